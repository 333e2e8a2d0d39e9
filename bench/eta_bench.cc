// ETA accuracy and cost benchmark: Headway's estimator against the plain
// average and tqdm's EMA.
//
//   eta_bench [--seeds N] [--rate-window N] [--change-ratio X] [--change-z X]
//             [--change-wander X] [--min-change-segment N] [--backtest-margin X]
//             [--max-samples N] [curve.csv ...]
//
// For each curve (synthetic, deterministic from a seeded RNG, or a recorded
// CSV of "step,time_s" lines, total = its last step), at checkpoints 10%..90%
// of the steps, each estimator predicts the remaining time from the samples
// seen so far; its absolute percentage error (APE) against the true remaining
// time is recorded. Synthetic curves are run with N seeds (default 20). The
// table prints mean and p90 APE per curve and estimator, and the ratio
// baseline error / Headway error (> 1: Headway is better). A second table
// keeps only the checkpoints after a speed change (60%..90%), where the
// change is in the past and can be learned; before it, no estimator can know
// it is coming. Then EstimateEta is timed on a 1M-sample series. The --flags
// override EtaOptions, for tuning. No assertions: the numbers are for reading.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <numbers>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "progress/eta.h"

namespace {

using headway::progress::EstimateEta;
using headway::progress::EstimateEtaAverage;
using headway::progress::EstimateEtaEma;
using headway::progress::EtaEstimate;
using headway::progress::EtaOptions;
using headway::progress::StepSample;

// Deterministic across standard libraries: mt19937_64 is specified exactly,
// the distributions are not, so they are written out here.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  double Uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }
  double Normal() {  // Box-Muller
    double u1 = std::max(Uniform(), 1e-300), u2 = Uniform();
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
  }

 private:
  std::mt19937_64 gen_;
};

struct CurveSpec {
  std::int64_t total_steps = 10000;
  std::int64_t report_every = 1;  // steps per report
  double step_s = 0.25;           // steady seconds per step
  double jitter = 0.05;           // iid multiplicative noise (sd)
  double compile_s = 0;           // extra time of step 1
  std::int64_t ramp_steps = 0;    // warm-up: steps slower, decaying from ramp_factor to 1
  double ramp_factor = 1;
  std::int64_t eval_every = 0;  // eval pause after every N steps (not after the last)
  double eval_s = 0;
  double slowdown_at = 0;    // fraction of steps after which step time is multiplied...
  double slowdown = 1;       // ...by this
  double drift_sd = 0;       // AR(1) log-throughput noise: stationary sd...
  double drift_rho = 0.995;  // ...and per-step autocorrelation
};

struct Curve {
  std::string name;
  std::vector<StepSample> samples;
  std::int64_t total_steps;
};

std::vector<StepSample> Generate(const CurveSpec& c, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<StepSample> out;
  out.push_back({0, 0.0});  // the reporter's "started" report
  double t = 0, drift = 0;
  const double innovation = c.drift_sd * std::sqrt(1 - c.drift_rho * c.drift_rho);
  for (std::int64_t k = 1; k <= c.total_steps; ++k) {
    drift = c.drift_rho * drift + innovation * rng.Normal();
    double dt = c.step_s * std::exp(drift) * std::max(0.2, 1 + c.jitter * rng.Normal());
    if (c.slowdown_at > 0 &&
        k > static_cast<std::int64_t>(c.slowdown_at * static_cast<double>(c.total_steps))) {
      dt *= c.slowdown;
    }
    if (k <= c.ramp_steps) {
      double f = 1 - static_cast<double>(k - 1) / static_cast<double>(c.ramp_steps);
      dt *= 1 + (c.ramp_factor - 1) * f;
    }
    if (k == 1) {
      dt += c.compile_s;
    }
    // An eval after step k-1 delays step k.
    if (c.eval_every > 0 && k > 1 && (k - 1) % c.eval_every == 0) {
      dt += c.eval_s;
    }
    t += dt;
    if (k % c.report_every == 0 || k == c.total_steps) {
      out.push_back({k, t});
    }
  }
  return out;
}

struct Named {
  std::string name;
  CurveSpec spec;
};

