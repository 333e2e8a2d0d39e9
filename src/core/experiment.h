// Persisted records of hyperparameter experiments and their trials. Plain
// values, no I/O; the experiment's spec is kept as its canonical JSON (the
// hpo module parses it), so the store needs no knowledge of search spaces.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/time.h"

namespace headway {

enum class ExperimentState { kRunning, kSucceeded, kFailed, kStopped };
std::string_view ExperimentStateName(ExperimentState s);
std::optional<ExperimentState> ParseExperimentState(std::string_view name);

struct ExperimentRecord {
  std::string name;
  std::string spec_json;  // hpo::ExperimentSpecToJson
  ExperimentState state = ExperimentState::kRunning;
  std::string message;  // why it ended, e.g. "goal reached by lr-sweep-7"
  Time created_at{};
  std::optional<Time> finished_at;
};

// Running: its job has not ended. EarlyStopped: the stopping rule stopped it
// (its objective still counts). Completed/Failed: how its job ended.
enum class TrialState { kRunning, kCompleted, kEarlyStopped, kFailed };
std::string_view TrialStateName(TrialState s);
std::optional<TrialState> ParseTrialState(std::string_view name);

struct TrialRecord {
  std::string experiment;
  std::int64_t index = 0;
  std::string job;          // the trial's job name
  std::string params_json;  // {"lr": 0.01, "optimizer": "adam"}
  TrialState state = TrialState::kRunning;
  bool stop_requested = false;      // the stopping rule asked its job to stop
  std::optional<double> objective;  // the best reported value of the objective metric
  std::string message;
};

}  // namespace headway
