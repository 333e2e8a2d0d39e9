// The parse of workflow manifests: YAML documents, their metadata and the
// specs of Workflows, WorkflowTemplates and CronWorkflows. Templates are
// parsed in manifest_templates.cc, from the field readers of
// manifest_fields.cc; manifest_validation.cc checks the result.
#include "workflow/manifest.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/yaml_fields.h"
#include "workflow/manifest_internal.h"

namespace headway::workflow {
namespace {

// Documents in one stream (ParseManifests).
constexpr std::size_t kMaxDocuments = 1000;

using internal::AsText;
using internal::BadHeadwayKey;
using internal::Bool;
using internal::Context;
using internal::FieldRules;
using internal::Handler;
using internal::Hooks;
using internal::Index;
using internal::Integer;
using internal::Io;
using internal::NonEmptyText;
using internal::OptionalBool;
using internal::Optionally;
using internal::ParseList;
using internal::ParseRetryStrategy;
using internal::ParseTemplate;
using internal::Text;
using internal::TextList;
using internal::TextMap;
using internal::WalkFields;
using yaml_fields::FieldError;
using yaml_fields::LineOf;
using yaml_fields::TypeName;

constexpr std::size_t kMaxWorkflowName = 63;
constexpr std::size_t kMaxCronWorkflowName = 52;  // Argo appends "-<unix time>"
constexpr std::size_t kGenerateNameSuffix = 5;
constexpr std::size_t kMaxFieldNameLength = 128;

// ---- specs -----------------------------------------------------------------------

Status ParseWorkflowSpec(Context& ctx, const std::string& path, const YAML::Node& node,
                         WorkflowSpec& s) {
  FieldRules rules;
  rules.parse = {
      {"entrypoint", Text(s.entrypoint)},
      {"arguments", Io(ctx, s.arguments)},
      {"templates",
       [&](const std::string& p, const YAML::Node& n) {
         return ParseList(ctx, p, n, s.templates,
                          [&](const std::string& ip, const YAML::Node& in, Template& t) {
                            return ParseTemplate(ctx, ip, in, t);
                          });
       }},
      {"onExit", Text(s.on_exit)},
      {"hooks", Hooks(ctx, s.exit_hook, s.recorded)},
      {"parallelism", Integer(s.parallelism, 0, 1'000'000)},
      {"activeDeadlineSeconds", Integer(s.active_deadline_seconds, 0, std::int64_t{1} << 40)},
      {"ttlStrategy",
       [&](const std::string& p, const YAML::Node& n) -> Status {
         TtlStrategy ttl;
         FieldRules r;
         r.parse = {{"secondsAfterCompletion", Integer(ttl.seconds_after_completion, 0, INT32_MAX)},
                    {"secondsAfterSuccess", Integer(ttl.seconds_after_success, 0, INT32_MAX)},
                    {"secondsAfterFailure", Integer(ttl.seconds_after_failure, 0, INT32_MAX)}};
         HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, p, n, r));
         s.ttl_strategy = ttl;
         return Status::Ok();
       }},
      {"serviceAccountName",
       [&](const std::string& p, const YAML::Node& n) -> Status {
         HEADWAY_RETURN_IF_ERROR(Text(s.service_account_name)(p, n));
         ctx.warnings.push_back({p, LineOf(n), "ignored: jobs run as the submitting user"});
         return Status::Ok();
       }},
      {"workflowTemplateRef",
       [&](const std::string& p, const YAML::Node& n) -> Status {
         WorkflowTemplateRef ref;
         FieldRules r;
         r.parse = {{"name", Text(ref.name)}, {"clusterScope", Bool(ref.cluster_scope)}};
         HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, p, n, r));
         if (ref.name.empty()) return FieldError(p, n, "needs the name of a WorkflowTemplate");
         s.workflow_template_ref = std::move(ref);
         return Status::Ok();
       }},
      {"retryStrategy", Optionally(ctx, s.retry_strategy, &ParseRetryStrategy)},
      {"suspend", OptionalBool(s.suspend)},
      {"priority", Integer(s.priority, INT32_MIN, INT32_MAX)},
      {"nodeSelector", [&](const std::string& p, const YAML::Node& n) -> Status {
         HEADWAY_RETURN_IF_ERROR(TextMap(ctx, s.node_selector)(p, n));
         ctx.warnings.push_back(
             {p, LineOf(n), "ignored: Headway places jobs by GPUs, queue and team"});
         return Status::Ok();
       }}};
  const char* kPod = "a Kubernetes pod setting Headway's executors do not apply";
  for (const char* name :
       {"affinity", "tolerations", "automountServiceAccountToken", "executor", "hostNetwork",
        "dnsPolicy", "dnsConfig", "schedulerName", "podPriorityClassName", "podPriority",
        "hostAliases", "securityContext", "podSpecPatch", "podDisruptionBudget", "podMetadata",
        "imagePullSecrets"}) {
    rules.ignored[name] = kPod;
  }
  rules.ignored["volumes"] = "volumes do not exist in Headway; use artifacts";
  rules.ignored["volumeClaimTemplates"] = "volumes do not exist in Headway; use artifacts";
  rules.ignored["volumeClaimGC"] = "volumes do not exist in Headway";
  rules.ignored["podGC"] = "Headway keeps each job until its retention ends";
  rules.ignored["metrics"] = "Headway exports its own metrics";
  rules.ignored["synchronization"] = "mutexes and semaphores are not enforced yet";
  rules.ignored["archiveLogs"] = "logs are kept by Headway for every job";
  rules.ignored["artifactRepositoryRef"] = "artifacts go to the server's artifact store";
  rules.ignored["artifactGC"] = "artifacts follow the artifact store's retention";
  rules.ignored["workflowMetadata"] = "labels come from metadata";
  rules.ignored["shutdown"] = "stop a workflow with the API";
  rules.refused = {{"templateDefaults", "write the fields on each template"}};
  return WalkFields(ctx, path, node, rules, &s.recorded);
}