std::vector<Named> SyntheticCurves() {
  std::vector<Named> v;
  CurveSpec constant;
  constant.total_steps = 6000;
  constant.jitter = 0.08;
  v.push_back({"constant", constant});

  CurveSpec warmup = constant;
  warmup.jitter = 0.05;
  warmup.compile_s = 30;
  warmup.ramp_steps = 60;
  warmup.ramp_factor = 3;
  v.push_back({"warmup", warmup});

  CurveSpec eval;
  eval.total_steps = 12000;
  eval.step_s = 0.2;
  eval.eval_every = 500;
  eval.eval_s = 20;
  v.push_back({"eval_pause", eval});

  CurveSpec drop;
  drop.total_steps = 8000;
  drop.step_s = 0.2;
  drop.slowdown_at = 0.5;
  drop.slowdown = 2;
  v.push_back({"speed_drop", drop});

  CurveSpec noisy;
  noisy.total_steps = 10000;
  noisy.jitter = 0.1;
  noisy.drift_sd = 0.2;
  v.push_back({"noisy", noisy});

  CurveSpec mixed;
  mixed.total_steps = 12000;
  mixed.step_s = 0.2;
  mixed.compile_s = 30;
  mixed.ramp_steps = 60;
  mixed.ramp_factor = 3;
  mixed.eval_every = 500;
  mixed.eval_s = 20;
  mixed.slowdown_at = 0.5;
  mixed.slowdown = 2;
  mixed.drift_sd = 0.1;
  v.push_back({"mixed", mixed});

  CurveSpec sparse = mixed;
  sparse.total_steps = 40000;
  sparse.report_every = 10;
  sparse.eval_every = 1000;
  sparse.eval_s = 60;
  v.push_back({"mixed_sparse", sparse});
  return v;
}

bool LoadCsv(const std::string& path, Curve& curve) {
  std::ifstream in(path);
  if (!in) {
    return false;
  }
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string step, time;
    if (!std::getline(fields, step, ',') || !std::getline(fields, time, ',')) {
      continue;
    }
    char* end = nullptr;
    long long s = std::strtoll(step.c_str(), &end, 10);
    if (end == step.c_str()) {
      continue;  // header
    }
    double t = std::strtod(time.c_str(), &end);
    if (end == time.c_str()) {
      continue;
    }
    if (!curve.samples.empty() && s <= curve.samples.back().step) {
      continue;
    }
    curve.samples.push_back({s, t});
  }
  if (curve.samples.size() < 20) {
    return false;
  }
  curve.total_steps = curve.samples.back().step;
  curve.name = path.substr(path.find_last_of('/') + 1);
  return true;
}

using Estimator = std::function<EtaEstimate(std::span<const StepSample>, std::int64_t, double)>;

struct Errors {
  std::vector<double> ape[3];
  std::vector<double> after_change[3];  // checkpoints past the speed change
};

void Evaluate(const Curve& c, double change_at, const Estimator (&estimators)[3], Errors& errors) {
  const double end_time = c.samples.back().time_s;
  for (int pct = 10; pct <= 90; pct += 10) {
    auto target = static_cast<std::int64_t>(static_cast<double>(c.total_steps) * pct / 100.0);
    auto it = std::lower_bound(c.samples.begin(), c.samples.end(), target,
                               [](const StepSample& s, std::int64_t v) { return s.step < v; });
    if (it == c.samples.end()) {
      continue;
    }
    std::size_t n = static_cast<std::size_t>(it - c.samples.begin()) + 1;
    std::span<const StepSample> seen(c.samples.data(), n);
    double now = seen.back().time_s;
    double truth = end_time - now;
    if (truth <= 0) {
      continue;
    }
    for (int e = 0; e < 3; ++e) {
      EtaEstimate est = estimators[e](seen, c.total_steps, now);
      // No estimate counts as a 100% error.
      double ape = est.eta_seconds ? std::abs(*est.eta_seconds - truth) / truth * 100 : 100;
      errors.ape[e].push_back(ape);
      if (change_at > 0 && pct > change_at * 100 + 5) {
        errors.after_change[e].push_back(ape);
      }
    }
  }
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) {
    s += x;
  }
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

