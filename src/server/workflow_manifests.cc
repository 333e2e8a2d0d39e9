// The workflow controller's WorkflowTemplates and CronWorkflows: stored
// manifests, submitting from them, and the crons' schedule.
#include <algorithm>
#include <type_traits>
#include <variant>

#include "core/job_spec_parser.h"
#include "server/workflow_controller.h"
#include "server/workflow_shared.h"
#include "workflow/cron.h"
#include "workflow/manifest.h"
#include "workflow/substitute.h"

namespace headway {

using nlohmann::json;
namespace wf = workflow;

namespace {

// The stored body: the manifest (Argo's JSON) and, for a CronWorkflow, its
// status beside it.
json ManifestJson(const wf::Manifest& manifest) {
  return std::visit([](const auto& resource) { return wf::ToJson(resource); }, manifest.resource);
}

std::string KindOf(const wf::Manifest& manifest) {
  if (std::holds_alternative<wf::WorkflowTemplate>(manifest.resource)) return "WorkflowTemplate";
  if (std::holds_alternative<wf::CronWorkflow>(manifest.resource)) return "CronWorkflow";
  return "Workflow";
}

wf::ObjectMeta& MetadataOf(wf::Manifest& manifest) {
  return std::visit([](auto& resource) -> wf::ObjectMeta& { return resource.metadata; },
                    manifest.resource);
}

Result<wf::Manifest> ParseStored(const WorkflowManifestRecord& record) {
  json body = json::parse(record.body, nullptr, false);
  if (!body.is_object())
    return Internal("stored " + record.kind + " '" + record.name + "' is unreadable");
  body.erase("status");
  auto manifest = wf::ParseManifest(body.dump());
  if (!manifest.ok()) {
    return Internal("stored " + record.kind + " '" + record.name +
                    "' is unreadable: " + manifest.status().message());
  }
  return manifest;
}

const char* const kCronLabel = "workflows.argoproj.io/cron-workflow";

}  // namespace

api::ManifestView WorkflowController::ManifestViewOf(const WorkflowManifestRecord& record) const {
  api::ManifestView view;
  view.team = record.team;
  json body = json::parse(record.body, nullptr, false);
  if (!body.is_object()) body = json::object();
  json& meta = body["metadata"];
  if (!meta.is_object()) meta = json::object();
  meta["name"] = record.name;
  meta["resourceVersion"] = std::to_string(record.revision);
  meta["creationTimestamp"] = workflow_shared::ArgoTime(record.created_at);
  if (!meta.contains("namespace")) meta["namespace"] = "default";
  json& labels = meta["labels"];
  if (!labels.is_object()) labels = json::object();
  labels[std::string(wf::kTeamKey)] = record.team;
  // Older Hera models require all three of a CronWorkflow's status fields:
  // send a status only once it has them.
  if (body.contains("status") &&
      !(body["status"].is_object() && body["status"].contains("lastScheduledTime"))) {
    body.erase("status");
  }
  view.body = std::move(body);
  return view;
}

Result<api::ManifestView> WorkflowController::CreateManifest(std::string_view kind,
                                                             std::string_view text,
                                                             std::string_view namespace_,
                                                             const api::TeamAdmission& admit,
                                                             bool dry_run) {
  auto manifest = wf::ParseManifest(text);
  if (!manifest.ok()) return manifest.status();
  if (KindOf(*manifest) != kind) {
    return InvalidArgument("kind: expected a " + std::string(kind)).WithField("kind");
  }
  wf::ObjectMeta& meta = MetadataOf(*manifest);
  api::PoolRequest pool = workflow_shared::PoolRequestOf(*manifest);
  if (admit) HEADWAY_RETURN_IF_ERROR(admit(pool));
  HEADWAY_RETURN_IF_ERROR(workflow_shared::CheckPlannedNodes(workflow_shared::SpecOf(*manifest)));
  const std::string team = pool.team;
  if (meta.name.empty()) {
    if (meta.generate_name.empty()) {
      return InvalidArgument("metadata.name or metadata.generateName is required")
          .WithField("metadata.name");
    }
    meta.name = meta.generate_name.substr(0, 47) + workflow_shared::RandomNameSuffix();
    meta.generate_name.clear();
  }
  meta.annotations[std::string(wf::kTeamKey)] = team;
  if (!namespace_.empty()) meta.namespace_ = std::string(namespace_);
  if (auto* cron = std::get_if<wf::CronWorkflow>(&manifest->resource)) {
    for (const std::string& schedule : cron->spec.schedules) {
      auto parsed = wf::CronSchedule::Parse(schedule);
      if (!parsed.ok()) return InvalidArgument("spec.schedule: " + parsed.status().message());
    }
    auto zone = wf::LookupTimeZone(cron->spec.timezone);
    if (!zone.ok()) return InvalidArgument("spec.timezone: " + zone.status().message());
  }
  WorkflowManifestRecord record;
  record.kind = std::string(kind);
  record.name = meta.name;
  record.team = team;
  record.body = ManifestJson(*manifest).dump();
  record.created_at = record.updated_at = clock_.Now();
  if (dry_run) return ManifestViewOf(record);
  HEADWAY_RETURN_IF_ERROR(store_.CreateWorkflowManifest(record));
  Wake();
  return ManifestViewOf(record);
}

Result<api::ManifestView> WorkflowController::UpdateManifest(std::string_view kind,
                                                             std::string_view name,
                                                             std::string_view text,
                                                             const api::TeamAdmission& admit) {
  auto current = store_.GetWorkflowManifest(kind, name);
  if (!current.ok()) return current.status();
  auto manifest = wf::ParseManifest(text);
  if (!manifest.ok()) return manifest.status();
  if (KindOf(*manifest) != kind) {
    return InvalidArgument("kind: expected a " + std::string(kind)).WithField("kind");
  }
  // Bounded as when it was created, in the team it stays in.
  api::PoolRequest pool = workflow_shared::PoolRequestOf(*manifest);
  pool.team = current->team;
  if (admit) HEADWAY_RETURN_IF_ERROR(admit(pool));
  HEADWAY_RETURN_IF_ERROR(workflow_shared::CheckPlannedNodes(workflow_shared::SpecOf(*manifest)));
  wf::ObjectMeta& meta = MetadataOf(*manifest);
  if (!meta.name.empty() && meta.name != name) {
    return InvalidArgument("metadata.name: '" + meta.name + "' is not '" + std::string(name) + "'");
  }
  meta.name = std::string(name);
  // The team stays the one it was created in.
  meta.annotations[std::string(wf::kTeamKey)] = current->team;
  json text_json = json::parse(text, nullptr, false);
  if (text_json.is_object() && text_json.contains("metadata") &&
      text_json["metadata"].is_object() && text_json["metadata"].contains("resourceVersion")) {
    std::string given = text_json["metadata"].value("resourceVersion", "");
    if (given != std::to_string(current->revision)) {
      return Conflict("the " + std::string(kind) + " was changed since resourceVersion " + given +
                      " (now " + std::to_string(current->revision) + "): read it again");
    }
  }
  json body = ManifestJson(*manifest);
  json old_body = json::parse(current->body, nullptr, false);
  if (old_body.is_object() && old_body.contains("status")) body["status"] = old_body["status"];
  current->body = body.dump();
  current->updated_at = clock_.Now();
  HEADWAY_RETURN_IF_ERROR(store_.UpdateWorkflowManifest(*current));
  Wake();
  return ManifestViewOf(*current);
}

Result<api::ManifestView> WorkflowController::GetManifest(std::string_view kind,
                                                          std::string_view name) {
  auto record = store_.GetWorkflowManifest(kind, name);
  if (!record.ok()) return record.status();
  return ManifestViewOf(*record);
}

Result<std::vector<api::ManifestView>> WorkflowController::ListManifests(std::string_view kind,
                                                                         const std::string& team) {
  auto records = store_.ListWorkflowManifests(kind, team);
  if (!records.ok()) return records.status();
  std::vector<api::ManifestView> out;
  for (const WorkflowManifestRecord& r : *records) out.push_back(ManifestViewOf(r));
  return out;
}

Status WorkflowController::DeleteManifest(std::string_view kind, std::string_view name) {
  return store_.DeleteWorkflowManifest(kind, name);
}

Result<api::ManifestView> WorkflowController::SuspendCron(std::string_view name, bool suspend) {
  std::lock_guard lock(mu_);
  auto record = store_.GetWorkflowManifest(api::kCronWorkflowKind, name);
  if (!record.ok()) return record.status();
  json body = json::parse(record->body, nullptr, false);
  if (!body.is_object())
    return Internal("stored CronWorkflow '" + std::string(name) + "' is unreadable");
  body["spec"]["suspend"] = suspend;
  record->body = body.dump();
  record->updated_at = clock_.Now();
  HEADWAY_RETURN_IF_ERROR(store_.UpdateWorkflowManifest(*record));
  return ManifestViewOf(*record);
}

Status WorkflowController::MergeTemplateRef(wf::Workflow& workflow, const std::string& team) {
  const wf::WorkflowTemplateRef ref = *workflow.spec.workflow_template_ref;
  if (ref.cluster_scope) {
    return InvalidArgument(
               "spec.workflowTemplateRef.clusterScope: ClusterWorkflowTemplates are "
               "not supported; use a WorkflowTemplate")
        .WithField("spec.workflowTemplateRef");
  }
  auto record = store_.GetWorkflowManifest(api::kWorkflowTemplateKind, ref.name);
  if (!record.ok() || record->team != team) {
    return NotFound("spec.workflowTemplateRef: no WorkflowTemplate '" + ref.name + "' in team '" +
                    team + "'");
  }
  auto manifest = ParseStored(*record);
  if (!manifest.ok()) return manifest.status();
  wf::WorkflowSpec merged = std::get<wf::WorkflowTemplate>(manifest->resource).spec;
  const wf::WorkflowSpec& own = workflow.spec;
  if (!own.entrypoint.empty()) merged.entrypoint = own.entrypoint;
  for (const wf::Parameter& p : own.arguments.parameters) {
    auto it = std::find_if(merged.arguments.parameters.begin(), merged.arguments.parameters.end(),
                           [&](const wf::Parameter& q) { return q.name == p.name; });
    if (it == merged.arguments.parameters.end()) {
      merged.arguments.parameters.push_back(p);
    } else {
      *it = p;
    }
  }
  for (const wf::Template& t : own.templates) {
    auto it = std::find_if(merged.templates.begin(), merged.templates.end(),
                           [&](const wf::Template& u) { return u.name == t.name; });
    if (it == merged.templates.end()) {
      merged.templates.push_back(t);
    } else {
      *it = t;
    }
  }
  if (!own.on_exit.empty()) merged.on_exit = own.on_exit;
  if (own.exit_hook) merged.exit_hook = own.exit_hook;
  if (own.parallelism) merged.parallelism = own.parallelism;
  if (own.active_deadline_seconds) merged.active_deadline_seconds = own.active_deadline_seconds;
  if (own.suspend) merged.suspend = own.suspend;
  if (own.priority) merged.priority = own.priority;
  merged.workflow_template_ref.reset();
  HEADWAY_RETURN_IF_ERROR(wf::ValidateWorkflowSpec(merged, wf::SpecOwner::kWorkflow, "spec"));
  workflow.spec = std::move(merged);
  workflow.metadata.labels["workflows.argoproj.io/workflow-template"] = ref.name;
  return Status::Ok();
}

const wf::Template* WorkflowController::ResolveRef(const wf::TemplateRef& ref,
                                                   const std::string& team) {
  if (ref.cluster_scope) return nullptr;
  auto it = templates_.find(ref.name);
  if (it == templates_.end()) {
    auto record = store_.GetWorkflowManifest(api::kWorkflowTemplateKind, ref.name);
    if (!record.ok() || record->team != team) return nullptr;
    auto manifest = ParseStored(*record);
    if (!manifest.ok()) return nullptr;
    it = templates_.emplace(ref.name, std::get<wf::WorkflowTemplate>(manifest->resource)).first;
  }
  if (it->second.metadata.annotations[std::string(wf::kTeamKey)] != team) return nullptr;
  return it->second.spec.FindTemplate(ref.template_name);
}

Result<api::WorkflowView> WorkflowController::SubmitFrom(std::string_view kind,
                                                         std::string_view name,
                                                         const api::SubmitOptions& options,
                                                         const std::string& created_by) {
  auto record = store_.GetWorkflowManifest(kind, name);
  if (!record.ok()) return record.status();
  auto manifest = ParseStored(*record);
  if (!manifest.ok()) return manifest.status();
  wf::Workflow workflow;
  if (kind == api::kWorkflowTemplateKind) {
    workflow.spec.workflow_template_ref = wf::WorkflowTemplateRef{std::string(name), false};
  } else {
    const auto& cron = std::get<wf::CronWorkflow>(manifest->resource);
    workflow.spec = cron.spec.workflow_spec;
    if (cron.spec.workflow_metadata) {
      workflow.metadata.labels = cron.spec.workflow_metadata->labels;
      workflow.metadata.annotations = cron.spec.workflow_metadata->annotations;
    }
    workflow.metadata.labels[kCronLabel] = std::string(name);
  }
  for (const std::string& assignment : options.parameters) {
    auto eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("submitOptions.parameters: '" + assignment + "' is not NAME=VALUE");
    }
    wf::Parameter p;
    p.name = assignment.substr(0, eq);
    p.value = assignment.substr(eq + 1);
    auto& params = workflow.spec.arguments.parameters;
    auto it = std::find_if(params.begin(), params.end(),
                           [&](const wf::Parameter& q) { return q.name == p.name; });
    if (it == params.end()) {
      params.push_back(p);
    } else {
      it->value = p.value;
    }
  }
  std::size_t start = 0;
  while (start < options.labels.size()) {
    std::size_t end = options.labels.find(',', start);
    if (end == std::string::npos) end = options.labels.size();
    std::string term = options.labels.substr(start, end - start);
    start = end + 1;
    if (term.empty()) continue;
    auto eq = term.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument("submitOptions.labels: '" + term + "' is not key=value");
    }
    // The template, admitted for its team when it was created, decides
    // where its jobs run and at what priority; a submitter does not.
    const std::string key = term.substr(0, eq);
    if (key == wf::kPriorityKey || key == wf::kTeamKey || key == wf::kQueueKey) {
      return InvalidArgument("submitOptions.labels: '" + key +
                             "' is the template's to set, not the submitter's");
    }
    workflow.metadata.labels[key] = term.substr(eq + 1);
  }
  workflow.metadata.name = options.name;
  workflow.metadata.generate_name =
      options.generate_name.empty() ? std::string(name) + "-" : options.generate_name;
  json body = json::parse(record->body, nullptr, false);
  std::string ns = body.is_object() && body.contains("metadata")
                       ? body["metadata"].value("namespace", "default")
                       : "default";
  std::lock_guard lock(mu_);
  return CreateLocked(std::move(workflow), record->team, created_by, ns, false);
}

