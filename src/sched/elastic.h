// Elastic jobs: how many rank groups (or nodes) each elastic job holds, decided
// around the rigid scheduler (scheduler.h). Pure: cluster state and measured
// throughput in, resizes out; `now` comes with the state.
//
// An elastic job runs between `min_size` and `max_size` units, each unit a
// rank group of `gpus_per_unit` GPUs (a node of a multi-node job, or a group
// of ranks of a single-node one). Around Schedule():
//  - Shrink before preempt: the GPUs an elastic job holds above its minimum
//    are shown to Schedule() as free, so a waiting job that may start (its
//    team's quota allows it, its turn has come) takes them before any job is
//    preempted. The elastic jobs it takes them from shrink first; the job
//    starts at the next decision, once they are back. The first to give back
//    are jobs whose verdict says more GPUs would not help (Plateaued,
//    Overfitting), then jobs whose ETA already meets their deadline, then
//    the least measured gain per GPU. A start that fits idle GPUs no other
//    start uses goes there instead, and nothing shrinks for it; a job of
//    node units gives back the node the start was placed on.
//  - Work-conserving growth: GPUs that no waiting job can use (none waits for
//    room) go to elastic jobs one unit at a time, up to their maximum and
//    within their team's quota, to the largest expected time saved per GPU
//    first. That gain is measured, not assumed (as in Pollux, OSDI '21): the
//    throughput a job had at each size it ran; a size it has not run is
//    extrapolated from the efficiency of its last measured step, or, with one
//    size measured, from `assumed_efficiency`, so that a job can explore. A
//    job grows only where the time it saves exceeds `amortise` restarts.
//  - A job whose measured throughput at its size is no better than at one
//    unit less gives the unit back.
//  - Churn: a resize costs the job a restart (measured, `restart_cost`), so a
//    job grows at most once per max(`min_interval`, `amortise` x its restart
//    cost). Shrinking for a waiting job is never held back: its only
//    alternative is a preemption, which costs more.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/time.h"
#include "sched/scheduler.h"

namespace headway::sched {

struct ElasticJob {
  std::string name;  // its RunningJob in ClusterState::running has the same name
  int size = 1;      // units it holds now (or is being resized to)
  int min_size = 1;
  int max_size = 1;
  int gpus_per_unit = 1;
  // Units are whole nodes (a multi-node job: each unit on a node of its own)
  // rather than rank groups on the node it runs on.
  bool units_are_nodes = false;
  // Work per second measured at each size it has run (samples/s where the job
  // reports them, else steps/s). Sizes not run are absent.
  std::map<int, double> throughput;
  // Its last resize, or its start: the churn interval counts from here.
  Time last_change{};
  // How long a resize stalls it (restart, rendezvous, checkpoint load), as
  // measured at its last resize; unknown: ElasticOptions::default_restart_cost.
  std::optional<Duration> restart_cost;
  std::optional<Duration> eta;   // remaining run at its current size, from progress
  std::optional<Time> deadline;  // its time limit's end
  // Its health verdict says more GPUs would not help (Plateaued, Overfitting).
  bool winding_down = false;
  // GPUs it is giving back (a shrink in progress), per node: not free yet.
  std::vector<NodeGpus> releasing;
};

struct ElasticOptions {
  Duration min_interval = std::chrono::minutes(2);
  double amortise = 4.0;
  Duration default_restart_cost = std::chrono::seconds(60);
  // What one more unit is assumed to give, per unit, before it is measured.
  double assumed_efficiency = 0.8;
  // A unit is worth keeping only where it adds at least this much throughput.
  double min_marginal_gain = 0.05;
};

struct Resize {
  std::string job;
  int from = 0;
  int to = 0;
  std::vector<NodeGpus> placement;  // the job's whole placement at its new size
  std::string reason;               // for its event: "grew to 3 rank groups: ..."
  std::string for_job;              // a shrink that makes room for this waiting job
};

struct ElasticPlan {
  Decision decision;  // Schedule()'s, less the starts that wait for shrinks
  std::vector<Resize> resizes;
};

// `state.running` holds each elastic job at its current size; `elastic`
// names those that are elastic.
ElasticPlan PlanWithElastic(const ClusterState& state, const std::vector<ElasticJob>& elastic,
                            const SchedulerOptions& options = {},
                            const ElasticOptions& elastic_options = {});

// Its throughput at `size`: measured, else extrapolated (see above); 0 where
// nothing is known.
double ExpectedThroughput(const ElasticJob& job, int size, const ElasticOptions& options = {});

// "rank group"/"rank groups" or "node"/"nodes".
std::string UnitName(const ElasticJob& job, int count);

}  // namespace headway::sched
