// Hyperparameter search benchmark: Headway's samplers against Optuna's, and
// Headway's early-stopping rules against none, side by side in one run.
//
//   hpo_bench [--seeds N] [--trials T] [--optuna path/to/hpo_optuna.py | --no-optuna]
//             [--samplers random,grid,tpe,gp]
//
// Part 1, samplers. Four standard test functions (all minimised, every
// parameter a plain kDouble, no log scale):
//   branin       2-D, x1 in [-5, 10], x2 in [0, 15]     min  0.397887
//   hartmann6    6-D, [0, 1]^6                          min -3.32237
//   rosenbrock4  4-D, [-5, 10]^4                        min  0
//   ackley5      5-D, [-32.768, 32.768]^5               min  0
// Each Headway sampler runs N seeds (default 10) x T trials (default 100),
// sequentially: suggest, evaluate, append Observation{params, kCompleted,
// value}; SamplerOptions{seed, startup_trials = 10}. The best value per seed
// is recorded, and the wall time of each Suggest call. The grid sampler is
// seed-independent; it gets the smallest grid_points g with g^d >= T and
// visits the first T points of that grid (last parameter fastest), so for
// d > 2 it covers only a slab of the grid. Then Optuna (TPESampler(seed=s)
// with default settings, and RandomSampler(seed=s)) runs the same functions
// via `/usr/bin/python3 bench/hpo_optuna.py --seeds N --trials T`. One table:
// median best, its IQR (25th..75th percentile, linear interpolation), the
// median simple regret (best - known optimum), and mean ms per Suggest.
//
// Part 2, early stopping. A synthetic learning-curve workload: a trial's
// hyperparameters (learning rate, log-uniform, and width, log-uniform int)
// fix its asymptotic loss and its convergence time constant,
//   loss(step) = final(p) + (init - final(p)) * exp(-step / tau(p)) + noise,
// for steps 1..100, with small Gaussian noise that is a pure function of
// (seed, trial, step). Low learning rates converge slowly, so some good
// configurations look bad early: the case where early stopping can hurt.
// 50 trials of Headway's random sampler per seed (the same seeds, hence the
// same trials and curves, for every rule), 4 at a time: the running trials
// advance one step each in round-robin, ShouldStop is asked after every
// step of every running trial (the others are all the trials started so
// far), and a stopped or finished trial frees its slot for the next one.
// Rules: none, median (min_trials 5, start_step 10), ASHA (min_resource 10,
// reduction_factor 3). Reported over the seeds (medians): total steps, trials
// stopped, the best final loss among completed trials, the best over all
// trials (a stopped trial counting with its last value), and the steps spent
// until any trial first reports a loss within 1% of the no-stopping run's
// best final loss (with how many seeds never got there).
//
// No assertions: the numbers are for reading.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numbers>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hpo/early_stopping.h"
#include "hpo/sampler.h"
#include "hpo/search_space.h"

namespace {

namespace hpo = headway::hpo;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------- statistics

// The q-quantile (0..1) of `v` with linear interpolation between order
// statistics (numpy's default); NaN for an empty vector.
double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}
double Median(std::vector<double> v) { return Quantile(std::move(v), 0.5); }

// How a sampler's per-seed bests compare with a reference sampler's: the
// chance that one seed of it ends lower than one seed of the reference
// (ties count half; 0.5 = as good), and the two-sided p-value of the
// Mann-Whitney U test (normal approximation, fine from about 10 seeds a
// side). With few seeds a difference of medians is often chance; this says
// how often.
struct VersusReference {
  double lower_chance = 0;
  double p_value = 1;
};

VersusReference CompareBests(const std::vector<double>& bests,
                             const std::vector<double>& reference) {
  VersusReference v;
  if (bests.empty() || reference.empty()) return v;
  double u = 0;
  for (double x : bests) {
    for (double y : reference) u += x < y ? 1.0 : x == y ? 0.5 : 0.0;
  }
  const double n1 = static_cast<double>(bests.size());
  const double n2 = static_cast<double>(reference.size());
  v.lower_chance = u / (n1 * n2);
  const double sd = std::sqrt(n1 * n2 * (n1 + n2 + 1) / 12);
  v.p_value = std::erfc(std::fabs(u - n1 * n2 / 2) / sd / std::sqrt(2.0));
  return v;
}

