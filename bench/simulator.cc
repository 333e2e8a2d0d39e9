// Trace-driven simulator: replays a job trace against a GPU pool with a
// virtual clock and compares, side by side in one run, a plain FIFO over the
// whole pool, static per-team partitions (a box per team), and Headway's
// scheduler (quotas with borrowing, fair share, gang placement, backfill),
// once knowing only time limits (what a batch scheduler knows) and once with
// progress ETAs.
//
//   simulator TRACE.csv [nodes=16] [gpus_per_node=8] [--starvation-bound SECONDS|off]
//   simulator --generate N SEED > trace.csv     # a synthetic trace
//
// Trace formats (told apart by the header):
//  - Headway's: submit_s,duration_s,gpus,team[,status]. status "stalled"
//    marks a job whose process hangs after doing its work: without stall
//    auto-stop it holds its GPUs until its time limit.
//  - Alibaba cluster-trace-gpu-v2023 (openb_pod_list_*.csv): GPU tasks with
//    creation, scheduled and deletion times; see bench/data/README.md.
//
// Every job's time limit is 2x its duration (users over-ask); the progress
// ETA is its true end off by a per-job error drawn from N(0, 11%), the mean
// error Headway's ETA estimator measured on training curves (eta_bench).
//
// Headway's scheduler runs with its default options (preemption off: the
// traces carry no priorities); --starvation-bound replaces the default bound
// after which a waiting job goes ahead of fair share ("off": fair share only,
// the rule before the bound existed). A second table compares the jobs that
// need a whole node or more across policies, with FIFO as the baseline.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <queue>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sched/fifo_scheduler.h"
#include "sched/scheduler.h"

namespace {

using namespace headway;
using namespace headway::sched;

struct TraceJob {
  double submit = 0, duration = 0;
  int gpus = 1;
  std::string team;
  bool stalled = false;
  double eta_error = 0;  // relative error of the progress ETA for this job
};

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> fields;
  std::istringstream row(line);
  std::string f;
  while (std::getline(row, f, ',')) fields.push_back(f);
  if (!line.empty() && line.back() == ',') fields.emplace_back();
  return fields;
}

// Alibaba openb pods: only GPU tasks that were scheduled. Runtime is
// deletion - scheduled (tasks still running at the trace's end are cut
// there); a fractional GPU (gpu_milli < 1000) takes a whole one here, since
// Headway allocates whole GPUs. The trace names no teams or users: the QoS
// class (LS, BE, Burstable, Guaranteed) stands in for the team.
bool ReadOpenbRow(const std::vector<std::string>& f, TraceJob& j) {
  // name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
  if (f.size() < 11 || f[10].empty()) return false;
  int gpus = std::stoi(f[3]);
  if (gpus <= 0) return false;
  double created = std::stod(f[8]), deleted = std::stod(f[9]), scheduled = std::stod(f[10]);
  j.submit = created;
  j.duration = std::max(1.0, deleted - scheduled);
  j.gpus = gpus;
  j.team = f[6];
  return true;
}

std::vector<TraceJob> ReadTrace(const std::string& path) {
  std::vector<TraceJob> jobs;
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::string line;
  bool openb = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("name,cpu_milli", 0) == 0) {
      openb = true;
      continue;
    }
    if (line.empty() || line[0] == '#' || line.rfind("submit", 0) == 0) continue;
    std::vector<std::string> f = SplitCsv(line);
    TraceJob j;
    if (openb) {
      if (!ReadOpenbRow(f, j)) continue;
    } else {
      f.resize(5);
      j.submit = std::stod(f[0]);
      j.duration = std::max(1.0, std::stod(f[1]));
      j.gpus = std::max(1, std::stoi(f[2]));
      j.team = f[3];
      j.stalled = f[4].find("stalled") != std::string::npos;
    }
    jobs.push_back(j);
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](auto& a, auto& b) { return a.submit < b.submit; });
  // Rebase to the first submission; draw each job's ETA error (fixed seed:
  // every policy and every run sees the same errors).
  std::mt19937 rng(2023);
  std::normal_distribution<double> error(0.0, 0.11);
  double first = jobs.empty() ? 0 : jobs.front().submit;
  for (TraceJob& j : jobs) {
    j.submit -= first;
    j.eta_error = std::clamp(error(rng), -0.5, 0.5);
  }
  return jobs;
}

