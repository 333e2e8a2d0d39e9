// Trace-driven simulator: replays a job trace against a GPU pool with a
// virtual clock and compares, side by side in one run and under the same
// rules, Headway's scheduler with classic baselines:
//
//   FIFO              strict arrival order; the first job that does not fit
//                     blocks the rest
//   SJF, oracle       shortest job first by true GPU-time (duration x GPUs),
//                     non-preemptive, any job that fits starts
//   SRSF, oracle      shortest remaining GPU-time first, preemptive: knows
//                     every job's true remaining work
//   2D-LAS            Tiresias' discretized two-dimensional least attained
//                     service (NSDI '19): preemptive, knows nothing about jobs;
//                     within a queue running jobs keep their GPUs
//   fair-share, limits   Headway's old default when jobs report no progress:
//                     expected ends are time limits
//   fair-share, ETA   the same with progress ETAs and stall auto-stop
//   progress-aware    Ordering::kShortestWork: learned run times for queued
//                     jobs, live ETAs for running ones, preemption of much
//                     longer checkpointable work, an 8 h starvation bound
//   balanced          Ordering::kBalanced: progress-aware's order, a
//                     starvation bound in slowdown scaled by load, and much
//                     longer work of a team at its quota makes room for the
//                     team's shorter jobs
// With `--elastic-share P` (sim_elastic.h: which jobs, the speed-up model
// from Horovod's measurements, `--resize-cost`), three more rows:
//   elastic (balanced)  balanced + sched::PlanWithElastic, fed the throughput
//                     each job measured at the sizes it ran and its ETA
//   Pollux-like goodput  each decision re-allocates the pool by marginal
//                     speed-up per GPU, model known; no quotas, no preemption
//   Pollux-like, all rigid  the same allocator, every job rigid
// The row of the server's default (sched::kDefaultOrdering) says "(default)".
//
// The same rules for every policy:
//  - gang placement: a job of a node or more takes whole nodes, a smaller one
//    stays on one node (best fit);
//  - quotas that bind, as a site sets them (`--quotas`): equal shares by
//    default, or a fixed split (TEAM=FRACTION,...); "demand" sizes them
//    from the trace's future GPU-time, for comparison only. A team may use
//    up to `--borrow` times its share (at least its largest job). A job of a
//    team at its cap does not start; the preemptive baselines first push out
//    the team's own lower-ranked jobs; Headway borrows and reclaims by its
//    own rules;
//  - strict FIFO: the first job that does not fit holds every later one;
//  - a restart cost (`--restart-cost`, 5 min): a preempted job redoes that
//    much work (lost since its checkpoint, plus starting again);
//  - decisions at every arrival and completion and every `--tick` seconds
//    while jobs wait.
//
// What a scheduler may know, drawn once per job with a fixed seed
// (sim_trace.cc):
//  - jobs that fail or are cancelled early (`--early-end-rate`, 15%): they
//    hold their GPUs for the trace's run time, but their ETAs and limits are
//    for the run they were meant to do, 1.1 to 10 times longer;
//  - time limits: where the trace has none, the intended run times a factor
//    drawn from a log-normal (median 2, sigma `--limit-spread` 0.8), rounded
//    up to the limits users pick (30 min, 1, 2, 4, 8, 12, 24, 48, 72 h, then
//    weeks): users over-ask, by 2 to 10 and more (Tsafrir et al. 2007), but
//    some ask too little and their job is killed at the limit;
//  - progress ETAs: none for the first 5% of a run (at least 2 min), then
//    the true remaining time of the intended run off by a per-job factor
//    exp(N(0, --eta-error)), 0.25 by default;
//  - learned run times: the median of the last 20 finished runs of the same
//    user (else team), as the server's RunTimeHistory keeps them.
//
// Utilisation is busy GPU-time over a fixed window, from the first to the
// last arrival, so a policy that finishes the last long job later is not
// credited for it. "big" jobs use a whole node or more. A second, separate
// event loop replays strict FIFO (sim_trace.cc, ReplayFifo) and each table
// says whether it agrees with the simulator's FIFO job by job.
//
//   simulator TRACE.csv [nodes[,nodes...]] [gpus_per_node=8] [--quotas equal|demand|T=F,...]
//             [--starvation-bound S|off] [--aware-starvation-bound S|off]
//             [--balanced-slowdown X] [--eta-error SIGMA] [--limit-spread SIGMA]
//             [--early-end-rate P] [--restart-cost S] [--borrow X] [--tick S]
//             [--preempt-ratio X] [--las-threshold GPU_S] [--elastic-share P]
//             [--elastic-max X] [--elastic-min F] [--elastic-start nominal|min]
//             [--resize-cost S] [--elastic-seed N]
//   simulator --generate N SEED > trace.csv     # a synthetic trace
//
// Several pool sizes, e.g. "4,6,8", replay the trace at several loads.
//
// Checkpoints (sim_checkpoint.cc): each job's run meets interruptions at
// balanced's preemption rate per GPU-hour plus `--gpu-failure-rate`; the
// GPU-hours lost (work redone, restarts, checkpoint writes of
// `--checkpoint-cost`) with no checkpoints, one every `--checkpoint-interval`
// and at the Young/Daly interval (none in a job's last interval).
// Trace formats (told apart by the header): see bench/data/README.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "sched/elastic.h"
#include "sched/run_time_history.h"
#include "sched/scheduler.h"
#include "sim_checkpoint.h"
#include "sim_elastic.h"
#include "sim_settings.h"
#include "sim_trace.h"