bool IsCronSchedule(const std::string& text) {
  std::string s = text;
  if (s.rfind("CRON_TZ=", 0) == 0 || s.rfind("TZ=", 0) == 0) {
    auto space = s.find(' ');
    if (space == std::string::npos) return false;
    s = s.substr(space + 1);
  }
  if (!s.empty() && s.front() == '@') return s.size() > 1;
  std::size_t fields = 0;
  bool in_field = false;
  for (char c : s) {
    bool blank = c == ' ' || c == '\t';
    if (!blank && !in_field) ++fields;
    in_field = !blank;
  }
  return fields == 5;
}

Status ParseCronSpec(Context& ctx, const std::string& path, const YAML::Node& node,
                     CronWorkflowSpec& s) {
  bool has_schedule = false;
  bool has_spec = false;
  FieldRules rules;
  rules.parse = {
      {"schedule",
       [&](const std::string& p, const YAML::Node& n) -> Status {
         std::string schedule;
         HEADWAY_RETURN_IF_ERROR(Text(schedule)(p, n));
         s.schedules.insert(s.schedules.begin(), schedule);
         s.single_schedule = true;
         has_schedule = true;
         return Status::Ok();
       }},
      {"schedules",
       [&](const std::string& p, const YAML::Node& n) -> Status {
         std::vector<std::string> list;
         HEADWAY_RETURN_IF_ERROR(TextList(ctx, list)(p, n));
         for (std::size_t i = 0; i < list.size(); ++i) {
           if (!IsCronSchedule(list[i])) {
             return FieldError(
                 Index(p, i), n[i],
                 "must be a cron schedule like '0 * * * *' or '@hourly', got '" + list[i] + "'");
           }
         }
         s.schedules.insert(s.schedules.end(), list.begin(), list.end());
         has_schedule = has_schedule || !list.empty();
         return Status::Ok();
       }},
      {"timezone", Text(s.timezone)},
      {"concurrencyPolicy",
       [&](const std::string& p, const YAML::Node& n) -> Status {
         auto text = AsText(p, n);
         if (!text.ok()) return text.status();
         if (*text == "Allow")
           s.concurrency_policy = ConcurrencyPolicy::kAllow;
         else if (*text == "Forbid")
           s.concurrency_policy = ConcurrencyPolicy::kForbid;
         else if (*text == "Replace")
           s.concurrency_policy = ConcurrencyPolicy::kReplace;
         else
           return FieldError(p, n, "must be Allow, Forbid or Replace, got '" + *text + "'");
         return Status::Ok();
       }},
      {"startingDeadlineSeconds", Integer(s.starting_deadline_seconds, 0, std::int64_t{1} << 40)},
      {"successfulJobsHistoryLimit", Integer(s.successful_jobs_history_limit, 0, INT32_MAX)},
      {"failedJobsHistoryLimit", Integer(s.failed_jobs_history_limit, 0, INT32_MAX)},
      {"suspend", Bool(s.suspend)},
      {"when", NonEmptyText(s.when)},
      {"workflowSpec",
       [&](const std::string& p, const YAML::Node& n) {
         has_spec = true;
         return ParseWorkflowSpec(ctx, p, n, s.workflow_spec);
       }},
      {"workflowMetadata", [&](const std::string& p, const YAML::Node& n) -> Status {
         TemplateMetadata m;
         FieldRules r;
         r.parse = {{"labels", TextMap(ctx, m.labels)},
                    {"annotations", TextMap(ctx, m.annotations)}};
         HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, p, n, r));  // other ObjectMeta fields: lenient
         s.workflow_metadata = std::move(m);
         return Status::Ok();
       }}};
  rules.ignored = {{"stopStrategy", "a CronWorkflow stops when suspended"}};
  HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, path, node, rules, &s.recorded));
  if (!has_schedule) return FieldError(path, node, "needs schedule or schedules");
  if (s.single_schedule && s.schedules.size() > 1) {
    return FieldError(path, node, "has both schedule and schedules: give schedules");
  }
  if (s.single_schedule && !IsCronSchedule(s.schedules.front())) {
    return FieldError(
        path + ".schedule", node["schedule"],
        "must be a cron schedule like '0 * * * *' or '@hourly', got '" + s.schedules.front() + "'");
  }
  if (!has_spec) return FieldError(path, node, "needs workflowSpec");
  return Status::Ok();
}

