#include "api/job_json.h"

#include <cmath>

#include "core/job_spec_json.h"

namespace headway::api {
namespace {

nlohmann::json OptionalTime(const std::optional<Time>& t) {
  return t ? nlohmann::json(FormatRfc3339(*t)) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json NumberToJson(double value) { return MetricValueToJson(value); }

nlohmann::json ProgressToJson(const ProgressView& p) {
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& [name, value] : p.metrics) metrics[name] = NumberToJson(value);
  return {{"percent", opt(p.percent)},
          {"step", opt(p.step)},
          {"total_steps", opt(p.total_steps)},
          {"epoch", opt(p.epoch)},
          {"total_epochs", opt(p.total_epochs)},
          {"eta_seconds", opt(p.eta_seconds)},
          {"steps_per_second", opt(p.steps_per_second)},
          {"samples_per_second", opt(p.samples_per_second)},
          {"last_report_at", OptionalTime(p.last_report_at)},
          {"metrics", metrics}};
}

namespace {
nlohmann::json EvidenceToJson(const std::optional<HealthEvidence>& evidence) {
  if (!evidence) return nullptr;
  return {{"series", evidence->series},
          {"level", NumberToJson(evidence->level)},
          {"best", NumberToJson(evidence->best)},
          {"best_step", evidence->best_step},
          {"noise", NumberToJson(evidence->noise)},
          {"threshold", NumberToJson(evidence->threshold)},
          {"window_reports", evidence->window_reports}};
}
}  // namespace

nlohmann::json JobToJson(const Job& job, const std::string& pending_reason,
                         const ProgressView& progress, bool with_spec, const QueuePlace& place) {
  nlohmann::json view = {
      {"health", std::string(HealthName(progress.health))},
      {"health_reason", progress.health_reason},
      {"health_evidence", EvidenceToJson(progress.health_evidence)},
      {"progress", ProgressToJson(progress)},
      {"name", job.name()},
      {"team", job.spec.team},
      {"queue", job.spec.queue},
      {"priority", job.spec.priority},
      {"state", JobStateName(job.state)},
      {"reason", job.reason},
      {"message", job.message},
      {"pending_reason", pending_reason},
      {"queue_position",
       place.position > 0 ? nlohmann::json(place.position) : nlohmann::json(nullptr)},
      {"expected_start", OptionalTime(place.expected_start)},
      {"exit_code", job.exit_code ? nlohmann::json(*job.exit_code) : nlohmann::json(nullptr)},
      {"restarts", job.restarts},
      {"preemptions", job.preemptions},
      {"attempt", job.attempt()},
      // An elastic job's GPUs are those it holds now, once it holds some.
      {"gpus", job.spec.elastic && !job.gpu_ids.empty() ? static_cast<int>(job.gpu_ids.size())
                                                        : job.spec.resources.gpus()},
      {"gpu_ids", job.gpu_ids},
      {"executor", job.executor},
      {"labels", job.spec.labels},
      {"created_by", job.created_by},
      {"created_at", FormatRfc3339(job.created_at)},
      {"started_at", OptionalTime(job.started_at)},
      {"finished_at", OptionalTime(job.finished_at)},
      {"stop_requested_at", OptionalTime(job.stop_requested_at)},
  };
  if (job.spec.elastic) {
    const ElasticRange& e = *job.spec.elastic;
    const int per_unit =
        e.ByNodes() ? job.spec.resources.gpus_per_process * job.spec.resources.processes_per_node
                    : job.spec.resources.gpus_per_process;
    const int held = per_unit > 0 ? static_cast<int>(job.gpu_ids.size()) / per_unit : 0;
    view["elastic"] = {{"unit", e.ByNodes() ? "nodes" : "rank groups"},
                       {"size", held > 0 ? nlohmann::json(held) : nlohmann::json(nullptr)},
                       {"min", e.MinUnits()},
                       {"max", e.MaxUnits()}};
  }
  if (with_spec) view["spec"] = JobSpecToJson(job.spec);
  return view;
}

namespace {
// JobRowColumns() in order, and where each is found in a view.
enum class RowSource { kView, kProgress, kMetrics };
struct RowColumn {
  const char* name;
  RowSource from;
};
constexpr RowColumn kRowColumns[] = {
    {"name", RowSource::kView},
    {"team", RowSource::kView},
    {"state", RowSource::kView},
    {"health", RowSource::kView},
    {"health_reason", RowSource::kView},
    {"percent", RowSource::kProgress},
    {"step", RowSource::kProgress},
    {"total_steps", RowSource::kProgress},
    {"eta_seconds", RowSource::kProgress},
    {"loss", RowSource::kMetrics},
    {"gpus", RowSource::kView},
    {"created_at", RowSource::kView},
    {"pending_reason", RowSource::kView},
};
}  // namespace

const nlohmann::json& JobRowColumns() {
  static const nlohmann::json columns = [] {
    nlohmann::json names = nlohmann::json::array();
    for (const RowColumn& c : kRowColumns) names.push_back(c.name);
    return names;
  }();
  return columns;
}

nlohmann::json JobRow(const nlohmann::json& view) {
  // The member `key` of `object`, or null when there is none.
  auto member = [](const nlohmann::json* object, const char* key) -> const nlohmann::json* {
    if (!object || !object->is_object()) return nullptr;
    auto it = object->find(key);
    return it == object->end() ? nullptr : &*it;
  };
  const nlohmann::json* progress = member(&view, "progress");
  const nlohmann::json* sources[] = {&view, progress, member(progress, "metrics")};
  nlohmann::json row = nlohmann::json::array();
  for (const RowColumn& c : kRowColumns) {
    const nlohmann::json* value = member(sources[static_cast<int>(c.from)], c.name);
    row.push_back(value ? *value : nlohmann::json(nullptr));
  }
  return row;
}

nlohmann::json JobView(JobService& service, const Job& job, bool with_spec) {
  nlohmann::json view = JobToJson(job, service.PendingReason(job.name()), service.Progress(job),
                                  with_spec, service.QueuePlaceOf(job.name()));
  if (job.spec.elastic) {
    const ElasticStatus status = service.ElasticOf(job.name());
    nlohmann::json throughput = nlohmann::json::object();
    for (const auto& [size, rate] : status.throughput) throughput[std::to_string(size)] = rate;
    view["elastic"]["steps_per_second"] = std::move(throughput);
    view["elastic"]["restart_seconds"] =
        status.restart_seconds ? nlohmann::json(*status.restart_seconds) : nlohmann::json(nullptr);
  }
  return view;
}

nlohmann::json QueueToJson(const QueueStatus& q) {
  auto opt = [](const std::optional<int>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  return {{"name", q.name},
          {"executor", q.executor},
          {"nominal_gpus", opt(q.nominal_gpus)},
          {"borrowing_limit", opt(q.borrowing_limit)},
          {"weight", q.weight},
          {"gpus_in_use", q.gpus_in_use},
          {"running", q.running},
          {"pending", q.pending},
          {"next_job", q.next_job},
          {"pending_reason", q.pending_reason}};
}

nlohmann::json NodeToJson(const NodeStatus& n) {
  return {{"name", n.name},
          {"executor", n.executor},
          {"gpus", n.gpus},
          {"gpus_in_use", n.gpus_in_use},
          {"jobs", n.jobs}};
}

namespace {

nlohmann::json TrialToJson(const TrialView& t) {
  auto opt = [](const auto& v) {
    return v ? NumberToJson(static_cast<double>(*v)) : nlohmann::json(nullptr);
  };
  return {{"index", t.record.index},
          {"job", t.record.job},
          {"state", TrialStateName(t.record.state)},
          {"job_state", t.job_state},
          {"params", t.params},
          {"objective", opt(t.record.objective)},
          {"latest", opt(t.latest)},
          {"step", t.step ? nlohmann::json(*t.step) : nlohmann::json(nullptr)},
          {"message", t.record.message}};
}

}  // namespace

nlohmann::json ExperimentToJson(const ExperimentView& e, bool with_trials) {
  std::map<std::string, int> counts = {
      {"Running", 0}, {"Completed", 0}, {"EarlyStopped", 0}, {"Failed", 0}};
  for (const TrialView& t : e.trials) counts[std::string(TrialStateName(t.record.state))] += 1;
  nlohmann::json j = {
      {"name", e.record.name},
      {"state", ExperimentStateName(e.record.state)},
      {"message", e.record.message},
      {"created_at", FormatRfc3339(e.record.created_at)},
      {"finished_at", OptionalTime(e.record.finished_at)},
      {"objective", e.spec.is_object() ? e.spec["objective"] : nlohmann::json(nullptr)},
      {"algorithm", e.spec.is_object() ? e.spec["algorithm"]["name"] : nlohmann::json(nullptr)},
      {"max_trials", e.spec.is_object() ? e.spec["max_trials"] : nlohmann::json(nullptr)},
      {"trial_counts", counts},
      {"best_trial", e.best ? TrialToJson(e.trials[*e.best]) : nlohmann::json(nullptr)},
  };
  if (with_trials) {
    nlohmann::json trials = nlohmann::json::array();
    for (const TrialView& t : e.trials) trials.push_back(TrialToJson(t));
    j["trials"] = trials;
    j["spec"] = e.spec;
  }
  return j;
}

nlohmann::json EventToJson(const JobEvent& event) {
  return {{"id", event.id},
          {"time", FormatRfc3339(event.time)},
          {"type", event.type},
          {"message", event.message}};
}

std::string JsonText(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json ErrorToJson(const Status& status) {
  nlohmann::json error = {{"code", StatusCodeName(status.code())}, {"message", status.message()}};
  if (!status.field().empty()) error["field"] = status.field();
  if (status.line()) error["line"] = *status.line();
  return {{"error", error}};
}

}  // namespace headway::api
