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
//                     service (NSDI '19): preemptive, knows nothing about jobs
//   headway, fair share, time limits   the default policy when jobs report
//                     no progress: expected ends are time limits
//   headway, fair share, ETA           the same with progress ETAs and stall
//                     auto-stop
//   headway, progress-aware            Ordering::kShortestWork: learned run
//                     times for queued jobs, live ETAs for running ones,
//                     preemption of much longer checkpointable work
//
// The same rules for every policy:
//  - gang placement: a job of a node or more takes whole nodes, a smaller one
//    stays on one node (best fit);
//  - quotas that bind: each team's nominal share is its part of the trace's
//    GPU-time; it may use up to `--borrow` times that (at least its largest
//    job). Baselines skip a job whose team is at its cap; Headway borrows,
//    and reclaims borrowed GPUs, by its own rules;
//  - a restart cost (`--restart-cost`, 5 min): a preempted job redoes that
//    much work (lost since its checkpoint, plus starting again);
//  - decisions at every arrival and completion and every `--tick` seconds
//    while jobs wait.
//
// What a scheduler may know, drawn once per job with a fixed seed:
//  - time limits: where the trace has none, the run time times a factor
//    drawn from a log-normal (median 2, sigma 0.7), rounded up to the
//    limits users pick (30 min, 1, 2, 4, 8, 12, 24, 48, 72 h, then weeks):
//    users over-ask, by a factor of 2 to 10 and more (Tsafrir et al. 2007);
//  - progress ETAs: none for the first 5% of a run (at least 2 min), then
//    the true remaining time off by a per-job factor exp(N(0, --eta-error)),
//    0.25 by default: about twice the mean error eta_bench measures on
//    training curves, since real jobs report coarsely;
//  - learned run times: the median of the last 20 finished runs of the same
//    user (else team), as the server's RunTimeHistory keeps them.
//
// Utilisation is busy GPU-time over a fixed window, from the first to the
// last arrival, so a policy that finishes the last long job later is not
// credited for it. "big" jobs use a whole node or more.
//
//   simulator TRACE.csv [nodes=16] [gpus_per_node=8] [--starvation-bound S|off]
//             [--aware-starvation-bound S|off] [--eta-error SIGMA] [--restart-cost S]
//             [--borrow X] [--tick S] [--preempt-ratio X] [--las-threshold GPU_S]
//   simulator --generate N SEED > trace.csv     # a synthetic trace
//
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
#include <vector>

#include "sched/run_time_history.h"
#include "sched/scheduler.h"

namespace {

using namespace headway;
using namespace headway::sched;

constexpr double kInf = std::numeric_limits<double>::infinity();

struct TraceJob {
  double submit = 0, duration = 0;
  int gpus = 1;
  std::string team, user;
  bool stalled = false;
  double time_limit = 0;  // seconds; drawn where the trace has none
  double eta_factor = 1;  // reported remaining time / true remaining time
};

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> fields;
  std::string f;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.push_back(f);
      f.clear();
    } else {
      f += c;
    }
  }
  fields.push_back(f);
  return fields;
}

// Column positions by name, from a header line.
struct Columns {
  std::map<std::string, std::size_t> at;
  explicit Columns(const std::vector<std::string>& header) {
    for (std::size_t i = 0; i < header.size(); ++i) at[header[i]] = i;
  }
  bool has(const std::string& name) const { return at.count(name) > 0; }
  const std::string& get(const std::vector<std::string>& row, const std::string& name) const {
    static const std::string empty;
    auto it = at.find(name);
    return it == at.end() || it->second >= row.size() ? empty : row[it->second];
  }
};

double Number(const std::string& s, double fallback = 0) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  return end == s.c_str() ? fallback : v;
}

// Reads the formats bench/data/README.md describes; `false` skips the row.
using RowReader = std::function<bool(const std::vector<std::string>&, TraceJob&)>;

