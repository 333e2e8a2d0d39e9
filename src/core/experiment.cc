#include "core/experiment.h"

namespace headway {

std::string_view ExperimentStateName(ExperimentState s) {
  switch (s) {
    case ExperimentState::kRunning:
      return "Running";
    case ExperimentState::kSucceeded:
      return "Succeeded";
    case ExperimentState::kFailed:
      return "Failed";
    case ExperimentState::kStopped:
      return "Stopped";
  }
  return "Running";
}

std::optional<ExperimentState> ParseExperimentState(std::string_view name) {
  for (ExperimentState s : {ExperimentState::kRunning, ExperimentState::kSucceeded,
                            ExperimentState::kFailed, ExperimentState::kStopped}) {
    if (ExperimentStateName(s) == name) return s;
  }
  return std::nullopt;
}

std::string_view TrialStateName(TrialState s) {
  switch (s) {
    case TrialState::kRunning:
      return "Running";
    case TrialState::kCompleted:
      return "Completed";
    case TrialState::kEarlyStopped:
      return "EarlyStopped";
    case TrialState::kFailed:
      return "Failed";
  }
  return "Running";
}

std::optional<TrialState> ParseTrialState(std::string_view name) {
  for (TrialState s : {TrialState::kRunning, TrialState::kCompleted, TrialState::kEarlyStopped,
                       TrialState::kFailed}) {
    if (TrialStateName(s) == name) return s;
  }
  return std::nullopt;
}

}  // namespace headway
