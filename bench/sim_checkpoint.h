// GPU-hours lost to interruptions under checkpoint policies (sim_checkpoint.cc).
#pragma once

#include <array>
#include <vector>

#include "sim_trace.h"

namespace headway::sim {

struct CheckpointSettings {
  double per_gpu_hour = 0;       // interruptions per GPU-hour of run (preemptions, failures)
  double cost = 120;             // seconds to write a checkpoint
  double fixed_interval = 3600;  // seconds of progress between checkpoints, fixed policy
  double restart = 300;          // seconds to start again after an interruption
};

struct CheckpointLosses {
  // none, every fixed interval, Young/Daly: work redone, restarts and writes
  std::array<double, 3> lost_gpu_h{};
  std::array<long, 3> interruptions{};  // the same process; more where jobs run longer
};

CheckpointLosses LostToInterruptions(const std::vector<TraceJob>& trace, int per_node,
                                     const CheckpointSettings& set);

}  // namespace headway::sim