RowReader ReaderFor(const Columns& c) {
  if (c.has("gpu_milli") && c.has("scheduled_time")) {
    // Alibaba cluster-trace-gpu-v2023 (openb): scheduled GPU tasks; runtime
    // is deletion - scheduled. A fractional GPU takes a whole one here. No
    // teams or users: the QoS class stands in for the team.
    return [c](const std::vector<std::string>& f, TraceJob& j) {
      if (c.get(f, "scheduled_time").empty()) return false;
      j.gpus = static_cast<int>(Number(c.get(f, "num_gpu")));
      if (j.gpus <= 0) return false;
      j.submit = Number(c.get(f, "creation_time"));
      j.duration = Number(c.get(f, "deletion_time")) - Number(c.get(f, "scheduled_time"));
      j.team = c.get(f, "qos");
      return true;
    };
  }
  if (c.has("timestamp") && c.has("num_gpus") && c.has("cluster")) {
    // Microsoft Philly (2017) as Pollux ships it: submit time as
    // "YYYY-MM-DD HH:MM:SS", run time in seconds over all attempts; the
    // virtual cluster stands in for the team. No users.
    return [c](const std::vector<std::string>& f, TraceJob& j) {
      std::tm tm{};
      const std::string& when = c.get(f, "timestamp");
      if (std::sscanf(when.c_str(), "%d-%d-%d %d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                      &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6) {
        return false;
      }
      tm.tm_year -= 1900;
      tm.tm_mon -= 1;
      j.submit = static_cast<double>(timegm(&tm));
      j.duration = Number(c.get(f, "duration"));
      j.gpus = static_cast<int>(Number(c.get(f, "num_gpus")));
      j.team = c.get(f, "cluster");
      return j.gpus > 0;
    };
  }
  if (c.has("submit_time") && c.has("num_gpu") && c.has("real_duration")) {
    // Microsoft Philly, one virtual cluster, as ElasticFlow ships it: submit
    // time in seconds from the first job, run time in seconds. Its model and
    // iteration columns were added by ElasticFlow's authors and are ignored.
    return [c](const std::vector<std::string>& f, TraceJob& j) {
      j.submit = Number(c.get(f, "submit_time"));
      j.duration = Number(c.get(f, "duration"));
      j.gpus = static_cast<int>(Number(c.get(f, "num_gpu")));
      j.team = "vc";
      return j.gpus > 0;
    };
  }
  if (c.has("submit_s") && c.has("duration_s")) {
    // Headway's own: submit_s,duration_s,gpus,team[,status][,user][,time_limit_s]
    return [c](const std::vector<std::string>& f, TraceJob& j) {
      j.submit = Number(c.get(f, "submit_s"));
      j.duration = Number(c.get(f, "duration_s"));
      j.gpus = static_cast<int>(Number(c.get(f, "gpus"), 1));
      j.team = c.get(f, "team");
      j.user = c.get(f, "user");
      j.stalled = c.get(f, "status").find("stalled") != std::string::npos;
      j.time_limit = Number(c.get(f, "time_limit_s"));
      return j.gpus > 0;
    };
  }
  return nullptr;
}

// Users' time limits: the values they pick, above what the job needs.
double DrawTimeLimit(double duration, std::mt19937& rng) {
  std::lognormal_distribution<double> over(std::log(2.0), 0.7);
  double want = duration * std::max(1.05, over(rng));
  for (double h : {0.5, 1.0, 2.0, 4.0, 8.0, 12.0, 24.0, 48.0, 72.0}) {
    if (want <= h * 3600) return h * 3600;
  }
  return std::ceil(want / (168 * 3600)) * 168 * 3600;
}

std::vector<TraceJob> ReadTrace(const std::string& path, double eta_sigma) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::vector<TraceJob> jobs;
  std::string line;
  RowReader read;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = SplitCsv(line);
    if (!read) {
      read = ReaderFor(Columns(f));
      if (!read) {
        std::fprintf(stderr, "%s: unknown trace format (header: %s)\n", path.c_str(), line.c_str());
        std::exit(2);
      }
      continue;
    }
    TraceJob j;
    try {
      if (!read(f, j)) continue;
    } catch (const std::exception&) {
      continue;
    }
    if (!std::isfinite(j.submit) || !std::isfinite(j.duration)) continue;
    j.duration = std::max(1.0, j.duration);
    if (j.team.empty()) j.team = "default";
    jobs.push_back(j);
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](auto& a, auto& b) { return a.submit < b.submit; });
  // Rebase to the first arrival; draw what schedulers may know (fixed seed:
  // every policy and every run sees the same limits and errors).
  std::mt19937 rng(2023);
  std::normal_distribution<double> error(0.0, eta_sigma);
  double first = jobs.empty() ? 0 : jobs.front().submit;
  for (TraceJob& j : jobs) {
    j.submit -= first;
    if (j.time_limit < j.duration) j.time_limit = DrawTimeLimit(j.duration, rng);
    j.eta_factor = std::exp(std::clamp(error(rng), -3 * eta_sigma, 3 * eta_sigma));
  }
  return jobs;
}

