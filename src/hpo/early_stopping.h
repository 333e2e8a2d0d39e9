// Early stopping from live metrics: decides whether a running trial should be
// stopped now, given its own objective curve and the other trials' curves.
// Pure: no I/O, no clocks; thread-safe.
//
//   median  (Vizier's median stopping rule, Golovin et al. 2017) stop trial t
//           at step s when its best objective so far is worse than the median
//           of the other trials' running averages up to s, counting only
//           trials that reached s. Applies from `start_step`, once at least
//           `min_trials` other trials have reached s.
//   asha    (asynchronous successive halving, Li et al. 2020) rungs at steps
//           min_resource x reduction_factor^k. When a trial reaches a rung
//           it continues only if its objective at the rung (best so far) is
//           within the top 1/reduction_factor of the trials that reached that
//           rung (itself included; ties continue); otherwise it stops. With
//           fewer than reduction_factor trials at a rung it continues.
//
//   health  independent of the rule: a trial whose *confirmed* health
//           verdict (progress/health.h, confirmed over reports and time, so
//           one report never stops a trial) is one of `stop_on_health`
//           stops: a run that diverged or overfits will not improve its best
//           objective by training on. Its objective stays the best it
//           reported; for Overfitting that is the evaluation at the step the
//           verdict names, whose checkpoint to keep.
//
// Objectives are minimised (a maximised metric is negated before it gets
// here). Non-finite values count as worst.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/health.h"

namespace headway::hpo {

struct CurvePoint {
  std::int64_t step = 0;
  double value = 0;
};

// One trial's objective series, ascending by step.
struct TrialCurve {
  std::string trial;
  std::vector<CurvePoint> points;
};

enum class StoppingRule { kNone, kMedian, kAsha };

struct EarlyStoppingOptions {
  StoppingRule rule = StoppingRule::kNone;
  int min_trials = 3;             // median: other trials needed at the step
  std::int64_t start_step = 0;    // median: no decision before this step
  std::int64_t min_resource = 1;  // asha: first rung (steps)
  double reduction_factor = 3;    // asha: eta, > 1
  std::vector<Health> stop_on_health = {Health::kDiverging, Health::kOverfitting};
};

struct StopDecision {
  bool stop = false;
  std::string reason;  // e.g. "median stopping rule: best 0.52 at step 40 is worse than the median
                       // 0.31 of 5 trials"
};

// Whether `trial` should stop now. `others` are the other trials of the
// experiment (running, completed or stopped), never `trial` itself.
StopDecision ShouldStop(const TrialCurve& trial, std::span<const TrialCurve> others,
                        const EarlyStoppingOptions& options);

// Whether a trial whose job's confirmed verdict is `health` (with `reason`)
// should stop under options.stop_on_health.
StopDecision ShouldStopOnHealth(Health health, const std::string& reason,
                                const EarlyStoppingOptions& options);

}  // namespace headway::hpo
