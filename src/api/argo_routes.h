// The part of Argo Server's REST API that Hera's WorkflowsService calls
// (tests/fixtures/argo/README.md lists every endpoint with its shapes), on
// the workflow controller: a Hera script pointed at Headway's URL creates,
// watches, lints, retries, suspends, resumes, stops, terminates and deletes
// workflows unchanged.
//
// Namespaces: Headway has none. Any non-empty namespace segment is accepted
// and echoed in metadata.namespace; what a caller sees is decided by the
// team of its token, as everywhere else.
//
// Also Argo's workflow logs (GET /api/v1/workflows/{ns}/{name}/log, a stream
// of {"result": LogEntry} lines: api/workflow_logs.h) and its artifact
// server's downloads of a step's artifacts (GET /artifact-files/{ns}/
// workflows|archived-workflows/{name|uid}/{nodeId}/outputs|inputs/{artifact},
// GET /artifacts/{ns}/{name}/{nodeId}/{artifact}): the bytes the artifact
// store keeps for it.
//
// Errors on these paths are Argo's (grpc-gateway's) shape,
// {"code": <gRPC code>, "message": "..."}, because Hera reads `message` from
// the top level (ToArgoError).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "api/artifact_service.h"
#include "api/http_server.h"
#include "api/job_service.h"
#include "api/request_context.h"
#include "api/router.h"
#include "api/watch_cache.h"
#include "api/workflow_service.h"

namespace headway::api {

struct ArgoRoutesOptions {
  // May be null: the routes then answer 503.
  WorkflowService* workflows = nullptr;
  // The step jobs' logs; without it /log answers 503.
  JobService* jobs = nullptr;
  // Followed logs read the store only when a job's cached view changed.
  WatchCache* cache = nullptr;
  // The step artifacts' bytes; without it the artifact downloads answer 503.
  ArtifactService* artifacts = nullptr;
  // Where an artifact kept in an object store is copied while it is sent
  // (private to the server); empty: the caller is redirected to a
  // presigned URL instead.
  std::string spool_dir;
  // Puts a stream in the answer, bound to the caller's token.
  std::function<HttpResponse(const RequestContext&, HttpResponse, std::shared_ptr<ResponseStream>)>
      bind_stream;
};

void AddArgoRoutes(Router& router, ArgoRoutesOptions options);

// Whether `path` is one of Argo's (errors there take Argo's shape).
bool IsArgoPath(std::string_view path);

// Rewrites a native error answer ({"error": {...}}) into Argo's shape.
void ToArgoError(HttpResponse& response);

}  // namespace headway::api