void Generate(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::exponential_distribution<double> gap(1.0 / 120.0);             // a job every 2 min
  std::lognormal_distribution<double> duration(std::log(1800), 1.2);  // median 30 min
  const int sizes[] = {1, 1, 1, 1, 2, 2, 4, 8, 8, 16};
  const char* teams[] = {"vision", "vision", "vision", "speech", "speech", "nlp", "rl", "infra"};
  std::printf("submit_s,duration_s,gpus,team,status\n");
  double t = 0;
  for (int i = 0; i < n; ++i) {
    t += gap(rng);
    bool stalled = rng() % 20 == 0;  // 5% of jobs hang
    std::printf("%.0f,%.0f,%d,%s,%s\n", t, std::min(duration(rng), 86400.0), sizes[rng() % 10],
                teams[rng() % 8], stalled ? "stalled" : "ok");
  }
}

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

enum class Policy {
  kFifo,
  kSjfOracle,
  kSrsfOracle,
  kLas,
  kFairShareLimits,
  kFairShareEta,
  kProgressAware
};

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
  SchedulerOptions headway;
  std::optional<Duration> aware_starvation_bound = SchedulerOptions::kShortestWorkStarvationBound;
};

struct Result {
  std::vector<double> jct, wait, big_jct;
  double busy_in_window = 0, window = 0, lost_gpu_h = 0, stalled_gpu_h = 0;
  int preemptions = 0, never_ran = 0;
};

using Placement = std::vector<std::pair<int, int>>;  // node, GPUs

struct Shape {
  int nodes = 1, each = 1;
  int held() const { return nodes * each; }
};

Shape ShapeOf(const TraceJob& j, int per_node) {
  if (j.gpus > per_node) return {(j.gpus + per_node - 1) / per_node, per_node};
  return {1, j.gpus};
}

// Best fit, as Headway places: the fullest nodes that still have room.
std::optional<Placement> Place(const Shape& s, const std::vector<int>& free) {
  std::vector<int> fits;
  for (int n = 0; n < static_cast<int>(free.size()); ++n) {
    if (free[static_cast<std::size_t>(n)] >= s.each) fits.push_back(n);
  }
  if (static_cast<int>(fits.size()) < s.nodes) return std::nullopt;
  std::partial_sort(fits.begin(), fits.begin() + s.nodes, fits.end(), [&](int a, int b) {
    int fa = free[static_cast<std::size_t>(a)], fb = free[static_cast<std::size_t>(b)];
    return fa != fb ? fa < fb : a < b;
  });
  Placement p;
  for (int k = 0; k < s.nodes; ++k) p.push_back({fits[static_cast<std::size_t>(k)], s.each});
  return p;
}

