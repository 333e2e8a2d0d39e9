#include "sim_trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>

namespace headway::sim {
namespace {

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

// Users' time limits: the values they pick, from what they expect the job to
// run (its intended run) times a factor that is mostly above 1 (users
// over-ask, by 2 to 10 and more: Tsafrir et al. 2007) but not always: a limit
// below the run kills the job there.
double DrawTimeLimit(double intended, double sigma, std::mt19937& rng) {
  std::lognormal_distribution<double> over(std::log(2.0), sigma);
  double want = intended * over(rng);
  for (double h : {0.5, 1.0, 2.0, 4.0, 8.0, 12.0, 24.0, 48.0, 72.0}) {
    if (want <= h * 3600) return h * 3600;
  }
  return std::ceil(want / (168 * 3600)) * 168 * 3600;
}

}  // namespace

double TraceJob::Work() const { return stalled ? time_limit : std::min(duration, time_limit); }

std::vector<TraceJob> ReadTrace(const std::string& path, const DrawOptions& draw) {
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
  // every policy and every run sees the same limits, errors and early ends).
  std::mt19937 rng(2023);
  std::normal_distribution<double> error(0.0, draw.eta_sigma);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double first = jobs.empty() ? 0 : jobs.front().submit;
  for (TraceJob& j : jobs) {
    j.submit -= first;
    // A job that failed or was cancelled early held its GPUs for the
    // trace's run time, but its ETAs and its user's limit were for the run
    // it was meant to do: 1.1 to 10 times longer.
    j.ends_early = unit(rng) < draw.early_end_rate;
    j.intended = j.ends_early ? j.duration / (0.1 + 0.8 * unit(rng)) : j.duration;
    if (j.time_limit <= 0) j.time_limit = DrawTimeLimit(j.intended, draw.limit_sigma, rng);
    j.eta_factor = std::exp(std::clamp(error(rng), -3 * draw.eta_sigma, 3 * draw.eta_sigma));
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

Shape ShapeOf(const TraceJob& j, int per_node) {
  if (j.gpus > per_node) return {(j.gpus + per_node - 1) / per_node, per_node};
  return {1, j.gpus};
}

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

std::map<std::string, TeamQuota> Quotas(const std::vector<TraceJob>& trace, int nodes, int per_node,
                                        const std::string& spec, double borrow) {
  const int pool = nodes * per_node;
  std::map<std::string, double> demand, share;
  std::map<std::string, int> largest;
  double total_demand = 0;
  for (const TraceJob& j : trace) {
    demand[j.team] += j.duration * j.gpus;
    total_demand += j.duration * j.gpus;
    largest[j.team] = std::max(largest[j.team], ShapeOf(j, per_node).held());
  }
  if (spec == "demand") {
    for (const auto& [team, d] : demand) share[team] = d / std::max(1.0, total_demand);
  } else {
    // A fixed split, "TEAM=FRACTION,...": the teams it does not name share
    // what is left equally ("equal": nothing named).
    double named = 0;
    if (spec != "equal") {
      std::size_t at = 0;
      while (at <= spec.size()) {
        std::size_t comma = spec.find(',', at);
        std::string item = spec.substr(at, comma == std::string::npos ? comma : comma - at);
        std::size_t eq = item.find('=');
        if (eq == std::string::npos) return {};
        char* end = nullptr;
        double f = std::strtod(item.c_str() + eq + 1, &end);
        if (*end != '\0' || !(f > 0)) return {};
        share[item.substr(0, eq)] = f;
        named += f;
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
      if (named > 1.0 + 1e-9) return {};
    }
    std::size_t unnamed = 0;
    for (const auto& [team, d] : demand) unnamed += share.count(team) ? 0 : 1;
    for (const auto& [team, d] : demand) {
      if (!share.count(team)) share[team] = (1.0 - named) / static_cast<double>(unnamed);
    }
  }
  std::map<std::string, TeamQuota> quotas;
  for (const auto& [team, d] : demand) {
    TeamQuota t;
    t.weight = std::max(1e-3, share[team]);
    t.nominal = std::max(1, static_cast<int>(std::lround(pool * share[team])));
    t.cap =
        std::min(pool, std::max(largest[team], static_cast<int>(std::lround(t.nominal * borrow))));
    quotas[team] = t;
  }
  return quotas;
}

std::vector<double> ReplayFifo(const std::vector<TraceJob>& trace, int nodes, int per_node,
                               const std::map<std::string, TeamQuota>& quotas) {
  struct Run {
    double end;
    std::size_t job;
    int held;
    std::vector<std::pair<int, int>> on;  // node, GPUs
  };
  std::vector<int> free(static_cast<std::size_t>(nodes), per_node);
  std::map<std::string, int> used;
  std::vector<std::size_t> queue;  // arrival order: FIFO never requeues
  std::vector<Run> running;
  std::vector<double> done(trace.size(), -1);
  std::size_t arrived = 0;
  double now = 0;
  while (arrived < trace.size() || !queue.empty() || !running.empty()) {
    double t =
        arrived < trace.size() ? trace[arrived].submit : std::numeric_limits<double>::infinity();
    for (const Run& r : running) t = std::min(t, r.end);
    if (!std::isfinite(t)) break;
    now = std::max(now, t);
    for (std::size_t k = running.size(); k-- > 0;) {
      if (running[k].end > now) continue;
      for (auto [n, g] : running[k].on) free[static_cast<std::size_t>(n)] += g;
      used[trace[running[k].job].team] -= running[k].held;
      done[running[k].job] = running[k].end;
      running.erase(running.begin() + static_cast<long>(k));
    }
    while (arrived < trace.size() && trace[arrived].submit <= now) queue.push_back(arrived++);
    // The head that does not fit holds everyone; a head its team's cap holds
    // back holds only its team.
    std::set<std::string> held;
    for (std::size_t k = 0; k < queue.size();) {
      const TraceJob& j = trace[queue[k]];
      if (held.count(j.team)) {
        ++k;
        continue;
      }
      const int span = j.gpus > per_node ? (j.gpus + per_node - 1) / per_node : 1;
      const int each = j.gpus > per_node ? per_node : j.gpus;
      // Nodes by how few GPUs they have free (then by number), those with room.
      std::vector<int> order;
      for (int n = 0; n < nodes; ++n) {
        if (free[static_cast<std::size_t>(n)] >= each) order.push_back(n);
      }
      if (static_cast<int>(order.size()) < span) break;
      if (used[j.team] + span * each > quotas.at(j.team).cap) {
        held.insert(j.team);
        ++k;
        continue;
      }
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return free[static_cast<std::size_t>(a)] < free[static_cast<std::size_t>(b)];
      });
      Run r{now + j.Work(), queue[k], span * each, {}};
      for (int s = 0; s < span; ++s) {
        free[static_cast<std::size_t>(order[static_cast<std::size_t>(s)])] -= each;
        r.on.push_back({order[static_cast<std::size_t>(s)], each});
      }
      used[j.team] += span * each;
      running.push_back(r);
      queue.erase(queue.begin() + static_cast<long>(k));
    }
  }
  return done;
}

}  // namespace headway::sim
