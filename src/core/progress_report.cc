#include "core/progress_report.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "core/series_summary.h"

namespace headway {
namespace {

using nlohmann::json;

// The value a metric given as a string names: "NaN", "Infinity",
// "-Infinity" (strict JSON has no literal for them), or "nan", "inf", "-inf".
std::optional<double> NonFiniteNamed(std::string_view s) {
  if (s == "NaN" || s == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (s == "Infinity" || s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

Status FieldError(const std::string& field, std::string message) {
  return InvalidArgument(std::move(message)).WithField(field);
}

Result<ProgressReport> DecodeOne(const json& j, const std::string& prefix,
                                 const ProgressLimits& limits, bool top_level_metrics) {
  if (!j.is_object()) return FieldError(prefix.empty() ? "report" : prefix, "must be an object");
  auto field = [&](const char* name) {
    return prefix.empty() ? std::string(name) : prefix + "." + name;
  };
  ProgressReport r;
  bool has_step = false;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "step") {
      if (!v.is_number_integer()) return FieldError(field("step"), "must be an integer");
      if (v.is_number_unsigned()
              ? v.get<std::uint64_t>() >
                    static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
              : v.get<std::int64_t>() < 0) {
        return FieldError(field("step"), "must be >= 0");
      }
      r.step = v.get<std::int64_t>();
      has_step = true;
    } else if (key == "total_steps") {
      if (v.is_null()) continue;
      if (!v.is_number_integer() || v.get<std::int64_t>() < 1) {
        return FieldError(field("total_steps"), "must be a positive integer");
      }
      r.total_steps = v.get<std::int64_t>();
    } else if (key == "epoch" || key == "total_epochs") {
      if (v.is_null()) continue;
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
        return FieldError(field(key.c_str()), "must be a finite number >= 0");
      }
      (key == "epoch" ? r.epoch : r.total_epochs) = v.get<double>();
    } else if (key == "time") {
      if (v.is_null()) continue;
      if (!v.is_string()) return FieldError(field("time"), "must be an RFC 3339 string");
      auto t = ParseRfc3339(v.get<std::string>());
      if (!t)
        return FieldError(field("time"), "must be an RFC 3339 time like 2026-12-02T10:00:00Z");
      r.time = t;
    } else if (key == "metrics") {
      if (v.is_null()) continue;
      if (!v.is_object()) return FieldError(field("metrics"), "must be an object of name: number");
      if (v.size() > limits.max_metrics_per_report) {
        return FieldError(
            field("metrics"),
            "has more than " + std::to_string(limits.max_metrics_per_report) + " metrics");
      }
      for (auto m = v.begin(); m != v.end(); ++m) {
        std::string name = field("metrics") + "." + m.key().substr(0, 64);
        if (!IsValidMetricName(m.key(), limits.max_metric_name)) {
          return FieldError(name, "metric names are 1-" + std::to_string(limits.max_metric_name) +
                                      " characters of letters, digits, '_', '.', '/', '-'");
        }
        auto value = ParseMetricValue(name, m.value());
        if (!value.ok()) return value.status();
        r.metrics[m.key()] = *value;
      }
    } else if (top_level_metrics) {
      continue;  // a metric: read after the reserved fields, below
    } else {
      return FieldError(
          field(key.substr(0, 64).c_str()),
          "unknown field (known: step, total_steps, epoch, total_epochs, metrics, time)");
    }
  }
  if (top_level_metrics) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& key = it.key();
      if (key == "step" || key == "total_steps" || key == "epoch" || key == "total_epochs" ||
          key == "time" || key == "metrics") {
        continue;
      }
      std::string name = field(key.substr(0, 64).c_str());
      if (key == "reports") return FieldError(name, "a batch has only the field 'reports'");
      if (!IsValidMetricName(key, limits.max_metric_name)) {
        return FieldError(name, "is not a metric name (1-" +
                                    std::to_string(limits.max_metric_name) +
                                    " characters of letters, digits, '_', '.', '/', '-')");
      }
      if (!it.value().is_number() && !it.value().is_string()) {
        return FieldError(name,
                          "a top-level field other than step, total_steps, epoch, "
                          "total_epochs, time and metrics is a metric and must be a number, got " +
                              it.value().dump().substr(0, 40));
      }
      auto value = ParseMetricValue(name, it.value());
      if (!value.ok()) return value.status();
      if (r.metrics.count(key))
        return FieldError(name, "is given both at the top level and in metrics");
      if (r.metrics.size() >= limits.max_metrics_per_report) {
        return FieldError(name, "more than " + std::to_string(limits.max_metrics_per_report) +
                                    " metrics in one report");
      }
      r.metrics[key] = *value;
    }
  }
  if (!has_step) return FieldError(field("step"), "is required");
  return r;
}

}  // namespace

