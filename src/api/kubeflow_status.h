// The Kubeflow Trainer v2 status endpoint, so code written for Kubeflow (the
// HF Transformers `KubeflowCallback`, the Kubeflow SDK's
// `update_trainjob_status`) reports to Headway unchanged:
//
//   POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}/status
//   {"trainerStatus": {"progressPercentage": 42, "estimatedRemainingSeconds": 3600,
//    "metrics": [{"name": "loss", "value": "0.41"}], "lastUpdatedTime": "..."}}
//
// It answers as Kubeflow's own status server does: 200 with the update as it
// was understood, or a Kubernetes metav1.Status failure (413 past 64 KiB,
// 403 for a token that is not this job's or a job that has ended, 422 for a
// body the TrainJob API would not take: `progressPercentage` not an integer
// in [0, 100], `estimatedRemainingSeconds` not an integer >= 0, more than
// 256 metrics, a metric name or value that is empty, over 64 characters or
// not a string, a missing `lastUpdatedTime`). Unknown fields are ignored;
// `{}` and `{"trainerStatus": null}` change nothing and answer 200.
//
// What is stored: metric values that read as numbers ("0.41", "nan",
// "tensor(0.41)"); other values ("N/A", "True") are accepted and not stored.
// A metric is stored only when its value differs from the job's latest one,
// since the clients re-send their last values with every update. The
// clients' `current_step`/`total_steps`/`current_epoch` metrics (and
// `global_step`, `step`, `max_steps`, `epoch`, `total_epochs`,
// `num_train_epochs`) are the report's step, total and epoch, not series.
// Without a step, a percentage is placed on the job's known total steps
// (rounded down: 100% only when 100 is reported). Without a total, it is the
// job's own percent (ProgressReport::percent), shown until steps and a total
// say more; a percent-only update then re-reports the latest known step.
// `estimatedRemainingSeconds` is the job's own ETA (progress/eta.h ChooseEta).
//
// Thread safety: the functions are pure or only call the thread-safe JobService.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/job_service.h"
#include "core/progress_report.h"
#include "core/status.h"

namespace headway::api {

// Kubeflow's status server reads at most this many bytes of a body (413 past it).
inline constexpr std::size_t kKubeflowMaxBody = 64 * 1024;
// Every Headway job is in this namespace (the one its KUBEFLOW_TRAINER_SERVER_URL names).
inline constexpr std::string_view kKubeflowNamespace = "default";

// A Kubernetes metav1.Status failure: `reason` is a metav1.StatusReason
// ("Invalid", "Forbidden", "RequestEntityTooLarge", ...), `code` the HTTP status.
struct KubeStatus {
  int code = 500;
  std::string reason;
  std::string message;
  // {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", ...}
  nlohmann::json ToJson() const;
};

// The metav1.Status for a Headway error: 401 and 403 are both 403 Forbidden
// (Kubeflow does not tell them apart), 400 is 422 Invalid, others keep their code.
KubeStatus KubeStatusFor(const Status& status);

// What Headway knew of the job before this update.
struct KubeflowJobContext {
  std::optional<std::int64_t> step;
  std::optional<std::int64_t> total_steps;
  std::map<std::string, double> latest_metrics;  // latest stored value of each
};

// An accepted update.
struct KubeflowUpdate {
  nlohmann::json echo = nlohmann::json::object();  // the 200 body: the update as understood
  std::optional<ProgressReport> report;            // unset: nothing to store
  std::vector<std::string> skipped_metrics;        // accepted, not numbers: not stored
};

// Either an update or why it is refused.
struct KubeflowParse {
  std::optional<KubeStatus> error;
  KubeflowUpdate update;
  bool ok() const { return !error.has_value(); }
};

// Parses and validates one status update body for job `job` (pure: no I/O).
KubeflowParse ParseKubeflowStatus(std::string_view body, std::string_view job,
                                  const KubeflowJobContext& known);

// Reads a metric value the way a training script wrote it with str(): a
// number ("0.41", "1e-05", "nan", "inf") or a wrapped one ("tensor(0.41)",
// "tensor(0.41, device='cuda:0')", "np.float32(0.41)"). nullopt otherwise.
std::optional<double> ParseMetricValue(std::string_view text);

// The endpoint: checks the body size, the namespace, that `token` is the
// job's and the job has not ended, parses the body and stores the report.
struct KubeflowAnswer {
  int code = 200;
  nlohmann::json body;
  std::size_t stored_points = 0;  // reports + metric values stored (0 when refused)
};
KubeflowAnswer HandleKubeflowStatus(JobService& service, std::string_view ns, std::string_view job,
                                    std::string_view token, std::string_view body);

// Kubeflow's status server answers anything but a POST to a status path
// (another path under /apis/, a GET, a PUT) with 404 and a NotFound
// metav1.Status: the answer for such a request, nullopt for a status POST
// or a path outside /apis/.
std::optional<KubeflowAnswer> KubeflowNotFound(std::string_view method, std::string_view path);

}  // namespace headway::api
