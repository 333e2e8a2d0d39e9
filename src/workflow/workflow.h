// The Argo Workflows model (argoproj.io/v1alpha1): Workflow, WorkflowTemplate
// and CronWorkflow as Headway reads them, so manifests written for Argo (by
// hand or by Hera) run unchanged, every workflow node becoming a Headway job.
// Field names in comments are Argo's; the JSON form (ToJson) uses them too.
//
// Pure data: no I/O. manifest.h parses and validates; ToJson writes Argo's
// JSON shape back (empty fields omitted), which the REST API returns.
//
// Values Argo keeps as strings stay strings here: parameter values written
// as numbers or booleans in YAML (`value: 3` is "3"), durations, quantities.
// Fields Argo types as int-or-string (retryStrategy.limit, backoff.factor,
// a template's activeDeadlineSeconds, withSequence.count/start/end) keep
// the text and whether it was written as a number, so it is written back
// the same way.
//
// Known Argo fields that Headway does not act on (volumes, podGC,
// nodeSelector, tolerations, imagePullSecrets, securityContext, ...) are
// kept verbatim in `recorded` (as JSON) and written back by ToJson; the
// parser reports each as a warning. Fields whose meaning Headway cannot
// honour (resource, http, plugin, containerSet and data templates, daemon,
// sidecars, env from secrets, ...) are refused with an error naming them.
//
// How a node becomes a job (the controller applies it):
//   container/script .image, .command, .args, .env, .workingDir
//                                   -> the job's command line, env, working dir
//   resources.limits["nvidia.com/gpu"] (else requests) -> GPUs of the job
//   resources.limits.cpu / .memory (else requests)     -> cpus / memory limit
//   metadata annotation (or label) headway.dev/gpus    -> GPUs when the
//                                      container does not say nvidia.com/gpu
//   headway.dev/team, headway.dev/queue, headway.dev/priority on the
//   workflow's metadata (annotations win over labels; a template's own
//   metadata wins over the workflow's) -> the job's team, queue, priority
//   activeDeadlineSeconds / timeout -> the job's time limit
//   retryStrategy                   -> new jobs for failed attempts
// NodeResourcesOf and HeadwayValue below compute these.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"

namespace headway::workflow {

inline constexpr std::string_view kApiVersion = "argoproj.io/v1alpha1";

// Headway's own keys in metadata.annotations / metadata.labels.
inline constexpr std::string_view kTeamKey = "headway.dev/team";
inline constexpr std::string_view kQueueKey = "headway.dev/queue";
inline constexpr std::string_view kPriorityKey = "headway.dev/priority";
inline constexpr std::string_view kGpusKey = "headway.dev/gpus";

// The annotation a CronWorkflow puts on each workflow it starts: the fire
// time it runs for (RFC 3339), which the workflow reads as
// {{workflow.scheduledTime}}.
inline constexpr std::string_view kScheduledTimeAnnotation = "workflows.argoproj.io/scheduled-time";

// Known fields kept verbatim, by Argo name (see the file comment).
using RecordedFields = std::map<std::string, nlohmann::json>;

// Kubernetes' intstr.IntOrString: `text` as written; `is_int` when it was
// a YAML/JSON number, so ToJson writes a number again.
struct IntOrString {
  std::string text;
  bool is_int = false;
  bool operator==(const IntOrString&) const = default;
};

// metadata (ObjectMeta): what Headway keeps. Other metadata is ignored.
struct ObjectMeta {
  std::string name;
  std::string generate_name;  // generateName
  std::string namespace_;     // namespace: recorded, Headway has none
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  bool operator==(const ObjectMeta&) const = default;
};

// A template's metadata: labels and annotations for its pods (jobs).
struct TemplateMetadata {
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  bool operator==(const TemplateMetadata&) const = default;
};

struct ConfigMapKeyRef {
  std::string name;
  std::string key;
  std::optional<bool> optional;
  bool operator==(const ConfigMapKeyRef&) const = default;
};

// valueFrom (ValueFrom): where an output (or input) parameter's value comes from.
struct ValueFrom {
  std::string path;        // a file in the container, read after it exits
  std::string json_path;   // jsonPath (resource templates)
  std::string jq_filter;   // jqFilter (resource templates)
  std::string event;       // an expression over a suspend's event
  std::string parameter;   // another parameter, e.g. "{{tasks.a.outputs.parameters.x}}"
  std::string expression;  // an expr-lang expression: recorded for the evaluator
  std::optional<std::string> default_value;  // default: used when the source fails
  bool supplied = false;                     // supplied: {}: a person resumes the suspend with it
  std::optional<ConfigMapKeyRef> config_map_key_ref;  // configMapKeyRef
  bool operator==(const ValueFrom&) const = default;
};

// A parameter (Parameter) of inputs, outputs or arguments.
struct Parameter {
  std::string name;
  std::optional<std::string> value;
  std::optional<std::string> default_value;  // default
  std::vector<std::string> enum_values;      // enum
  std::string description;
  std::string global_name;              // globalName
  std::optional<ValueFrom> value_from;  // valueFrom
  bool operator==(const Parameter&) const = default;
};

// archive (ArchiveStrategy): how an output directory is packed.
enum class ArchiveKind { kDefault, kNone, kTar, kZip };

struct S3Location {
  std::string key;
  std::string bucket;
  std::string endpoint;
  std::string region;
  bool operator==(const S3Location&) const = default;
};

// An artifact (Artifact) of inputs, outputs or arguments.
struct Artifact {
  std::string name;
  std::string path;
  std::string from;             // "{{tasks.a.outputs.artifacts.x}}"
  std::string from_expression;  // fromExpression: recorded for the evaluator
  std::string global_name;      // globalName
  std::string sub_path;         // subPath
  std::optional<std::int32_t> mode;
  bool optional = false;
  ArchiveKind archive = ArchiveKind::kDefault;
  std::optional<int> tar_compression_level;  // archive.tar.compressionLevel
  std::optional<S3Location> s3;
  std::optional<std::string> raw_data;  // raw.data
  std::string http_url;                 // http.url
  RecordedFields recorded;              // archiveLogs, artifactGC, ...
  bool operator==(const Artifact&) const = default;

