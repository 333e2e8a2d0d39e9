#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <tuple>

#include "api/auth.h"
#include "api/http_client.h"
#include "api/kubeflow_status.h"
#include "core/stdout_metrics.h"
#include "exec/local/local_executor.h"
#include "exec/ssh_server.h"
#include "lifecycle/retention.h"
#include "server/job_controller.h"

namespace headway {

Status JobController::CheckReportToken(std::string_view name, std::string_view token) {
  if (token.empty()) {
    return Unauthenticated("a report needs 'Authorization: Bearer <HEADWAY_TOKEN>'");
  }
  std::string expected;
  {
    std::lock_guard lock(tokens_mu_);
    auto it = token_hashes_.find(std::string(name));
    if (it != token_hashes_.end()) expected = it->second;
  }
  if (expected.empty()) {
    auto job = store_.GetJob(name);
    if (!job.ok()) return job.status();
    expected = job->token_hash;
    std::lock_guard lock(tokens_mu_);
    if (!expected.empty()) token_hashes_[std::string(name)] = expected;
  }
  if (expected.empty() || !api::SameHash(api::HashToken(token), expected)) {
    return PermissionDenied("this token may not report for job '" + std::string(name) + "'");
  }
  return Status::Ok();
}

Status JobController::MayReport(std::string_view name, std::string_view token) {
  HEADWAY_RETURN_IF_ERROR(CheckReportToken(name, token));
  auto job = store_.GetJob(name);
  if (!job.ok()) return job.status();
  if (IsTerminal(job->state)) {
    return Conflict("job '" + std::string(name) + "' has ended (" +
                    std::string(JobStateName(job->state)) + "): its token no longer reports");
  }
  return Status::Ok();
}

Status JobController::AdmitReports(std::string_view name, std::string_view token,
                                   const std::vector<ProgressReport>& reports) {
  HEADWAY_RETURN_IF_ERROR(CheckReportToken(name, token));
  return tracker_.Admit(std::string(name), reports,
                        {options_.max_series_per_job, options_.max_points_per_job});
}

Status JobController::ReportProgress(std::string_view name, std::string_view token,
                                     std::vector<ProgressReport> reports) {
  HEADWAY_RETURN_IF_ERROR(AdmitReports(name, token, reports));
  return writer_.Write({std::string(name), std::move(reports), clock_.Now()});
}

void JobController::ReportProgressThen(std::string_view name, std::string_view token,
                                       std::vector<ProgressReport> reports,
                                       std::function<void(const Status&)> done) {
  if (Status admitted = AdmitReports(name, token, reports); !admitted.ok()) {
    done(admitted);
    return;
  }
  writer_.WriteThen({std::string(name), std::move(reports), clock_.Now()}, std::move(done));
}

ProgressView JobController::Progress(const Job& job) { return tracker_.View(job, clock_.Now()); }

Result<std::vector<MetricPoint>> JobController::MetricSeries(std::string_view name,
                                                             std::string_view metric) {
  auto job = store_.GetJob(name);
  if (!job.ok()) return job.status();
  std::vector<MetricPoint> points;
  HEADWAY_RETURN_IF_ERROR(
      store_.ScanMetric(name, metric, [&](const MetricPoint& p) { points.push_back(p); }));
  if (points.empty()) {
    return NotFound("job '" + std::string(name) + "' has no metric '" + std::string(metric) + "'");
  }
  return points;
}

Result<MetricChart> JobController::MetricChartOf(std::string_view name, std::string_view metric,
                                                 std::size_t buckets) {
  if (buckets > 0) {
    auto job = store_.GetJob(name);
    if (!job.ok()) return job.status();
    auto chart = tracker_.charts().Chart(std::string(name), std::string(metric), buckets,
                                         [&](const std::function<void(const MetricPoint&)>& each) {
                                           return store_.ScanMetric(name, metric, each);
                                         });
    if (!chart.ok()) return chart.status();
    if (*chart) return std::move(**chart);
  }
  return JobService::MetricChartOf(name, metric, buckets);
}

Result<std::vector<MetricPoint>> JobController::MetricSeriesAfter(std::string_view name,
                                                                  std::string_view metric,
                                                                  std::int64_t after_step,
                                                                  std::size_t limit) {
  auto job = store_.GetJob(name);
  if (!job.ok()) return job.status();
  return store_.MetricAfter(name, metric, after_step, limit);
}

Result<std::vector<std::string>> JobController::MetricNames(std::string_view name) {
  auto job = store_.GetJob(name);
  if (!job.ok()) return job.status();
  return store_.MetricNames(name);
}

lifecycle::Step JobController::ScanMarkers(const Job& job, bool final) {
  lifecycle::Step step;
  EnsureLogsIndexed(job, step.events);
  auto files = store_.ListLogFiles(job.name());
  if (!files.ok()) return step;
  std::vector<LogFile> current;
  for (const LogFile& f : *files) {
    if (f.attempt == job.attempt()) current.push_back(f);
  }
  int malformed = 0;
  std::vector<LogFile> rotated;
  std::string why;
  const std::set<std::string> stdout_metrics = StdoutMetricNames(job.spec);
  std::vector<ProgressReport> reports = markers_.Scan(
      current, malformed, &rotated, stdout_metrics.empty() ? nullptr : &stdout_metrics, &why);
  if (malformed > 0 && !warned_malformed_[job.name()]) {
    warned_malformed_[job.name()] = true;
    step.events.push_back(
        Event(job, "Warning",
              "ignored a malformed HEADWAY progress line in the job's output: " + why +
                  " (the form is HEADWAY {\"step\": 1, \"loss\": 0.5}; later "
                  "malformed lines are ignored without another event)"));
  }
  for (const LogFile& f : rotated) {
    step.events.push_back(
        Event(job, "Warning",
              "rank " + std::to_string(f.rank) + "'s output passed half of its log limit of " +
                  std::to_string(options_.max_log_bytes) +
                  " bytes (--max-log-bytes): older output moved to " +
                  std::filesystem::path(f.path).filename().string() +
                  ".1, and output older than that is dropped; the newest is kept"));
  }
  // The same limits as HTTP reports; a job's output cannot be refused, so
  // what is over them is dropped, and the job's events say so once per limit.
  const IngestLimits limits{options_.max_series_per_job, options_.max_points_per_job};
  tracker_.DropOverLimits(job.name(), reports, limits);
  for (std::string& warning : tracker_.TakeWarnings(job.name(), limits)) {
    step.events.push_back(Event(job, "Warning", std::move(warning)));
  }
  if (!reports.empty()) {
    if (final) {
      // The attempt ended: its last reports must count in its final verdict.
      Status s = writer_.Write({job.name(), std::move(reports), clock_.Now()});
      if (!s.ok()) step.events.push_back(Event(job, "Warning", "progress lines: " + s.message()));
    } else {
      writer_.WriteAsync({job.name(), std::move(reports), clock_.Now()});
    }
  }
  return step;
}

void JobController::PullProgress() {
  std::vector<Job> jobs;
  {
    std::lock_guard lock(pull_mu_);
    jobs = pull_jobs_;
  }
  const Time now = clock_.Now();
  std::erase_if(pull_memos_, [&](const auto& entry) {
    return std::none_of(jobs.begin(), jobs.end(),
                        [&](const Job& j) { return j.name() == entry.first; });
  });
  for (const Job& job : jobs) {
    const ProgressEndpoint& endpoint = *job.spec.progress_endpoint;
    PullMemo& memo = pull_memos_[job.name()];
    if (memo.handle != job.executor_handle) {
      memo = PullMemo{};
      memo.handle = job.executor_handle;
    }
    if (now < memo.next) continue;
    memo.next = now + endpoint.interval;
    std::string problem;
    if (memo.host.empty()) {
      auto host = ExecutorFor(job).PrimaryHost(job.executor_handle);
      if (host.ok()) {
        memo.host = *host;
      } else {
        problem = host.status().message();
      }
    }
    const std::string url =
        "http://" + (memo.host.find(':') != std::string::npos ? "[" + memo.host + "]" : memo.host) +
        ":" + std::to_string(endpoint.port);
    if (problem.empty()) {
      api::HttpClient http(url);
      http.set_timeout(std::chrono::seconds(2));
      // Inside the job's own network where it has one, not on the host.
      http.set_connector([this, &job, port = endpoint.port] {
        return ExecutorFor(job).ConnectToJob(job.executor_handle, port);
      });
      auto response = http.Request("GET", endpoint.path);
      if (!response.ok()) {
        problem = response.status().message();
      } else if (response->status != 200) {
        problem = "it answered HTTP " + std::to_string(response->status);
      } else if (response->body.size() > (1u << 20)) {
        problem = "its answer is over 1 MiB";
      } else {
        auto report = ParsePulledProgress(response->body, memo.last);
        if (!report.ok()) {
          problem = report.status().message();
        } else if (*report) {
          std::vector<ProgressReport> reports{std::move(**report)};
          tracker_.DropOverLimits(job.name(), reports,
                                  {options_.max_series_per_job, options_.max_points_per_job});
          if (!reports.empty()) writer_.WriteAsync({job.name(), std::move(reports), now});
        }
      }
    }
    if (problem.empty()) {
      memo.failures = 0;
      continue;
    }
    memo.host.clear();  // ask again: a Slurm job may not have its node yet
    if (++memo.failures >= 3 && !memo.warned) {
      memo.warned = true;
      std::lock_guard lock(pull_mu_);
      pull_warnings_[job.name()] = "cannot read the job's progress from " + url + endpoint.path +
                                   " (progress_endpoint): " + problem;
    }
  }
}

void JobController::RunPullLoop(Duration period) {
  pull_loop_.Run(period, [this] { PullProgress(); });
}

}  // namespace headway