bool IsValidMetricName(std::string_view name, std::size_t max_length) {
  if (name.empty() || name.size() > max_length) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '/' || c == '-';
    if (!ok) return false;
  }
  return true;
}

namespace {

Result<std::vector<ProgressReport>> Decode(std::string_view text, const ProgressLimits& limits,
                                           bool top_level_metrics) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("body is not valid JSON");
  if (!j.is_object()) return InvalidArgument("body must be a JSON object");
  std::vector<ProgressReport> reports;
  if (j.contains("reports")) {
    if (j.size() != 1) return InvalidArgument("a batch has only the field 'reports'");
    const json& list = j["reports"];
    if (!list.is_array()) return FieldError("reports", "must be a list");
    if (list.empty()) return FieldError("reports", "must not be empty");
    if (list.size() > limits.max_reports) {
      return Status(StatusCode::kPayloadTooLarge,
                    "a batch carries at most " + std::to_string(limits.max_reports) + " reports")
          .WithField("reports");
    }
    reports.reserve(list.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto r = DecodeOne(list[i], "reports[" + std::to_string(i) + "]", limits, top_level_metrics);
      if (!r.ok()) return r.status();
      reports.push_back(std::move(r.value()));
    }
    return reports;
  }
  auto r = DecodeOne(j, "", limits, top_level_metrics);
  if (!r.ok()) return r.status();
  reports.push_back(std::move(r.value()));
  return reports;
}

// Reads well-formed reports straight from the parser's events into
// ProgressReports, without building the JSON document first: at 2,400
// requests of 100 reports a second, building and walking the document took
// most of a request thread. Gives up (returns false from an event) on
// anything it does not take as valid, and on anything rare (a "time"
// field); Decode then reads the text again and says what is wrong, so the
// errors are the same. For valid input its result is Decode's: a key given
// twice keeps its last value, as in the document.
class WellFormedReports final : public nlohmann::json_sax<json> {
 public:
  explicit WellFormedReports(const ProgressLimits& limits) : limits_(limits) {}

  std::vector<ProgressReport> Take() { return std::move(reports_); }

