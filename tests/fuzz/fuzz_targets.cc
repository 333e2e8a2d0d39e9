#include "fuzz_targets.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string_view>

#include "api/artifact_json.h"
#include "api/http_server.h"
#include "api/kubeflow_status.h"
#include "api/rest_api.h"
#include "artifact/s3/s3_xml.h"
#include "core/job_spec_json.h"
#include "core/job_spec_parser.h"
#include "core/progress_report.h"
#include "hpo/experiment_spec.h"
#include "workflow/engine.h"
#include "workflow/manifest.h"

#define FUZZ_CHECK(condition)                                                                 \
  do {                                                                                        \
    if (!(condition)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (false)

namespace headway::fuzz {
namespace {

std::string_view Text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The REST API's input handling over a control plane that knows no jobs.
// A stand-in, not the real controller: the real one would launch whatever
// process a fuzzed spec names. Submit validates as far as the API does.
class NoJobs final : public api::JobService {
 public:
  Result<Job> Submit(JobSpec spec, std::string created_by) override {
    Job job;
    job.spec = std::move(spec);
    job.created_by = std::move(created_by);
    return job;
  }
  Result<Job> Get(std::string_view name) override { return Missing(name); }
  Result<std::vector<Job>> List(const JobFilter&) override { return std::vector<Job>{}; }
  Result<Job> Stop(std::string_view name, std::string) override { return Missing(name); }
  Result<Job> ForceStop(std::string_view name, std::string) override { return Missing(name); }
  Result<std::vector<JobEvent>> Events(std::string_view name, std::int64_t) override {
    return Missing(name).status();
  }
  Result<std::vector<LogFile>> LogFiles(std::string_view name) override {
    return Missing(name).status();
  }
  Status ReportProgress(std::string_view name, std::string_view,
                        std::vector<ProgressReport>) override {
    return Missing(name).status();
  }
  Status MayReport(std::string_view name, std::string_view) override {
    return Missing(name).status();
  }
  ProgressView Progress(const Job&) override { return {}; }
  Result<std::vector<MetricPoint>> MetricSeries(std::string_view name, std::string_view) override {
    return Missing(name).status();
  }
  Result<std::vector<MetricPoint>> MetricSeriesAfter(std::string_view name, std::string_view,
                                                     std::int64_t, std::size_t) override {
    return Missing(name).status();
  }
  Result<std::vector<std::string>> MetricNames(std::string_view name) override {
    return Missing(name).status();
  }
  std::string PendingReason(std::string_view) override { return {}; }
  std::vector<api::QueueStatus> Queues() override { return {}; }
  std::vector<api::NodeStatus> Nodes() override { return {}; }

 private:
  static Result<Job> Missing(std::string_view name) {
    return NotFound("job '" + std::string(name) + "' not found");
  }
};

}  // namespace

void FuzzJobSpec(const std::uint8_t* data, std::size_t size) {
  auto spec = ParseJobSpec(Text(data, size));
  if (!spec.ok()) {
    FUZZ_CHECK(!spec.status().message().empty());
    return;
  }
  // Its canonical JSON is itself a valid spec that says the same.
  std::string canonical = JobSpecToJson(*spec).dump();
  auto again = ParseJobSpec(canonical);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(JobSpecToJson(*again).dump() == canonical);
}

void FuzzExperimentSpec(const std::uint8_t* data, std::size_t size) {
  auto spec = hpo::ParseExperimentSpec(Text(data, size));
  if (!spec.ok()) {
    FUZZ_CHECK(!spec.status().message().empty());
    return;
  }
  std::string canonical = hpo::ExperimentSpecToJson(*spec).dump();
  auto again = hpo::ParseExperimentSpec(canonical);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(hpo::ExperimentSpecToJson(*again).dump() == canonical);
}

void FuzzProgressReport(const std::uint8_t* data, std::size_t size) {
  ProgressLimits limits;
  // The HTTP form and the stdout form (top-level numbers are metrics) keep
  // the same invariants; whatever the HTTP form takes, the stdout form does.
  auto reports = DecodeProgressReports(Text(data, size), limits);
  auto markers = DecodeMarkerReports(Text(data, size), limits);
  if (reports.ok()) FUZZ_CHECK(markers.ok());
  // The HTTP form reads well-formed bodies as the parser goes and the
  // stdout form from the whole document: where the first takes a body,
  // both read the same reports from it.
  if (reports.ok()) {
    FUZZ_CHECK(reports->size() == markers->size());
    auto same = [](double a, double b) {
      return std::isnan(a) ? std::isnan(b) : a == b && std::signbit(a) == std::signbit(b);
    };
    for (std::size_t i = 0; i < reports->size(); ++i) {
      const ProgressReport& a = (*reports)[i];
      const ProgressReport& b = (*markers)[i];
      FUZZ_CHECK(a.step == b.step && a.total_steps == b.total_steps && a.epoch == b.epoch &&
                 a.total_epochs == b.total_epochs && a.time == b.time);
      FUZZ_CHECK(a.metrics.size() == b.metrics.size());
      for (const auto& [name, value] : a.metrics) {
        auto it = b.metrics.find(name);
        FUZZ_CHECK(it != b.metrics.end() && same(value, it->second));
      }
    }
  }
  for (const auto* decoded : {&reports, &markers}) {
    if (!decoded->ok()) continue;
    FUZZ_CHECK(!(*decoded)->empty() && (*decoded)->size() <= limits.max_reports);
    for (const auto& r : **decoded) {
      FUZZ_CHECK(r.step >= 0);
      FUZZ_CHECK(r.metrics.size() <= limits.max_metrics_per_report);
      for (const auto& [name, value] : r.metrics) {
        FUZZ_CHECK(IsValidMetricName(name) && name.size() <= limits.max_metric_name);
        (void)value;
      }
    }
  }
}

void FuzzKubeflowStatus(const std::uint8_t* data, std::size_t size) {
  api::KubeflowJobContext known;
  known.step = 5;
  known.total_steps = 7;
  known.latest_metrics = {{"loss", 0.5}};
  api::KubeflowParse parsed = api::ParseKubeflowStatus(Text(data, size), "job", known);
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.error->code == 422 || parsed.error->code == 413);
    FUZZ_CHECK(!parsed.update.report);
    return;
  }
  FUZZ_CHECK(parsed.update.echo.is_object());
  if (!parsed.update.report) return;
  const ProgressReport& r = *parsed.update.report;
  FUZZ_CHECK(r.step >= 0 && r.time.has_value());
  FUZZ_CHECK(!r.total_steps || *r.total_steps > 0);
  FUZZ_CHECK(r.metrics.size() <= 256);
  FUZZ_CHECK(!r.remaining_seconds || *r.remaining_seconds >= 0);
}

void FuzzHttpRequest(const std::uint8_t* data, std::size_t size) {
  static NoJobs jobs;
  // As a server on a non-loopback address without --allow-host: any Host
  // passes, so inputs reach the routes behind the check (api/request_guard.h
  // has its own tests); Origin is still checked.
  static const api::HttpHandler handler = [] {
    api::RestApiOptions options;
    options.hosts.listen_address = "0.0.0.0";
    return api::MakeRestApi(jobs, options);
  }();
  auto request = api::ParseHttpRequest(Text(data, size));
  if (!request.ok()) return;
  api::HttpResponse response = handler(*request);
  FUZZ_CHECK(response.status >= 200 && response.status < 600);
  // Every error the API sends is JSON with a code and a message.
  if (response.status >= 400 && !response.stream) {
    FUZZ_CHECK(response.body.find("\"code\"") != std::string::npos);
  }
}

void FuzzArtifactRecord(const std::uint8_t* data, std::size_t size) {
  auto artifact = api::ParseNewArtifact(Text(data, size));
  if (!artifact.ok()) {
    FUZZ_CHECK(!artifact.status().message().empty());
    return;
  }
  // What is accepted is a safe name, a real digest, and serialises.
  FUZZ_CHECK(IsValidArtifactName(artifact->name));
  FUZZ_CHECK(IsValidDigest(artifact->digest));
  FUZZ_CHECK(ObjectKey(*artifact).find("..") == std::string::npos);
  (void)api::ArtifactToJson(*artifact).dump();
}

void FuzzWorkflowManifest(const std::uint8_t* data, std::size_t size) {
  auto manifest = workflow::ParseManifest(Text(data, size));
  if (!manifest.ok()) {
    FUZZ_CHECK(!manifest.status().message().empty());
    return;
  }
  // What is accepted writes back as Argo JSON that reads back the same.
  if (const auto* w = std::get_if<workflow::Workflow>(&manifest->resource)) {
    auto again = workflow::ParseManifest(workflow::ToJson(*w).dump());
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(std::get<workflow::Workflow>(again->resource) == *w);
    // And the engine runs it to the end without throwing: every job it asks
    // for ends at once (every third one failing), each node survives its
    // JSON, every job name is valid. Sequences are left out: one may
    // expand to 10,000 steps.
    if (Text(data, size).find("withSequence") != std::string_view::npos) return;
    workflow::WorkflowState state;
    state.name = w->metadata.name.empty() ? "fuzz" : w->metadata.name;
    state.uid = "u";
    std::map<std::string, workflow::JobObservation> jobs;
    workflow::Environment env;
    env.now = FromUnixMillis(1'700'000'000'000);
    env.observe = [&](const std::string& job) -> std::optional<workflow::JobObservation> {
      auto it = jobs.find(job);
      if (it == jobs.end()) return std::nullopt;
      return it->second;
    };
    for (int pass = 0; pass < 30 && !state.Finished(); ++pass) {
      workflow::Actions actions = workflow::Operate(w->spec, state, env);
      for (const workflow::JobToCreate& job : actions.create) {
        FUZZ_CHECK(IsValidJobName(job.spec.name));
        workflow::JobObservation ended;
        ended.state = jobs.size() % 3 == 2 ? JobState::kFailed : JobState::kSucceeded;
        ended.exit_code = ended.state == JobState::kFailed ? 1 : 0;
        ended.stdout_text = "out";
        jobs[job.spec.name] = ended;
      }
      env.now += std::chrono::minutes(10);
      if (state.nodes.size() > 5000) break;
    }
    for (const auto& [id, node] : state.nodes) {
      auto back = workflow::NodeFromJson(workflow::ToJson(node));
      FUZZ_CHECK(back.ok() && back->id == id && back->phase == node.phase);
    }
  }
}

void FuzzS3Xml(const std::uint8_t* data, std::size_t size) {
  const std::string_view body = Text(data, size);
  if (auto page = ParseListObjectsV2(body); page.ok()) {
    FUZZ_CHECK(!page->truncated || !page->next_continuation_token.empty());
    for (const S3Object& o : page->objects) FUZZ_CHECK(!o.key.empty());
  }
  if (auto parts = ParseListParts(body); parts.ok()) {
    for (const S3Part& p : parts->parts) FUZZ_CHECK(p.number >= 1 && p.number <= 10000);
    FUZZ_CHECK(parts->next_part_number_marker >= 0 && parts->next_part_number_marker <= 10000);
  }
  if (auto id = ParseInitiateMultipartUpload(body); id.ok()) FUZZ_CHECK(!id->empty());
  (void)ParseCompleteMultipartUpload(body);
  (void)ParseS3Error(body);
}

}  // namespace headway::fuzz