void WorkflowController::RunCrons() {
  auto crons = store_.ListWorkflowManifests(api::kCronWorkflowKind, "");
  if (!crons.ok()) return;
  const Time now = clock_.Now();
  if (!crons_since_) crons_since_ = now;
  for (WorkflowManifestRecord& record : *crons) {
    auto manifest = ParseStored(record);
    if (!manifest.ok()) continue;
    const auto& cron = std::get<wf::CronWorkflow>(manifest->resource);
    std::vector<wf::CronSchedule> schedules;
    for (const std::string& text : cron.spec.schedules) {
      auto parsed = wf::CronSchedule::Parse(text);
      if (parsed.ok()) schedules.push_back(*parsed);
    }
    auto zone = wf::LookupTimeZone(cron.spec.timezone);
    if (!zone.ok()) continue;
    json body = json::parse(record.body, nullptr, false);
    json status = body.is_object() && body.contains("status") && body["status"].is_object()
                      ? body["status"]
                      : json::object();
    std::optional<Time> last;
    if (status.contains("lastScheduledTime"))
      last = ParseRfc3339(status.value("lastScheduledTime", ""));
    // Its workflows, newest first: the running ones count for the policy.
    WorkflowFilter mine;
    mine.labels[kCronLabel] = record.name;
    auto runs = store_.ListWorkflows(mine);
    if (!runs.ok()) continue;
    std::vector<std::string> active;
    for (const WorkflowRecord& r : *runs) {
      if (!r.finished_at) active.push_back(r.name);
    }
    wf::CronDecision decision =
        wf::DecideCron(schedules, *zone, cron.spec.suspend, cron.spec.concurrency_policy,
                       cron.spec.starting_deadline_seconds, record.created_at, last, now,
                       static_cast<int>(active.size()), *crons_since_);
    if (decision.run) {
      if (decision.stop_active) {
        for (const std::string& name : active) {
          auto live = Load(name);
          if (!live.ok()) continue;
          std::string error;
          if (wf::RequestShutdown((*live)->state, wf::Shutdown::kTerminate, &error)) {
            (void)Save(**live);
            Advance(**live);
          }
        }
      }
      wf::Workflow workflow;
      workflow.spec = cron.spec.workflow_spec;
      if (cron.spec.workflow_metadata) {
        workflow.metadata.labels = cron.spec.workflow_metadata->labels;
        workflow.metadata.annotations = cron.spec.workflow_metadata->annotations;
      }
      workflow.metadata.labels[kCronLabel] = record.name;
      workflow.metadata.annotations[std::string(wf::kScheduledTimeAnnotation)] =
          workflow_shared::ArgoTime(*decision.run);
      // Named for its fire time, so a pass repeated after a crash finds it made.
      workflow.metadata.name =
          record.name + "-" + std::to_string(ToUnixMillis(*decision.run) / 1000);
      auto created = CreateLocked(std::move(workflow), record.team, "cron/" + record.name,
                                  cron.metadata.namespace_, false);
      if (created.ok()) {
        active.push_back(created->body["metadata"].value("name", ""));
      } else if (created.status().code() != StatusCode::kConflict) {
        status["lastError"] = created.status().message();
      }
    }
    if (decision.scheduled && decision.scheduled != last) {
      status["lastScheduledTime"] = workflow_shared::ArgoTime(*decision.scheduled);
      if (!decision.skipped.empty()) status["lastSkipped"] = decision.skipped;
    }
    std::vector<wf::CronRun> counted;
    for (const WorkflowRecord& r : *runs) {
      counted.push_back({r.name, r.finished_at.has_value(), r.phase == "Succeeded"});
    }
    for (const std::string& name : active) {
      if (std::none_of(counted.begin(), counted.end(),
                       [&](const wf::CronRun& c) { return c.name == name; })) {
        counted.push_back({name, false, false});
      }
    }
    status = wf::CronStatus(status, counted);
    // History: the newest successful and failed runs are kept, the rest deleted.
    int succeeded = 0, failed = 0;
    const int keep_succeeded = cron.spec.successful_jobs_history_limit.value_or(3);
    const int keep_failed = cron.spec.failed_jobs_history_limit.value_or(1);
    for (const WorkflowRecord& r : *runs) {
      if (!r.finished_at) continue;
      const bool ok = r.phase == "Succeeded";
      int& count = ok ? succeeded : failed;
      if (++count > (ok ? keep_succeeded : keep_failed)) {
        live_.erase(r.name);
        (void)store_.DeleteWorkflow(r.name);
      }
    }
    if (!body.is_object()) continue;
    if (body.value("status", json()) != status) {
      body["status"] = status;
      record.body = body.dump();
      record.updated_at = now;
      (void)store_.UpdateWorkflowManifest(record);  // a concurrent update wins; next pass redoes
    }
  }
}

}  // namespace headway