// metadata is lenient: unknown fields are ignored, as an API server keeps them.
Status ParseObjectMeta(Context& ctx, const std::string& path, const YAML::Node& node,
                       ObjectMeta& m) {
  HEADWAY_RETURN_IF_ERROR(ctx.Visit(path, node));
  if (!node.IsMap()) return FieldError(path, node, "must be a map, got " + TypeName(node));
  std::map<std::string, Handler> handlers = {{"name", Text(m.name)},
                                             {"generateName", Text(m.generate_name)},
                                             {"namespace", Text(m.namespace_)},
                                             {"labels", TextMap(ctx, m.labels)},
                                             {"annotations", TextMap(ctx, m.annotations)}};
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) continue;
    auto it = handlers.find(kv.first.Scalar());
    if (it == handlers.end()) continue;
    std::string field = path + "." + kv.first.Scalar();
    ctx.Mark(field, kv.first);
    HEADWAY_RETURN_IF_ERROR(it->second(field, kv.second));
  }
  return Status::Ok();
}

// ---- names -----------------------------------------------------------------------

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

Status CheckObjectName(const std::string& kind, const ObjectMeta& m, const YAML::Node& metadata,
                       bool name_required) {
  std::size_t max = kind == "CronWorkflow" ? kMaxCronWorkflowName : kMaxWorkflowName;
  if (!m.name.empty() && !IsValidObjectName(m.name, max)) {
    return FieldError("metadata.name", metadata["name"],
                      "must be at most " + std::to_string(max) +
                          " lowercase letters, digits, '-' or '.', starting and ending with a "
                          "letter or digit, got '" +
                          m.name + "'");
  }
  if (!m.generate_name.empty() &&
      !IsValidObjectName(m.generate_name + "x", max - kGenerateNameSuffix + 1)) {
    return FieldError("metadata.generateName", metadata["generateName"],
                      "must be a name prefix of at most " +
                          std::to_string(max - kGenerateNameSuffix) +
                          " lowercase letters, digits, '-' or '.', got '" + m.generate_name + "'");
  }
  if (m.name.empty() && (name_required || m.generate_name.empty())) {
    return FieldError("metadata", metadata,
                      name_required ? "needs a name" : "needs a name or a generateName");
  }
  return Status::Ok();
}

