// Headway's scheduler for a shared GPU pool: pure decision logic, cluster
// state in, actions out. No I/O, no clocks (`now` is part of the state), so it
// is unit-tested directly and driven by the trace simulator in bench/.
//
// Policy, in the order it is applied:
//  - Queues (one per team) have a nominal GPU quota and may borrow idle quota
//    of the cohort (the whole pool) up to their borrowing limit, as Kueue
//    cohorts do. Within a queue: higher priority first, then FIFO. Across
//    queues: higher head priority first; then heads that have waited past
//    the starvation bound (options), oldest first; then the queue with the
//    lowest weighted share (GPUs in use / weight), so teams share fairly.
//  - Gang admission: a job starts only when all its GPUs are free together,
//    `nodes` nodes with `gpus_per_node` each, best-fit on the fullest nodes
//    that still fit, so large holes stay available for large jobs.
//  - EASY backfill: the first job in that order that cannot start gets a
//    reservation at the earliest time its GPUs free up (from running jobs' expected ends:
//    time limits, or progress ETAs when Headway knows them). Later jobs may
//    start now only if they cannot delay it: they end before the reservation,
//    or use only GPUs the reservation does not need. Without expected ends
//    nothing may use the reserved GPUs. Since a job past the starvation
//    bound is ordered by age alone, the oldest such job that cannot start
//    keeps the reservation from one decision to the next until it starts
//    (unless a higher-priority job blocks first), whatever the teams' shares.
//  - Preemption: a job that fits its queue's nominal quota, or outranks
//    running jobs, may reclaim GPUs. Victims, cheapest first: jobs marked
//    reclaimable (stalled, by policy), then jobs running on borrowed quota,
//    then lower priority, then the most recently started. The caller warns
//    each victim (checkpoint signal), waits its grace, and requeues it.
//  - Ordering::kShortestWork (progress-aware) replaces FIFO within a queue
//    and fair share across queues by expected work, smallest first: a
//    waiting job's learned run time (capped by its time limit) x GPUs.
//    Heads that fit their queue's nominal quota go before heads that would
//    borrow, so each team keeps its share; the starvation bound still puts
//    jobs that waited past it first, oldest first. With preemption on, a
//    job that cannot start may also take the GPUs of a running job that
//    can checkpoint and whose remaining work (live ETA x GPUs) exceeds its
//    own by `preempt_ratio`, counting the restart cost the victim pays.
//    A job preempted for shorter work, or reclaimed from a borrowing team,
//    is first granted a run (`min_run_before_preemption`, doubled for each
//    earlier preemption), so long and borrowing jobs are not sent back each
//    time short ones come.
//  - Ordering::kBalanced (balanced) orders as kShortestWork, but a job
//    starves once its time since submission reaches `balanced_slowdown` x
//    its expected run x the pool's load (no fixed hours); a job over its
//    team's quota may preempt the team's own much longer checkpointable
//    work, and the team's smaller jobs may pass it until it starves; only a
//    starving job that cannot start holds the backfill reservation.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/time.h"

namespace headway::sched {

struct Node {
  std::string name;
  int gpus = 0;
};

struct QueueQuota {
  int nominal_gpus = 0;
  int borrowing_limit = 0;  // extra GPUs it may take from idle quota of others
  double weight = 1.0;      // fair-share weight
};

struct NodeGpus {
  std::string node;
  int gpus = 0;
};

struct RunningJob {
  std::string name;
  std::string queue;
  int priority = 0;
  std::vector<NodeGpus> placement;
  Time started_at{};
  std::optional<Time> expected_end;  // time limit or progress ETA; nullopt: unknown
  bool reclaimable = false;          // e.g. stalled with a policy that allows reclaiming it
  // It acknowledged a checkpoint request (should_checkpoint()), so it resumes
  // where it stopped: kShortestWork may preempt it for much shorter work.
  bool checkpointable = false;
  int preemptions = 0;  // how often it was preempted before
  // Already told to go (preempted or stopping): its GPUs count as on their way
  // back, so the scheduler does not pick further victims for the same need.
  bool leaving = false;
};

struct WaitingJob {
  std::string name;
  std::string queue;
  int priority = 0;
  std::int64_t submit_seq = 0;
  // FIFO key within equal priority: when it (last) entered the queue. A
  // preempted job re-enters at its preemption, behind the job it made room for.
  Time queued_at{};
  // When it was first submitted (nullopt: queued_at). kBalanced measures a
  // job's slowdown from here, so a job preempted again and again still
  // comes to its turn.
  std::optional<Time> submitted_at;
  int nodes = 1;
  int gpus_per_node = 0;
  std::optional<Duration> time_limit;  // for backfill: how long it may hold its GPUs
  // What its history predicts it will run (its user's, team's or template's
  // past jobs); kShortestWork orders by it, capped by the time limit.
  std::optional<Duration> expected_run;

