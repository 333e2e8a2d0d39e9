// The trace simulator's settings and its command line (simulator.cc).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/time.h"
#include "sched/elastic.h"
#include "sched/scheduler.h"
#include "sim_checkpoint.h"
#include "sim_elastic.h"
#include "sim_trace.h"

namespace headway::sim {

struct Settings {
  int nodes = 16, per_node = 8;
  double restart_cost = 300;  // seconds of work redone after a preemption
  double borrow = 2.0;        // a team may use this many times its nominal share
  double tick = 300;          // seconds between decisions while jobs wait
  double stall_detect = 600;  // Headway's auto-stop: silence before a hung job is stopped
  // 2D-LAS: GPU-seconds before a job drops to the second queue; of 1, 10
  // and 100 GPU-hours, 10 did best on the tuning trace.
  double las_threshold = 36000;
  double las_promote = 8;  // 2D-LAS: waited this many times what it ran: back to the first
  sched::SchedulerOptions headway;
  std::optional<Duration> aware_starvation_bound =
      sched::SchedulerOptions::kShortestWorkStarvationBound;
  double balanced_slowdown = sched::SchedulerOptions::kBalancedSlowdown;
  CheckpointSettings checkpoints;
  double gpu_failure_rate = 2e-5;         // interruptions per GPU-hour from failures
  ElasticDraw elastic;                    // which jobs are elastic (sim_elastic.h)
  double resize_cost = 60;                // seconds without progress after each resize
  sched::ElasticOptions elastic_options;  // Headway's elastic sizing (sched/elastic.h)
};

// Reads the flags into `set`, `draw` and `quota_spec`, the other arguments
// into `positional`. Returns 0, or 2 after printing what was wrong (or the
// usage, without a trace).
int ParseArgs(int argc, char** argv, Settings& set, DrawOptions& draw, std::string& quota_spec,
              std::vector<std::string>& positional);

}  // namespace headway::sim
