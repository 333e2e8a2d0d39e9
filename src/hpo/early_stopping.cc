#include "hpo/early_stopping.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace headway::hpo {
namespace {

constexpr double kWorst = std::numeric_limits<double>::infinity();

// Every non-finite value (NaN, +-inf) is the worst possible objective, so a
// diverged trial never looks good and a NaN never poisons a comparison.
double Sanitised(double v) { return std::isfinite(v) ? v : kWorst; }

std::string FormatObjective(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// What one pass over a curve tells us about the prefix up to `limit`. The pass
// filters by step instead of relying on the ascending order, so a curve that
// arrives unsorted (or with repeated steps) still gives the same answer.
struct Prefix {
  std::int64_t latest = std::numeric_limits<std::int64_t>::min();
  std::int64_t count = 0;  // points with step <= limit
  double best = kWorst;    // min over those points
  double sum = 0;          // sum over those points; +inf once one is non-finite
};

Prefix Summarise(const TrialCurve& curve, std::int64_t limit) {
  Prefix p;
  for (const CurvePoint& point : curve.points) {
    p.latest = std::max(p.latest, point.step);
    if (point.step > limit) continue;
    const double v = Sanitised(point.value);
    ++p.count;
    p.best = std::min(p.best, v);
    p.sum += v;
  }
  return p;
}

std::optional<std::int64_t> LatestStep(const TrialCurve& curve) {
  if (curve.points.empty()) return std::nullopt;
  std::int64_t latest = curve.points.front().step;
  for (const CurvePoint& point : curve.points) latest = std::max(latest, point.step);
  return latest;
}

StopDecision Median(const TrialCurve& trial, std::span<const TrialCurve> others,
                    const EarlyStoppingOptions& options) {
  const std::optional<std::int64_t> latest = LatestStep(trial);
  if (!latest || *latest < options.start_step) return {};
  const std::int64_t s = *latest;
  const double best = Summarise(trial, s).best;

  std::vector<double> averages;
  for (const TrialCurve& other : others) {
    const Prefix p = Summarise(other, s);
    // A peer that stopped (or has not yet got) before s says nothing about
    // how good a value at s is; one whose first point is after s has no
    // running average at s.
    if (p.latest < s || p.count == 0) continue;
    averages.push_back(p.sum / static_cast<double>(p.count));  // inf stays inf
  }
  // A median needs at least one peer even if min_trials is configured as 0.
  const std::size_t needed = static_cast<std::size_t>(std::max(options.min_trials, 1));
  if (averages.size() < needed) return {};

  std::sort(averages.begin(), averages.end());
  const std::size_t n = averages.size();
  // With infinities the mean of the middle pair is still well defined (inf),
  // since no value is -inf or NaN after Sanitised.
  const double median =
      n % 2 == 1 ? averages[n / 2] : 0.5 * averages[n / 2 - 1] + 0.5 * averages[n / 2];
  if (!(best > median)) return {};
  return {true, "median stopping rule: best " + FormatObjective(best) + " at step " +
                    std::to_string(s) + " is worse than the median " + FormatObjective(median) +
                    " of " + std::to_string(n) + " trials' running averages"};
}

// The step of rung k, min_resource x eta^k rounded to the nearest integer, or
// nullopt when it does not fit in a step. Rounding can map consecutive k to
// the same step for a small eta; those are one rung, which is why callers
// only ever ask for the highest k below a step.
std::optional<std::int64_t> RungStep(std::int64_t min_resource, double eta, double k) {
  const double x = static_cast<double>(min_resource) * std::pow(eta, k);
  // 2^62: comfortably inside int64 after rounding, far beyond any real step.
  if (!(x < 0x1.0p62)) return std::nullopt;
  return std::llround(x);
}

struct Rung {
  std::int64_t index = 0;  // k
  std::int64_t step = 0;
};

// The highest rung at or below `latest`, if the trial reached rung 0. Closed
// form rather than walking the rungs, so an eta barely above 1 (millions of
// rungs, many rounding to the same step) costs the same as eta = 3: rung k is
// at or below `latest` iff min_resource x eta^k < latest + 0.5, so the answer
// is the largest such k. The bounded loops only absorb log/pow rounding.
std::optional<Rung> HighestRung(std::int64_t latest, std::int64_t min_resource, double eta) {
  if (latest < min_resource) return std::nullopt;
  auto at_or_below = [&](double k) {
    const std::optional<std::int64_t> step = RungStep(min_resource, eta, k);
    return step && *step <= latest;
  };
  double k =
      std::floor(std::log((static_cast<double>(latest) + 0.5) / static_cast<double>(min_resource)) /
                 std::log(eta));
  k = std::max(k, 0.0);
  for (int i = 0; i < 8 && at_or_below(k + 1); ++i) ++k;
  for (int i = 0; i < 8 && k > 0 && !at_or_below(k); ++i) --k;
  // Rung 0 is min_resource itself, which is <= latest; a step that overflowed
  // after the adjustment (impossible in practice) falls back to it.
  const std::optional<std::int64_t> step = RungStep(min_resource, eta, k);
  if (!step || *step > latest) return Rung{0, min_resource};
  return Rung{static_cast<std::int64_t>(k), *step};
}

StopDecision Asha(const TrialCurve& trial, std::span<const TrialCurve> others,
                  const EarlyStoppingOptions& options) {
  const double eta = options.reduction_factor;
  // A bad configuration must not stop trials; the spec parser is where it is
  // reported. isfinite also rejects NaN, for which every comparison is false.
  if (!std::isfinite(eta) || !(eta > 1) || options.min_resource <= 0) return {};
  const std::optional<std::int64_t> latest = LatestStep(trial);
  if (!latest) return {};
  const std::optional<Rung> rung = HighestRung(*latest, options.min_resource, eta);
  if (!rung) return {};

  const Prefix mine = Summarise(trial, rung->step);
  // No value at or before the rung (the first report came after it): nothing
  // to rank, and no lower rung has a value either.
  if (mine.count == 0) return {};

  // A trial's value at a rung is fixed once it has passed the rung (no more
  // points <= the rung arrive), so repeated calls while the trial sits between
  // this rung and the next see the same values, plus any peers that arrive.
  // Those arrivals can move the verdict either way (better peers push the
  // trial under the cut; worse ones widen the cut), since nothing here records
  // which peers were at the rung first; callers act on the first stop.
  std::int64_t n = 1;
  std::int64_t better = 0;
  for (const TrialCurve& other : others) {
    const Prefix p = Summarise(other, rung->step);
    if (p.latest < rung->step || p.count == 0) continue;
    ++n;
    if (p.best < mine.best) ++better;  // ties count in the trial's favour
  }
  if (static_cast<double>(n) < eta) return {};
  const auto keep = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::floor(static_cast<double>(n) / eta)));
  if (better < keep) return {};
  return {true, "ASHA: at rung " + std::to_string(rung->index) + " (step " +
                    std::to_string(rung->step) + ") objective " + FormatObjective(mine.best) +
                    " ranks " + std::to_string(better + 1) + " of " + std::to_string(n) +
                    "; only the top " + std::to_string(keep) + " continue"};
}

}  // namespace

StopDecision ShouldStop(const TrialCurve& trial, std::span<const TrialCurve> others,
                        const EarlyStoppingOptions& options) {
  switch (options.rule) {
    case StoppingRule::kMedian:
      return Median(trial, others, options);
    case StoppingRule::kAsha:
      return Asha(trial, others, options);
    case StoppingRule::kNone:
      break;
  }
  return {};
}

StopDecision ShouldStopOnHealth(Health health, const std::string& reason,
                                const EarlyStoppingOptions& options) {
  if (std::find(options.stop_on_health.begin(), options.stop_on_health.end(), health) ==
      options.stop_on_health.end()) {
    return {};
  }
  return {true, std::string(HealthName(health)) + (reason.empty() ? "" : ": " + reason)};
}

}  // namespace headway::hpo