namespace {

using namespace headway;
using namespace headway::sched;
using namespace headway::sim;

constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Policy {
  kFifo,
  kSjfOracle,
  kSrsfOracle,
  kLas,
  kFairShareLimits,
  kFairShareEta,
  kProgressAware,
  kBalanced,
  kElastic,     // balanced + sched::PlanWithElastic
  kPollux,      // Pollux-like goodput allocation (sim_elastic.cc)
  kPolluxRigid  // the same allocator with every job rigid: what is not elasticity
};

// Whether a policy reads progress (ETAs, learned run times, stall auto-stop)
// and lets running jobs checkpoint.
bool UsesProgress(Policy p) {
  return p == Policy::kProgressAware || p == Policy::kBalanced || p == Policy::kElastic;
}
bool ResizesJobs(Policy p) { return p == Policy::kElastic || p == Policy::kPollux; }

struct Result {
  std::vector<double> jct, wait, big_jct;
  std::vector<double> done;  // each job's completion time, in trace order
  double busy_in_window = 0, window = 0, lost_gpu_h = 0, stalled_gpu_h = 0;
  double resize_gpu_h = 0;  // GPUs held x the resize cost, each resize
  int preemptions = 0, never_ran = 0, resizes = 0;
};

class Simulation {
 public:
  Simulation(const std::vector<TraceJob>& trace, const Settings& settings, Policy policy,
             const std::map<std::string, TeamQuota>& quotas,
             const std::vector<ElasticSpec>& elastic)
      : trace_(trace),
        elastic_(elastic),
        set_(settings),
        policy_(policy),
        jobs_(trace.size()),
        free_(static_cast<std::size_t>(settings.nodes), settings.per_node) {
    for (const auto& [team, q] : quotas) teams_[team] = {q.nominal, q.cap, 0, q.weight};
    for (std::size_t i = 0; i < trace.size(); ++i) {
      const TraceJob& j = trace[i];
      jobs_[i].shape = ShapeOf(j, set_.per_node);
      // An elastic job waits for its nominal size or its minimum and starts there.
      if (Elastic(i)) jobs_[i].shape = elastic_[i].ShapeAt(elastic_[i].start_units);
      bool stop_stalls = policy == Policy::kFairShareEta || UsesProgress(policy) ||
                         policy == Policy::kPollux || policy == Policy::kPolluxRigid;
      // Its time limit kills it, or it fails or is cancelled early, or a hung
      // job is stopped by its limit or (with progress) by auto-stop.
      jobs_[i].left = j.stalled && stop_stalls
                          ? std::min(j.time_limit, j.duration + set_.stall_detect)
                          : j.Work();
      // What its user meant it to run, which its ETAs tell: for a hung job,
      // its work.
      jobs_[i].intended_left = std::max(jobs_[i].left, std::min(j.intended, j.time_limit));
    }
    res_.done.assign(trace.size(), -1);
    res_.window = trace.empty() ? 0 : trace.back().submit;
  }

  Result Run() {
    std::size_t next = 0;
    double last_tick = -kInf;
    while (next < trace_.size() || !waiting_.empty() || !running_.empty()) {
      double t = next < trace_.size() ? trace_[next].submit : kInf;
      for (std::size_t r : running_) t = std::min(t, jobs_[r].end);
      if (!waiting_.empty()) t = std::min(t, std::max(now_, last_tick + set_.tick));
      if (policy_ == Policy::kLas) t = std::min(t, NextLasDemotion());
      if (!std::isfinite(t)) break;
      now_ = std::max(now_, t);
      Complete();
      while (next < trace_.size() && trace_[next].submit <= now_) {
        jobs_[next].queued_at = trace_[next].submit;
        waiting_.push_back(next++);
      }
      if (!waiting_.empty()) {
        Decide();
        last_tick = now_;
      }
    }
    res_.never_ran = static_cast<int>(waiting_.size());
    return res_;
  }

 private:
  struct Team {
    int nominal = 0, cap = 0, used = 0;
    double weight = 1;
  };
  struct JobState {
    Shape shape;
    double left = 0;           // seconds of holding its GPUs still needed
    double intended_left = 0;  // what its ETA tracks: left, or more for a job ending early
    double intended_end = 0;   // while running
    double end = 0;            // while running
    double started = -1;       // this run's start
    double first_start = -1;
    double queued_at = 0;
    double ran = 0;  // seconds run in all (earlier runs)
    bool running = false;
    // Elastic sizes: `left` and `intended_left` count seconds at its trace
    // size; it progresses at `rate` of that from `progress_from` (after a
    // resize's stall).
    double rate = 1, progress_from = 0;
    double acct_from = 0;            // busy GPU-time is counted up to here
    double last_change = 0;          // its start or last resize
    std::map<int, double> measured;  // throughput at each size it ran a minute or more
    double attained = 0;             // GPU-seconds received, for 2D-LAS
    double las_base = 0;             // attained at its last promotion
    double las_entered = 0;          // when it entered 2D-LAS' first queue (arrival or promotion)
    double las_demoted = -1;         // when it dropped to the second queue; -1: it has not
    int preemptions = 0;
    // Remaining time its last ETA gave, for a preempted job that had one.
    std::optional<double> reported_left;
    Placement placement;
  };