  bool null() override {
    switch (expect_) {
      case Expect::kTotalSteps:
      case Expect::kEpoch:
      case Expect::kTotalEpochs:
      case Expect::kMetrics:
        expect_ = Expect::kReportKey;
        return true;
      default:
        return false;
    }
  }
  bool boolean(bool) override { return false; }
  bool number_integer(number_integer_t v) override {
    switch (expect_) {
      case Expect::kStep:
        if (v < 0) return false;
        report_.step = v;
        has_step_ = true;
        break;
      case Expect::kTotalSteps:
        if (v < 1) return false;
        report_.total_steps = v;
        break;
      default:
        return Number(static_cast<double>(v));
    }
    expect_ = Expect::kReportKey;
    return true;
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (v > static_cast<number_unsigned_t>(std::numeric_limits<std::int64_t>::max())) return false;
    return number_integer(static_cast<number_integer_t>(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return Number(v); }
  bool string(string_t& v) override {
    if (expect_ != Expect::kMetricValue) return false;
    const std::optional<double> value = NonFiniteNamed(v);
    return value && Metric(*value);
  }
  bool binary(binary_t&) override { return false; }

  bool start_object(std::size_t) override {
    switch (expect_) {
      case Expect::kDocument:
        expect_ = Expect::kFirstKey;
        return true;
      case Expect::kReportInList:
        if (reports_.size() >= limits_.max_reports) return false;
        StartReport();
        return true;
      case Expect::kMetrics:
        expect_ = Expect::kMetricName;
        return true;
      default:
        return false;
    }
  }
  bool key(string_t& k) override {
    if (expect_ == Expect::kFirstKey) {
      if (k == "reports") {
        expect_ = Expect::kReportList;
        return true;
      }
      StartReport();
      single_ = true;
    }
    if (expect_ == Expect::kMetricName) {
      if (!IsValidMetricName(k, limits_.max_metric_name)) return false;
      metric_ = &report_.metrics[k];
      expect_ = Expect::kMetricValue;
      return true;
    }
    if (expect_ != Expect::kReportKey) return false;
    // A field given again replaces what it said before, null included.
    if (k == "step") {
      expect_ = Expect::kStep;
    } else if (k == "total_steps") {
      report_.total_steps.reset();
      expect_ = Expect::kTotalSteps;
    } else if (k == "epoch") {
      report_.epoch.reset();
      expect_ = Expect::kEpoch;
    } else if (k == "total_epochs") {
      report_.total_epochs.reset();
      expect_ = Expect::kTotalEpochs;
    } else if (k == "metrics") {
      report_.metrics.clear();
      expect_ = Expect::kMetrics;
    } else {
      return false;  // "time", "reports" beside a report's fields, or unknown
    }
    return true;
  }
  bool end_object() override {
    if (expect_ == Expect::kMetricName) {
      if (report_.metrics.size() > limits_.max_metrics_per_report) return false;
      expect_ = Expect::kReportKey;
      return true;
    }
    if (expect_ == Expect::kReportKey) {
      if (!has_step_) return false;
      reports_.push_back(std::move(report_));
      expect_ = single_ ? Expect::kEnd : Expect::kReportInList;
      return true;
    }
    if (expect_ == Expect::kFirstKey) return false;  // {}
    return expect_ == Expect::kAfterList;
  }
  bool start_array(std::size_t) override {
    if (expect_ != Expect::kReportList) return false;
    expect_ = Expect::kReportInList;
    return true;
  }
  bool end_array() override {
    if (expect_ != Expect::kReportInList || reports_.empty()) return false;
    expect_ = Expect::kAfterList;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  enum class Expect {
    kDocument,
    kFirstKey,
    kReportList,
    kReportInList,
    kAfterList,
    kReportKey,
    kStep,
    kTotalSteps,
    kEpoch,
    kTotalEpochs,
    kMetrics,
    kMetricName,
    kMetricValue,
    kEnd,
  };

  void StartReport() {
    report_ = ProgressReport{};
    has_step_ = false;
    expect_ = Expect::kReportKey;
  }
  bool Number(double v) {
    switch (expect_) {
      case Expect::kEpoch:
      case Expect::kTotalEpochs:
        if (!std::isfinite(v) || v < 0) return false;
        (expect_ == Expect::kEpoch ? report_.epoch : report_.total_epochs) = v;
        expect_ = Expect::kReportKey;
        return true;
      case Expect::kMetricValue:
        return Metric(v);
      default:
        return false;
    }
  }
  bool Metric(double v) {
    if (expect_ != Expect::kMetricValue) return false;
    *metric_ = v;
    expect_ = Expect::kMetricName;
    return true;
  }

  const ProgressLimits& limits_;
  Expect expect_ = Expect::kDocument;
  bool single_ = false;
  bool has_step_ = false;
  ProgressReport report_;
  double* metric_ = nullptr;
  std::vector<ProgressReport> reports_;
};

}  // namespace

Result<std::vector<ProgressReport>> DecodeProgressReports(std::string_view text,
                                                          const ProgressLimits& limits) {
  WellFormedReports fast(limits);
  if (json::sax_parse(text, &fast, nlohmann::detail::input_format_t::json, /*strict=*/true)) {
    return fast.Take();
  }
  return Decode(text, limits, /*top_level_metrics=*/false);
}

Result<std::vector<ProgressReport>> DecodeMarkerReports(std::string_view text,
                                                        const ProgressLimits& limits) {
  return Decode(text, limits, /*top_level_metrics=*/true);
}

}  // namespace headway

namespace headway {

std::vector<MetricBucket> Downsample(const std::vector<MetricPoint>& points, std::size_t buckets) {
  std::vector<MetricBucket> out;
  if (points.empty() || buckets == 0) return out;
  std::size_t n = points.size();
  std::size_t count = std::min(buckets, n);
  out.reserve(count);
  for (std::size_t b = 0; b < count; ++b) {
    std::size_t begin = b * n / count, end = (b + 1) * n / count;
    MetricBucket bucket = BucketOf(points[begin]);
    for (std::size_t i = begin + 1; i < end; ++i)
      bucket = MergeBuckets(bucket, BucketOf(points[i]));
    out.push_back(bucket);
  }
  return out;
}

Result<double> ParseMetricValue(const std::string& field, const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    if (auto value = NonFiniteNamed(v.get_ref<const std::string&>())) return *value;
  }
  return InvalidArgument("must be a number (or \"NaN\", \"Infinity\", \"-Infinity\"), got " +
                         v.dump().substr(0, 40))
      .WithField(field);
}

json MetricValueToJson(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

}  // namespace headway