// -------------------------------------------------------------- test functions

struct TestFunction {
  std::string name;         // also the key in hpo_optuna.py's JSON
  std::string description;  // dimension and domain
  int dims;
  double lo, hi;  // per dimension; Branin overrides x2 below
  double optimum;
  std::vector<double> argmin;  // a known minimiser, for the sanity check
  std::function<double(const std::vector<double>&)> f;
  hpo::SearchSpace space;
};

double Branin(const std::vector<double>& x) {
  constexpr double pi = std::numbers::pi;
  const double a = 1, b = 5.1 / (4 * pi * pi), c = 5 / pi, r = 6, s = 10, t = 1 / (8 * pi);
  const double u = x[1] - b * x[0] * x[0] + c * x[0] - r;
  return a * u * u + s * (1 - t) * std::cos(x[0]) + s;
}

double Hartmann6(const std::vector<double>& x) {
  static constexpr double kAlpha[4] = {1.0, 1.2, 3.0, 3.2};
  static constexpr double kA[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                      {0.05, 10, 17, 0.1, 8, 14},
                                      {3, 3.5, 1.7, 10, 17, 8},
                                      {17, 8, 0.05, 10, 0.1, 14}};
  static constexpr double kP[4][6] = {{1312, 1696, 5569, 124, 8283, 5886},
                                      {2329, 4135, 8307, 3736, 1004, 9991},
                                      {2348, 1451, 3522, 2883, 3047, 6650},
                                      {4047, 8828, 8732, 5743, 1091, 381}};
  double total = 0;
  for (int i = 0; i < 4; ++i) {
    double inner = 0;
    for (int j = 0; j < 6; ++j) {
      const double d = x[j] - 1e-4 * kP[i][j];
      inner += kA[i][j] * d * d;
    }
    total += kAlpha[i] * std::exp(-inner);
  }
  return -total;
}

double Rosenbrock(const std::vector<double>& x) {
  double total = 0;
  for (std::size_t i = 0; i + 1 < x.size(); ++i) {
    const double a = x[i + 1] - x[i] * x[i];
    const double b = 1 - x[i];
    total += 100 * a * a + b * b;
  }
  return total;
}

double Ackley(const std::vector<double>& x) {
  const double d = static_cast<double>(x.size());
  double s1 = 0, s2 = 0;
  for (double v : x) {
    s1 += v * v;
    s2 += std::cos(2 * std::numbers::pi * v);
  }
  return -20 * std::exp(-0.2 * std::sqrt(s1 / d)) - std::exp(s2 / d) + 20 + std::numbers::e;
}

std::vector<TestFunction> MakeFunctions() {
  std::vector<TestFunction> fns = {
      {"branin",
       "2-D, x1 in [-5,10], x2 in [0,15]",
       2,
       -5,
       10,
       0.397887,
       {std::numbers::pi, 2.275},
       Branin,
       {}},
      {"hartmann6",
       "6-D, [0,1]^6",
       6,
       0,
       1,
       -3.32237,
       {0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573},
       Hartmann6,
       {}},
      {"rosenbrock4", "4-D, [-5,10]^4", 4, -5, 10, 0.0, {1, 1, 1, 1}, Rosenbrock, {}},
      {"ackley5", "5-D, [-32.768,32.768]^5", 5, -32.768, 32.768, 0.0, {0, 0, 0, 0, 0}, Ackley, {}},
  };
  for (TestFunction& fn : fns) {
    for (int i = 0; i < fn.dims; ++i) {
      hpo::ParamSpec p;
      p.name = "x" + std::to_string(i);
      p.type = hpo::ParamType::kDouble;
      p.min = fn.lo;
      p.max = fn.hi;
      fn.space.push_back(p);
    }
  }
  fns[0].space[1].min = 0;  // Branin's x2 in [0, 15]
  fns[0].space[1].max = 15;
  return fns;
}

std::vector<double> Point(const hpo::SearchSpace& space, const hpo::Assignment& a) {
  std::vector<double> x;
  x.reserve(space.size());
  for (const hpo::ParamSpec& p : space) x.push_back(std::get<double>(a.at(p.name)));
  return x;
}

// ------------------------------------------------------------ sampler runs

