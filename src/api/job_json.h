// JSON views of jobs and events as the REST API returns them
// (docs/api/openapi.yaml describes the shapes).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "api/experiment_service.h"
#include "api/job_service.h"
#include "core/job.h"
#include "core/progress_report.h"
#include "core/status.h"

namespace headway::api {

// Without `with_spec`, the view has no "spec" (what the jobs stream sends).
// A waiting job's `place` gives "queue_position" and "expected_start" (null
// when unknown).
nlohmann::json JobToJson(const Job& job, const std::string& pending_reason,
                         const ProgressView& progress, bool with_spec = true,
                         const QueuePlace& place = {});
// JobToJson with the job's pending reason, place in line and progress as
// `service` has them now.
nlohmann::json JobView(JobService& service, const Job& job, bool with_spec = true);
nlohmann::json ProgressToJson(const ProgressView& progress);
// The jobs list in compact form (GET /api/v1/watch/jobs?compact=true): a job
// as one array of its view's members named by JobRowColumns(), in that
// order, where "percent", "step", "total_steps", "eta_seconds" and "loss"
// come from the view's "progress". What a list of jobs shows and sorts by, at
// a fifth of the view's size, and with no member names to parse per job.
const nlohmann::json& JobRowColumns();
nlohmann::json JobRow(const nlohmann::json& view);
// JSON has no NaN or infinity: non-finite values become "NaN", "Infinity", "-Infinity".
nlohmann::json NumberToJson(double value);
nlohmann::json EventToJson(const JobEvent& event);
nlohmann::json ErrorToJson(const Status& status);
// Serialises a response body. Bytes that are not UTF-8 (a request path can
// carry any) become U+FFFD instead of throwing.
std::string JsonText(const nlohmann::json& value);
nlohmann::json QueueToJson(const QueueStatus& queue);
nlohmann::json NodeToJson(const NodeStatus& node);
// Counts and the best trial always; every trial with `with_trials`.
nlohmann::json ExperimentToJson(const ExperimentView& experiment, bool with_trials);

}  // namespace headway::api
