// What the REST API needs for hyperparameter experiments. The server's
// experiment controller implements it.
//
// Thread safety: implementations must allow concurrent calls.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/experiment.h"
#include "core/job.h"
#include "core/status.h"

namespace headway::api {

struct TrialView {
  TrialRecord record;
  nlohmann::json params;             // {"lr": 0.01, "optimizer": "adam"}
  std::string job_state;             // the trial job's state, "" if it has no job yet
  std::optional<std::int64_t> step;  // its latest reported step
  std::optional<double> latest;      // its latest value of the objective metric
};

struct ExperimentView {
  ExperimentRecord record;
  nlohmann::json spec;  // canonical spec
  std::vector<TrialView> trials;
  std::optional<std::size_t> best;  // index into `trials` of the best finished trial
};

class ExperimentService {
 public:
  virtual ~ExperimentService() = default;
  // Parses and validates a spec (InvalidArgument naming the field), then
  // starts the experiment. Conflict for a taken name. Trials run in
  // `submit_dir` (when absolute) unless the template sets working_dir.
  // `admit`, when set, sees the trial template first and may adjust it or
  // refuse the experiment with its error (authorisation).
  virtual Result<ExperimentView> CreateExperiment(
      std::string_view document, std::string_view submit_dir,
      const std::function<Status(JobSpec&)>& admit = nullptr) = 0;
  virtual Result<ExperimentView> GetExperiment(std::string_view name) = 0;
  virtual Result<std::vector<ExperimentView>> ListExperiments() = 0;
  // Stops its running trials and ends it as Stopped; Conflict if it already ended.
  virtual Result<ExperimentView> StopExperiment(std::string_view name) = 0;
  // Deletes an ended experiment with its trials' jobs (or workflows) and
  // their records, so its name is free again; returns it as it was. Conflict
  // while it or one of its trials still runs: stop it first. A trial name
  // taken by a job the experiment did not make is left alone.
  virtual Result<ExperimentView> DeleteExperiment(std::string_view name) = 0;
};

}  // namespace headway::api