struct SamplerRun {
  std::vector<double> best;                                      // per seed
  double suggest_ms = std::numeric_limits<double>::quiet_NaN();  // mean per Suggest
  std::string note;
};

std::unique_ptr<hpo::Sampler> MustMake(const std::string& name, const hpo::SamplerOptions& o) {
  auto made = hpo::MakeSampler(name, o);
  if (!made.ok()) {
    std::fprintf(stderr, "MakeSampler(%s): %s\n", name.c_str(), made.status().ToString().c_str());
    std::exit(2);
  }
  return std::move(made).value();
}

// The smallest g with g^d >= trials.
int GridPointsFor(int dims, int trials) {
  int g = 2;
  while (std::pow(static_cast<double>(g), dims) < trials) ++g;
  return g;
}

SamplerRun RunHeadway(const std::string& name, const TestFunction& fn, int seeds, int trials) {
  SamplerRun run;
  double total_ms = 0;
  std::int64_t calls = 0;
  const int grid_points = GridPointsFor(fn.dims, trials);
  if (name == "grid") {
    const std::int64_t size = hpo::GridSize(fn.space, grid_points);
    run.note = std::to_string(grid_points) + "^" + std::to_string(fn.dims) + "=" +
               std::to_string(size) + " pts";
  }
  for (int seed = 0; seed < seeds; ++seed) {
    hpo::SamplerOptions options;
    options.seed = static_cast<std::uint64_t>(seed);
    options.startup_trials = 10;
    options.grid_points = grid_points;
    const auto sampler = MustMake(name, options);
    std::vector<hpo::Observation> history;
    history.reserve(static_cast<std::size_t>(trials));
    double best = std::numeric_limits<double>::infinity();
    for (int t = 0; t < trials; ++t) {
      const auto start = Clock::now();
      hpo::Assignment a = sampler->Suggest(fn.space, history, t);
      total_ms += std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      ++calls;
      const double value = fn.f(Point(fn.space, a));
      best = std::min(best, value);
      history.push_back({std::move(a), hpo::TrialOutcome::kCompleted, value});
    }
    run.best.push_back(best);
  }
  run.suggest_ms = calls > 0 ? total_ms / static_cast<double>(calls) : run.suggest_ms;
  return run;
}

// ------------------------------------------------------------------- Optuna

struct OptunaResult {
  bool ok = false;
  std::string why;  // when !ok
  nlohmann::json json;
};

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

OptunaResult RunOptuna(const std::string& script, int seeds, int trials) {
  OptunaResult r;
  if (access("/usr/bin/python3", X_OK) != 0) {
    r.why = "/usr/bin/python3 not found";
    return r;
  }
  if (access(script.c_str(), R_OK) != 0) {
    r.why = script + " not found (run from the repository root, or pass --optuna PATH)";
    return r;
  }
  const std::string cmd = "/usr/bin/python3 " + ShellQuote(script) + " --seeds " +
                          std::to_string(seeds) + " --trials " + std::to_string(trials);
  std::FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    r.why = "popen failed";
    return r;
  }
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    r.why = "`" + cmd + "` failed (exit status " +
            std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
            "; is python3-optuna installed?)";
    return r;
  }
  r.json = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (r.json.is_discarded() || !r.json.is_object()) {
    r.why = "could not parse the script's output as JSON";
    return r;
  }
  r.ok = true;
  return r;
}

std::optional<std::vector<double>> OptunaBests(const OptunaResult& r, const std::string& sampler,
                                               const std::string& fn) {
  if (!r.ok || !r.json.contains(sampler) || !r.json[sampler].contains(fn)) return std::nullopt;
  const auto& arr = r.json[sampler][fn];
  if (!arr.is_array()) return std::nullopt;
  std::vector<double> v;
  for (const auto& x : arr) {
    if (x.is_number()) v.push_back(x.get<double>());
  }
  return v;
}

// ------------------------------------------------------------ early stopping

constexpr int kEsTrials = 50;
constexpr int kEsParallel = 4;
constexpr std::int64_t kEsSteps = 100;
constexpr double kEsInit = 2.5;
constexpr double kEsNoise = 0.01;

