#include "workflow/workflow.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/job.h"

namespace headway::workflow {
namespace {

using nlohmann::json;

constexpr std::string_view kGpuResource = "nvidia.com/gpu";

// Writes `value` under `key` unless it is empty (Argo omits empty fields).
void PutString(json& j, const char* key, const std::string& value) {
  if (!value.empty()) j[key] = value;
}

template <typename T>
void PutOptional(json& j, const char* key, const std::optional<T>& value) {
  if (value) j[key] = *value;
}

void PutMap(json& j, const char* key, const std::map<std::string, std::string>& map) {
  if (!map.empty()) j[key] = map;
}

void PutList(json& j, const char* key, const std::vector<std::string>& list) {
  if (!list.empty()) j[key] = list;
}

void PutRecorded(json& j, const RecordedFields& recorded) {
  for (const auto& [key, value] : recorded) j[key] = value;
}

json IntOrStringJson(const IntOrString& v) {
  if (v.is_int) {
    std::int64_t n = 0;
    auto [end, ec] = std::from_chars(v.text.data(), v.text.data() + v.text.size(), n);
    if (ec == std::errc() && end == v.text.data() + v.text.size()) return n;
  }
  return v.text;
}

void PutIntOrString(json& j, const char* key, const std::optional<IntOrString>& v) {
  if (v) j[key] = IntOrStringJson(*v);
}

json ToJson(const ObjectMeta& m) {
  json j = json::object();
  PutString(j, "name", m.name);
  PutString(j, "generateName", m.generate_name);
  PutString(j, "namespace", m.namespace_);
  PutMap(j, "labels", m.labels);
  PutMap(j, "annotations", m.annotations);
  return j;
}

json ToJson(const TemplateMetadata& m) {
  json j = json::object();
  PutMap(j, "labels", m.labels);
  PutMap(j, "annotations", m.annotations);
  return j;
}

json ToJson(const ValueFrom& v) {
  json j = json::object();
  PutString(j, "path", v.path);
  PutString(j, "jsonPath", v.json_path);
  PutString(j, "jqFilter", v.jq_filter);
  PutString(j, "event", v.event);
  PutString(j, "parameter", v.parameter);
  PutString(j, "expression", v.expression);
  PutOptional(j, "default", v.default_value);
  if (v.supplied) j["supplied"] = json::object();
  if (v.config_map_key_ref) {
    json ref = {{"name", v.config_map_key_ref->name}, {"key", v.config_map_key_ref->key}};
    PutOptional(ref, "optional", v.config_map_key_ref->optional);
    j["configMapKeyRef"] = ref;
  }
  return j;
}

json ToJson(const Parameter& p) {
  json j = {{"name", p.name}};
  PutOptional(j, "value", p.value);
  PutOptional(j, "default", p.default_value);
  PutList(j, "enum", p.enum_values);
  PutString(j, "description", p.description);
  PutString(j, "globalName", p.global_name);
  if (p.value_from) j["valueFrom"] = ToJson(*p.value_from);
  return j;
}

json ArchiveJson(const Artifact& a) {
  switch (a.archive) {
    case ArchiveKind::kNone:
      return {{"none", json::object()}};
    case ArchiveKind::kZip:
      return {{"zip", json::object()}};
    case ArchiveKind::kTar: {
      json tar = json::object();
      PutOptional(tar, "compressionLevel", a.tar_compression_level);
      return {{"tar", tar}};
    }
    case ArchiveKind::kDefault:
      break;
  }
  return nullptr;
}

json ToJson(const Artifact& a) {
  json j = {{"name", a.name}};
  PutString(j, "path", a.path);
  PutString(j, "from", a.from);
  PutString(j, "fromExpression", a.from_expression);
  PutString(j, "globalName", a.global_name);
  PutString(j, "subPath", a.sub_path);
  PutOptional(j, "mode", a.mode);
  if (a.optional) j["optional"] = true;
  if (json archive = ArchiveJson(a); !archive.is_null()) j["archive"] = archive;
  if (a.s3) {
    json s3 = json::object();
    PutString(s3, "key", a.s3->key);
    PutString(s3, "bucket", a.s3->bucket);
    PutString(s3, "endpoint", a.s3->endpoint);
    PutString(s3, "region", a.s3->region);
    j["s3"] = s3;
  }
  if (a.raw_data) j["raw"] = {{"data", *a.raw_data}};
  if (!a.http_url.empty()) j["http"] = {{"url", a.http_url}};
  PutRecorded(j, a.recorded);
  return j;
}

json ToJson(const ParametersAndArtifacts& io) {
  json j = json::object();
  for (const auto& p : io.parameters) j["parameters"].push_back(ToJson(p));
  for (const auto& a : io.artifacts) j["artifacts"].push_back(ToJson(a));
  return j;
}

void PutIo(json& j, const char* key, const ParametersAndArtifacts& io) {
  if (!io.empty()) j[key] = ToJson(io);
}

json ToJson(const Container& c) {
  json j = json::object();
  PutString(j, "name", c.name);
  PutString(j, "image", c.image);
  PutList(j, "command", c.command);
  PutList(j, "args", c.args);
  for (const auto& e : c.env) j["env"].push_back({{"name", e.name}, {"value", e.value}});
  PutString(j, "workingDir", c.working_dir);
  if (!c.resources.limits.empty() || !c.resources.requests.empty()) {
    json r = json::object();
    PutMap(r, "limits", c.resources.limits);
    PutMap(r, "requests", c.resources.requests);
    j["resources"] = r;
  }
  PutString(j, "source", c.source);
  PutRecorded(j, c.recorded);
  return j;
}

json ToJson(const Task& t) {
  json j = {{"name", t.name}};
  PutString(j, "template", t.template_name);
  if (t.template_ref) {
    json ref = {{"name", t.template_ref->name}, {"template", t.template_ref->template_name}};
    if (t.template_ref->cluster_scope) ref["clusterScope"] = true;
    j["templateRef"] = ref;
  }
  PutIo(j, "arguments", t.arguments);
  PutList(j, "dependencies", t.dependencies);
  PutString(j, "depends", t.depends);
  PutString(j, "when", t.when);
  if (t.with_items) j["withItems"] = *t.with_items;
  PutString(j, "withParam", t.with_param);
  if (t.with_sequence) {
    json s = json::object();
    PutIntOrString(s, "count", t.with_sequence->count);
    PutIntOrString(s, "start", t.with_sequence->start);
    PutIntOrString(s, "end", t.with_sequence->end);
    PutString(s, "format", t.with_sequence->format);
    j["withSequence"] = s;
  }
  if (t.continue_on) {
    json c = json::object();
    if (t.continue_on->error) c["error"] = true;
    if (t.continue_on->failed) c["failed"] = true;
    j["continueOn"] = c;
  }
  PutString(j, "onExit", t.on_exit);
  PutRecorded(j, t.recorded);
  return j;
}

json ToJson(const RetryStrategy& r) {
  json j = json::object();
  PutIntOrString(j, "limit", r.limit);
  if (r.retry_policy != RetryPolicy::kDefault) j["retryPolicy"] = RetryPolicyName(r.retry_policy);
  if (r.backoff) {
    json b = json::object();
    PutString(b, "duration", r.backoff->duration);
    PutIntOrString(b, "factor", r.backoff->factor);
    PutString(b, "maxDuration", r.backoff->max_duration);
    j["backoff"] = b;
  }
  PutString(j, "expression", r.expression);
  PutRecorded(j, r.recorded);
  return j;
}

json ToJson(const Memoize& m) {
  json j = {{"key", m.key}};
  PutString(j, "maxAge", m.max_age);
  if (!m.config_map_name.empty()) j["cache"] = {{"configMap", {{"name", m.config_map_name}}}};
  return j;
}

json ToJson(const Dag& d) {
  json j = json::object();
  PutString(j, "target", d.target);
  PutOptional(j, "failFast", d.fail_fast);
  j["tasks"] = json::array();
  for (const auto& t : d.tasks) j["tasks"].push_back(ToJson(t));
  return j;
}

json ToJson(const StepGroups& groups) {
  json j = json::array();
  for (const auto& group : groups) {
    json g = json::array();
    for (const auto& step : group) g.push_back(ToJson(step));
    j.push_back(g);
  }
  return j;
}

json ToJson(const TtlStrategy& t) {
  json j = json::object();
  PutOptional(j, "secondsAfterCompletion", t.seconds_after_completion);
  PutOptional(j, "secondsAfterSuccess", t.seconds_after_success);
  PutOptional(j, "secondsAfterFailure", t.seconds_after_failure);
  return j;
}

json ToJson(const CronWorkflowSpec& s) {
  json j = json::object();
  if (s.single_schedule && s.schedules.size() == 1) {
    j["schedule"] = s.schedules.front();
  } else {
    PutList(j, "schedules", s.schedules);
  }
  PutString(j, "timezone", s.timezone);
  if (s.concurrency_policy != ConcurrencyPolicy::kAllow) {
    j["concurrencyPolicy"] = ConcurrencyPolicyName(s.concurrency_policy);
  }
  PutOptional(j, "startingDeadlineSeconds", s.starting_deadline_seconds);
  PutOptional(j, "successfulJobsHistoryLimit", s.successful_jobs_history_limit);
  PutOptional(j, "failedJobsHistoryLimit", s.failed_jobs_history_limit);
  if (s.suspend) j["suspend"] = true;
  PutString(j, "when", s.when);
  j["workflowSpec"] = ToJson(s.workflow_spec);
  if (s.workflow_metadata) j["workflowMetadata"] = ToJson(*s.workflow_metadata);
  PutRecorded(j, s.recorded);
  return j;
}

json Document(std::string_view kind, const ObjectMeta& metadata, json spec) {
  return {{"apiVersion", kApiVersion},
          {"kind", kind},
          {"metadata", ToJson(metadata)},
          {"spec", std::move(spec)}};
}

std::optional<double> ParseCpuQuantity(const std::string& text) {
  std::string s = text;
  double scale = 1;
  if (!s.empty() && s.back() == 'm') {
    scale = 0.001;
    s.pop_back();
  }
  char* end = nullptr;
  double value = std::strtod(s.c_str(), &end);
  if (s.empty() || end == nullptr || *end != '\0' || !std::isfinite(value) || value < 0) {
    return std::nullopt;
  }
  return value * scale;
}

// A quantity from limits, else requests: nullptr when neither says it.
const std::string* LimitOrRequest(const ResourceRequirements& r, std::string_view name,
                                  std::string* side) {
  for (const auto& [map, label] :
       {std::pair{&r.limits, "limits"}, std::pair{&r.requests, "requests"}}) {
    auto it = map->find(std::string(name));
    if (it != map->end()) {
      *side = label;
      return &it->second;
    }
  }
  return nullptr;
}

Status QuantityError(const std::string& side, std::string_view name, const std::string& text,
                     const std::string& expected) {
  Status s = InvalidArgument("must be " + expected + ", got '" + text + "'");
  s.WithField("resources." + side + "." + std::string(name));
  return s;
}

Result<int> GpuCount(const std::string& text) {
  int gpus = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), gpus);
  if (ec != std::errc() || end != text.data() + text.size() || gpus < 0 || gpus > 1024) {
    return InvalidArgument("bad GPU count");
  }
  return gpus;
}

}  // namespace