  const TraceJob& T(std::size_t i) const { return trace_[i]; }
  bool Elastic(std::size_t i) const { return ResizesJobs(policy_) && elastic_[i].elastic; }
  Team& TeamOf(std::size_t i) { return teams_.at(trace_[i].team); }

  void Account(std::size_t i, double from, double to) {
    double lo = std::max(from, 0.0), hi = std::min(to, res_.window);
    if (hi > lo) res_.busy_in_window += (hi - lo) * jobs_[i].shape.held();
    jobs_[i].attained += (to - from) * jobs_[i].shape.held();
  }

  void Release(std::size_t i) {
    for (auto [n, g] : jobs_[i].placement) free_[static_cast<std::size_t>(n)] += g;
    TeamOf(i).used -= jobs_[i].shape.held();
    jobs_[i].placement.clear();
  }

  void Complete() {
    for (auto it = running_.begin(); it != running_.end();) {
      std::size_t i = *it;
      JobState& s = jobs_[i];
      if (s.end > now_) {
        ++it;
        continue;
      }
      Account(i, s.acct_from, s.end);
      Release(i);
      double jct = s.end - T(i).submit;
      res_.done[i] = s.end;
      res_.jct.push_back(jct);
      if (T(i).gpus >= set_.per_node) res_.big_jct.push_back(jct);
      if (T(i).stalled)
        res_.stalled_gpu_h += std::max(0.0, s.left - T(i).duration) * s.shape.held() / 3600;
      // What the server learns when a job ends: how long it ran in all.
      history_.Record(
          Keys(i),
          Duration(static_cast<std::int64_t>(std::min(T(i).Work(), T(i).duration) * 1000)));
      it = running_.erase(it);
    }
  }

  std::vector<std::string> Keys(std::size_t i) const {
    std::vector<std::string> keys;
    if (!T(i).user.empty()) keys.push_back("user:" + T(i).user);
    keys.push_back("team:" + T(i).team);
    return keys;
  }

  void Start(std::size_t i, const Placement& p) {
    JobState& s = jobs_[i];
    if (Elastic(i)) {  // at the size it was given
      const int units = elastic_[i].UnitsOf(p);
      s.shape = elastic_[i].ShapeAt(units);
      s.rate = elastic_[i].Rate(units);
    }
    for (auto [n, g] : p) free_[static_cast<std::size_t>(n)] -= g;
    TeamOf(i).used += s.shape.held();
    s.placement = p;
    s.started = now_;
    s.acct_from = s.progress_from = s.last_change = now_;
    if (s.first_start < 0) {
      s.first_start = now_;
      res_.wait.push_back(now_ - T(i).submit);
    }
    s.end = now_ + s.left / s.rate;
    s.intended_end = now_ + s.intended_left / s.rate;
    s.running = true;
    running_.push_back(i);
    std::erase(waiting_, i);
  }

  // What is left of `end`'s run, in seconds at its trace size.
  double LeftOf(std::size_t i, double end) const {
    const JobState& s = jobs_[i];
    return std::max(0.0, end - std::max(now_, s.progress_from)) * s.rate;
  }

  void Preempt(std::size_t i) {
    JobState& s = jobs_[i];
    Account(i, s.acct_from, now_);
    Release(i);
    const double this_run = now_ - s.started;
    if (EtaKnown(i))
      s.reported_left = std::max(0.0, s.intended_end - now_) * T(i).eta_factor + set_.restart_cost;
    s.ran += this_run;
    s.running = false;
    s.left = LeftOf(i, s.end) + set_.restart_cost * s.rate;
    s.intended_left = LeftOf(i, s.intended_end) + set_.restart_cost * s.rate;
    s.queued_at = now_;
    ++s.preemptions;
    res_.lost_gpu_h += set_.restart_cost * s.shape.held() / 3600;
    ++res_.preemptions;
    std::erase(running_, i);
    waiting_.push_back(i);
    if (Elastic(i)) {  // it waits as at first
      s.shape = elastic_[i].ShapeAt(elastic_[i].start_units);
      s.rate = elastic_[i].Rate(elastic_[i].start_units);
    }
  }

  // A running elastic job to a new placement: `resize_cost` seconds without
  // progress, on the GPUs it holds after.
  void Resize(std::size_t i, const Placement& p) {
    JobState& s = jobs_[i];
    Account(i, s.acct_from, now_);
    s.acct_from = now_;
    s.left = LeftOf(i, s.end);
    s.intended_left = LeftOf(i, s.intended_end);
    for (auto [n, g] : s.placement) free_[static_cast<std::size_t>(n)] += g;
    TeamOf(i).used -= s.shape.held();
    const int units = elastic_[i].UnitsOf(p);
    s.shape = elastic_[i].ShapeAt(units);
    s.rate = elastic_[i].Rate(units);
    s.placement = p;
    for (auto [n, g] : p) free_[static_cast<std::size_t>(n)] -= g;
    TeamOf(i).used += s.shape.held();
    s.progress_from = now_ + set_.resize_cost;
    s.end = s.progress_from + s.left / s.rate;
    s.intended_end = s.progress_from + s.intended_left / s.rate;
    s.last_change = now_;
    ++res_.resizes;
    res_.resize_gpu_h += set_.resize_cost * s.shape.held() / 3600;
  }

