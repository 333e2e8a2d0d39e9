#include "cli/job_table.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <variant>

#include "cli/output.h"
#include "core/ascii.h"
#include "core/job.h"

namespace headway::cli {

using nlohmann::json;

namespace {

const json& Field(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

}  // namespace

bool IsEndedState(std::string_view state) {
  const auto parsed = ParseJobState(state);
  return parsed && IsTerminal(*parsed);
}

std::string FieldText(const json& j, const char* key, const std::string& fallback) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return fallback;
  if (j[key].is_string()) {
    std::string s = j[key].get<std::string>();
    return s.empty() ? fallback : s;
  }
  return j[key].dump();
}

std::string ProgressBar(const json& progress) {
  const json& percent = Field(progress, "percent");
  if (!percent.is_number()) return "-";
  double pct = percent.get<double>();
  int filled = static_cast<int>(pct / 12.5 + 0.5);
  std::string bar;
  for (int i = 0; i < 8; ++i) bar += i < filled ? "\u2588" : "\u2591";
  char text[16];
  std::snprintf(text, sizeof text, "%4s ", FormatPercent(pct).c_str());
  return text + bar;
}

std::string FormatEta(const json& progress, const std::string& state) {
  if (state != "Running") return "-";
  const json& eta = Field(progress, "eta_seconds");
  if (!eta.is_number()) return "?";
  return FormatSeconds(eta.get<double>());
}

std::vector<std::string> JobHeader(bool wide) {
  std::vector<std::string> header = {"NAME", "STATE", "HEALTH", "PROGRESS", "STEP",
                                     "ETA",  "LOSS",  "GPUS",   "AGE"};
  if (wide) header.insert(header.end(), {"TEAM", "RESTARTS", "REASON"});
  return header;
}

std::vector<std::string> JobRow(const json& job, bool wide, Time now) {
  std::string state = FieldText(job, "state");
  const json& progress = Field(job, "progress");
  std::string step = "-";
  if (Field(progress, "step").is_number()) {
    step = std::to_string(progress["step"].get<std::int64_t>());
    if (Field(progress, "total_steps").is_number()) {
      step += "/" + std::to_string(progress["total_steps"].get<std::int64_t>());
    }
  }
  std::string loss = "-";
  const json& metrics = Field(progress, "metrics");
  if (metrics.is_object() && metrics.contains("loss")) loss = FormatMetric(metrics["loss"]);
  // Running jobs' live health; ended ones keep the verdict the run ended with.
  const bool ended = IsEndedState(state);
  std::string health = state == "Running" || (ended && FieldText(job, "health") != "Unknown")
                           ? FieldText(job, "health")
                           : "-";
  std::vector<std::string> row = {FieldText(job, "name"),
                                  state,
                                  health,
                                  ProgressBar(progress),
                                  step,
                                  health == "Stalled" ? "stalled" : FormatEta(progress, state),
                                  loss,
                                  FieldText(job, "gpus"),
                                  Age(FieldText(job, "created_at", ""), now)};
  if (wide) {
    row.push_back(FieldText(job, "team"));
    row.push_back(FieldText(job, "restarts"));
    std::string reason = FieldText(job, "pending_reason", "");
    if (reason.empty() && state == "Running") reason = FieldText(job, "health_reason", "");
    if (reason.empty()) reason = FieldText(job, "message", "");
    row.push_back(reason.empty() ? "-" : reason);
  }
  return row;
}

std::string JobsTable(const std::vector<json>& jobs, bool wide, Time now, bool with_header) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(jobs.size());
  for (const auto& job : jobs) rows.push_back(JobRow(job, wide, now));
  return FormatTable(JobHeader(wide), rows, with_header);
}

const std::vector<std::string>& JobSortKeys() {
  static const std::vector<std::string> kKeys = {"name", "state", "health",   "progress",
                                                 "step", "eta",   "loss",     "gpus",
                                                 "age",  "team",  "restarts", "priority"};
  return kKeys;
}

namespace {

using SortValue = std::variant<std::monostate, double, std::string>;

SortValue ValueOf(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  return std::monostate{};
}

// The JSON path a sort key reads (".a.b"), or empty when it is not one.
std::optional<std::vector<std::string>> PathOf(const std::string& key) {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> kColumns = {
      {"name", {"name"}},
      {"state", {"state"}},
      {"health", {"health"}},
      {"progress", {"progress", "percent"}},
      {"step", {"progress", "step"}},
      {"eta", {"progress", "eta_seconds"}},
      {"loss", {"progress", "metrics", "loss"}},
      {"gpus", {"gpus"}},
      {"team", {"team"}},
      {"restarts", {"restarts"}},
      {"priority", {"priority"}},
  };
  const std::string lower = AsciiLower(key);
  for (const auto& [name, path] : kColumns) {
    if (lower == name) return path;
  }
  if (key.size() < 2 || key[0] != '.') return std::nullopt;
  std::vector<std::string> path;
  std::string part;
  for (std::size_t i = 1; i <= key.size(); ++i) {
    if (i == key.size() || key[i] == '.') {
      if (part.empty()) return std::nullopt;
      path.push_back(part);
      part.clear();
    } else {
      part += key[i];
    }
  }
  return path;
}

}  // namespace

Status SortJobs(std::vector<json>& jobs, const std::string& key, bool descending) {
  bool by_age = AsciiLower(key) == "age";
  std::optional<std::vector<std::string>> path =
      by_age ? std::vector<std::string>{"created_at"} : PathOf(key);
  if (!path) {
    std::string keys;
    for (const auto& k : JobSortKeys()) keys += (keys.empty() ? "" : ", ") + k;
    return InvalidArgument("--sort-by '" + key + "': expected one of " + keys +
                           ", or a field path such as .progress.percent");
  }
  // Youngest first is ascending age: the latest created_at first.
  if (by_age) descending = !descending;
  std::vector<std::pair<SortValue, std::size_t>> keyed;
  keyed.reserve(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const json* v = &jobs[i];
    for (const auto& part : *path) {
      if (!v->is_object() || !v->contains(part)) {
        static const json kNull;
        v = &kNull;
        break;
      }
      v = &(*v)[part];
    }
    keyed.emplace_back(ValueOf(*v), i);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    bool a_missing = std::holds_alternative<std::monostate>(a.first);
    bool b_missing = std::holds_alternative<std::monostate>(b.first);
    if (a_missing || b_missing) return !a_missing && b_missing;
    // Numbers before strings when a field holds both ("NaN" losses).
    if (a.first.index() != b.first.index()) return a.first.index() < b.first.index();
    return descending ? b.first < a.first : a.first < b.first;
  });
  std::vector<json> sorted;
  sorted.reserve(jobs.size());
  for (auto& [value, index] : keyed) sorted.push_back(std::move(jobs[index]));
  jobs = std::move(sorted);
  return Status::Ok();
}

}  // namespace headway::cli