std::uint64_t SplitMix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A standard normal draw that is a pure function of (seed, trial, step).
double NoiseAt(std::uint64_t seed, std::int64_t trial, std::int64_t step) {
  std::uint64_t z = SplitMix(SplitMix(SplitMix(seed) ^ static_cast<std::uint64_t>(trial)) ^
                             static_cast<std::uint64_t>(step));
  const double u1 = (static_cast<double>(z >> 11) + 0.5) * 0x1.0p-53;
  z = SplitMix(z);
  const double u2 = static_cast<double>(z >> 11) * 0x1.0p-53;
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
}

hpo::SearchSpace EsSpace() {
  hpo::ParamSpec lr;
  lr.name = "lr";
  lr.type = hpo::ParamType::kDouble;
  lr.min = 1e-5;
  lr.max = 1e-1;
  lr.log = true;
  hpo::ParamSpec width;
  width.name = "width";
  width.type = hpo::ParamType::kInt;
  width.min = 16;
  width.max = 1024;
  width.log = true;
  return {lr, width};
}

struct CurveShape {
  double final_loss;
  double tau;
};

// u = log10(lr) in [-5, -1], w = log2(width) in [4, 10]. The best asymptote
// is at lr 1e-3.5..1e-3 (wider nets like a slightly lower rate) and width
// 2^8.5; the time constant shrinks tenfold for every two decades of lr and
// grows with width, so the configurations with the best asymptote converge
// slowly (tau ~ 60..100 steps, not finished at step 100).
CurveShape ShapeOf(const hpo::Assignment& a) {
  const double u = std::log10(std::get<double>(a.at("lr")));
  const double w = std::log2(std::get<double>(a.at("width")));
  const double u_opt = -3.0 - 0.15 * (w - 7);
  const double final_loss = 0.2 + 0.12 * (u - u_opt) * (u - u_opt) + 0.03 * (w - 8.5) * (w - 8.5);
  const double tau = std::clamp(30 * std::pow(10.0, -0.5 * (u + 3)) * (w / 7), 3.0, 400.0);
  return {final_loss, tau};
}

double LossAt(const CurveShape& s, std::uint64_t seed, std::int64_t trial, std::int64_t step) {
  const double clean =
      s.final_loss + (kEsInit - s.final_loss) * std::exp(-static_cast<double>(step) / s.tau);
  return clean + kEsNoise * NoiseAt(seed, trial, step);
}

struct EsRun {
  std::int64_t total_steps = 0;
  int stopped = 0;
  double best_completed = std::numeric_limits<double>::infinity();
  double best_all = std::numeric_limits<double>::infinity();
  int best_completed_trial = -1;
  bool kept_best = false;  // the no-stopping run's best trial completed here too
  // Steps spent when a reported loss first reached `target`; nullopt: never.
  std::optional<std::int64_t> steps_to_target;
};

EsRun RunEarlyStopping(const hpo::EarlyStoppingOptions& options, std::uint64_t seed,
                       double target) {
  const hpo::SearchSpace space = EsSpace();
  hpo::SamplerOptions so;
  so.seed = seed;
  const auto sampler = MustMake("random", so);

  struct Running {
    int trial;  // index into curves/shapes
    std::int64_t step;
  };
  std::vector<hpo::TrialCurve> curves;  // every trial started so far, by index
  std::vector<CurveShape> shapes;
  std::vector<hpo::Assignment> params;
  std::vector<hpo::Observation> history;
  std::vector<std::optional<Running>> slots(kEsParallel);
  int started = 0;
  EsRun run;

  auto start_trial = [&]() -> std::optional<Running> {
    if (started >= kEsTrials) return std::nullopt;
    hpo::Assignment a = sampler->Suggest(space, history, started);
    shapes.push_back(ShapeOf(a));
    params.push_back(std::move(a));
    curves.push_back({"trial-" + std::to_string(started), {}});
    return Running{started++, 0};
  };
  for (auto& slot : slots) slot = start_trial();

  auto any_running = [&] {
    return std::any_of(slots.begin(), slots.end(), [](const auto& s) { return s.has_value(); });
  };
  while (any_running()) {
    for (auto& slot : slots) {
      if (!slot) continue;
      Running& r = *slot;
      ++r.step;
      ++run.total_steps;
      const double loss = LossAt(shapes[r.trial], seed, r.trial, r.step);
      curves[r.trial].points.push_back({r.step, loss});
      if (!run.steps_to_target && loss <= target) run.steps_to_target = run.total_steps;

      bool stop = false;
      if (r.step < kEsSteps && options.rule != hpo::StoppingRule::kNone) {
        // Move the trial to the end so the others are one contiguous span.
        std::swap(curves[r.trial], curves.back());
        stop = hpo::ShouldStop(curves.back(), std::span(curves.data(), curves.size() - 1), options)
                   .stop;
        std::swap(curves[r.trial], curves.back());
      }
      if (stop || r.step == kEsSteps) {
        const bool completed = !stop;
        run.best_all = std::min(run.best_all, loss);
        if (completed && loss < run.best_completed) {
          run.best_completed = loss;
          run.best_completed_trial = r.trial;
        }
        if (stop) ++run.stopped;
        history.push_back({params[r.trial],
                           completed ? hpo::TrialOutcome::kCompleted : hpo::TrialOutcome::kPruned,
                           loss});
        // The slot frees now; its next trial takes its first step next round.
        slot = start_trial();
      }
    }
  }
  return run;
}