  // Churn, for both elastic policies: a job resizes by choice at most once
  // per max(min_interval, amortise x the resize cost).
  bool MayResize(std::size_t i) const {
    const ElasticOptions& o = set_.elastic_options;
    return now_ - jobs_[i].last_change >=
           std::max(std::chrono::duration<double>(o.min_interval).count(),
                    o.amortise * set_.resize_cost);
  }

  bool WithinCap(std::size_t i) {
    const Team& t = TeamOf(i);
    return t.used + jobs_[i].shape.held() <= t.cap;
  }

  void Decide() {
    switch (policy_) {
      case Policy::kFifo:
        return DecideFifo();
      case Policy::kSjfOracle:
        return DecideSjf();
      case Policy::kSrsfOracle:
        return DecidePreemptive([this](std::size_t i) {
          const JobState& s = jobs_[i];
          double left = s.running ? s.end - now_ : s.left;
          return std::make_pair(left * s.shape.held(), T(i).submit);
        });
      case Policy::kLas:
        return DecideLas();
      case Policy::kPollux:
      case Policy::kPolluxRigid:
        return DecidePollux();
      default:
        return DecideHeadway();
    }
  }

  void DecideFifo() {
    std::vector<std::size_t> order = waiting_;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return jobs_[a].queued_at != jobs_[b].queued_at ? jobs_[a].queued_at < jobs_[b].queued_at
                                                      : a < b;
    });
    // Strict FIFO: the first job that does not fit the free GPUs holds
    // every later one. A job that fits but is over its team's cap holds its
    // team's later jobs (a queue is FIFO), not other teams'.
    std::set<std::string> held_teams;
    for (std::size_t i : order) {
      if (held_teams.count(T(i).team)) continue;
      auto p = Place(jobs_[i].shape, free_);
      if (!p) break;
      if (!WithinCap(i)) {
        held_teams.insert(T(i).team);
        continue;
      }
      Start(i, *p);
    }
  }

  void DecideSjf() {
    std::vector<std::size_t> order = waiting_;
    auto work = [&](std::size_t i) { return jobs_[i].left * jobs_[i].shape.held(); };
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return work(a) != work(b) ? work(a) < work(b) : a < b;
    });
    for (std::size_t i : order) {
      if (!WithinCap(i)) continue;
      if (auto p = Place(jobs_[i].shape, free_)) Start(i, *p);
    }
  }

  // Preemptive priority scheduling, as Tiresias does it: take jobs in order
  // while their GPUs fit the pool (and their team's cap); running jobs left
  // out make room, last in order first, for chosen waiting jobs that
  // cannot be placed otherwise.
  template <typename Key>
  void DecidePreemptive(Key key) {
    std::vector<std::size_t> all = running_;
    all.insert(all.end(), waiting_.begin(), waiting_.end());
    std::vector<std::pair<decltype(key(0)), std::size_t>> keyed;
    for (std::size_t i : all) keyed.push_back({key(i), i});
    std::sort(keyed.begin(), keyed.end());
    int budget = set_.nodes * set_.per_node;
    std::map<std::string, int> team_budget;
    std::set<std::size_t> chosen;
    for (const auto& [k, i] : keyed) {
      int g = jobs_[i].shape.held();
      int& used = team_budget[T(i).team];
      if (g > budget || used + g > TeamOf(i).cap) continue;
      budget -= g;
      used += g;
      chosen.insert(i);
    }
    std::vector<std::size_t> evictable;  // running, not chosen: worst first
    for (auto it = keyed.rbegin(); it != keyed.rend(); ++it) {
      std::size_t i = it->second;
      if (!chosen.count(i) && jobs_[i].running) {
        evictable.push_back(i);
      }
    }
    for (const auto& [k, i] : keyed) {
      if (!chosen.count(i) || jobs_[i].running) continue;
      // Its team's cap: the team's running jobs left out make room first,
      // worst first (the chosen ones fit the cap together).
      std::vector<std::size_t> take;
      std::vector<int> after = free_;
      int team_used = TeamOf(i).used;
      const int g = jobs_[i].shape.held();
      auto evict = [&](std::size_t v) {
        take.push_back(v);
        for (auto [n, h] : jobs_[v].placement) after[static_cast<std::size_t>(n)] += h;
        if (T(v).team == T(i).team) team_used -= jobs_[v].shape.held();
      };
      for (std::size_t v : evictable) {
        if (team_used + g <= TeamOf(i).cap) break;
        if (T(v).team == T(i).team) evict(v);
      }
      if (team_used + g > TeamOf(i).cap) continue;
      auto p = Place(jobs_[i].shape, after);
      for (std::size_t v : evictable) {
        if (p) break;
        if (std::find(take.begin(), take.end(), v) != take.end()) continue;
        evict(v);
        p = Place(jobs_[i].shape, after);
      }
      if (!p) continue;
      for (std::size_t v : take) {
        Preempt(v);
        std::erase(evictable, v);
      }
      p = Place(jobs_[i].shape, free_);
      if (!p) continue;
      Start(i, *p);
    }
  }

  double AttainedNow(std::size_t i) const {
    const JobState& s = jobs_[i];
    return s.attained + (s.running ? (now_ - s.started) * s.shape.held() : 0);
  }
  double NextLasDemotion() const {
    double t = kInf;
    for (std::size_t i : running_) {
      const JobState& s = jobs_[i];
      if (s.las_demoted >= 0) continue;
      double crossing =
          s.started + (set_.las_threshold - (s.attained - s.las_base)) / s.shape.held();
      if (crossing > now_) t = std::min(t, crossing);
    }
    return t;
  }
  // Tiresias' discretized 2D-LAS with two queues: a job drops to the second
  // queue once it has received `las_threshold` GPU-seconds; within a queue,
  // first come (to that queue) first served; a job that waited `las_promote`
  // times what it has run goes back to the first queue.
  void DecideLas() {
    for (std::size_t i : running_) {
      JobState& s = jobs_[i];
      double over = AttainedNow(i) - s.las_base - set_.las_threshold;
      if (over >= 0 && s.las_demoted < 0) s.las_demoted = now_ - over / s.shape.held();
    }
    for (std::size_t i : waiting_) {
      JobState& s = jobs_[i];
      if (s.las_demoted >= 0 && now_ - s.queued_at >= set_.las_promote * s.ran) {
        s.las_base = s.attained;
        s.las_demoted = -1;
        s.las_entered = now_;
      }
    }
    // Within a queue, running jobs keep their GPUs ahead of waiting ones
    // (Tiresias preempts only across queues), then first come first served.
    DecidePreemptive([this](std::size_t i) {
      const JobState& s = jobs_[i];
      double entered = s.las_demoted >= 0 ? s.las_demoted : std::max(s.las_entered, T(i).submit);
      return std::make_tuple(s.las_demoted >= 0 ? 1 : 0, s.running ? 0 : 1,
                             entered + 1e-9 * static_cast<double>(i));
    });
  }

  Time At(double s) const {
    return FromUnixMillis(0) + Duration(static_cast<std::int64_t>(s * 1000));
  }

  void DecideHeadway() {
    SchedulerOptions options = set_.headway;
    if (policy_ == Policy::kProgressAware) {
      options.ordering = Ordering::kShortestWork;
      options.starvation_bound = set_.aware_starvation_bound;
    } else if (policy_ == Policy::kBalanced || policy_ == Policy::kElastic) {
      options.ordering = Ordering::kBalanced;
      options.balanced_slowdown = set_.balanced_slowdown;
    }
    // A decision may preempt; the victims leave at once here (the server
    // waits their checkpoint grace), and the job they made room for starts
    // at the next decision, made straight away.
    for (int round = 0; round < 3; ++round) {
      ClusterState s;
      s.now = At(now_);
      for (int n = 0; n < set_.nodes; ++n) s.nodes.push_back({std::to_string(n), set_.per_node});
      for (const auto& [name, t] : teams_)
        s.queues[name] = {t.nominal, t.cap - t.nominal, t.weight};
      for (std::size_t i : running_) {
        const JobState& js = jobs_[i];
        RunningJob r;
        r.name = std::to_string(i);
        r.queue = T(i).team;
        for (auto [n, g] : js.placement) r.placement.push_back({std::to_string(n), g});
        r.started_at = At(js.started);
        r.expected_end = At(ExpectedEnd(i));
        r.checkpointable = UsesProgress(policy_);
        r.preemptions = js.preemptions;
        s.running.push_back(r);
      }
      for (std::size_t i : waiting_) {
        const JobState& js = jobs_[i];
        WaitingJob w;
        w.name = std::to_string(i);
        w.queue = T(i).team;
        w.submit_seq = static_cast<std::int64_t>(i);
        w.nodes = js.shape.nodes;
        w.gpus_per_node = js.shape.each;
        // A requeued job gets its whole limit again, as under Slurm.
        w.time_limit = Duration(static_cast<std::int64_t>(T(i).time_limit * 1000));
        w.queued_at = At(js.queued_at);
        w.submitted_at = At(T(i).submit);
        if (UsesProgress(policy_)) {
          // A preempted job's last ETA; else its history, less what it ran.
          if (js.reported_left) {
            w.expected_run = Duration(static_cast<std::int64_t>(*js.reported_left * 1000));
          } else if (auto learned = history_.Expect(Keys(i))) {
            w.expected_run = std::max(
                Duration(60'000), *learned - Duration(static_cast<std::int64_t>(js.ran * 1000)));
          }
        }
        s.waiting.push_back(w);
      }
      auto placement = [](const std::vector<NodeGpus>& from) {
        Placement p;
        for (const NodeGpus& ng : from) p.push_back({std::stoi(ng.node), ng.gpus});
        return p;
      };
      ElasticPlan plan;
      if (policy_ == Policy::kElastic) {
        plan = PlanWithElastic(s, ElasticJobs(), options, set_.elastic_options);
      } else {
        plan.decision = Schedule(s, options);
      }
      const Decision& d = plan.decision;
      std::set<std::size_t> preempted;
      for (const Preemption& p : d.preemptions) {
        preempted.insert(std::stoul(p.job));
        Preempt(std::stoul(p.job));
      }
      // Shrinks first: their GPUs come back at once (a start that waits for
      // them starts at the next round, straight away).
      bool shrank_for_start = false;
      for (int grow = 0; grow < 2; ++grow) {
        for (const sched::Resize& r : plan.resizes) {
          if ((r.to > r.from) != (grow == 1) || preempted.count(std::stoul(r.job))) continue;
          if (grow == 0 && !r.for_job.empty()) shrank_for_start = true;
          Resize(std::stoul(r.job), placement(r.placement));
        }
        if (grow == 1) break;
        for (const sched::Start& st : d.starts) Start(std::stoul(st.job), placement(st.placement));
      }
      CheckFree();
      if (d.preemptions.empty() && !shrank_for_start) break;
    }
  }

  // Running elastic jobs as sched::PlanWithElastic sees them: the throughput
  // each measured at the sizes it ran (a minute or more), its ETA at its size.
  std::vector<ElasticJob> ElasticJobs() {
    std::vector<ElasticJob> out;
    for (std::size_t i : running_) {
      if (!Elastic(i)) continue;
      JobState& js = jobs_[i];
      const ElasticSpec& e = elastic_[i];
      const int units = e.UnitsOf(js.placement);
      if (now_ - js.progress_from >= 60) js.measured[units] = js.rate;
      ElasticJob j;
      j.name = std::to_string(i);
      j.size = units;
      j.min_size = e.min_units;
      j.max_size = e.max_units;
      j.gpus_per_unit = e.gpus_per_unit;
      j.units_are_nodes = e.units_are_nodes;
      j.throughput = js.measured;
      j.last_change = At(js.last_change);
      j.restart_cost = Duration(static_cast<std::int64_t>(set_.resize_cost * 1000));
      if (EtaKnown(i)) {
        const double left = std::max(0.0, js.intended_end - now_) * T(i).eta_factor;
        j.eta = Duration(static_cast<std::int64_t>(left * 1000));
      }
      out.push_back(std::move(j));
    }
    return out;
  }

  // Pollux-like: every decision re-allocates the pool by marginal speed-up
  // per GPU (sim_elastic.cc), with the same churn limit as Headway's.
  void DecidePollux() {
    std::vector<PolluxRunning> running;
    for (std::size_t i : running_) {
      const bool elastic = Elastic(i);
      running.push_back(
          {i, elastic ? &elastic_[i] : nullptr, jobs_[i].placement, elastic && MayResize(i)});
    }
    std::vector<std::size_t> order = waiting_;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return jobs_[a].queued_at != jobs_[b].queued_at ? jobs_[a].queued_at < jobs_[b].queued_at
                                                      : a < b;
    });
    std::vector<PolluxWaiting> waiting;
    for (std::size_t i : order) {
      waiting.push_back({i, Elastic(i) ? &elastic_[i] : nullptr, jobs_[i].shape});
    }
    const PolluxPlan plan = PolluxAllocate(free_, set_.per_node, running, waiting);
    // What resized jobs give up comes back before the starts, which may use
    // it; then each takes its new placement.
    auto given_up = [&](std::size_t i, const Placement& p, int sign) {
      std::map<int, int> drop;
      for (auto [n, g] : jobs_[i].placement) drop[n] += g;
      for (auto [n, g] : p) drop[n] -= g;
      for (auto [n, g] : drop) free_[static_cast<std::size_t>(n)] += sign * std::max(g, 0);
    };
    for (const auto& [i, p] : plan.resizes) given_up(i, p, +1);
    for (const auto& [i, p] : plan.starts) Start(i, p);
    for (const auto& [i, p] : plan.resizes) {
      given_up(i, p, -1);
      Resize(i, p);
    }
    CheckFree();
  }

  void CheckFree() const {
    for (int f : free_) {
      if (f < 0 || f > set_.per_node) {
        std::fprintf(stderr, "simulator: a node's free GPUs went to %d\n", f);
        std::abort();
      }
    }
  }

  // Whether a running job has reported enough for an ETA: after 5% of its
  // run (at least 2 min) since it (re)started.
  bool EtaKnown(std::size_t i) const {
    return now_ - jobs_[i].started >= std::max(120.0, 0.05 * T(i).intended);
  }

  // When the scheduler expects a running job to end: its time limit without
  // progress; with progress, the ETA once the job has reported enough (and,
  // progress-aware, its learned run time before that), capped by the limit.
  double ExpectedEnd(std::size_t i) const {
    const JobState& s = jobs_[i];
    double limit_end = s.started + T(i).time_limit;
    if (policy_ == Policy::kFairShareLimits) return limit_end;
    if (!EtaKnown(i)) {
      // As the server: the time limit until the job reports; progress-aware
      // also knows what its history predicts, and for a resumed job, what its
      // reports from before its preemption said was left.
      double expected = limit_end;
      if (UsesProgress(policy_)) {
        if (s.reported_left) {
          expected = s.started + *s.reported_left;
        } else if (auto e = history_.Expect(Keys(i))) {
          expected = s.started + std::max(0.0, std::chrono::duration<double>(*e).count() - s.ran);
        }
      }
      return std::max(now_, std::min(limit_end, expected));
    }
    return std::max(now_, std::min(limit_end, now_ + (s.intended_end - now_) * T(i).eta_factor));
  }

  const std::vector<TraceJob>& trace_;
  const std::vector<ElasticSpec>& elastic_;
  Settings set_;
  Policy policy_;
  std::vector<JobState> jobs_;
  std::vector<int> free_;
  std::map<std::string, Team> teams_;
  std::vector<std::size_t> waiting_, running_;
  RunTimeHistory history_;
  double now_ = 0;
  Result res_;
};