// ---- documents -----------------------------------------------------------------------

// Whether a line starts with "---" or "...": only then can the text hold
// more than one YAML document.
bool HasDocumentMarker(std::string_view text) {
  for (std::size_t at = 0; at < text.size();) {
    std::string_view line = text.substr(at, text.find('\n', at) - at);
    if (line.rfind("---", 0) == 0 || line.rfind("...", 0) == 0) return true;
    std::size_t newline = text.find('\n', at);
    if (newline == std::string_view::npos) break;
    at = newline + 1;
  }
  return false;
}

Result<std::vector<YAML::Node>> LoadDocuments(std::string_view text) {
  if (text.size() > kMaxManifestBytes) {
    return Status(StatusCode::kPayloadTooLarge,
                  "the manifest is " + std::to_string(text.size()) + " bytes; at most " +
                      std::to_string(kMaxManifestBytes) + " are accepted");
  }
  auto first = yaml_fields::Load(text);  // UTF-8 and syntax errors, with their line
  if (!first.ok()) return first.status();
  if (!HasDocumentMarker(text)) {
    if (first->IsNull()) return InvalidArgument("the manifest is empty");
    return std::vector<YAML::Node>{*first};
  }
  auto all = yaml_fields::LoadAll(text, kMaxDocuments);
  if (!all.ok()) return all.status();
  std::vector<YAML::Node> documents;
  for (auto& doc : *all) {
    if (!doc.IsNull()) documents.push_back(std::move(doc));
  }
  if (documents.empty()) return InvalidArgument("the manifest is empty");
  return documents;
}