// ------------------------------------------------------------------ output

std::string Fmt(double v, const char* f = "%.4g") {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

struct Args {
  int seeds = 10;
  int trials = 100;
  std::string optuna = "bench/hpo_optuna.py";
  bool run_optuna = true;
  std::vector<std::string> samplers = {"random", "grid", "tpe", "tpe-multivariate", "gp"};
};

[[noreturn]] void Usage() {
  std::fprintf(stderr,
               "usage: hpo_bench [--seeds N] [--trials T] "
               "[--optuna path/to/hpo_optuna.py | --no-optuna] [--samplers random,grid,tpe,gp]\n");
  std::exit(2);
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Usage();
      return argv[++i];
    };
    if (arg == "--seeds") {
      a.seeds = std::atoi(next().c_str());
    } else if (arg == "--trials") {
      a.trials = std::atoi(next().c_str());
    } else if (arg == "--optuna") {
      a.optuna = next();
      a.run_optuna = true;
    } else if (arg == "--no-optuna") {
      a.run_optuna = false;
    } else if (arg == "--samplers") {
      a.samplers.clear();
      std::string list = next();
      for (std::size_t pos = 0; pos <= list.size();) {
        const std::size_t comma = std::min(list.find(',', pos), list.size());
        if (comma > pos) a.samplers.push_back(list.substr(pos, comma - pos));
        pos = comma + 1;
      }
    } else {
      Usage();
    }
  }
  if (a.seeds < 1 || a.trials < 1) Usage();
  return a;
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