  // Whether the artifact names where its bytes come from by itself.
  bool HasSource() const {
    return !from.empty() || !from_expression.empty() || s3 || raw_data || !http_url.empty();
  }
};

// arguments (Arguments), inputs (Inputs), outputs (Outputs minus result,
// exitCode, which exist on every node implicitly).
struct ParametersAndArtifacts {
  std::vector<Parameter> parameters;
  std::vector<Artifact> artifacts;
  bool operator==(const ParametersAndArtifacts&) const = default;
  bool empty() const { return parameters.empty() && artifacts.empty(); }
  const Parameter* FindParameter(std::string_view name) const;
  const Artifact* FindArtifact(std::string_view name) const;
};
using Arguments = ParametersAndArtifacts;
using Inputs = ParametersAndArtifacts;
using Outputs = ParametersAndArtifacts;

struct EnvVar {
  std::string name;
  std::string value;
  bool operator==(const EnvVar&) const = default;
};

// resources (ResourceRequirements): quantities as written ("500m", "16Gi", "1").
struct ResourceRequirements {
  std::map<std::string, std::string> limits;
  std::map<std::string, std::string> requests;
  bool operator==(const ResourceRequirements&) const = default;
};

// container (Container), or script (ScriptTemplate: a container plus source,
// which runs as the command's last argument file).
struct Container {
  std::string name;
  std::string image;
  std::vector<std::string> command;
  std::vector<std::string> args;
  std::vector<EnvVar> env;
  std::string working_dir;  // workingDir
  ResourceRequirements resources;
  std::string source;       // script only
  RecordedFields recorded;  // imagePullPolicy, volumeMounts, securityContext, ...
  bool operator==(const Container&) const = default;
};

// withSequence (Sequence): numbers as items; count or end, not both.
struct Sequence {
  std::optional<IntOrString> count;
  std::optional<IntOrString> start;
  std::optional<IntOrString> end;
  std::string format;
  bool operator==(const Sequence&) const = default;
};

// templateRef (TemplateRef): a template in a WorkflowTemplate (or a
// ClusterWorkflowTemplate with clusterScope), resolved by the controller.
struct TemplateRef {
  std::string name;
  std::string template_name;   // template
  bool cluster_scope = false;  // clusterScope
  bool operator==(const TemplateRef&) const = default;
};

// continueOn (ContinueOn): the parent goes on when this node fails/errors.
struct ContinueOn {
  bool error = false;
  bool failed = false;
  bool operator==(const ContinueOn&) const = default;
};

// A lifecycle hook (LifecycleHook). Headway runs the `exit` hook of a step
// or task, as Argo does, like its onExit: `template` (or `templateRef`) runs
// as "<node>.onExit" once the node ends, with `arguments` resolved against
// the node's outputs (steps.NAME.outputs.* / tasks.NAME.outputs.*). Other
// hooks are kept with a warning.
struct LifecycleHook {
  std::string template_name;                // template
  std::optional<TemplateRef> template_ref;  // templateRef
  Arguments arguments;
  std::string expression;  // kept; an exit hook runs whatever it says
  bool operator==(const LifecycleHook&) const = default;
};

// A DAG task (DAGTask) or a step (WorkflowStep): a step has no
// dependencies/depends; its order comes from its group.
struct Task {
  std::string name;
  std::string template_name;                // template
  std::optional<TemplateRef> template_ref;  // templateRef
  Arguments arguments;
  std::vector<std::string> dependencies;  // DAG only
  std::string depends;                    // DAG only: an expression over task results
  std::string when;                       // a condition; the node is skipped when false
  // withItems: any JSON values; an empty list runs the node zero times.
  std::optional<std::vector<nlohmann::json>> with_items;
  std::string with_param;                  // withParam: a JSON list, usually from "{{...}}"
  std::optional<Sequence> with_sequence;   // withSequence
  std::optional<ContinueOn> continue_on;   // continueOn
  std::string on_exit;                     // onExit: a template run after this node
  std::optional<LifecycleHook> exit_hook;  // hooks.exit: run as onExit is
  RecordedFields recorded;                 // hooks (all of them, as written), inline
  bool operator==(const Task&) const = default;

