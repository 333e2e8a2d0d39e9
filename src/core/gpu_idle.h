// The GPU-idle rule of batch jobs (policies.on_gpu_idle): a running job
// whose GPUs have all stayed below a utilisation threshold for a while holds
// them for nothing, and its owner is told, or the job is stopped so that the
// GPUs go back to the pool. Pure: the readings and the time come in.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "core/job.h"
#include "core/time.h"

namespace headway {

// What is remembered of one attempt between readings.
struct GpuIdleWatch {
  Time busy_at{};      // the last reading with a GPU at or above the threshold (or the start)
  bool acted = false;  // the policy acted in this idle spell
};

struct GpuIdleVerdict {
  enum class Action { kNone, kNotify, kStop };
  Action action = Action::kNone;
  Duration idle_for{0};
  double highest_percent = 0;  // the busiest of its GPUs at this reading
};

// One reading of the job's GPUs (`utilization`: percent by GPU id; ids it
// lacks have no reading). A GPU at or above `gpu_idle_below_percent` starts
// a new spell; with every GPU below it for `gpu_idle_after` the policy acts,
// once per spell. No reading of any of its GPUs is no signal: nothing is
// decided and the spell is not extended.
GpuIdleVerdict DecideGpuIdle(const HealthPolicies& policies, const std::vector<int>& gpu_ids,
                             const std::map<int, double>& utilization, GpuIdleWatch& watch,
                             Time now);

}  // namespace headway
