// The artifact routes of the REST API (versions, lineage, uploads direct or
// through the server, downloads), for users and for a job with its own
// token (RequestContext::job: its team's artifacts only, it is their
// producer):
//   POST   /api/v1/artifacts                                   a draft version
//   GET    /api/v1/artifacts[?kind&job&team&name]              versions
//   GET    /api/v1/artifacts/{name}                            one name's versions
//   GET    /api/v1/artifacts/{name}/versions/{version}         with its lineage
//   PUT    /api/v1/artifacts/{name}/versions/{version}/content the bytes, through the server
//   POST   /api/v1/artifacts/{name}/versions/{version}/commit  Ready, once checked
//   GET    /api/v1/artifacts/{name}/versions/{version}/parts   a multipart upload's parts
//   POST   /api/v1/artifacts/{name}/versions/{version}/parts   presigned part URLs
//   GET    /api/v1/artifacts/{name}/versions/{version}/content the bytes (or 307 to the store)
//   DELETE /api/v1/artifacts/{name}/versions/{version}
//   GET    /api/v1/jobs/{name}/artifacts                       what a job made and used
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

namespace headway::api {

struct ArtifactRoutesOptions {
  ArtifactService* artifacts = nullptr;  // null: the routes answer 503
  JobService* jobs = nullptr;            // whether the caller sees a job
  // Where downloads a job cannot fetch from the store itself are spooled.
  std::string spool_dir;
  // Local jobs on a network of their own reach only the server: never
  // hand them a presigned URL.
  bool local_jobs_reach_only_the_server = false;
  // Puts a download's stream in the answer, bound to the caller's token.
  std::function<HttpResponse(const RequestContext&, HttpResponse, std::shared_ptr<ResponseStream>)>
      bind_stream;
};

void AddArtifactRoutes(Router& router, ArtifactRoutesOptions options);

// Whether `path` is one of the artifact routes' (which a job's own token may call).
bool IsArtifactPath(std::string_view path);

}  // namespace headway::api
