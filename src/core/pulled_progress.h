// Pull mode's wire format: what a job serves on its progress endpoint
// (JobSpec::progress_endpoint), as OpenShift AI's KubeflowProgressCallback
// serves it:
//
//   {"progressPercentage": 45, "estimatedRemainingSeconds": 120,
//    "currentStep": 90, "totalSteps": 200, "currentEpoch": 1.8, "totalEpochs": 4,
//    "trainMetrics": {"loss": 0.41, "learning_rate": 1e-4},
//    "evalMetrics": {"eval_loss": 0.52}}
//
// Python's bare NaN and Infinity are read as such (a diverging loss stays
// visible). Metric names are taken as the Kubeflow endpoint takes them.
// The callback keeps serving its last metrics until new ones
// replace them, so a metric is taken only when its value changed since the
// previous poll: a re-served evaluation is never a second point (which
// would fake a plateau).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/progress_report.h"
#include "core/status.h"

namespace headway {

// What one poll added, if anything. `last` is the per-job memory of the
// values taken so far (updated). nullopt when nothing changed: the same
// step and no new metric value.
struct PulledState {
  std::optional<std::int64_t> step;
  std::map<std::string, double> metrics;
};
Result<std::optional<ProgressReport>> ParsePulledProgress(std::string_view body, PulledState& last);

}  // namespace headway