  bool HasLoop() const { return with_items || !with_param.empty() || with_sequence; }
};

struct Dag {
  std::string target;             // target: run only these tasks (and what they need)
  std::optional<bool> fail_fast;  // failFast
  std::vector<Task> tasks;
  bool operator==(const Dag&) const = default;
};

// steps: groups run one after the other; the steps of a group in parallel.
using StepGroups = std::vector<std::vector<Task>>;

struct Suspend {
  std::string duration;  // empty: until resumed
  bool operator==(const Suspend&) const = default;
};

// backoff (Backoff): delay before retry n is duration * factor^n, at most
// maxDuration in total.
struct Backoff {
  std::string duration;
  std::optional<IntOrString> factor;
  std::string max_duration;  // maxDuration
  bool operator==(const Backoff&) const = default;
};

// retryPolicy: which failures are retried. Argo's default is OnFailure.
enum class RetryPolicy { kDefault, kAlways, kOnFailure, kOnError, kOnTransientError };

struct RetryStrategy {
  std::optional<IntOrString> limit;  // unset: retry without limit
  RetryPolicy retry_policy = RetryPolicy::kDefault;
  std::optional<Backoff> backoff;
  std::string expression;   // recorded for the evaluator
  RecordedFields recorded;  // affinity
  bool operator==(const RetryStrategy&) const = default;
};

// memoize (Memoize): reuse a node's outputs for the same key.
struct Memoize {
  std::string key;
  std::string max_age;          // maxAge
  std::string config_map_name;  // cache.configMap.name: recorded
  bool operator==(const Memoize&) const = default;
};

enum class TemplateKind { kContainer, kScript, kDag, kSteps, kSuspend };

struct Template {
  std::string name;
  std::string display_name;  // displayName
  TemplateKind kind = TemplateKind::kContainer;
  Inputs inputs;
  Outputs outputs;
  TemplateMetadata metadata;
  std::optional<Container> container;  // container or script
  std::optional<Dag> dag;
  std::optional<StepGroups> steps;
  std::optional<Suspend> suspend;
  std::optional<RetryStrategy> retry_strategy;         // retryStrategy
  std::optional<IntOrString> active_deadline_seconds;  // activeDeadlineSeconds
  std::string timeout;  // a duration for the whole template, e.g. "10m"
  std::optional<std::int64_t> parallelism;
  std::optional<bool> fail_fast;  // failFast (deprecated here; dag.failFast)
  std::optional<Memoize> memoize;
  std::map<std::string, std::string> node_selector;  // nodeSelector: recorded
  RecordedFields recorded;                           // affinity, tolerations, volumes, metrics, ...
  bool operator==(const Template&) const = default;
};

// ttlStrategy (TTLStrategy): seconds after which the workflow is deleted.
struct TtlStrategy {
  std::optional<std::int32_t> seconds_after_completion;  // secondsAfterCompletion
  std::optional<std::int32_t> seconds_after_success;     // secondsAfterSuccess
  std::optional<std::int32_t> seconds_after_failure;     // secondsAfterFailure
  bool operator==(const TtlStrategy&) const = default;
};

// workflowTemplateRef (WorkflowTemplateRef): run a WorkflowTemplate's spec.
struct WorkflowTemplateRef {
  std::string name;
  bool cluster_scope = false;
  bool operator==(const WorkflowTemplateRef&) const = default;
};

// spec (WorkflowSpec) of a Workflow or WorkflowTemplate, and a
// CronWorkflow's workflowSpec.
struct WorkflowSpec {
  std::string entrypoint;
  Arguments arguments;
  std::vector<Template> templates;
  std::string on_exit;                     // onExit: a template run when the workflow ends
  std::optional<LifecycleHook> exit_hook;  // hooks.exit: run as onExit is
  std::optional<std::int64_t> parallelism;
  std::optional<std::int64_t> active_deadline_seconds;       // activeDeadlineSeconds
  std::optional<TtlStrategy> ttl_strategy;                   // ttlStrategy
  std::string service_account_name;                          // serviceAccountName: recorded
  std::optional<WorkflowTemplateRef> workflow_template_ref;  // workflowTemplateRef
  std::optional<RetryStrategy> retry_strategy;               // default for every template
  std::optional<bool> suspend;
  std::optional<std::int32_t> priority;
  std::map<std::string, std::string> node_selector;  // nodeSelector: recorded
  RecordedFields recorded;  // volumes, podGC, imagePullSecrets, hooks (as written), ...
  bool operator==(const WorkflowSpec&) const = default;

