// The REST API (docs/api/openapi.yaml): routes requests to the JobService and
// turns every failure into a JSON error with the matching HTTP status.
#pragma once

#include "api/http_server.h"
#include "api/job_service.h"

namespace headway::api {

// `service` must outlive the handler.
HttpHandler MakeRestApi(JobService& service);

}  // namespace headway::api
