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
// Errors on these paths are Argo's (grpc-gateway's) shape,
// {"code": <gRPC code>, "message": "..."}, because Hera reads `message` from
// the top level (ToArgoError).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "api/request_context.h"
#include "api/http_server.h"
#include "api/router.h"
#include "api/workflow_service.h"

namespace headway::api {

// `service` may be null: the routes then answer 503.
void AddArgoRoutes(Router& router, WorkflowService* service);

// Whether `path` is one of Argo's (errors there take Argo's shape).
bool IsArgoPath(std::string_view path);

// Rewrites a native error answer ({"error": {...}}) into Argo's shape.
void ToArgoError(HttpResponse& response);

}  // namespace headway::api
