// The REST API (docs/api/openapi.yaml): routes requests to the JobService and
// turns every failure into a JSON error with the matching HTTP status.
#pragma once

#include "api/experiment_service.h"
#include "api/http_server.h"
#include "api/job_service.h"

namespace headway::api {

// The services must outlive the handler; without `experiments` the
// experiment routes answer 503.
HttpHandler MakeRestApi(JobService& service, ExperimentService* experiments = nullptr);

}  // namespace headway::api
