#include "health/legacy/health.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <vector>

#include "progress/lower_median.h"

// See legacy/health.h: the classifier before the rebuild, unchanged but for its namespace.

namespace headway::bench::legacy {
namespace {

// "4.1s", "45s", "12m", "2h5m".
std::string Duration(double s) {
  char buf[48];
  if (!std::isfinite(s) || s < 0) {
    s = 0;
  }
  if (s < 10) {
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  } else if (s < 120) {
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  } else if (s < 7200) {
    std::snprintf(buf, sizeof buf, "%.0fm", std::floor(s / 60));
  } else {
    double minutes = std::floor(s / 60);
    std::snprintf(buf, sizeof buf, "%.0fh%.0fm", std::floor(minutes / 60), std::fmod(minutes, 60));
  }
  return buf;
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string NonFiniteName(double v) {
  if (std::isnan(v)) {
    return "NaN";
  }
  return v > 0 ? "inf" : "-inf";
}

using progress::internal::LowerMedian;

std::optional<HealthVerdict> CheckDivergence(const HealthInput& in, const HealthOptions& options) {
  if (in.loss.empty()) {
    if (in.any_non_finite_loss) {
      return HealthVerdict{Health::kDiverging, "loss was non-finite"};
    }
    return std::nullopt;
  }
  const MetricSample& newest = in.loss.back();
  if (!std::isfinite(newest.value)) {
    return HealthVerdict{Health::kDiverging, "loss is " + NonFiniteName(newest.value) +
                                                 " at step " + std::to_string(newest.step)};
  }
  // NaN stands for "not known" (std::optional<double> trips GCC 12's
  // -Wmaybe-uninitialized here).
  double first = in.first_loss.value_or(NAN);
  double min = in.min_loss.value_or(NAN);
  if (!std::isfinite(first)) {
    first = NAN;
  }
  if (!std::isfinite(min)) {
    min = NAN;
  }
  std::vector<double> recent;  // newest first
  // Whether a non-finite loss came among the newest three finite ones: then
  // only the losses since it count. The median of 3 forgives one spike among
  // sound losses; a job that just reported NaN has no sound losses to vouch
  // for the first finite one after it, which must itself be in range.
  bool since_non_finite = false;
  for (auto it = in.loss.rbegin(); it != in.loss.rend(); ++it) {
    if (!std::isfinite(it->value)) {
      since_non_finite = since_non_finite || recent.size() < 3;
      continue;
    }
    if (recent.size() < 3 && !since_non_finite) {
      recent.push_back(it->value);
    }
    if (std::isnan(min) || it->value < min) {
      min = it->value;
    }
  }
  if (std::isnan(first)) {
    for (const MetricSample& s : in.loss) {
      if (std::isfinite(s.value)) {
        first = s.value;
        break;
      }
    }
  }
  if ((recent.size() < 3 && !since_non_finite) || std::isnan(min) || std::isnan(first)) {
    return std::nullopt;
  }
  const double now = LowerMedian(recent);
  const double scale = std::max(std::abs(min), 1e-3 * std::abs(first));
  if (!(scale > 0) || options.explode_factor <= 1) {
    return std::nullopt;
  }
  if (now - min <= (options.explode_factor - 1) * scale) {
    return std::nullopt;
  }
  std::string reason = "loss " + Number(now);
  if (min > 0) {
    reason += " is " + Number(now / min) + "x its minimum " + Number(min);
  } else {
    reason += " is " + Number(now - min) + " above its minimum " + Number(min);
  }
  return HealthVerdict{Health::kDiverging, reason};
}

std::optional<HealthVerdict> CheckStall(const HealthInput& in, const HealthOptions& options) {
  // Intervals between reports that moved forward in step and time.
  std::vector<double> gaps;
  gaps.reserve(in.steps.size());
  double longest = 0;
  const StepSample* prev = nullptr;
  for (const StepSample& s : in.steps) {
    if (!std::isfinite(s.time_s)) {
      continue;
    }
    if (prev && s.step > prev->step && s.time_s > prev->time_s) {
      double gap = s.time_s - prev->time_s;
      gaps.push_back(gap);
      longest = std::max(longest, gap);
    }
    if (!prev || (s.step > prev->step && s.time_s >= prev->time_s)) {
      prev = &s;
    }
  }
  if (!prev) {
    return std::nullopt;  // no usable time at all
  }
  const double silent = in.now_s - prev->time_s;
  double threshold = std::max(options.stall_floor_s, options.unknown_grace_s);
  std::string basis;
  if (!gaps.empty()) {
    const double median = LowerMedian(gaps);
    threshold = std::max({options.stall_floor_s, options.stall_factor * median,
                          options.stall_pause_factor * longest});
    basis = " (median interval " + Duration(median) + ")";
  }
  if (!(silent > threshold)) {
    return std::nullopt;
  }
  return HealthVerdict{Health::kStalled, "no new step for " + Duration(silent) + basis};
}

std::optional<HealthVerdict> CheckPlateau(const HealthInput& in, const HealthOptions& options) {
  if (options.plateau_window_steps <= 0 || in.objective.empty()) {
    return std::nullopt;
  }
  const bool minimize = in.objective_goal == Goal::kMinimize;
  auto better = [minimize](double a, double b) { return minimize ? a < b : a > b; };
  std::optional<std::int64_t> last;
  for (const MetricSample& s : in.objective) {
    if (std::isfinite(s.value) && (!last || s.step > *last)) {
      last = s.step;
    }
  }
  if (!last) {
    return std::nullopt;
  }
  const std::int64_t boundary = *last - options.plateau_window_steps;
  std::optional<double> before, within;
  for (const MetricSample& s : in.objective) {
    if (!std::isfinite(s.value)) {
      continue;
    }
    std::optional<double>& side = s.step <= boundary ? before : within;
    if (!side || better(s.value, *side)) {
      side = s.value;
    }
  }
  if (!before || !within) {
    return std::nullopt;  // the tail does not cover the window yet
  }
  const double improvement = minimize ? *before - *within : *within - *before;
  const double relative = improvement / std::max(std::abs(*before), 1e-12);
  if (relative >= options.plateau_min_delta) {
    return std::nullopt;
  }
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.3g%%", options.plateau_min_delta * 100);
  return HealthVerdict{Health::kPlateaued, "best " + std::string(in.objective_name) +
                                               " improved <" + pct + " over the last " +
                                               std::to_string(options.plateau_window_steps) +
                                               " steps"};
}

}  // namespace

HealthVerdict ClassifyHealth(const HealthInput& in, const HealthOptions& options) {
  if (in.steps.empty()) {
    const double waited = in.now_s - in.started_at_s;
    if (waited >= options.unknown_grace_s) {
      return {Health::kUnknown, "no progress reported for " + Duration(waited) + " since start"};
    }
    return {Health::kUnknown, "waiting for first report"};
  }
  if (auto v = CheckDivergence(in, options)) {
    return *v;
  }
  if (auto v = CheckStall(in, options)) {
    return *v;
  }
  if (auto v = CheckPlateau(in, options)) {
    return *v;
  }
  const StepSample& newest = in.steps.back();
  return {Health::kProgressing, "step " + std::to_string(newest.step) + " reported " +
                                    Duration(std::max(0.0, in.now_s - newest.time_s)) + " ago"};
}

}  // namespace headway::bench::legacy
