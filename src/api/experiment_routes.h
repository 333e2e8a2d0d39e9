// Experiments (hyperparameter searches, core/experiment.h), as the REST API
// serves them to the team of their trials:
//   POST /api/v1/experiments              a spec (Headway's or Katib's): created
//   GET  /api/v1/experiments              the caller's teams' experiments
//   GET  /api/v1/experiments/{name}       one, with its trials
//   POST /api/v1/experiments/{name}/stop  no new trials; running ones are stopped
#pragma once

#include "api/experiment_service.h"
#include "api/router.h"

namespace headway::api {

// `experiments` null: these answer 503.
void AddExperimentRoutes(Router& router, ExperimentService* experiments);

}  // namespace headway::api