const Parameter* ParametersAndArtifacts::FindParameter(std::string_view name) const {
  for (const auto& p : parameters) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const Artifact* ParametersAndArtifacts::FindArtifact(std::string_view name) const {
  for (const auto& a : artifacts) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

const Template* WorkflowSpec::FindTemplate(std::string_view name) const {
  for (const auto& t : templates) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string_view RetryPolicyName(RetryPolicy policy) {
  switch (policy) {
    case RetryPolicy::kAlways:
      return "Always";
    case RetryPolicy::kOnFailure:
      return "OnFailure";
    case RetryPolicy::kOnError:
      return "OnError";
    case RetryPolicy::kOnTransientError:
      return "OnTransientError";
    case RetryPolicy::kDefault:
      break;
  }
  return "";
}

std::string_view ConcurrencyPolicyName(ConcurrencyPolicy policy) {
  switch (policy) {
    case ConcurrencyPolicy::kForbid:
      return "Forbid";
    case ConcurrencyPolicy::kReplace:
      return "Replace";
    case ConcurrencyPolicy::kAllow:
      break;
  }
  return "Allow";
}

std::string_view TemplateKindName(TemplateKind kind) {
  switch (kind) {
    case TemplateKind::kScript:
      return "script";
    case TemplateKind::kDag:
      return "dag";
    case TemplateKind::kSteps:
      return "steps";
    case TemplateKind::kSuspend:
      return "suspend";
    case TemplateKind::kContainer:
      break;
  }
  return "container";
}

Result<NodeResources> NodeResourcesOf(const Template& tmpl) {
  NodeResources out;
  std::string side;
  if (tmpl.container) {
    const auto& r = tmpl.container->resources;
    if (const std::string* gpus = LimitOrRequest(r, kGpuResource, &side)) {
      auto n = GpuCount(*gpus);
      if (!n.ok())
        return QuantityError(side, kGpuResource, *gpus, "a whole number of GPUs (0-1024)");
      out.gpus = *n;
    } else if (auto it = tmpl.metadata.annotations.find(std::string(kGpusKey));
               it != tmpl.metadata.annotations.end()) {
      auto n = GpuCount(it->second);
      if (!n.ok()) {
        Status s =
            InvalidArgument("must be a whole number of GPUs (0-1024), got '" + it->second + "'");
        return s.WithField("metadata.annotations." + std::string(kGpusKey));
      }
      out.gpus = *n;
    }
    if (const std::string* cpu = LimitOrRequest(r, "cpu", &side)) {
      auto cpus = ParseCpuQuantity(*cpu);
      if (!cpus || *cpus > 4096)
        return QuantityError(side, "cpu", *cpu, "a CPU quantity such as 2, 1.5 or 500m");
      out.cpus = *cpus;
    }
    if (const std::string* memory = LimitOrRequest(r, "memory", &side)) {
      auto bytes = ParseByteQuantity(*memory);
      if (!bytes) return QuantityError(side, "memory", *memory, "a size such as 512Mi, 16Gi or 2G");
      out.memory_bytes = *bytes;
    }
  }
  return out;
}

std::optional<std::string> HeadwayValue(const ObjectMeta& workflow, const TemplateMetadata* tmpl,
                                        std::string_view key) {
  auto find = [&](const std::map<std::string, std::string>& annotations,
                  const std::map<std::string, std::string>& labels) -> std::optional<std::string> {
    if (auto it = annotations.find(std::string(key)); it != annotations.end()) return it->second;
    if (auto it = labels.find(std::string(key)); it != labels.end()) return it->second;
    return std::nullopt;
  };
  if (tmpl) {
    if (auto v = find(tmpl->annotations, tmpl->labels)) return v;
  }
  return find(workflow.annotations, workflow.labels);
}

std::int64_t HighestPriority(const ObjectMeta& workflow, const WorkflowSpec& spec,
                             const TemplateMetadata* extra) {
  std::int64_t highest = std::max<std::int64_t>(0, spec.priority.value_or(0));
  auto take = [&](const std::map<std::string, std::string>& values) {
    auto it = values.find(std::string(kPriorityKey));
    if (it == values.end()) return;
    std::int64_t priority = 0;
    const std::string& text = it->second;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), priority);
    // (Not a number: refused where the manifest is read; out of range: the
    // highest there is, so that it is refused here.)
    if (ec == std::errc::result_out_of_range)
      priority = std::numeric_limits<std::int64_t>::max();
    else if (ec != std::errc() || end != text.data() + text.size())
      return;
    highest = std::max(highest, priority);
  };
  take(workflow.annotations);
  take(workflow.labels);
  if (extra != nullptr) {
    take(extra->annotations);
    take(extra->labels);
  }
  for (const Template& t : spec.templates) {
    take(t.metadata.annotations);
    take(t.metadata.labels);
  }
  return highest;
}

json ToJson(const Template& t) {
  json j = {{"name", t.name}};
  PutString(j, "displayName", t.display_name);
  PutIo(j, "inputs", t.inputs);
  PutIo(j, "outputs", t.outputs);
  if (!t.metadata.labels.empty() || !t.metadata.annotations.empty())
    j["metadata"] = ToJson(t.metadata);
  if (t.container)
    j[t.kind == TemplateKind::kScript ? "script" : "container"] = ToJson(*t.container);
  if (t.dag) j["dag"] = ToJson(*t.dag);
  if (t.steps) j["steps"] = ToJson(*t.steps);
  if (t.suspend) {
    json s = json::object();
    PutString(s, "duration", t.suspend->duration);
    j["suspend"] = s;
  }
  if (t.retry_strategy) j["retryStrategy"] = ToJson(*t.retry_strategy);
  PutIntOrString(j, "activeDeadlineSeconds", t.active_deadline_seconds);
  PutString(j, "timeout", t.timeout);
  PutOptional(j, "parallelism", t.parallelism);
  PutOptional(j, "failFast", t.fail_fast);
  if (t.memoize) j["memoize"] = ToJson(*t.memoize);
  PutMap(j, "nodeSelector", t.node_selector);
  PutRecorded(j, t.recorded);
  return j;
}

json ToJson(const WorkflowSpec& s) {
  json j = json::object();
  PutString(j, "entrypoint", s.entrypoint);
  PutIo(j, "arguments", s.arguments);
  for (const auto& t : s.templates) j["templates"].push_back(ToJson(t));
  PutString(j, "onExit", s.on_exit);
  PutOptional(j, "parallelism", s.parallelism);
  PutOptional(j, "activeDeadlineSeconds", s.active_deadline_seconds);
  if (s.ttl_strategy) j["ttlStrategy"] = ToJson(*s.ttl_strategy);
  PutString(j, "serviceAccountName", s.service_account_name);
  if (s.workflow_template_ref) {
    json ref = {{"name", s.workflow_template_ref->name}};
    if (s.workflow_template_ref->cluster_scope) ref["clusterScope"] = true;
    j["workflowTemplateRef"] = ref;
  }
  if (s.retry_strategy) j["retryStrategy"] = ToJson(*s.retry_strategy);
  PutOptional(j, "suspend", s.suspend);
  PutOptional(j, "priority", s.priority);
  PutMap(j, "nodeSelector", s.node_selector);
  PutRecorded(j, s.recorded);
  return j;
}

json ToJson(const Workflow& wf) { return Document("Workflow", wf.metadata, ToJson(wf.spec)); }

json ToJson(const WorkflowTemplate& wft) {
  return Document("WorkflowTemplate", wft.metadata, ToJson(wft.spec));
}

json ToJson(const CronWorkflow& cron) {
  return Document("CronWorkflow", cron.metadata, ToJson(cron.spec));
}

}  // namespace headway::workflow