class Simulation {
 public:
  Simulation(const std::vector<TraceJob>& trace, const Settings& settings, Policy policy)
      : trace_(trace),
        set_(settings),
        policy_(policy),
        jobs_(trace.size()),
        free_(static_cast<std::size_t>(settings.nodes), settings.per_node) {
    // Quotas: each team's share of the trace's GPU-time.
    double total_demand = 0;
    std::map<std::string, double> demand;
    std::map<std::string, int> largest;
    for (const TraceJob& j : trace) {
      demand[j.team] += j.duration * j.gpus;
      total_demand += j.duration * j.gpus;
      largest[j.team] = std::max(largest[j.team], ShapeOf(j, set_.per_node).held());
    }
    const int pool = set_.nodes * set_.per_node;
    for (const auto& [team, d] : demand) {
      Team t;
      t.weight = std::max(1e-3, d / std::max(1.0, total_demand));
      t.nominal = std::max(1, static_cast<int>(std::lround(pool * t.weight)));
      t.cap = std::min(
          pool, std::max(largest[team], static_cast<int>(std::lround(t.nominal * set_.borrow))));
      teams_[team] = t;
    }
    for (std::size_t i = 0; i < trace.size(); ++i) {
      const TraceJob& j = trace[i];
      jobs_[i].shape = ShapeOf(j, set_.per_node);
      bool stop_stalls = policy == Policy::kFairShareEta || policy == Policy::kProgressAware;
      jobs_[i].left = !j.stalled    ? j.duration
                      : stop_stalls ? j.duration + set_.stall_detect
                                    : j.time_limit;
    }
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
    double left = 0;      // seconds of holding its GPUs still needed
    double end = 0;       // while running
    double started = -1;  // this run's start
    double first_start = -1;
    double queued_at = 0;
    double ran = 0;  // seconds run in all (earlier runs)
    bool running = false;
    double attained = 0;      // GPU-seconds received, for 2D-LAS
    double las_base = 0;      // attained at its last promotion
    double las_entered = 0;   // when it entered 2D-LAS' first queue (arrival or promotion)
    double las_demoted = -1;  // when it dropped to the second queue; -1: it has not
    int preemptions = 0;
    // Remaining time its last ETA gave, for a preempted job that had one.
    std::optional<double> reported_left;
    Placement placement;
  };

