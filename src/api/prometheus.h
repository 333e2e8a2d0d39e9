// GET /metrics: the control plane in the Prometheus text exposition format
// (version 0.0.4), with conventional names: per active job progress, ETA,
// health and latest metrics; GPUs per node and queue; job counts per state;
// ingest and HTTP counters; artifact bytes and versions per team.
// deploy/grafana/headway.json charts them.
//
// Jobs are labelled job_name (and team), not job: Prometheus gives every
// scraped series a `job` label of its own (the scrape job), and ours would be
// renamed exported_job.
//
// Per-job series exist only while a job is active (Queued, Starting,
// Running, Preempted), so ended jobs do not grow the series count forever.
//
// Thread safety: ApiCounters are atomics; RenderPrometheus may run
// concurrently with anything.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "api/artifact_service.h"
#include "api/job_service.h"

namespace headway::api {

struct ApiCounters {
  // Points accepted by the progress endpoints.
  std::atomic<std::uint64_t> report_points{0};
  // Progress requests (native and Kubeflow) by outcome.
  std::atomic<std::uint64_t> report_requests_accepted{0};
  std::atomic<std::uint64_t> report_requests_rejected{0};
  // Every API request by status class: 1xx..5xx at indexes 1..5.
  std::array<std::atomic<std::uint64_t>, 6> http_responses{};

  void CountResponse(int status) {
    int cls = status / 100;
    if (cls >= 1 && cls <= 5) http_responses[static_cast<std::size_t>(cls)].fetch_add(1);
  }
};

// The whole exposition, ending in a newline; with a `team`, the per-job
// series, job counts and artifact series of that team only. `artifacts`
// may be null (artifacts not enabled).
std::string RenderPrometheus(JobService& service, const ApiCounters& counters,
                             const std::string& team = {}, ArtifactService* artifacts = nullptr);

// Escapes a label value: backslash, double quote and newline.
std::string EscapeLabelValue(std::string_view value);

}  // namespace headway::api