  int gpus() const { return nodes * gpus_per_node; }
};

struct ClusterState {
  Time now{};
  std::vector<Node> nodes;
  std::map<std::string, QueueQuota> queues;  // a queue not listed is bounded by the pool alone
  std::vector<RunningJob> running;
  std::vector<WaitingJob> waiting;
};

struct Start {
  std::string job;
  std::vector<NodeGpus> placement;
  bool backfilled = false;
};

struct Preemption {
  std::string job;
  std::string reason;  // e.g. "reclaimed by vision (within its quota)"
  std::string for_job;
};

// Why a waiting job was left waiting, in numbers: Decision::Reason words it
// when someone asks, so a decision over 10k waiting jobs builds no strings.
struct Pending {
  enum class Why : std::uint8_t {
    kBehindInQueue,   // an earlier job of its queue is held by the queue's quota
    kOverQuota,       // its team's quota (nominal + borrowing) is used up
    kWouldDelay,      // starting it could delay the job holding the reservation
    kNoRoom,          // not enough free GPUs
    kTooBig,          // more GPUs than the pool has
    kPreempting,      // victims were chosen for it
    kVictimsLeaving,  // jobs already leaving make its room
  };
  std::uint32_t job = 0;  // index into ClusterState::waiting
  Why why = Why::kNoRoom;
  // kNoRoom/kTooBig of the job first in line: its team is past its nominal quota.
  bool over_nominal = false;
  std::int32_t count = 0;      // kNoRoom: free GPUs then; kPreempting/kVictimsLeaving: jobs
  std::int32_t usage = 0;      // kOverQuota, over_nominal: the team's GPUs in use then
  std::uint32_t reserved = 0;  // kWouldDelay: index of the waiting job holding the reservation
};

struct Decision {
  std::vector<Start> starts;
  std::vector<Preemption> preemptions;
  // Every waiting job not started, in the order this decision considered
  // them across queues: pending[i] is (i + 1)th in line.
  std::vector<Pending> pending;
  int pool_gpus = 0;  // GPUs of every node, for the wording of reasons
  // When the job holding the reservation (preemption or backfill) is
  // expected to start: now when its victims are leaving, else when the
  // running jobs' expected ends free its GPUs. Absent where unknown.
  std::map<std::string, Time> expected_starts;

  // Why `p` waits, as its team may see it: another team's job is named only
  // by its queue. `state` is the one this decision was made from.
  std::string Reason(const ClusterState& state, const Pending& p) const;
};

// Every waiting job not started, by name: its reason and place in line (for
// tests and small pools; the server looks jobs up one by one).
struct Explanation {
  std::unordered_map<std::string, std::string> reasons;
  std::unordered_map<std::string, int> positions;
};
Explanation Explain(const ClusterState& state, const Decision& decision);

enum class Ordering {
  kFairShare,     // FIFO within a queue, lowest weighted share across queues
  kShortestWork,  // smallest expected work first; nominal quota before borrowing
  // kShortestWork with a starvation bound in slowdown, not hours: a job
  // starves once it has waited `balanced_slowdown` x its expected run, that
  // factor scaled by the pool's load (GPUs running and asked for / GPUs of
  // the pool, at least 1), so a busy pool does not turn back into FIFO and
  // a quiet one does not let big jobs wait.
  kBalanced,
};

// The server's default (`headway server --scheduling-policy`); the
// simulator marks its rows.
inline constexpr Ordering kDefaultOrdering = Ordering::kFairShare;

// "fair-share", "progress-aware", "balanced": the server's names.
std::string_view OrderingName(Ordering ordering);
std::optional<Ordering> ParseOrdering(std::string_view name);

struct SchedulerOptions {
  Ordering ordering = Ordering::kFairShare;
  bool backfill = true;
  bool preemption = true;
  // Starvation bound: a waiting job whose `queued_at` is at least this long
  // ago goes ahead of fair share (after higher priorities), oldest first, so
  // the oldest such job that cannot start holds the backfill reservation
  // until it starts; backfill may not delay it. A job its team's quota holds
  // back holds nothing. Zero: FIFO across teams (with backfill). nullopt:
  // fair share only, where the reservation goes to whichever blocked job is
  // first in fair-share order at each decision and so can move between
  // teams. The default, 30 minutes, is what bench/README.md measured best
  // for both average completion time and whole-node jobs.
  std::optional<Duration> starvation_bound = kDefaultStarvationBound;
  static constexpr Duration kDefaultStarvationBound = std::chrono::minutes(30);
  // What the tuning trace measured best for kShortestWork: ordering by work
  // needs a longer bound, or a contended pool turns back into FIFO.
  static constexpr Duration kShortestWorkStarvationBound = std::chrono::hours(8);
  // kShortestWork: a job past the bound starves only once it has also waited
  // this many times its expected run time (of 0, 1, 2 and 4, 4 did best on
  // the tuning trace).
  double starvation_slowdown = 4.0;
  // kBalanced: a waiting job starves once it has waited this many times its
  // expected run (at least `min_run_before_preemption`) times the pool's
  // load; the fixed `starvation_bound` applies only to jobs whose work is
  // unknown.
  double balanced_slowdown = kBalancedSlowdown;
  static constexpr double kBalancedSlowdown = 4.0;

  // kShortestWork with preemption: a checkpointable job is preempted for a
  // waiting one only when its remaining GPU-time exceeds `preempt_ratio` x
  // (the waiting job's expected GPU-time + `restart_cost` x its own GPUs),
  // and only after it has run `min_run_before_preemption` (no thrashing).
  // 1.5 measured best on the tuning trace (bench/README.md).
  double preempt_ratio = 1.5;
  Duration restart_cost = std::chrono::minutes(5);
  // Doubled for each time the job was preempted before.
  Duration min_run_before_preemption = std::chrono::minutes(10);
};

Decision Schedule(const ClusterState& state, const SchedulerOptions& options = {});

}  // namespace headway::sched
