// GPU-hours lost to interruptions (preemptions and failures) under three
// checkpoint policies, for bench/simulator: none, a fixed interval, and the
// Young/Daly interval sqrt(2 x cost x mean time between interruptions) that
// Headway can choose from a job's checkpoint cost and its queue's
// interruption rate, with no checkpoint in the job's last interval.
#include "sim_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace headway::sim {
namespace {

// One job's lost seconds (work redone, restarts and checkpoint writes) with
// a checkpoint every `interval` seconds of progress (infinity: none), under
// interruptions that come at `rate` per second of its run. The same seed
// gives every policy the same interruptions.
double LostSeconds(double work, double interval, double rate, double cost, double restart,
                   unsigned seed, int& interruptions) {
  std::mt19937 rng(seed);
  std::exponential_distribution<double> gap(rate > 0 ? rate : 1.0);
  double saved = 0, lost = 0;
  double next = rate > 0 ? gap(rng) : std::numeric_limits<double>::infinity();
  constexpr int kMaxInterruptions = 10000;  // a job that cannot finish without checkpoints
  for (int n = 0; saved < work && n < kMaxInterruptions;) {
    // The next segment: to the next checkpoint (and its write), or to the end.
    double run = std::min(interval, work - saved);
    double wall = run + (saved + run < work ? cost : 0);
    if (next >= wall) {
      next -= wall;
      saved += run;
      if (saved < work) lost += cost;
      continue;
    }
    lost += next + restart;  // the work since the last checkpoint, and starting again
    ++n;
    ++interruptions;
    next = gap(rng);
  }
  return lost;
}

}  // namespace

CheckpointLosses LostToInterruptions(const std::vector<TraceJob>& trace, int per_node,
                                     const CheckpointSettings& set) {
  CheckpointLosses out;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const int gpus = ShapeOf(trace[i], per_node).held();
    const double rate = set.per_gpu_hour * gpus / 3600;  // per second of its run
    const double work = trace[i].Work();
    const unsigned seed = static_cast<unsigned>(i) * 2654435761u + 17;
    const double daly =
        rate > 0 ? std::sqrt(2 * set.cost / rate) : std::numeric_limits<double>::infinity();
    const double intervals[] = {std::numeric_limits<double>::infinity(), set.fixed_interval, daly};
    for (int p = 0; p < 3; ++p) {
      int n = 0;
      out.lost_gpu_h[static_cast<std::size_t>(p)] +=
          LostSeconds(work, intervals[p], rate, set.cost, set.restart, seed, n) * gpus / 3600;
      out.interruptions[static_cast<std::size_t>(p)] += n;
    }
  }
  return out;
}

}  // namespace headway::sim