Result<Manifest> ParseDocument(const YAML::Node& root) {
  Context ctx;
  if (!root.IsMap()) return FieldError("", root, "a manifest must be a map, got " + TypeName(root));
  std::string api_version, kind;
  ObjectMeta meta;
  YAML::Node metadata, spec;  // a default YAML::Node is a defined null: keep track
  bool has_metadata = false, has_spec = false;
  FieldRules rules;
  rules.parse = {{"apiVersion", Text(api_version)},
                 {"kind", Text(kind)},
                 {"metadata",
                  [&](const std::string&, const YAML::Node& n) {
                    metadata = n;
                    has_metadata = true;
                    return Status::Ok();
                  }},
                 {"spec",
                  [&](const std::string&, const YAML::Node& n) {
                    spec = n;
                    has_spec = true;
                    return Status::Ok();
                  }},
                 {"status", [](const std::string&, const YAML::Node&) { return Status::Ok(); }}};
  HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, "", root, rules));
  if (api_version != kApiVersion) {
    return FieldError("apiVersion", root["apiVersion"] ? root["apiVersion"] : root,
                      "must be " + std::string(kApiVersion) + ", got '" + api_version + "'");
  }
  if (kind != "Workflow" && kind != "WorkflowTemplate" && kind != "CronWorkflow") {
    return FieldError("kind", root["kind"] ? root["kind"] : root,
                      "must be Workflow, WorkflowTemplate or CronWorkflow, got '" + kind + "'");
  }
  if (!has_metadata) return FieldError("metadata", root, "is required");
  if (!has_spec) return FieldError("spec", root, "is required");
  HEADWAY_RETURN_IF_ERROR(ParseObjectMeta(ctx, "metadata", metadata, meta));
  HEADWAY_RETURN_IF_ERROR(
      CheckObjectName(kind, meta, metadata, /*name_required=*/kind != "Workflow"));
  if (auto bad = BadHeadwayKey(meta.labels, meta.annotations)) {
    std::string field = "metadata." + bad->first;
    Status s = InvalidArgument(bad->second);
    return s.WithField(
        field, ctx.lines.count(field) ? std::optional<int>(ctx.lines[field]) : std::nullopt);
  }

  Manifest out;
  if (kind == "CronWorkflow") {
    CronWorkflow cron{std::move(meta), {}};
    HEADWAY_RETURN_IF_ERROR(ParseCronSpec(ctx, "spec", spec, cron.spec));
    HEADWAY_RETURN_IF_ERROR(ValidateWorkflowSpec(cron.spec.workflow_spec, SpecOwner::kWorkflow,
                                                 "spec.workflowSpec", &ctx.lines));
    out.resource = std::move(cron);
  } else {
    WorkflowSpec parsed;
    HEADWAY_RETURN_IF_ERROR(ParseWorkflowSpec(ctx, "spec", spec, parsed));
    SpecOwner owner = kind == "Workflow" ? SpecOwner::kWorkflow : SpecOwner::kWorkflowTemplate;
    HEADWAY_RETURN_IF_ERROR(ValidateWorkflowSpec(parsed, owner, "spec", &ctx.lines));
    if (owner == SpecOwner::kWorkflow) {
      out.resource = Workflow{std::move(meta), std::move(parsed)};
    } else {
      out.resource = WorkflowTemplate{std::move(meta), std::move(parsed)};
    }
  }
  out.warnings = std::move(ctx.warnings);
  out.lines = std::move(ctx.lines);
  return out;
}

Result<Manifest> ParseDocumentSafely(const YAML::Node& root) {
  return yaml_fields::CatchYamlErrors<Manifest>([&] { return ParseDocument(root); });
}

}  // namespace

bool IsValidObjectName(std::string_view name, std::size_t max_length) {
  if (name.empty() || name.size() > max_length) return false;
  if (!IsLowerAlnum(name.front()) || !IsLowerAlnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsLowerAlnum(c) || c == '-' || c == '.'; });
}

bool IsValidTemplateName(std::string_view name) {
  if (name.empty() || name.size() > kMaxFieldNameLength || !IsAlnum(name.front())) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return IsAlnum(c) || c == '-'; });
}

bool IsValidParameterName(std::string_view name) {
  if (name.empty() || name.size() > kMaxFieldNameLength) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsAlnum(c) || c == '_' || c == '-'; });
}

Result<Manifest> ParseManifest(std::string_view text) {
  auto documents = LoadDocuments(text);
  if (!documents.ok()) return documents.status();
  if (documents->size() > 1) {
    return InvalidArgument("the manifest holds " + std::to_string(documents->size()) +
                           " documents; submit them one at a time");
  }
  return ParseDocumentSafely(documents->front());
}

Result<std::vector<Manifest>> ParseManifests(std::string_view text) {
  auto documents = LoadDocuments(text);
  if (!documents.ok()) return documents.status();
  std::vector<Manifest> out;
  for (std::size_t i = 0; i < documents->size(); ++i) {
    auto manifest = ParseDocumentSafely((*documents)[i]);
    if (!manifest.ok()) {
      Status s = manifest.status();
      std::string field = Index("documents", i) + (s.field().empty() ? "" : "." + s.field());
      return s.WithField(field, s.line());
    }
    out.push_back(std::move(*manifest));
  }
  return out;
}

}  // namespace headway::workflow