void Generate(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::exponential_distribution<double> gap(1.0 / 120.0);         // a job every 2 min
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

struct Result {
  std::vector<double> jct, wait, big_jct;  // big: a whole node or more
  double busy_gpu_s = 0, makespan = 0, stalled_gpu_h = 0;
  int never_ran = 0;
};

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

constexpr double kStallDetect = 600;  // seconds of silence before auto-stop (10 min)

// How long a job holds its GPUs once started.
double HoldTime(const TraceJob& j, bool auto_stop) {
  if (!j.stalled) return j.duration;
  return auto_stop ? j.duration + kStallDetect : 2 * j.duration;  // else until its time limit
}

enum class Policy { kFifo, kFifoNodes, kPartitions, kHeadwayTimeLimits, kHeadway };

Result Simulate(const std::vector<TraceJob>& trace, int nodes, int per_node, Policy policy,
                bool auto_stop, const SchedulerOptions& options) {
  Result res;
  std::vector<std::string> teams;
  for (const auto& j : trace) {
    if (std::find(teams.begin(), teams.end(), j.team) == teams.end()) teams.push_back(j.team);
  }
  std::sort(teams.begin(), teams.end());
  // Shares in proportion to each team's demand (GPU-seconds in the trace), as
  // an administrator sizing quotas would set them: nominal quotas for
  // Headway, whole nodes for static partitions (at least one each, largest
  // remainders first).
  std::map<std::string, double> demand;
  double total_demand = 0;
  for (const auto& j : trace) {
    demand[j.team] += j.duration * j.gpus;
    total_demand += j.duration * j.gpus;
  }
  std::map<std::string, int> node_count;
  int assigned = 0;
  for (const auto& t : teams) {
    node_count[t] = std::max(1, static_cast<int>(nodes * demand[t] / total_demand));
    assigned += node_count[t];
  }
  std::vector<std::string> by_demand = teams;
  std::sort(by_demand.begin(), by_demand.end(), [&](auto& a, auto& b) { return demand[a] > demand[b]; });
  for (std::size_t i = 0; assigned < nodes; i = (i + 1) % by_demand.size(), ++assigned) node_count[by_demand[i]]++;
  for (std::size_t i = 0; assigned > nodes && i < by_demand.size() * 8; ++i) {
    auto& c = node_count[by_demand[i % by_demand.size()]];
    if (c > 1) --c, --assigned;
  }
  std::map<std::string, std::vector<int>> team_nodes;
  int next_node = 0;
  for (const auto& t : teams) {
    for (int k = 0; k < node_count[t] && next_node < nodes; ++k) team_nodes[t].push_back(next_node++);
  }

  struct Active {
    std::size_t job;
    double end;
    std::vector<std::pair<int, int>> placement;  // node, gpus
  };
  std::vector<int> free(static_cast<std::size_t>(nodes), per_node);
  std::vector<Active> running;
  std::vector<std::size_t> waiting;
  std::vector<double> start(trace.size(), -1);
  std::size_t next = 0;
  double now = 0;
  const Time epoch = FromUnixMillis(0);
  auto at = [&](double s) { return epoch + Duration(static_cast<std::int64_t>(s * 1000)); };

  while (next < trace.size() || !waiting.empty() || !running.empty()) {
    // Next event: a submission or a completion.
    double t_sub = next < trace.size() ? trace[next].submit : INFINITY;
    double t_end = INFINITY;
    for (const auto& a : running) t_end = std::min(t_end, a.end);
    now = std::min(t_sub, t_end);
    if (!std::isfinite(now)) {
      res.never_ran = static_cast<int>(waiting.size());
      break;
    }
    for (auto it = running.begin(); it != running.end();) {
      if (it->end <= now) {
        for (auto [n, g] : it->placement) free[static_cast<std::size_t>(n)] += g;
        res.jct.push_back(it->end - trace[it->job].submit);
        if (trace[it->job].gpus >= per_node) res.big_jct.push_back(it->end - trace[it->job].submit);
        res.makespan = std::max(res.makespan, it->end);
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    while (next < trace.size() && trace[next].submit <= now) waiting.push_back(next++);

    std::vector<std::pair<std::size_t, std::vector<std::pair<int, int>>>> starts;
    if (policy == Policy::kHeadway || policy == Policy::kHeadwayTimeLimits) {
      ClusterState s;
      s.now = at(now);
      for (int n = 0; n < nodes; ++n) s.nodes.push_back({std::to_string(n), per_node});
      for (const auto& t : teams) {
        int share = static_cast<int>(std::lround(nodes * per_node * demand[t] / total_demand));
        s.queues[t] = {share, nodes * per_node, std::max(1e-3, demand[t] / total_demand)};
      }
      for (const auto& a : running) {
        RunningJob r;
        r.name = std::to_string(a.job);
        r.queue = trace[a.job].team;
        for (auto [n, g] : a.placement) r.placement.push_back({std::to_string(n), g});
        r.started_at = at(start[a.job]);
        const TraceJob& tj = trace[a.job];
        double limit_end = start[a.job] + 2 * tj.duration;
        // Headway's edge: the progress ETA knows roughly when a job will
        // really end. A hung job's ETA says nothing: only its limit counts.
        double eta_end = tj.stalled ? limit_end : start[a.job] + tj.duration * (1 + tj.eta_error);
        r.expected_end = at(policy == Policy::kHeadway ? std::max(now, eta_end) : limit_end);
        s.running.push_back(r);
      }
      for (std::size_t w : waiting) {
        WaitingJob j;
        j.name = std::to_string(w);
        j.queue = trace[w].team;
        j.submit_seq = static_cast<std::int64_t>(w);
        j.nodes = trace[w].gpus > per_node ? (trace[w].gpus + per_node - 1) / per_node : 1;
        j.gpus_per_node = trace[w].gpus > per_node ? per_node : trace[w].gpus;
        j.time_limit = Duration(static_cast<std::int64_t>(2 * trace[w].duration * 1000));
        j.queued_at = at(trace[w].submit);
        s.waiting.push_back(j);
      }
      Decision d = Schedule(s, options);
      for (const auto& st : d.starts) {
        std::vector<std::pair<int, int>> p;
        for (const auto& ng : st.placement) p.push_back({std::stoi(ng.node), ng.gpus});
        starts.push_back({std::stoul(st.job), p});
      }
    } else if (policy == Policy::kFifoNodes) {
      // Strict FIFO with Headway's gang placement: a job of a node or more
      // takes whole nodes, a smaller one fits on one node (best fit); the
      // first job that does not fit blocks all behind it.
      for (std::size_t w : waiting) {
        const TraceJob& tj = trace[w];
        int want_nodes = tj.gpus > per_node ? (tj.gpus + per_node - 1) / per_node : 1;
        int each = tj.gpus > per_node ? per_node : tj.gpus;
        std::vector<int> fits;
        for (int n = 0; n < nodes; ++n) {
          if (free[static_cast<std::size_t>(n)] >= each) fits.push_back(n);
        }
        if (static_cast<int>(fits.size()) < want_nodes) break;
        std::stable_sort(fits.begin(), fits.end(), [&](int a, int b) {
          return free[static_cast<std::size_t>(a)] < free[static_cast<std::size_t>(b)];
        });
        std::vector<std::pair<int, int>> placement;
        for (int k = 0; k < want_nodes; ++k) {
          placement.push_back({fits[static_cast<std::size_t>(k)], each});
          free[static_cast<std::size_t>(fits[static_cast<std::size_t>(k)])] -= each;
        }
        starts.push_back({w, placement});
      }
      for (auto& [job, placement] : starts) {
        for (auto [n, g] : placement) free[static_cast<std::size_t>(n)] += g;  // re-applied below
      }
    } else {
      // FIFO over GPU ids; for partitions, one FIFO per team over its own nodes.
      auto fifo_over = [&](const std::vector<int>& node_set, const std::vector<std::size_t>& jobs) {
        std::vector<PendingJob> pending;
        for (std::size_t w : jobs) {
          pending.push_back({std::to_string(w), trace[w].gpus, 0, static_cast<std::int64_t>(w)});
        }
        std::vector<int> ids;
        for (int n : node_set) {
          int used = per_node - free[static_cast<std::size_t>(n)];
          for (int g = used; g < per_node; ++g) ids.push_back(n * per_node + g);
        }
        FifoDecision d = ScheduleFifo(pending, ids, static_cast<int>(node_set.size()) * per_node);
        for (const auto& p : d.starts) {
          std::map<int, int> by_node;
          for (int id : p.gpu_ids) by_node[id / per_node]++;
          std::vector<std::pair<int, int>> placement(by_node.begin(), by_node.end());
          for (auto [n, g] : placement) free[static_cast<std::size_t>(n)] -= g;
          starts.push_back({std::stoul(p.job), placement});
        }
      };
      if (policy == Policy::kFifo) {
        std::vector<int> all(static_cast<std::size_t>(nodes));
        for (int n = 0; n < nodes; ++n) all[static_cast<std::size_t>(n)] = n;
        fifo_over(all, waiting);
      } else {
        for (const auto& [team, node_set] : team_nodes) {
          std::vector<std::size_t> mine;
          for (std::size_t w : waiting) {
            if (trace[w].team == team) mine.push_back(w);
          }
          fifo_over(node_set, mine);
        }
      }
      for (auto& [job, placement] : starts) {
        for (auto [n, g] : placement) free[static_cast<std::size_t>(n)] += g;  // re-applied below
      }
    }
    std::set<std::size_t> started;
    for (auto& [job, placement] : starts) {
      for (auto [n, g] : placement) free[static_cast<std::size_t>(n)] -= g;
      double hold = HoldTime(trace[job], auto_stop);
      running.push_back({job, now + hold, placement});
      start[job] = now;
      res.wait.push_back(now - trace[job].submit);
      res.busy_gpu_s += hold * trace[job].gpus;
      if (trace[job].stalled) res.stalled_gpu_h += (hold - trace[job].duration) * trace[job].gpus / 3600;
      started.insert(job);
    }
    waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                                 [&](std::size_t w) { return started.count(w) > 0; }),
                  waiting.end());
  }
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--generate") {
    Generate(argc > 2 ? std::atoi(argv[2]) : 2000, argc > 3 ? static_cast<unsigned>(std::atoi(argv[3])) : 1);
    return 0;
  }
  SchedulerOptions options{.backfill = true, .preemption = false};
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg != "--starvation-bound") {
      args.push_back(arg);
      continue;
    }
    std::string value = i + 1 < argc ? argv[++i] : "";
    char* end = nullptr;
    double seconds = std::strtod(value.c_str(), &end);
    if (value == "off") {
      options.starvation_bound.reset();
    } else if (!value.empty() && *end == '\0' && seconds >= 0) {
      options.starvation_bound = Duration(static_cast<std::int64_t>(seconds * 1000));
    } else {
      std::fprintf(stderr, "--starvation-bound takes seconds (>= 0) or \"off\", not \"%s\"\n",
                   value.c_str());
      return 2;
    }
  }
  if (args.empty()) {
    std::fprintf(stderr,
                 "usage: simulator TRACE.csv [nodes] [gpus_per_node] [--starvation-bound SECONDS|off]\n"
                 "       simulator --generate N SEED\n");
    return 2;
  }
  auto trace = ReadTrace(args[0]);
  int nodes = args.size() > 1 ? std::atoi(args[1].c_str()) : 16;
  int per_node = args.size() > 2 ? std::atoi(args[2].c_str()) : 8;
  if (nodes <= 0 || per_node <= 0) {
    std::fprintf(stderr, "nodes and gpus_per_node must be positive\n");
    return 2;
  }
  // Jobs larger than the pool can never run anywhere; drop them for every policy alike.
  std::erase_if(trace, [&](const TraceJob& j) { return j.gpus > nodes * per_node; });
  std::printf("trace %s: %zu jobs on %d nodes x %d GPUs; starvation bound %s\n\n", args[0].c_str(),
              trace.size(), nodes, per_node,
              options.starvation_bound
                  ? (std::to_string(options.starvation_bound->count() / 1000) + " s").c_str()
                  : "off (fair share only)");
  std::printf("%-24s %9s %9s %9s %9s %9s %9s %7s %9s %12s\n", "policy", "JCT avg h", "JCT p50 h",
              "JCT p99 h", "big JCT h", "wait avg", "wait p99", "util %", "makespan", "stalled GPUh");
  struct Row {
    const char* name;
    Policy policy;
    bool auto_stop;
    bool fair_share_only = false;  // the rule before the starvation bound, for comparison
  };
  std::vector<Row> rows = {{"FIFO", Policy::kFifo, false},
                           {"FIFO, whole nodes", Policy::kFifoNodes, false},
                           {"static partitions", Policy::kPartitions, false},
                           {"headway, time limits", Policy::kHeadwayTimeLimits, false},
                           {"headway, progress ETA", Policy::kHeadway, false},
                           {"headway + stall stop", Policy::kHeadway, true}};
  if (options.starvation_bound) {
    rows.push_back({"  fair share only, TL", Policy::kHeadwayTimeLimits, false, true});
    rows.push_back({"  fair share only, ETA", Policy::kHeadway, false, true});
    rows.push_back({"  fair share only, +stop", Policy::kHeadway, true, true});
  }
  std::vector<Result> results;
  for (const Row& row : rows) {
    SchedulerOptions row_options = options;
    if (row.fair_share_only) row_options.starvation_bound.reset();
    Result r = Simulate(trace, nodes, per_node, row.policy, row.auto_stop, row_options);
    double util = r.makespan > 0 ? 100 * r.busy_gpu_s / (r.makespan * nodes * per_node) : 0;
    std::printf("%-24s %9.2f %9.2f %9.2f %9.2f %8.2fh %8.2fh %7.1f %8.1fh %12.1f%s\n", row.name,
                Mean(r.jct) / 3600, Pct(r.jct, 0.5) / 3600, Pct(r.jct, 0.99) / 3600,
                Mean(r.big_jct) / 3600, Mean(r.wait) / 3600, Pct(r.wait, 0.99) / 3600, util,
                r.makespan / 3600, r.stalled_gpu_h,
                r.never_ran ? (" (" + std::to_string(r.never_ran) + " never ran)").c_str() : "");
    results.push_back(std::move(r));
  }
  // Jobs of a whole node or more, side by side. Ratios (< 1: sooner) against
  // FIFO over GPU ids, which may spread an 8-GPU job over several nodes, and
  // against FIFO that, like Headway, keeps each node's share of a job on one node.
  const std::vector<double>& fifo = results[0].big_jct;
  const std::vector<double>& fifo_nodes = results[1].big_jct;
  std::printf("\nbig jobs (>= %d GPUs): %zu\n", per_node, fifo.size());
  std::printf("%-24s %9s %9s %9s %9s %9s %9s %9s %9s\n", "policy", "avg h", "p50 h", "p95 h",
              "max h", "avg/FIFO", "p95/FIFO", "avg/FIFOn", "p95/FIFOn");
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  for (std::size_t i = 0; i < results.size(); ++i) {
    const std::vector<double>& big = results[i].big_jct;
    std::printf("%-24s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", rows[i].name,
                Mean(big) / 3600, Pct(big, 0.5) / 3600, Pct(big, 0.95) / 3600, Pct(big, 1.0) / 3600,
                ratio(Mean(big), Mean(fifo)), ratio(Pct(big, 0.95), Pct(fifo, 0.95)),
                ratio(Mean(big), Mean(fifo_nodes)), ratio(Pct(big, 0.95), Pct(fifo_nodes, 0.95)));
  }
  return 0;
}