double P90(std::vector<double> v) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(std::ceil(0.9 * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

void PrintRow(const std::string& name, const std::vector<double> (&ape)[3]) {
  double m[3], p[3];
  for (int i = 0; i < 3; ++i) {
    m[i] = Mean(ape[i]);
    p[i] = P90(ape[i]);
  }
  auto ratio = [&](int i) { return m[0] > 0 ? m[i] / m[0] : INFINITY; };
  std::printf("%-14s %7.2f %7.2f | %7.2f %7.2f %6.1fx | %7.2f %7.2f %6.1fx\n", name.c_str(), m[0],
              p[0], m[1], p[1], ratio(1), m[2], p[2], ratio(2));
}

void PrintHeader() {
  std::printf("%-14s %15s | %24s | %24s\n", "", "headway", "average", "ema (tqdm, 0.3)");
  std::printf("%-14s %7s %7s | %7s %7s %7s | %7s %7s %7s\n", "curve", "mean", "p90", "mean", "p90",
              "ratio", "mean", "p90", "ratio");
}

void TimeLargeSeries(const EtaOptions& options) {
  CurveSpec spec;
  spec.total_steps = 1'000'000;
  spec.step_s = 0.1;
  spec.eval_every = 500;
  spec.eval_s = 20;
  std::vector<StepSample> series = Generate(spec, 7);
  const std::int64_t total = 2'000'000;
  std::span<const StepSample> all(series);
  struct Case {
    const char* what;
    std::span<const StepSample> span;
  } cases[] = {
      {"full 1M span (reads its tail)", all},
      {"server tail of 512", all.subspan(all.size() - 512)},
  };
  std::printf("\nEstimateEta cost on a %zu-sample series:\n", series.size());
  for (const Case& c : cases) {
    const int calls = 2000;
    double sink = 0;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) {
      EtaEstimate e = EstimateEta(c.span, total, c.span.back().time_s + i * 1e-3, options);
      sink += e.eta_seconds.value_or(0);
    }
    auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start);
    std::printf("  %-36s %9.0f ns/call  (checksum %.3g)\n", c.what, ns.count() / calls, sink);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int seeds = 20;
  EtaOptions options;
  std::vector<std::string> csvs;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    bool has_value = i + 1 < argc;
    if (arg == "--seeds" && has_value) {
      seeds = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--rate-window" && has_value) {
      options.rate_window = std::strtoul(argv[++i], nullptr, 10);
    } else if (arg == "--change-ratio" && has_value) {
      options.change_ratio = std::strtod(argv[++i], nullptr);
    } else if (arg == "--change-z" && has_value) {
      options.change_z = std::strtod(argv[++i], nullptr);
    } else if (arg == "--change-wander" && has_value) {
      options.change_wander_factor = std::strtod(argv[++i], nullptr);
    } else if (arg == "--min-change-segment" && has_value) {
      options.min_change_segment = std::strtoul(argv[++i], nullptr, 10);
    } else if (arg == "--backtest-margin" && has_value) {
      options.backtest_margin = std::strtod(argv[++i], nullptr);
    } else if (arg == "--max-samples" && has_value) {
      options.max_samples = std::strtoul(argv[++i], nullptr, 10);
    } else if (arg.starts_with("--")) {
      std::fprintf(stderr, "eta_bench: unknown flag %s\n", arg.c_str());
      return 2;
    } else {
      csvs.push_back(arg);
    }
  }
  const Estimator estimators[3] = {
      [&](auto s, auto t, auto n) { return EstimateEta(s, t, n, options); },
      [](auto s, auto t, auto n) { return EstimateEtaAverage(s, t, n); },
      [](auto s, auto t, auto n) { return EstimateEtaEma(s, t, n); },
  };

  std::printf("Absolute %% error of predicted remaining time, checkpoints 10%%..90%%, %d seeds\n",
              seeds);
  PrintHeader();
  Errors all;
  std::vector<std::pair<std::string, Errors>> changed;
  auto add = [](Errors& to, const Errors& from) {
    for (int i = 0; i < 3; ++i) {
      to.ape[i].insert(to.ape[i].end(), from.ape[i].begin(), from.ape[i].end());
    }
  };
  for (const Named& n : SyntheticCurves()) {
    Errors e;
    for (int s = 0; s < seeds; ++s) {
      Curve c{n.name, Generate(n.spec, 1000 + static_cast<std::uint64_t>(s)), n.spec.total_steps};
      Evaluate(c, n.spec.slowdown_at, estimators, e);
    }
    PrintRow(n.name, e.ape);
    add(all, e);
    if (n.spec.slowdown_at > 0) {
      changed.emplace_back(n.name, e);
    }
  }
  for (const std::string& path : csvs) {
    Curve c;
    if (!LoadCsv(path, c)) {
      std::fprintf(stderr, "eta_bench: cannot read a curve from %s\n", path.c_str());
      return 1;
    }
    Errors e;
    Evaluate(c, 0, estimators, e);
    PrintRow(c.name, e.ape);
    add(all, e);
  }
  PrintRow("all", all.ape);
  std::printf("ratio = baseline mean APE / headway mean APE\n");
  if (!changed.empty()) {
    std::printf("\nSame, only checkpoints after the speed change (60%%..90%%)\n");
    PrintHeader();
    for (const auto& [name, e] : changed) {
      PrintRow(name, e.after_change);
    }
  }
  TimeLargeSeries(options);
  return 0;
}