// Whether two completion times are the same event (they are sums of the
// same seconds in another order).
bool SameTime(double a, double b) { return std::abs(a - b) <= 1e-6 * std::max(1.0, std::abs(a)); }

int RunPool(const std::vector<TraceJob>& all, const std::string& path, Settings set,
            const std::string& quota_spec, const DrawOptions& draw) {
  // Jobs larger than the pool can never run anywhere; drop them for every policy alike.
  std::vector<TraceJob> trace = all;
  std::erase_if(trace, [&](const TraceJob& j) {
    return ShapeOf(j, set.per_node).held() > set.nodes * set.per_node;
  });
  const auto quotas = Quotas(trace, set.nodes, set.per_node, quota_spec, set.borrow);
  if (quotas.empty() && !trace.empty()) {
    std::fprintf(stderr, "--quotas: \"%s\" is not equal, demand or TEAM=FRACTION,...\n",
                 quota_spec.c_str());
    return 2;
  }
  std::set<std::string> users;
  double gpu_time = 0;
  int killed = 0, early = 0;
  for (const TraceJob& j : trace) {
    if (!j.user.empty()) users.insert(j.user);
    gpu_time += j.Work() * ShapeOf(j, set.per_node).held();
    killed += j.KilledAtLimit() ? 1 : 0;
    early += j.ends_early ? 1 : 0;
  }
  const int pool = set.nodes * set.per_node;
  const double span = trace.empty() ? 0 : trace.back().submit;
  std::printf(
      "trace %s: %zu jobs, %zu teams, %zu users, on %d nodes x %d GPUs; offered load %.2f\n",
      path.c_str(), trace.size(), quotas.size(), users.size(), set.nodes, set.per_node,
      span > 0 ? gpu_time / (span * pool) : 0);
  std::printf(
      "quotas %s, cap %.1fx; %d jobs killed at their time limit, %d end early (failed or "
      "cancelled); restart cost %.0f s; ETA error sigma %.2f\n\n",
      quota_spec.c_str(), set.borrow, killed, early, set.restart_cost, draw.eta_sigma);
  struct Row {
    const char* name;
    Policy policy;
    bool is_default;
  };
  // The server's default ordering (sched::kDefaultOrdering) marks its rows.
  const bool fair_default = kDefaultOrdering == Ordering::kFairShare;
  std::vector<Row> rows = {
      {"FIFO", Policy::kFifo, false},
      {"SJF, oracle", Policy::kSjfOracle, false},
      {"SRSF, oracle", Policy::kSrsfOracle, false},
      {"2D-LAS (Tiresias)", Policy::kLas, false},
      {"fair-share, limits", Policy::kFairShareLimits, fair_default},
      {"fair-share, ETA", Policy::kFairShareEta, fair_default},
      {"progress-aware", Policy::kProgressAware, kDefaultOrdering == Ordering::kShortestWork},
      {"balanced", Policy::kBalanced, kDefaultOrdering == Ordering::kBalanced}};
  const std::size_t kBalancedRow = rows.size() - 1;
  const std::vector<ElasticSpec> elastic = DrawElastic(trace, set.per_node, set.nodes, set.elastic);
  const bool with_elastic = set.elastic.share > 0;
  if (with_elastic) {
    rows.push_back({"elastic (balanced)", Policy::kElastic, false});
    rows.push_back({"Pollux-like goodput", Policy::kPollux, false});
    rows.push_back({"Pollux-like, all rigid", Policy::kPolluxRigid, false});
    PrintElasticHeader(elastic, set.elastic, set.resize_cost);
  }
  std::vector<Result> results;
  for (const Row& row : rows) {
    auto began = std::chrono::steady_clock::now();
    results.push_back(Simulation(trace, set, row.policy, quotas, elastic).Run());
    std::fprintf(stderr, "  %s: %.1f s\n", row.name,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  }
  std::printf("%-28s %9s %9s %9s %9s %9s %7s %8s %9s %7s %7s %7s%s\n", "policy", "JCT avg h",
              "JCT p50 h", "JCT p99 h", "big JCT h", "wait avg", "util %", "preempt", "lost GPUh",
              "avg/LAS", "p99/LAS", "big/LAS", with_elastic ? "  resizes rsz GPUh" : "");
  const Result& las = results[3];
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const Result& r = results[k];
    double util = r.window > 0 ? 100 * r.busy_in_window / (r.window * pool) : 0;
    char big[16] = "-", big_ratio[16] = "-";
    if (!r.big_jct.empty()) {
      std::snprintf(big, sizeof big, "%.2f", Mean(r.big_jct) / 3600);
      std::snprintf(big_ratio, sizeof big_ratio, "%.2f", ratio(Mean(r.big_jct), Mean(las.big_jct)));
    }
    std::string name = std::string(rows[k].name) + (rows[k].is_default ? " (default)" : "");
    char resizes[48] = "";
    if (with_elastic)
      std::snprintf(resizes, sizeof resizes, " %8d %8.1f", r.resizes, r.resize_gpu_h);
    std::printf("%-28s %9.2f %9.2f %9.2f %9s %8.2fh %7.1f %8d %9.1f %7.2f %7.2f %7s%s%s\n",
                name.c_str(), Mean(r.jct) / 3600, Pct(r.jct, 0.5) / 3600, Pct(r.jct, 0.99) / 3600,
                big, Mean(r.wait) / 3600, util, r.preemptions, r.lost_gpu_h + r.stalled_gpu_h,
                ratio(Mean(r.jct), Mean(las.jct)), ratio(Pct(r.jct, 0.99), Pct(las.jct, 0.99)),
                big_ratio, resizes,
                r.never_ran ? (" (" + std::to_string(r.never_ran) + " never ran)").c_str() : "");
  }
  // The cross-check: strict FIFO replayed by an event loop of its own.
  const std::vector<double> replay = ReplayFifo(trace, set.nodes, set.per_node, quotas);
  std::size_t same = 0;
  for (std::size_t i = 0; i < trace.size(); ++i)
    same += SameTime(replay[i], results[0].done[i]) ? 1 : 0;
  std::printf(
      "\ncheck: an independent FIFO replay %s the simulator's FIFO (%zu/%zu jobs end at "
      "the same time)\n",
      same == trace.size() ? "agrees with" : "DISAGREES with", same, trace.size());
  // Checkpoints: what interruptions at balanced's preemption rate, plus
  // failures, cost each job under three checkpoint policies.
  CheckpointSettings ck = set.checkpoints;
  ck.restart = set.restart_cost;
  ck.per_gpu_hour = set.gpu_failure_rate +
                    (gpu_time > 0 ? results[kBalancedRow].preemptions / (gpu_time / 3600) : 0);
  const CheckpointLosses lost = LostToInterruptions(trace, set.per_node, ck);
  std::printf(
      "\ncheckpoints: %.4f interruptions per GPU-hour (balanced's preemptions, failures "
      "%.0e), write %.0f s, restart %.0f s\n",
      ck.per_gpu_hour, set.gpu_failure_rate, ck.cost, ck.restart);
  std::printf("%-28s %12s %14s\n", "checkpoint policy", "lost GPUh", "interruptions");
  const std::string names[] = {
      "none", "every " + std::to_string(static_cast<int>(ck.fixed_interval / 60)) + " min",
      "Young/Daly (Headway)"};
  for (std::size_t p = 0; p < 3; ++p) {
    const std::string& name = names[p];
    std::printf("%-28s %12.1f %14ld\n", name.c_str(), lost.lost_gpu_h[p], lost.interruptions[p]);
  }
  const std::vector<double>& fifo = results[0].big_jct;
  if (fifo.empty()) return same == trace.size() ? 0 : 1;
  std::printf("\nbig jobs (>= %d GPUs): %zu\n", set.per_node, fifo.size());
  std::printf("%-28s %9s %9s %9s %9s %9s %9s\n", "policy", "avg h", "p50 h", "p95 h", "max h",
              "avg/FIFO", "p95/FIFO");
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const std::vector<double>& big = results[k].big_jct;
    std::printf("%-28s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", rows[k].name, Mean(big) / 3600,
                Pct(big, 0.5) / 3600, Pct(big, 0.95) / 3600, Pct(big, 1.0) / 3600,
                ratio(Mean(big), Mean(fifo)), ratio(Pct(big, 0.95), Pct(fifo, 0.95)));
  }
  return same == trace.size() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--generate") {
    Generate(argc > 2 ? std::atoi(argv[2]) : 2000,
             argc > 3 ? static_cast<unsigned>(std::atoi(argv[3])) : 1);
    return 0;
  }
  Settings set;
  DrawOptions draw;
  std::string quota_spec = "equal";
  std::vector<std::string> args;
  if (int rc = ParseArgs(argc, argv, set, draw, quota_spec, args); rc != 0) return rc;
  // Several pool sizes ("8,16,32"): the same trace at several loads.
  std::vector<int> pools;
  {
    std::stringstream list(args.size() > 1 ? args[1] : "16");
    for (std::string item; std::getline(list, item, ',');) pools.push_back(std::atoi(item.c_str()));
  }
  set.per_node = args.size() > 2 ? std::atoi(args[2].c_str()) : 8;
  if (pools.empty() || set.per_node <= 0 ||
      std::any_of(pools.begin(), pools.end(), [](int n) { return n <= 0; })) {
    std::fprintf(stderr, "nodes and gpus_per_node must be positive\n");
    return 2;
  }
  const auto trace = ReadTrace(args[0], draw);
  int rc = 0;
  for (std::size_t k = 0; k < pools.size(); ++k) {
    if (k > 0) std::printf("\n----\n\n");
    set.nodes = pools[k];
    rc = std::max(rc, RunPool(trace, args[0], set, quota_spec, draw));
  }
  return rc;
}
