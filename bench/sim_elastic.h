// Elastic jobs in the trace simulator (sim_elastic.cc): which jobs are
// elastic, how fast each runs at each size, and the Pollux-like goodput
// allocator the simulator compares Headway's elastic sizing with.
//
// Speed-up model. Throughput on g GPUs is g^a (data-parallel training that
// keeps its per-GPU batch), with a drawn per job so that its scaling
// efficiency at 128 GPUs, T(128) / (128 T(1)), is one of those Horovod
// measured (Sergeev & Del Balso, "Horovod: fast and easy distributed deep
// learning in TensorFlow", arXiv:1802.05799, 2018): about 90% for
// Inception V3 and ResNet-101 and 68% for VGG-16 at 128 GPUs. So
// a = 1 + ln(eff) / ln(128): 0.978 (90%) or 0.920 (68%). Throughput only:
// the statistical efficiency that a larger global batch loses (Pollux's
// goodput, Qiao et al. OSDI '21) is not modelled, which flatters growth.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "sim_trace.h"

namespace headway::sim {

struct ElasticSpec {
  bool elastic = false;
  int min_units = 1, max_units = 1;
  int trace_units = 1;    // its size in the trace (at which its run time was measured)
  int start_units = 1;    // what it waits for and starts at under Headway (min or nominal)
  int gpus_per_unit = 1;  // 1 GPU within a node, or a whole node
  bool units_are_nodes = false;
  double exponent = 1;  // throughput ~ GPUs^exponent
  const char* model = "";

  Shape ShapeAt(int units) const {
    return units_are_nodes ? Shape{units, gpus_per_unit} : Shape{1, units * gpus_per_unit};
  }
  // Progress per second at `units`, where its trace size makes 1.
  double Rate(int units) const;
  // Its speed-up at `units` over its minimum (Pollux's measure).
  double Speedup(int units) const;
  int UnitsOf(const Placement& p) const;
};

struct ElasticDraw {
  double share = 0;           // of multi-GPU jobs (hung jobs excepted)
  double max_factor = 1;      // max = its trace size x this (within a node / the pool)
  double min_fraction = 0;    // min = this x its trace size, at least 1 unit
  bool start_at_min = false;  // wait for its minimum rather than its trace size
  unsigned seed = 44;
};

// One spec per job, in trace order; the same for every policy and pool of
// `per_node` GPUs per node.
std::vector<ElasticSpec> DrawElastic(const std::vector<TraceJob>& trace, int per_node,
                                     int pool_nodes, const ElasticDraw& draw);

// One line: which jobs are elastic, how, and by which speed-up model.
void PrintElasticHeader(const std::vector<ElasticSpec>& elastic, const ElasticDraw& draw,
                        double resize_cost);

// The first `units` of a placement (the first unit holds rank 0).
Placement PrefixUnits(const ElasticSpec& spec, const Placement& p, int units);
// The same GPUs on the same nodes, whatever the order.
bool SamePlacement(Placement a, Placement b);

// Pollux-like goodput allocation at one decision, with the speed-up model
// known (as Pollux fits it per job): every running elastic job that may
// resize now is taken down to its minimum, waiting jobs are admitted in
// order (any that fits; no reservations, no quotas beyond the pool), rigid
// ones at their size and elastic ones at their minimum, and then GPUs go
// one unit at a time to the elastic job whose speed-up gains the most per
// added GPU, while any fits. Running jobs that may not resize keep theirs;
// no job is preempted.
struct PolluxRunning {
  std::size_t id = 0;
  const ElasticSpec* spec = nullptr;  // null: rigid
  Placement placement;
  bool may_resize = false;
};
struct PolluxWaiting {
  std::size_t id = 0;
  const ElasticSpec* spec = nullptr;  // null: rigid
  Shape shape;                        // rigid: its shape
};
struct PolluxPlan {
  std::vector<std::pair<std::size_t, Placement>> starts;
  std::vector<std::pair<std::size_t, Placement>> resizes;  // the job's whole new placement
};
PolluxPlan PolluxAllocate(std::vector<int> free, int per_node,
                          const std::vector<PolluxRunning>& running,
                          const std::vector<PolluxWaiting>& waiting);

}  // namespace headway::sim
