// A progress report from a training process (DESIGN.md, "The progress
// protocol") and its decoder. Decoding is the trust boundary for everything a
// job sends: it checks types, ranges and sizes and names the offending field.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/health.h"
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
  // The job's own estimate of its remaining seconds (Kubeflow's
  // estimatedRemainingSeconds), as of arrival. Kept in memory only, not stored.
  std::optional<double> remaining_seconds;
  // The job's own percent complete (Kubeflow's progressPercentage) when no
  // total step count says it; as of arrival, in memory only, not stored.
  std::optional<double> percent;
};

// One stored point of the step series.
struct StepPoint {
  std::int64_t step = 0;
  Time time{};
  std::optional<std::int64_t> total_steps;
  std::optional<double> epoch;
  std::optional<double> total_epochs;
};

// One stored point of a metric series.
struct MetricPoint {
  std::int64_t step = 0;
  double value = 0;  // may be NaN or ±inf
};

// What the platform knows about a job's progress right now.
struct ProgressView {
  std::optional<double> percent;
  std::optional<std::int64_t> step;
  std::optional<std::int64_t> total_steps;
  std::optional<double> epoch;
  std::optional<double> total_epochs;
  std::optional<double> eta_seconds;
  std::optional<double> steps_per_second;
  std::optional<double> samples_per_second;
  std::optional<Time> last_report_at;
  std::map<std::string, double> metrics;  // latest value of each
  Health health = Health::kUnknown;
  std::string health_reason;
  // What the running job's verdict rests on; unset when it rests on no
  // series (Unknown, Stalled, Progressing) or the job is not running.
  std::optional<HealthEvidence> health_evidence;
};

struct ProgressLimits {
  std::size_t max_reports = 10000;  // per request
  std::size_t max_metrics_per_report = 256;
  std::size_t max_metric_name = 128;
};

// Decodes `{"step": ...}` or `{"reports": [{...}, ...]}`. Metric values are
// JSON numbers, or the strings "NaN", "Infinity", "-Infinity" (strict JSON has
// no literal for them). Unknown fields, wrong types, negative steps, and
// metric names outside [A-Za-z0-9_./-] are InvalidArgument.
Result<std::vector<ProgressReport>> DecodeProgressReports(std::string_view json,
                                                          const ProgressLimits& limits = {});

// The stdout form (`HEADWAY {...}` lines): as DecodeProgressReports, and
// any other top-level field whose value is a number (or "NaN", "Infinity",
// "-Infinity") is a metric, so `{"step": 1, "loss": 1.47}` works as
// `{"step": 1, "metrics": {"loss": 1.47}}`. Reserved, never metrics: step,
// total_steps, epoch, total_epochs, time, metrics, reports. A name given
// both ways is InvalidArgument.
Result<std::vector<ProgressReport>> DecodeMarkerReports(std::string_view json,
                                                        const ProgressLimits& limits = {});

// Valid metric names: 1..max_metric_name characters of [A-Za-z0-9_./-].
bool IsValidMetricName(std::string_view name, std::size_t max_length = 128);

// A metric value as JSON carries it: a number, or "NaN", "Infinity",
// "-Infinity" (also "nan", "inf", "-inf"). InvalidArgument naming `field` otherwise.
Result<double> ParseMetricValue(const std::string& field, const nlohmann::json& value);
// The inverse: a number, or one of those strings for a non-finite value.
nlohmann::json MetricValueToJson(double value);

}  // namespace headway

namespace headway {

// A chart-sized view of a metric series: each bucket covers consecutive
// points and keeps their min, max and last value, so spikes survive.
struct MetricBucket {
  std::int64_t first_step = 0;
  std::int64_t last_step = 0;
  double min = 0;  // over finite values; NaN when the bucket has none
  double max = 0;
  double last = 0;  // the value at last_step, finite or not
  std::size_t count = 0;
  bool non_finite = false;  // some point in the bucket is NaN or ±inf
};

// Splits `points` (ascending by step) into at most `buckets` buckets of
// equal point count. Fewer points than buckets: one bucket per point.
std::vector<MetricBucket> Downsample(const std::vector<MetricPoint>& points, std::size_t buckets);

// What a chart of a metric shows: its point count, and either its points
// (short series) or its buckets.
struct MetricChart {
  std::size_t count = 0;
  std::vector<MetricPoint> points;
  std::vector<MetricBucket> buckets;
};

}  // namespace headway
