// The jobs table `get jobs`, `get jobs -w` and `top` print, and how it sorts.
// Pure functions over the API's job JSON; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace headway::cli {

// "42% ████░░░░": the percent as the dashboard writes it and an 8-cell bar; "-" without one.
std::string ProgressBar(const nlohmann::json& progress);
// The ETA of a running job as the dashboard writes it; "?" when unknown, "-" when not running.
std::string FormatEta(const nlohmann::json& progress, const std::string& state);

// A field of an API object as a table cell: strings as they are, other
// values as JSON, `fallback` where it is missing, null or empty.
// Whether a job state's name (as the API sends it) is an ended one (core/job.h).
bool IsEndedState(std::string_view state);

std::string FieldText(const nlohmann::json& j, const char* key, const std::string& fallback = "-");

std::vector<std::string> JobHeader(bool wide);
std::vector<std::string> JobRow(const nlohmann::json& job, bool wide, Time now);
// Header and rows; `with_header` false for --no-headers.
std::string JobsTable(const std::vector<nlohmann::json>& jobs, bool wide, Time now,
                      bool with_header = true);

// Sort keys by the column they order: name, state, health, progress, step,
// eta, loss, gpus, age (youngest first), team, restarts, priority; or a
// JSON path into a job such as ".progress.percent" or ".spec.priority".
// Jobs without a value come last either way; ties keep their order.
const std::vector<std::string>& JobSortKeys();
// Sorts `jobs` by `key`, ascending unless `descending`. InvalidArgument
// naming the valid keys when `key` is none of them.
[[nodiscard]] Status SortJobs(std::vector<nlohmann::json>& jobs, const std::string& key,
                              bool descending = false);

}  // namespace headway::cli