  const Template* FindTemplate(std::string_view name) const;
};

struct Workflow {
  ObjectMeta metadata;
  WorkflowSpec spec;
  bool operator==(const Workflow&) const = default;
};

struct WorkflowTemplate {
  ObjectMeta metadata;
  WorkflowSpec spec;
  bool operator==(const WorkflowTemplate&) const = default;
};

enum class ConcurrencyPolicy { kAllow, kForbid, kReplace };

// spec (CronWorkflowSpec).
struct CronWorkflowSpec {
  std::vector<std::string> schedules;  // schedule (one, deprecated) or schedules
  bool single_schedule = false;        // written as `schedule`; ToJson writes it so again
  std::string timezone;
  ConcurrencyPolicy concurrency_policy = ConcurrencyPolicy::kAllow;
  std::optional<std::int64_t> starting_deadline_seconds;
  std::optional<std::int32_t> successful_jobs_history_limit;  // Argo's default: 3
  std::optional<std::int32_t> failed_jobs_history_limit;      // Argo's default: 1
  bool suspend = false;
  std::string when;            // an expression: recorded for the evaluator
  WorkflowSpec workflow_spec;  // workflowSpec
  // workflowMetadata: labels and annotations for the workflows it creates.
  std::optional<TemplateMetadata> workflow_metadata;
  RecordedFields recorded;  // stopStrategy
  bool operator==(const CronWorkflowSpec&) const = default;
};

struct CronWorkflow {
  ObjectMeta metadata;
  CronWorkflowSpec spec;
  bool operator==(const CronWorkflow&) const = default;
};

// What a node's job asks for (see the mapping in the file comment).
struct NodeResources {
  int gpus = 0;
  double cpus = 0;                // 0: no limit
  std::int64_t memory_bytes = 0;  // 0: no limit
  bool operator==(const NodeResources&) const = default;
};

// A template's resources; InvalidArgument (naming the field) for a
// quantity that is not one. Only container and script templates ask for any.
Result<NodeResources> NodeResourcesOf(const Template& tmpl);

// A Headway key (kTeamKey, ...) from the template's metadata, else the
// workflow's: annotations first, then labels. nullopt when absent.
std::optional<std::string> HeadwayValue(const ObjectMeta& workflow, const TemplateMetadata* tmpl,
                                        std::string_view key);

// The highest priority any job of `spec` can ask for (its templates'
// headway.dev/priority, the workflow's, spec.podPriority; also `extra`'s, a
// CronWorkflow's workflowMetadata), and 0 when none asks: what a submission
// is checked against, as a job's priority is (core/team_policy.h).
std::int64_t HighestPriority(const ObjectMeta& workflow, const WorkflowSpec& spec,
                             const TemplateMetadata* extra = nullptr);

std::string_view RetryPolicyName(RetryPolicy policy);
std::string_view ConcurrencyPolicyName(ConcurrencyPolicy policy);
std::string_view TemplateKindName(TemplateKind kind);

// Argo's JSON shape (apiVersion, kind, metadata, spec), empty fields omitted.
nlohmann::json ToJson(const Workflow& wf);
nlohmann::json ToJson(const WorkflowTemplate& wft);
nlohmann::json ToJson(const CronWorkflow& cron);
nlohmann::json ToJson(const WorkflowSpec& spec);
nlohmann::json ToJson(const Template& tmpl);

}  // namespace headway::workflow
