// The health classifier as it was before the verdicts were rebuilt for real,
// noisy curves (commit af97344, src/progress/health.{h,cc}): kept only so
// that health_bench can print it side by side with the current one. Not
// used by the server.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "progress/health.h"

namespace headway::bench::legacy {

using progress::Goal;
using progress::MetricSample;
using progress::StepSample;

struct HealthInput {
  double now_s = 0;
  double started_at_s = 0;
  std::span<const StepSample> steps;
  std::span<const MetricSample> loss;
  std::span<const MetricSample> objective;
  Goal objective_goal = Goal::kMinimize;
  std::string_view objective_name = "objective";
  bool any_non_finite_loss = false;
  std::optional<double> first_loss;
  std::optional<double> min_loss;
};

struct HealthOptions {
  double stall_factor = 10;
  double stall_floor_s = 60;
  double stall_pause_factor = 1.5;
  double unknown_grace_s = 300;
  double explode_factor = 10;
  std::int64_t plateau_window_steps = 0;
  double plateau_min_delta = 1e-4;
};

struct HealthVerdict {
  Health health = Health::kUnknown;
  std::string reason;
};

HealthVerdict ClassifyHealth(const HealthInput& input, const HealthOptions& options = {});

}  // namespace headway::bench::legacy