  const TraceJob& T(std::size_t i) const { return trace_[i]; }
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
      Account(i, s.started, s.end);
      Release(i);
      double jct = s.end - T(i).submit;
      res_.jct.push_back(jct);
      if (T(i).gpus >= set_.per_node) res_.big_jct.push_back(jct);
      if (T(i).stalled) res_.stalled_gpu_h += (s.left - T(i).duration) * s.shape.held() / 3600;
      // What the server learns when a job ends: how long it ran in all.
      history_.Record(Keys(i), Duration(static_cast<std::int64_t>(T(i).duration * 1000)));
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
    for (auto [n, g] : p) free_[static_cast<std::size_t>(n)] -= g;
    TeamOf(i).used += s.shape.held();
    s.placement = p;
    s.started = now_;
    if (s.first_start < 0) {
      s.first_start = now_;
      res_.wait.push_back(now_ - T(i).submit);
    }
    s.end = now_ + s.left;
    s.running = true;
    running_.push_back(i);
    std::erase(waiting_, i);
  }

  void Preempt(std::size_t i) {
    JobState& s = jobs_[i];
    Account(i, s.started, now_);
    Release(i);
    const double this_run = now_ - s.started;
    if (EtaKnown(i))
      s.reported_left = std::max(0.0, s.end - now_) * T(i).eta_factor + set_.restart_cost;
    s.ran += this_run;
    s.running = false;
    s.left = std::max(0.0, s.end - now_) + set_.restart_cost;
    s.queued_at = now_;
    ++s.preemptions;
    res_.lost_gpu_h += set_.restart_cost * s.shape.held() / 3600;
    ++res_.preemptions;
    std::erase(running_, i);
    waiting_.push_back(i);
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
    // A job over its team's cap holds its team's later jobs (a queue is
    // FIFO), not other teams'; the first job that does not fit holds all.
    std::set<std::string> held_teams;
    for (std::size_t i : order) {
      if (held_teams.count(T(i).team)) continue;
      if (!WithinCap(i)) {
        held_teams.insert(T(i).team);
        continue;
      }
      auto p = Place(jobs_[i].shape, free_);
      if (!p) break;
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
      if (!WithinCap(i)) continue;
      auto p = Place(jobs_[i].shape, free_);
      if (!p) {
        std::vector<int> after = free_;
        std::size_t take = 0;
        while (take < evictable.size() && !p) {
          for (auto [n, g] : jobs_[evictable[take]].placement)
            after[static_cast<std::size_t>(n)] += g;
          ++take;
          p = Place(jobs_[i].shape, after);
        }
        if (!p) continue;
        for (std::size_t v = 0; v < take; ++v) Preempt(evictable[v]);
        evictable.erase(evictable.begin(), evictable.begin() + static_cast<long>(take));
        p = Place(jobs_[i].shape, free_);
        if (!p) continue;
      }
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
    DecidePreemptive([this](std::size_t i) {
      const JobState& s = jobs_[i];
      double entered = s.las_demoted >= 0 ? s.las_demoted : std::max(s.las_entered, T(i).submit);
      return std::make_pair(s.las_demoted >= 0 ? 1.0 : 0.0,
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
        r.checkpointable = policy_ == Policy::kProgressAware;
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
        if (policy_ == Policy::kProgressAware) {
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
      Decision d = Schedule(s, options);
      for (const Preemption& p : d.preemptions) Preempt(std::stoul(p.job));
      for (const sched::Start& st : d.starts) {
        Placement p;
        for (const NodeGpus& ng : st.placement) p.push_back({std::stoi(ng.node), ng.gpus});
        Start(std::stoul(st.job), p);
      }
      if (d.preemptions.empty()) break;
    }
  }

  // Whether a running job has reported enough for an ETA: after 5% of its
  // run (at least 2 min) since it (re)started.
  bool EtaKnown(std::size_t i) const {
    return now_ - jobs_[i].started >= std::max(120.0, 0.05 * T(i).duration);
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
      if (policy_ == Policy::kProgressAware) {
        if (s.reported_left) {
          expected = s.started + *s.reported_left;
        } else if (auto e = history_.Expect(Keys(i))) {
          expected = s.started + std::max(0.0, std::chrono::duration<double>(*e).count() - s.ran);
        }
      }
      return std::max(now_, std::min(limit_end, expected));
    }
    return std::max(now_, std::min(limit_end, now_ + (s.end - now_) * T(i).eta_factor));
  }

  const std::vector<TraceJob>& trace_;
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

bool ParseSeconds(const std::string& value, double& out) {
  char* end = nullptr;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(v >= 0)) return false;
  out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--generate") {
    Generate(argc > 2 ? std::atoi(argv[2]) : 2000,
             argc > 3 ? static_cast<unsigned>(std::atoi(argv[3])) : 1);
    return 0;
  }
  Settings set;
  double eta_sigma = 0.25;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      args.push_back(arg);
      continue;
    }
    std::string value = i + 1 < argc ? argv[++i] : "";
    double v = 0;
    bool ok = ParseSeconds(value, v);
    if (arg == "--starvation-bound" && value == "off") {
      set.headway.starvation_bound.reset();
    } else if (arg == "--starvation-bound" && ok) {
      set.headway.starvation_bound = Duration(static_cast<std::int64_t>(v * 1000));
    } else if (arg == "--aware-starvation-bound" && value == "off") {
      set.aware_starvation_bound.reset();
    } else if (arg == "--aware-starvation-bound" && ok) {
      set.aware_starvation_bound = Duration(static_cast<std::int64_t>(v * 1000));
    } else if (arg == "--eta-error" && ok) {
      eta_sigma = v;
    } else if (arg == "--restart-cost" && ok) {
      set.restart_cost = v;
      set.headway.restart_cost = Duration(static_cast<std::int64_t>(v * 1000));
    } else if (arg == "--borrow" && ok && v >= 1) {
      set.borrow = v;
    } else if (arg == "--tick" && ok && v > 0) {
      set.tick = v;
    } else if (arg == "--starvation-slowdown" && ok) {
      set.headway.starvation_slowdown = v;
    } else if (arg == "--las-threshold" && ok && v > 0) {
      set.las_threshold = v;
    } else if (arg == "--preempt-ratio" && ok && v > 0) {
      set.headway.preempt_ratio = v;
    } else {
      std::fprintf(stderr, "%s: bad or missing value \"%s\"\n", arg.c_str(), value.c_str());
      return 2;
    }
  }
  if (args.empty()) {
    std::fprintf(stderr,
                 "usage: simulator TRACE.csv [nodes] [gpus_per_node] [--starvation-bound S|off]\n"
                 "                 [--aware-starvation-bound S|off] [--eta-error SIGMA]\n"
                 "                 [--restart-cost S] [--borrow X] [--tick S] [--preempt-ratio X]\n"
                 "                 [--las-threshold GPU_SECONDS]\n"
                 "       simulator --generate N SEED\n");
    return 2;
  }
  set.nodes = args.size() > 1 ? std::atoi(args[1].c_str()) : 16;
  set.per_node = args.size() > 2 ? std::atoi(args[2].c_str()) : 8;
  if (set.nodes <= 0 || set.per_node <= 0) {
    std::fprintf(stderr, "nodes and gpus_per_node must be positive\n");
    return 2;
  }
  auto trace = ReadTrace(args[0], eta_sigma);
  // Jobs larger than the pool can never run anywhere; drop them for every policy alike.
  std::erase_if(trace, [&](const TraceJob& j) {
    return ShapeOf(j, set.per_node).held() > set.nodes * set.per_node;
  });
  std::set<std::string> teams, users;
  for (const TraceJob& j : trace) {
    teams.insert(j.team);
    if (!j.user.empty()) users.insert(j.user);
  }
  std::printf("trace %s: %zu jobs, %zu teams, %zu users, on %d nodes x %d GPUs\n", args[0].c_str(),
              trace.size(), teams.size(), users.size(), set.nodes, set.per_node);
  std::printf(
      "quotas: share of GPU-time, cap %.1fx; restart cost %.0f s; ETA error sigma %.2f; "
      "starvation bound %s\n\n",
      set.borrow, set.restart_cost, eta_sigma,
      set.headway.starvation_bound
          ? (std::to_string(set.headway.starvation_bound->count() / 1000) + " s").c_str()
          : "off");
  struct Row {
    const char* name;
    Policy policy;
  };
  const std::vector<Row> rows = {{"FIFO", Policy::kFifo},
                                 {"SJF, oracle", Policy::kSjfOracle},
                                 {"SRSF, oracle", Policy::kSrsfOracle},
                                 {"2D-LAS (Tiresias)", Policy::kLas},
                                 {"headway fair, limits", Policy::kFairShareLimits},
                                 {"headway fair, ETA", Policy::kFairShareEta},
                                 {"headway progress-aware", Policy::kProgressAware}};
  std::printf("%-24s %9s %9s %9s %9s %9s %7s %8s %9s %9s %9s\n", "policy", "JCT avg h", "JCT p50 h",
              "JCT p99 h", "big JCT h", "wait avg", "util %", "preempt", "lost GPUh", "avg/LAS",
              "avg/SJF");
  std::vector<Result> results;
  for (const Row& row : rows) {
    auto began = std::chrono::steady_clock::now();
    results.push_back(Simulation(trace, set, row.policy).Run());
    std::fprintf(stderr, "  %s: %.1f s\n", row.name,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  }
  const double las = Mean(results[3].jct), sjf = Mean(results[1].jct);
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const Result& r = results[k];
    double util = r.window > 0 ? 100 * r.busy_in_window / (r.window * set.nodes * set.per_node) : 0;
    char big[16] = "-";
    if (!r.big_jct.empty()) std::snprintf(big, sizeof big, "%.2f", Mean(r.big_jct) / 3600);
    std::printf("%-24s %9.2f %9.2f %9.2f %9s %8.2fh %7.1f %8d %9.1f %9.2f %9.2f%s\n", rows[k].name,
                Mean(r.jct) / 3600, Pct(r.jct, 0.5) / 3600, Pct(r.jct, 0.99) / 3600, big,
                Mean(r.wait) / 3600, util, r.preemptions, r.lost_gpu_h + r.stalled_gpu_h,
                las > 0 ? Mean(r.jct) / las : 0, sjf > 0 ? Mean(r.jct) / sjf : 0,
                r.never_ran ? (" (" + std::to_string(r.never_ran) + " never ran)").c_str() : "");
  }
  const std::vector<double>& fifo = results[0].big_jct;
  if (fifo.empty()) return 0;
  std::printf("\nbig jobs (>= %d GPUs): %zu\n", set.per_node, fifo.size());
  std::printf("%-24s %9s %9s %9s %9s %9s %9s\n", "policy", "avg h", "p50 h", "p95 h", "max h",
              "avg/FIFO", "p95/FIFO");
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const std::vector<double>& big = results[k].big_jct;
    std::printf("%-24s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", rows[k].name, Mean(big) / 3600,
                Pct(big, 0.5) / 3600, Pct(big, 0.95) / 3600, Pct(big, 1.0) / 3600,
                ratio(Mean(big), Mean(fifo)), ratio(Pct(big, 0.95), Pct(fifo, 0.95)));
  }
  return 0;
}