int main(int argc, char** argv) {
  const auto t0 = Clock::now();
  const Args args = ParseArgs(argc, argv);
  const std::vector<TestFunction> fns = MakeFunctions();

  std::printf("== HPO benchmark: %d seeds x %d trials per sampler and function ==\n\n", args.seeds,
              args.trials);
  std::printf("Test functions (minimised; every parameter kDouble, no log scale):\n");
  for (const TestFunction& fn : fns) {
    std::printf("  %-12s %-36s known min %-9s f(known argmin) = %.6g\n", fn.name.c_str(),
                fn.description.c_str(), Fmt(fn.optimum, "%.6g").c_str(), fn.f(fn.argmin));
  }
  std::printf("\n");
  std::fflush(stdout);  // before the progress lines on stderr

  // Headway runs, function by function.
  std::map<std::pair<std::string, std::string>, SamplerRun> headway;
  for (const TestFunction& fn : fns) {
    for (const std::string& s : args.samplers) {
      const auto start = Clock::now();
      headway[{fn.name, s}] = RunHeadway(s, fn, args.seeds, args.trials);
      std::fprintf(stderr, "  headway %-6s %-12s %.1f s\n", s.c_str(), fn.name.c_str(),
                   std::chrono::duration<double>(Clock::now() - start).count());
    }
  }

  OptunaResult optuna;
  double optuna_s = 0;
  if (args.run_optuna) {
    std::fprintf(stderr, "  running Optuna: /usr/bin/python3 %s ...\n", args.optuna.c_str());
    const auto start = Clock::now();
    optuna = RunOptuna(args.optuna, args.seeds, args.trials);
    optuna_s = std::chrono::duration<double>(Clock::now() - start).count();
  } else {
    optuna.why = "--no-optuna";
  }

  std::printf("-- Samplers: best value found in %d trials, over %d seeds --\n", args.trials,
              args.seeds);
  if (optuna.ok) {
    std::printf("Optuna %s via /usr/bin/python3 %s (%.1f s wall)\n",
                optuna.json.value("optuna_version", std::string("?")).c_str(), args.optuna.c_str(),
                optuna_s);
  } else {
    std::printf("Optuna was NOT run: %s. Headway rows only.\n", optuna.why.c_str());
  }
  std::printf("\n%-12s %-28s %11s %11s %11s %13s %11s  %s\n", "function", "sampler", "median best",
              "p25 best", "p75 best", "median regret", "ms/suggest", "vs optuna tpe");

  // Row order puts each Headway sampler next to its Optuna counterpart.
  struct RowSpec {
    std::string owner, sampler;
  };
  const std::vector<RowSpec> rows = {{"headway", "random"},
                                     {"optuna", "random"},
                                     {"headway", "tpe"},
                                     {"optuna", "tpe"},
                                     {"headway", "tpe-multivariate"},
                                     {"optuna", "tpe-multivariate"},
                                     {"headway", "gp"},
                                     {"headway", "grid"}};
  for (const TestFunction& fn : fns) {
    const auto reference = OptunaBests(optuna, "tpe", fn.name);  // what every row is held to
    for (const RowSpec& row : rows) {
      std::vector<double> best;
      double ms = std::numeric_limits<double>::quiet_NaN();
      std::string label = row.owner + " " + row.sampler;
      if (row.owner == "headway") {
        if (!Has(args.samplers, row.sampler)) continue;
        const SamplerRun& r = headway.at({fn.name, row.sampler});
        best = r.best;
        ms = r.suggest_ms;
        if (!r.note.empty()) label += " (" + r.note + ")";
      } else {
        const auto b = OptunaBests(optuna, row.sampler, fn.name);
        if (!b) continue;
        best = *b;
      }
      std::vector<double> regret;
      for (double b : best) regret.push_back(b - fn.optimum);
      std::string versus = "-";
      if (reference && !(row.owner == "optuna" && row.sampler == "tpe")) {
        const VersusReference v = CompareBests(best, *reference);
        char text[48];
        std::snprintf(text, sizeof text, "%.2f (p %.2f)", v.lower_chance, v.p_value);
        versus = text;
      }
      std::printf("%-12s %-28s %11s %11s %11s %13s %11s  %s\n", fn.name.c_str(), label.c_str(),
                  Fmt(Median(best)).c_str(), Fmt(Quantile(best, 0.25)).c_str(),
                  Fmt(Quantile(best, 0.75)).c_str(), Fmt(Median(regret)).c_str(),
                  Fmt(ms, "%.3f").c_str(), versus.c_str());
    }
    std::printf("\n");
  }
  std::printf(
      "regret = best - known min (lower is better). ms/suggest: mean wall time of one Headway\n"
      "Suggest call over all %d trials (the first 10 are random startup trials for tpe/gp).\n"
      "vs optuna tpe: the chance that a seed of this sampler ends lower than a seed of\n"
      "Optuna's TPE (0.5: as good; over 0.5: better), and the p-value of the Mann-Whitney U\n"
      "test that they are equally good (under 0.05: the difference is unlikely to be chance).\n",
      args.trials);
  if (Has(args.samplers, "grid")) {
    std::printf(
        "grid: seed-independent (p25 = p75); g^d >= %d points, of which it visits the first %d\n"
        "in Cartesian order (last parameter fastest), so for d > 2 it only sweeps a slab of\n"
        "the grid; whether a lattice point lands near the optimum is luck of the domain.\n",
        args.trials, args.trials);
  }
  if (optuna.ok && optuna.json.contains("seconds")) {
    const double n = static_cast<double>(args.seeds) * args.trials * fns.size();
    for (const char* s : {"random", "tpe", "tpe-multivariate"}) {
      if (optuna.json["seconds"].contains(s)) {
        std::printf(
            "optuna %-6s: %.3f ms per whole trial (suggest + study bookkeeping + objective)\n", s,
            1000 * optuna.json["seconds"][s].get<double>() / n);
      }
    }
  }

  // ---- Early stopping.
  std::printf(
      "\n-- Early stopping: %d random-search trials x %lld steps, %d in parallel, "
      "%d seeds --\n",
      kEsTrials, static_cast<long long>(kEsSteps), kEsParallel, args.seeds);
  std::printf(
      "workload: loss(step) = final + (%.1f - final) * exp(-step / tau) + N(0, %.2f^2);\n"
      "lr log-uniform in [1e-5, 1e-1], width log-uniform int in [16, 1024]; final(lr, width)\n"
      "in 0.2..~2.6, best near lr 1e-3.2, width 362; tau = 30 * 10^(-(log10 lr + 3) / 2) *\n"
      "log2(width) / 7 steps, clamped to [3, 400]: the best configurations converge slowly.\n"
      "target = within 1%% of the no-stopping run's best final loss (same seed); steps to\n"
      "target = total steps spent (all trials) when any trial first reports a loss <= target.\n\n",
      kEsInit, kEsNoise);

  struct RuleSpec {
    std::string name;
    hpo::EarlyStoppingOptions options;
  };
  std::vector<RuleSpec> rules(3);
  rules[0].name = "none";
  rules[1].name = "median (min_trials 5, start 10)";
  rules[1].options.rule = hpo::StoppingRule::kMedian;
  rules[1].options.min_trials = 5;
  rules[1].options.start_step = 10;
  rules[2].name = "asha (min_res 10, eta 3)";
  rules[2].options.rule = hpo::StoppingRule::kAsha;
  rules[2].options.min_resource = 10;
  rules[2].options.reduction_factor = 3;

  std::vector<std::vector<EsRun>> es(rules.size());
  for (int seed = 0; seed < args.seeds; ++seed) {
    const auto useed = static_cast<std::uint64_t>(seed);
    const EsRun base = RunEarlyStopping(rules[0].options, useed, -1e300);
    const double target = base.best_completed * 1.01;
    for (std::size_t r = 0; r < rules.size(); ++r) {
      EsRun run = RunEarlyStopping(rules[r].options, useed, target);
      run.kept_best = run.best_completed_trial == base.best_completed_trial;
      es[r].push_back(run);
    }
  }
  std::printf("%-32s %11s %8s %8s %13s %11s %15s %6s %10s\n", "rule", "total steps", "vs none",
              "stopped", "best complete", "best of all", "steps to target", "never", "kept best");
  const double none_steps = [&] {
    std::vector<double> v;
    for (const EsRun& r : es[0]) v.push_back(static_cast<double>(r.total_steps));
    return Median(v);
  }();
  for (std::size_t r = 0; r < rules.size(); ++r) {
    std::vector<double> steps, stopped, best_c, best_a, to_target;
    int never = 0, kept = 0;
    for (const EsRun& run : es[r]) {
      steps.push_back(static_cast<double>(run.total_steps));
      stopped.push_back(run.stopped);
      best_c.push_back(run.best_completed);
      best_a.push_back(run.best_all);
      if (run.steps_to_target) {
        to_target.push_back(static_cast<double>(*run.steps_to_target));
      } else {
        ++never;
      }
      kept += run.kept_best ? 1 : 0;
    }
    std::printf("%-32s %11s %8s %8s %13s %11s %15s %6s %10s\n", rules[r].name.c_str(),
                Fmt(Median(steps), "%.0f").c_str(),
                Fmt(Median(steps) / none_steps, "%.2fx").c_str(),
                Fmt(Median(stopped), "%.1f").c_str(), Fmt(Median(best_c)).c_str(),
                Fmt(Median(best_a)).c_str(), Fmt(Median(to_target), "%.0f").c_str(),
                (std::to_string(never) + "/" + std::to_string(args.seeds)).c_str(),
                (std::to_string(kept) + "/" + std::to_string(args.seeds)).c_str());
  }
  std::printf(
      "medians over seeds. stopped: trials stopped early (of %d). best complete: best final\n"
      "loss among trials that ran all %lld steps; best of all also counts a stopped trial's\n"
      "last value. steps to target: median over the seeds that reached it; never: seeds that\n"
      "did not. kept best: seeds where the no-stopping run's best trial also completed.\n",
      kEsTrials, static_cast<long long>(kEsSteps));

  std::printf("\nelapsed: %.1f s\n", std::chrono::duration<double>(Clock::now() - t0).count());
  return 0;
}
