// What the REST API needs for Argo-compatible workflows. The server's
// workflow controller implements it; the Argo routes (api/argo_routes.h)
// and the native CLI call it.
//
// Workflows are answered in Argo's JSON shape (a Workflow object with
// metadata, spec and status), so Hera and argo-style clients read them
// unchanged; `team` rides beside it for the caller's access checks.
//
// Thread safety: implementations must allow concurrent calls.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/request_context.h"
#include "core/status.h"
#include "core/workflow_record.h"

namespace headway::api {

struct WorkflowView {
  std::string team;
  std::string created_by;  // Job::created_by style: "user/NAME", "cron/NAME", ...
  std::int64_t seq = 0;    // the store's order: pages of a list continue below it
  nlohmann::json body;     // Argo's Workflow
  // What the manifest's parser reported (known fields that are not acted
  // on, hooks that do not run, ...): "FIELD (line N): MESSAGE". Sent as
  // HTTP Warning headers, as a Kubernetes API server does.
  std::vector<std::string> warnings;
};

// Decides the team a new workflow runs under and whether the caller may:
// it may fill in the caller's team for a workflow that names none, and
// refuses (PermissionDenied) a team the caller may not change, or (InvalidArgument) a
// priority above the team's bound for members.
using TeamAdmission = std::function<Status(PoolRequest& request)>;

// A WorkflowTemplate or CronWorkflow, in Argo's JSON shape.
struct ManifestView {
  std::string team;
  nlohmann::json body;
};

inline constexpr std::string_view kWorkflowTemplateKind = "WorkflowTemplate";
inline constexpr std::string_view kCronWorkflowKind = "CronWorkflow";

// Argo's submitOptions: "NAME=VALUE" parameters and "k=v,k2=v2" labels.
struct SubmitOptions {
  std::vector<std::string> parameters;
  std::string labels;
  std::string name;
  std::string generate_name;
};

struct WorkflowRetry {
  bool restart_successful = false;
  std::string node_field_selector;      // "displayName=x" / "name=x" / "id=x"; empty: all failed
  std::vector<std::string> parameters;  // "NAME=VALUE": override the workflow's arguments
};

struct WorkflowResubmit {
  bool memoized = false;
  std::vector<std::string> parameters;  // "NAME=VALUE": override the workflow's arguments
};

class WorkflowService {
 public:
  virtual ~WorkflowService() = default;
  // A Workflow manifest (YAML or JSON text, or Argo's {"workflow": ...}
  // request body's object), validated (InvalidArgument naming the field and
  // line), named (generateName), and queued. With `dry_run`, validated and
  // answered without being stored. Conflict for a taken name.
  virtual Result<WorkflowView> CreateWorkflow(std::string_view manifest,
                                              std::string_view namespace_,
                                              const TeamAdmission& admit,
                                              const std::string& created_by, bool dry_run) = 0;
  virtual Result<WorkflowView> GetWorkflow(std::string_view name) = 0;
  // Without nodes (Argo's list omits nothing, but a list of 10,000-node
  // workflows would be huge; `argo list` reads no nodes either).
  virtual Result<std::vector<WorkflowView>> ListWorkflows(const WorkflowFilter& filter) = 0;
  // Stops its running steps and removes it; its jobs stay, with their logs.
  virtual Status DeleteWorkflow(std::string_view name) = 0;
  virtual Result<WorkflowView> SuspendWorkflow(std::string_view name) = 0;
  virtual Result<WorkflowView> ResumeWorkflow(std::string_view name) = 0;
  // Stop runs exit handlers; terminate does not.
  virtual Result<WorkflowView> StopWorkflow(std::string_view name, bool terminate) = 0;
  // `argo retry`: the failed nodes run again, with what depends on them
  // (and the given parameters, as `argo retry -p`).
  virtual Result<WorkflowView> RetryWorkflow(std::string_view name, const WorkflowRetry& retry) = 0;
  // `argo resubmit`: a new workflow (named NAME-xxxxx) with the same spec
  // (its arguments overridden by the given parameters) and team. With
  // `memoized`, the steps that succeeded keep their results and only the
  // others run.
  virtual Result<WorkflowView> ResubmitWorkflow(std::string_view name, const WorkflowResubmit& how,
                                                const std::string& created_by) = 0;

  // WorkflowTemplates and CronWorkflows (`kind`), validated like workflows.
  // Create with `dry_run` only lints. Update needs the stored
  // metadata.resourceVersion when the manifest gives one (Conflict if stale).
  virtual Result<ManifestView> CreateManifest(std::string_view kind, std::string_view manifest,
                                              std::string_view namespace_,
                                              const TeamAdmission& admit, bool dry_run) = 0;
  virtual Result<ManifestView> UpdateManifest(std::string_view kind, std::string_view name,
                                              std::string_view manifest,
                                              const TeamAdmission& admit) = 0;
  virtual Result<ManifestView> GetManifest(std::string_view kind, std::string_view name) = 0;
  // `team` empty: every team's.
  virtual Result<std::vector<ManifestView>> ListManifests(std::string_view kind,
                                                          const std::string& team) = 0;
  virtual Status DeleteManifest(std::string_view kind, std::string_view name) = 0;
  virtual Result<ManifestView> SuspendCron(std::string_view name, bool suspend) = 0;
  // A workflow from a WorkflowTemplate or a CronWorkflow's workflowSpec.
  virtual Result<WorkflowView> SubmitFrom(std::string_view kind, std::string_view name,
                                          const SubmitOptions& options,
                                          const std::string& created_by) = 0;
};

}  // namespace headway::api
