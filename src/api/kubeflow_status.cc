#include "api/kubeflow_status.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <span>

#include "core/ascii.h"
#include "core/time.h"

namespace headway::api {
namespace {

using nlohmann::json;

// Kubeflow's TrainerStatus schema (trainjob_types.go).
constexpr std::size_t kMaxMetrics = 256;
constexpr std::size_t kMaxMetricText = 64;  // characters of a name or a value
constexpr const char* kStatusPath = "status.trainerStatus";

// The clients' progress, sent as metrics (HF KubeflowCallback: current_step,
// total_steps, current_epoch; its logs: epoch). First name found wins.
constexpr std::string_view kStepNames[] = {"current_step", "global_step", "step"};
constexpr std::string_view kTotalStepNames[] = {"total_steps", "max_steps"};
constexpr std::string_view kEpochNames[] = {"current_epoch", "epoch"};
constexpr std::string_view kTotalEpochNames[] = {"total_epochs", "num_train_epochs", "num_epochs",
                                                 "max_epochs"};

KubeStatus Invalid(std::string message) { return {422, "Invalid", std::move(message)}; }

// A body Go's encoding/json would not decode into UpdateTrainJobStatusRequest.
KubeStatus InvalidPayload(const std::string& why) { return Invalid("Invalid payload: " + why); }

bool EqualsFolded(std::string_view a, std::string_view b) { return EqualsIgnoringCase(a, b); }

// A field as Go's encoding/json finds it: the exact key, else one that
// matches ignoring case. Null when absent.
const json* Field(const json& object, std::string_view key) {
  if (auto it = object.find(std::string(key)); it != object.end()) return &*it;
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (EqualsFolded(it.key(), key)) return &it.value();
  }
  return nullptr;
}

std::size_t Characters(std::string_view utf8) {
  return static_cast<std::size_t>(std::count_if(utf8.begin(), utf8.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

// An int32 field: nullopt for null/absent; an error for anything but an integer.
std::optional<KubeStatus> ReadInt32(const json& status, std::string_view key,
                                    std::optional<std::int64_t>& out) {
  const json* v = Field(status, key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  std::string field = "trainerStatus." + std::string(key);
  if (!v->is_number_integer()) {
    return InvalidPayload(field + " must be an integer, got " + v->dump());
  }
  std::int64_t n = 0;
  if (v->is_number_unsigned()) {
    auto u = v->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max())) {
      return InvalidPayload(field + " " + v->dump() + " is out of the int32 range");
    }
    n = static_cast<std::int64_t>(u);
  } else {
    n = v->get<std::int64_t>();
  }
  if (n < std::numeric_limits<std::int32_t>::min() ||
      n > std::numeric_limits<std::int32_t>::max()) {
    return InvalidPayload(field + " " + v->dump() + " is out of the int32 range");
  }
  out = n;
  return std::nullopt;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::optional<double> WholeNumber(std::string_view s) {
  if (s.empty()) return std::nullopt;
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<std::int64_t> AsCount(const std::map<std::string, double>& numbers,
                                    std::span<const std::string_view> names, bool positive) {
  for (std::string_view name : names) {
    auto it = numbers.find(std::string(name));
    if (it == numbers.end()) continue;
    double v = it->second;
    if (std::isfinite(v) && v >= (positive ? 1 : 0) && v <= 9007199254740992.0 &&
        v == std::floor(v)) {
      return static_cast<std::int64_t>(v);
    }
  }
  return std::nullopt;
}

std::optional<double> AsNumber(const std::map<std::string, double>& numbers,
                               std::span<const std::string_view> names, bool positive) {
  for (std::string_view name : names) {
    auto it = numbers.find(std::string(name));
    if (it != numbers.end() && std::isfinite(it->second) &&
        (positive ? it->second > 0 : it->second >= 0)) {
      return it->second;
    }
  }
  return std::nullopt;
}

bool SameValue(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// RFC 3339 in UTC to the second, as metav1.Time writes it.
std::string KubeTime(Time t) {
  std::string s = FormatRfc3339(t);  // ...T10:00:00.123Z
  if (auto dot = s.find('.'); dot != std::string::npos) s = s.substr(0, dot) + "Z";
  return s;
}

}  // namespace

json KubeStatus::ToJson() const {
  return {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
          {"status", "Failure"}, {"message", message}, {"reason", reason},
          {"code", code}};
}

KubeStatus KubeStatusFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kUnauthenticated:
    case StatusCode::kPermissionDenied:
      return {403, "Forbidden", "Forbidden: " + status.message()};
    case StatusCode::kInvalidArgument:
      return Invalid(status.message());
    case StatusCode::kNotFound:
      return {404, "NotFound", status.message()};
    case StatusCode::kConflict:
      return {409, "Conflict", status.message()};
    case StatusCode::kPayloadTooLarge:
      return {413, "RequestEntityTooLarge", status.message()};
    case StatusCode::kResourceExhausted:
      return {429, "TooManyRequests", status.message()};
    case StatusCode::kUnavailable:
      return {503, "ServiceUnavailable", status.message()};
    default:
      return {500, "InternalError", "Internal error"};
  }
}

std::optional<double> ParseMetricValue(std::string_view text) {
  std::string s = Trim(text);
  if (auto v = WholeNumber(s)) return v;
  // name(number) or name(number, keyword=...): torch.Tensor, numpy scalars.
  std::size_t open = s.find('(');
  if (open == std::string::npos || open == 0 || s.back() != ')') return std::nullopt;
  for (std::size_t i = 0; i < open; ++i) {
    char c = s[i];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return std::nullopt;
  }
  std::size_t end = s.find_first_of(",)", open + 1);
  return WholeNumber(Trim(std::string_view(s).substr(open + 1, end - open - 1)));
}

KubeflowParse ParseKubeflowStatus(std::string_view body, std::string_view job,
                                  const KubeflowJobContext& known) {
  KubeflowParse out;
  auto fail = [&out](KubeStatus s) {
    out.error = std::move(s);
    return out;
  };
  if (body.size() > kKubeflowMaxBody) {
    return fail({413, "RequestEntityTooLarge", "Payload too large"});
  }
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return fail(InvalidPayload("the body is not one JSON value"));
  if (doc.is_null()) return out;
  if (!doc.is_object()) return fail(InvalidPayload("the body must be a JSON object"));
  const json* status_ptr = Field(doc, "trainerStatus");
  if (status_ptr == nullptr || status_ptr->is_null()) return out;  // nothing to apply
  const json& status = *status_ptr;
  if (!status.is_object()) return fail(InvalidPayload("trainerStatus must be an object"));

  // Decoding (Go's json.Decoder): types.
  std::optional<std::int64_t> percent, remaining;
  if (auto e = ReadInt32(status, "progressPercentage", percent)) return fail(*e);
  if (auto e = ReadInt32(status, "estimatedRemainingSeconds", remaining)) return fail(*e);
  std::vector<std::pair<std::string, std::string>> metrics;
  if (const json* m = Field(status, "metrics"); m != nullptr && !m->is_null()) {
    if (!m->is_array()) return fail(InvalidPayload("trainerStatus.metrics must be a list"));
    for (std::size_t i = 0; i < m->size(); ++i) {
      const json& item = (*m)[i];
      std::string at = "trainerStatus.metrics[" + std::to_string(i) + "]";
      if (item.is_null()) {
        metrics.emplace_back();
        continue;
      }
      if (!item.is_object())
        return fail(InvalidPayload(at + " must be {\"name\": ..., \"value\": ...}"));
      std::string text[2];
      const char* keys[2] = {"name", "value"};
      for (int k = 0; k < 2; ++k) {
        const json* v = Field(item, keys[k]);
        if (v == nullptr || v->is_null()) continue;
        if (!v->is_string()) {
          return fail(InvalidPayload(
              at + "." + keys[k] + " must be a string, got " + v->dump().substr(0, 64) +
              (k == 1 ? " (Kubeflow metric values are strings, e.g. \"0.41\")" : "")));
        }
        text[k] = v->get<std::string>();
      }
      metrics.emplace_back(std::move(text[0]), std::move(text[1]));
    }
  }
  std::optional<Time> updated;
  if (const json* t = Field(status, "lastUpdatedTime"); t != nullptr && !t->is_null()) {
    if (t->is_string()) updated = ParseRfc3339(t->get<std::string>());
    if (!updated) {
      return fail(InvalidPayload("trainerStatus.lastUpdatedTime must be an RFC 3339 time, got " +
                                 t->dump().substr(0, 64)));
    }
  }

  // Validation (the TrainJob CRD's schema), every violation at once.
  std::vector<std::string> problems;
  const std::string base = kStatusPath;
  if (percent && (*percent < 0 || *percent > 100)) {
    problems.push_back(base + ".progressPercentage: Invalid value: " + std::to_string(*percent) +
                       ": must be from 0 to 100");
  }
  if (remaining && *remaining < 0) {
    problems.push_back(base + ".estimatedRemainingSeconds: Invalid value: " +
                       std::to_string(*remaining) + ": must be greater than or equal to 0");
  }
  if (metrics.size() > kMaxMetrics) {
    problems.push_back(base + ".metrics: Too many: " + std::to_string(metrics.size()) +
                       ": must have at most " + std::to_string(kMaxMetrics) + " items");
  }
  for (std::size_t i = 0; i < metrics.size() && problems.size() < 10; ++i) {
    const std::string at = base + ".metrics[" + std::to_string(i) + "]";
    const std::string* text[2] = {&metrics[i].first, &metrics[i].second};
    const char* keys[2] = {"name", "value"};
    for (int k = 0; k < 2; ++k) {
      if (text[k]->empty()) {
        problems.push_back(at + "." + keys[k] + ": Required value");
      } else if (Characters(*text[k]) > kMaxMetricText) {
        problems.push_back(at + "." + keys[k] + ": Too long: may not be more than " +
                           std::to_string(kMaxMetricText) + " characters");
      }
    }
  }
  if (!updated) {
    problems.push_back(base +
                       ": Invalid value: \"object\": lastUpdatedTime is required when "
                       "trainerStatus is present");
  }
  if (!problems.empty()) {
    std::string list;
    for (std::size_t i = 0; i < problems.size(); ++i) list += (i ? ", " : "") + problems[i];
    if (problems.size() > 1) list = "[" + list + "]";
    return fail(
        Invalid("TrainJob.trainer.kubeflow.org \"" + std::string(job) + "\" is invalid: " + list));
  }

  // The answer: the update as understood, as Kubeflow's server echoes it.
  json echo = json::object();
  if (percent) echo["progressPercentage"] = *percent;
  if (remaining) echo["estimatedRemainingSeconds"] = *remaining;
  if (!metrics.empty()) {
    json list = json::array();
    for (const auto& [name, value] : metrics) list.push_back({{"name", name}, {"value", value}});
    echo["metrics"] = std::move(list);
  }
  echo["lastUpdatedTime"] = KubeTime(*updated);
  out.update.echo = {{"trainerStatus", std::move(echo)}};

  // What to store.
  std::map<std::string, double> numbers;
  for (const auto& [name, value] : metrics) {
    if (auto v = ParseMetricValue(value)) {
      numbers[name] = *v;
    } else {
      numbers.erase(name);
      out.update.skipped_metrics.push_back(name);
    }
  }
  std::optional<std::int64_t> step = AsCount(numbers, kStepNames, false);
  std::optional<std::int64_t> total = AsCount(numbers, kTotalStepNames, true);
  std::optional<double> epoch = AsNumber(numbers, kEpochNames, false);
  std::optional<double> total_epochs = AsNumber(numbers, kTotalEpochNames, true);
  if (!total) total = known.total_steps;
  ProgressReport report;
  if (!step && percent && total) {
    // Rounded down: a job shows 100% only once it says so.
    step = *percent == 100 ? *total : (*percent * *total) / 100;
  } else if (percent && !total) {
    // No total to place it on: the job's own percent, beside its steps
    // (never a step count of its own among them).
    report.percent = static_cast<double>(*percent);
  }
  static const std::set<std::string_view> kProgressNames = [] {
    std::set<std::string_view> s;
    for (auto list : {std::span<const std::string_view>(kStepNames),
                      std::span<const std::string_view>(kTotalStepNames),
                      std::span<const std::string_view>(kEpochNames),
                      std::span<const std::string_view>(kTotalEpochNames)}) {
      s.insert(list.begin(), list.end());
    }
    return s;
  }();
  for (const auto& [name, value] : numbers) {
    if (kProgressNames.count(name)) continue;
    // Re-sent values are not new evidence (they would fake a plateau).
    auto last = known.latest_metrics.find(name);
    if (last != known.latest_metrics.end() && SameValue(last->second, value)) continue;
    report.metrics[name] = value;
  }
  if (!step && !epoch && !remaining && !report.percent && report.metrics.empty()) {
    return out;  // nothing new
  }
  report.step = step.value_or(known.step.value_or(0));
  report.total_steps = total;
  report.epoch = epoch;
  report.total_epochs = total_epochs;
  report.time = updated;
  if (remaining) report.remaining_seconds = static_cast<double>(*remaining);
  out.update.report = std::move(report);
  return out;
}

KubeflowAnswer HandleKubeflowStatus(JobService& service, std::string_view ns, std::string_view job,
                                    std::string_view token, std::string_view body) {
  auto refuse = [](const KubeStatus& s) { return KubeflowAnswer{s.code, s.ToJson(), 0}; };
  // The same answer whether the job exists or the token is wrong.
  const KubeStatus forbidden{403, "Forbidden",
                             "Forbidden: this token may not report for this job (or there is no "
                             "such job)"};
  if (body.size() > kKubeflowMaxBody)
    return refuse({413, "RequestEntityTooLarge", "Payload too large"});
  if (ns != kKubeflowNamespace) {
    return refuse({403, "Forbidden",
                   "Forbidden: Headway jobs are in namespace '" + std::string(kKubeflowNamespace) +
                       "' (see $KUBEFLOW_TRAINER_SERVER_URL), not '" + std::string(ns) + "'"});
  }
  Status may = service.MayReport(job, token);
  if (!may.ok()) {
    switch (may.code()) {
      case StatusCode::kUnauthenticated:
      case StatusCode::kPermissionDenied:
      case StatusCode::kNotFound:
        return refuse(forbidden);
      case StatusCode::kConflict:
        return refuse({403, "Forbidden", "Forbidden: " + may.message()});
      default:
        return refuse(KubeStatusFor(may));
    }
  }
  KubeflowJobContext known;
  if (auto current = service.Get(job); current.ok()) {
    ProgressView view = service.Progress(*current);
    known.step = view.step;
    known.total_steps = view.total_steps;
    known.latest_metrics = std::move(view.metrics);
  }
  KubeflowParse parsed = ParseKubeflowStatus(body, job, known);
  if (!parsed.ok()) return refuse(*parsed.error);
  std::size_t points = 0;
  if (parsed.update.report) {
    points = 1 + parsed.update.report->metrics.size();
    Status s = service.ReportProgress(job, token, {std::move(*parsed.update.report)});
    if (s.code() == StatusCode::kPermissionDenied || s.code() == StatusCode::kNotFound ||
        s.code() == StatusCode::kUnauthenticated) {
      return refuse(forbidden);
    }
    if (!s.ok()) return refuse(KubeStatusFor(s));
  }
  return {200, std::move(parsed.update.echo), points};
}

std::optional<KubeflowAnswer> KubeflowNotFound(std::string_view method, std::string_view path) {
  if (!path.starts_with("/apis/") && path != "/apis") return std::nullopt;
  // /apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}/status
  std::vector<std::string_view> parts;
  for (std::size_t at = 1; at <= path.size();) {
    std::size_t end = path.find('/', at);
    if (end == std::string_view::npos) end = path.size();
    parts.push_back(path.substr(at, end - at));
    at = end + 1;
  }
  const bool status_path = parts.size() == 8 && parts[0] == "apis" &&
                           parts[1] == "trainer.kubeflow.org" && parts[2] == "v1alpha1" &&
                           parts[3] == "namespaces" && !parts[4].empty() &&
                           parts[5] == "trainjobs" && !parts[6].empty() && parts[7] == "status";
  if (status_path && method == "POST") return std::nullopt;
  return KubeflowAnswer{404, KubeStatus{404, "NotFound", "Not found"}.ToJson(), 0};
}

}  // namespace headway::api
