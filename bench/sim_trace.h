// Traces for bench/simulator: reading the formats bench/data/README.md
// describes, what a scheduler may know of each job (drawn once, with a fixed
// seed, so every policy sees the same), gang shapes and best-fit placement,
// and an independent FIFO replay that cross-checks the simulator's own.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace headway::sim {

struct TraceJob {
  double submit = 0;
  // How long it held its GPUs in the trace: its work, or what it did before
  // it failed or was cancelled.
  double duration = 0;
  // How long its user meant it to run: its ETAs and its time limit come from
  // this. Longer than `duration` for a job that fails or is cancelled early
  // (its ETA was wrong); else the same.
  double intended = 0;
  int gpus = 1;
  std::string team, user;
  bool stalled = false;     // hangs after its work until stopped
  bool ends_early = false;  // fails or is cancelled before its intended end
  double time_limit = 0;    // seconds; drawn where the trace has none, may be below the run
  double eta_factor = 1;    // reported remaining time / true remaining time

  // How long it runs when nothing stops it: its run, cut at its time limit.
  double Work() const;
  bool KilledAtLimit() const { return time_limit < duration; }
};

struct DrawOptions {
  double eta_sigma = 0.25;
  double limit_sigma = 0.8;      // spread of users' limit / intended run (log-normal, median 2)
  double early_end_rate = 0.15;  // jobs that fail or are cancelled early
};

std::vector<TraceJob> ReadTrace(const std::string& path, const DrawOptions& draw);
void Generate(int n, unsigned seed);

double Pct(std::vector<double> v, double p);
double Mean(const std::vector<double>& v);

using Placement = std::vector<std::pair<int, int>>;  // node, GPUs

struct Shape {
  int nodes = 1, each = 1;
  int held() const { return nodes * each; }
};
Shape ShapeOf(const TraceJob& j, int per_node);
// Best fit, as Headway places: the fullest nodes that still have room.
std::optional<Placement> Place(const Shape& s, const std::vector<int>& free);

// Team quotas as a site sets them: nominal GPUs, a cap it may borrow up to,
// and a fair-share weight.
struct TeamQuota {
  int nominal = 0, cap = 0;
  double weight = 1;
};
// `spec`: "equal" (each team the same share), "TEAM=FRACTION,..." (a fixed
// split; teams not named share what is left equally), or "demand" (each
// team's part of the whole trace's GPU-time: it knows the future, for
// comparison only). The cap is `borrow` x nominal, at least the team's
// largest job. Empty on a bad spec.
std::map<std::string, TeamQuota> Quotas(const std::vector<TraceJob>& trace, int nodes, int per_node,
                                        const std::string& spec, double borrow);

// Strict FIFO with team caps, replayed by its own small event loop (none of
// the simulator's code): each job's completion time, in trace order. The
// simulator's FIFO must give the same.
std::vector<double> ReplayFifo(const std::vector<TraceJob>& trace, int nodes, int per_node,
                               const std::map<std::string, TeamQuota>& quotas);

}  // namespace headway::sim
