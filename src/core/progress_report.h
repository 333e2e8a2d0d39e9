// A progress report from a training process (DESIGN.md, "The progress
// protocol") and its decoder. Decoding is the trust boundary for everything a
// job sends: it checks types, ranges and sizes and names the offending field.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace headway {

struct ProgressReport {
  std::int64_t step = 0;
  std::optional<std::int64_t> total_steps;
  std::optional<double> epoch;
  std::optional<double> total_epochs;
  std::map<std::string, double> metrics;  // values may be NaN or ±inf
  std::optional<Time> time;               // when the job measured it; default: arrival
};

struct ProgressLimits {
  std::size_t max_reports = 10000;        // per request
  std::size_t max_metrics_per_report = 256;
  std::size_t max_metric_name = 128;
};

// Decodes `{"step": ...}` or `{"reports": [{...}, ...]}`. Metric values are
// JSON numbers, or the strings "NaN", "Infinity", "-Infinity" (strict JSON has
// no literal for them). Unknown fields, wrong types, negative steps, and
// metric names outside [A-Za-z0-9_./-] are InvalidArgument.
Result<std::vector<ProgressReport>> DecodeProgressReports(std::string_view json,
                                                          const ProgressLimits& limits = {});

// Valid metric names: 1..max_metric_name characters of [A-Za-z0-9_./-].
bool IsValidMetricName(std::string_view name, std::size_t max_length = 128);

}  // namespace headway
