#include "core/pulled_progress.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace headway {
namespace {

using nlohmann::json;

// Python's json.dumps writes NaN, Infinity and -Infinity bare; JSON has no
// such tokens. Outside strings they become the strings "NaN", "Infinity"
// and "-Infinity", which the metric reader below takes as numbers.
std::string QuoteNonFinite(std::string_view body) {
  std::string out;
  out.reserve(body.size() + 16);
  bool in_string = false;
  for (std::size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < body.size()) {
        out += body[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    bool done = false;
    for (std::string_view token : {"-Infinity", "Infinity", "NaN"}) {
      if (body.substr(i, token.size()) == token) {
        out += '"';
        out += token;
        out += '"';
        i += token.size() - 1;
        done = true;
        break;
      }
    }
    if (!done) out += c;
  }
  return out;
}

std::optional<double> Number(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
  }
  return std::nullopt;
}

// Names as the Kubeflow endpoint takes them: 1-64 printable characters
// ("eval_f1 (macro)" included).
bool IsPrintableName(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
  });
}

bool Same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

}  // namespace

Result<std::optional<ProgressReport>> ParsePulledProgress(std::string_view body,
                                                          PulledState& last) {
  json doc = json::parse(QuoteNonFinite(body), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object())
    return InvalidArgument("the progress endpoint did not answer a JSON object");
  ProgressReport report;
  auto integer = [&](const char* key) -> std::optional<std::int64_t> {
    auto n = doc.contains(key) ? Number(doc[key]) : std::nullopt;
    if (!n || !std::isfinite(*n) || *n < 0 || *n > 9.0e15) return std::nullopt;
    return static_cast<std::int64_t>(*n);
  };
  auto real = [&](const char* key) -> std::optional<double> {
    auto n = doc.contains(key) ? Number(doc[key]) : std::nullopt;
    if (!n || !std::isfinite(*n) || *n < 0) return std::nullopt;
    return n;
  };
  // The step, or without one the percentage as a step of 100.
  if (auto step = integer("currentStep")) {
    report.step = *step;
    if (auto total = integer("totalSteps"); total && *total > 0) report.total_steps = total;
  } else if (auto percent = integer("progressPercentage"); percent && *percent <= 100) {
    report.step = *percent;
    report.total_steps = 100;
  } else {
    return InvalidArgument(
        "the progress endpoint's answer has neither currentStep nor progressPercentage");
  }
  report.epoch = real("currentEpoch");
  // The job's own ETA, shown until Headway has enough reports of its own.
  report.remaining_seconds = real("estimatedRemainingSeconds");
  if (auto total = real("totalEpochs"); total && *total > 0) report.total_epochs = total;
  for (const char* group : {"trainMetrics", "evalMetrics"}) {
    if (!doc.contains(group) || !doc[group].is_object()) continue;
    for (const auto& [name, value] : doc[group].items()) {
      auto v = Number(value);
      if (!v || !IsPrintableName(name)) continue;
      auto seen = last.metrics.find(name);
      if (seen != last.metrics.end() && Same(seen->second, *v)) continue;  // served again
      report.metrics[name] = *v;
    }
  }
  if (report.metrics.empty() && last.step == report.step) return std::optional<ProgressReport>();
  last.step = report.step;
  for (const auto& [name, value] : report.metrics) last.metrics[name] = value;
  return std::optional<ProgressReport>(std::move(report));
}

}  // namespace headway
