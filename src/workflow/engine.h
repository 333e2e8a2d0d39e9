// The workflow engine: Argo's operator as a pure state machine. Given a
// workflow's spec, its node statuses so far, what became of the jobs its
// pod nodes run, and the time, Operate() advances the workflow as far as it
// can and says what to do next: which jobs to create or stop, what to
// memoize, and when to look again (a retry's backoff, a suspend's duration,
// a deadline). The caller persists the state *before* acting, so a crash
// between the two is repaired by the next Operate: job names are
// deterministic, a job already created is found again, and no step runs
// twice.
//
// Like Argo's controller, Operate re-evaluates the workflow from its entry
// template every time, creating nodes that do not exist yet and reading the
// phase of those that do; node names and ids follow Argo's
// (`wf.step[0].a(1:x)`, id "wf-<fnv32a of the name>"), so `argo get`-style
// output, Hera and scripts reading node status see what they expect.
//
// Supported: container and script (pod) nodes, steps, dag (dependencies
// and depends, failFast, target), suspend (with duration; resumed by
// Resume), when, withItems / withParam / withSequence, retryStrategy (limit,
// retryPolicy, backoff duration / factor / maxDuration), workflow and
// template parallelism, activeDeadlineSeconds (workflow), onExit (workflow,
// step and task), memoize (key, maxAge), template outputs (parameters from
// files, results, values from other parameters), stop and terminate.
//
// Pure: no I/O, no clock (`now` is an argument), no threads.
#pragma once

#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "core/time.h"
#include "workflow/expression.h"
#include "workflow/workflow.h"

namespace headway::workflow {

// Argo's NodeType.
enum class NodeType { kPod, kSteps, kStepGroup, kDag, kTaskGroup, kRetry, kSkipped, kSuspend };
std::string_view NodeTypeName(NodeType type);
std::optional<NodeType> ParseNodeType(std::string_view name);

struct NodeParameter {
  std::string name;
  std::string value;
  bool operator==(const NodeParameter&) const = default;
};

// An artifact a node read or wrote: `ref` names its version in Headway's
// artifact store ("NAME:VERSION").
struct NodeArtifact {
  std::string name;
  std::string path;
  std::string ref;
  bool operator==(const NodeArtifact&) const = default;
};

// A node's status (Argo's NodeStatus, the fields Headway fills).
struct Node {
  std::string id;
  std::string name;          // full name: "wf.steps[0].a(1:x)"
  std::string display_name;  // the last part: "a(1:x)"
  NodeType type = NodeType::kPod;
  std::string template_name;
  std::string template_ref;  // "WORKFLOWTEMPLATE/TEMPLATE" when called by templateRef
  std::string boundary_id;   // the DAG or steps node it belongs to
  NodePhase phase = NodePhase::kPending;
  std::string message;
  std::optional<Time> started_at;
  std::optional<Time> finished_at;
  std::vector<std::string> children;  // ids, in creation order
  std::vector<NodeParameter> inputs;
  std::vector<NodeParameter> outputs;
  std::vector<NodeArtifact> input_artifacts;
  std::vector<NodeArtifact> output_artifacts;
  std::optional<std::string> result;     // outputs.result
  std::optional<std::string> exit_code;  // outputs.exitCode
  // Pod nodes: the Headway job that runs it.
  std::string job;
  // Retry nodes: when the next attempt may start (its backoff).
  std::optional<Time> retry_after;
  // Memoized nodes: {key, hit, cacheName} as Argo's memoizationStatus.
  std::string memo_key;
  std::optional<bool> memo_hit;
  std::string memo_cache;  // memoize.cache.configMap.name ("default" when none)
  // Whether the node stands for an exit handler (its parent's onExit).
  bool on_exit = false;
  // Pod nodes: output artifacts with an s3.key, by name -> the artifact
  // store's name they are kept under (ArtifactNameForKey).
  std::map<std::string, std::string> artifact_names;
  // Number of pod nodes below this node finished / in all: Argo's "1/3".
  std::string progress;

  bool Fulfilled() const;
  bool operator==(const Node&) const = default;
};

// Argo's JSON (NodeStatus) for a node, and back. FromJson refuses what is
// not a node: a stored body that is not one is a bug, and says so.
nlohmann::json ToJson(const Node& node);
Result<Node> NodeFromJson(const nlohmann::json& body);

// How a workflow is asked to end early (Argo's spec.shutdown).
enum class Shutdown { kNone, kStop, kTerminate };

// Everything the engine keeps about one workflow between calls.
struct WorkflowState {
  std::string name;
  std::string uid;
  NodePhase phase = NodePhase::kPending;  // Pending, Running, Succeeded, Failed, Error
  std::string message;
  std::optional<Time> started_at;
  std::optional<Time> finished_at;
  bool suspended = false;  // spec.suspend: no new step starts until resumed
  Shutdown shutdown = Shutdown::kNone;
  // workflow.outputs: what nodes' outputs with a globalName published, as
  // soon as each node finished (Argo's status.outputs).
  std::vector<NodeParameter> outputs;          // workflow.outputs.parameters
  std::vector<NodeArtifact> output_artifacts;  // workflow.outputs.artifacts
  int generation = 0;                          // how many times Retry() ran: new jobs' names differ
  std::map<std::string, Node> nodes;           // by id

  const Node* FindByName(std::string_view node_name) const;
  bool Finished() const { return finished_at.has_value(); }
};

// What became of the job that runs a pod node, as the caller observed it.
struct JobObservation {
  JobState state = JobState::kQueued;
  std::optional<Time> started_at;
  std::optional<Time> finished_at;
  std::optional<int> exit_code;
  std::string reason;   // Job::reason: "ExitCode", "TimeLimitExceeded", "Stalled", ...
  std::string message;  // why it failed or stopped
  // Read from the job's outputs once it ended: values of outputs.parameters
  // with valueFrom.path (by name), and its stdout for outputs.result. A
  // parameter whose file was missing is absent.
  std::map<std::string, std::string> parameters;
  std::optional<std::string> stdout_text;
  // Output artifacts the caller stored (name -> "NAME:VERSION"); absent when
  // the step left no file at the path. `artifact_error` when storing failed.
  std::map<std::string, std::string> artifacts;
  std::string artifact_error;
};

// An input artifact to put at `path` before the step runs: a stored
// version (`ref`) or literal text (`raw`).
struct InputArtifact {
  std::string name;
  std::string path;
  std::string ref;
  std::optional<std::string> raw;
};

// An output artifact to keep after the step: the file or directory at
// `path`; `tar` when a directory is packed (Argo's archive), else the file as is.
struct OutputArtifact {
  std::string name;
  std::string path;
  bool optional = false;
  std::string store_as;  // an s3.key's name in the artifact store; "" for JOB.NAME
};

// Argo's key-only S3 artifacts (`s3: {key: models/v1.tgz}`) live in the
// artifact store (Headway's artifact repository) under a name made of the
// key: '/' read as '.', e.g. "models.v1.tgz". Each write is a new version,
// and a step that reads the key gets the latest. An error when the key makes
// no valid name (uppercase letters, spaces, ...).
Result<std::string> ArtifactNameForKey(std::string_view key);

// A job to create for a pod node. `spec.command` is the step's own command
// line; `script_source`, when set, is written to a file whose path is
// appended to it; the caller wraps it so that `output_paths` (parameter
// name -> file) and stdout are kept for the engine to read.
struct JobToCreate {
  std::string node_id;
  JobSpec spec;
  std::optional<std::string> script_source;
  std::map<std::string, std::string> output_paths;
  std::vector<InputArtifact> input_artifacts;
  std::vector<OutputArtifact> output_artifacts;
  std::string image;              // the container's image
  std::string image_pull_policy;  // its imagePullPolicy, as written ("" when none)
};

struct MemoEntry {
  std::string cache;  // memoize.cache.configMap.name, or "default"
  std::string key;
  std::vector<NodeParameter> outputs;
  std::optional<std::string> result;
  Time saved_at{};
};

struct Actions {
  std::vector<JobToCreate> create;
  std::vector<std::string> stop;  // jobs to stop (a stop, a terminate, a deadline)
  std::vector<MemoEntry> memoize;
  std::optional<Time> wake_at;  // look again then, even if no job changes
  bool changed = false;         // the state changed: persist it
};

// What the engine needs from outside, all optional.
// At most this many nodes in one workflow: a loop that would take it past
// this is an error of its step (nested loops multiply: 300 x 300 is 90,000).
inline constexpr std::size_t kMaxWorkflowNodes = 20000;

struct Environment {
  Time now{};
  // Pods this call may start at most; the others wait (as under
  // `parallelism`) for a later call. The controller bounds each pass this
  // way, so one workflow's wide fan-out cannot hold it (and every other
  // workflow) for long, and a team at its queued-job bound starts none.
  std::size_t max_new_pods = std::numeric_limits<std::size_t>::max();
  // Nodes the workflow may have at most: kMaxWorkflowNodes, or fewer where
  // its team's other workflows hold most of the team's bound. A loop that
  // would pass it is an error of its step, which `node_limit_reason` names.
  std::size_t max_nodes = kMaxWorkflowNodes;
  std::string node_limit_reason = "the workflow's limit";
  // Non-empty: the workflow is past a bound of the server's (the bytes of
  // its status): it stops as a terminate stops it, and this is its message.
  std::string stop_reason;
  // The job of a pod node; nullopt when the caller has no such job (not
  // created yet, or deleted).
  std::function<std::optional<JobObservation>(const std::string& job)> observe;
  // A memoized result; nullopt on a miss.
  std::function<std::optional<MemoEntry>(const std::string& cache, const std::string& key)>
      memo_lookup;
  // A template called by templateRef: nullptr when there is none.
  std::function<const Template*(const TemplateRef& ref)> resolve_ref;
  // Headway settings of the jobs: the workflow's team and its metadata
  // (for headway.dev/queue, priority, gpus).
  std::string team = "default";
  ObjectMeta metadata;
};

// Advances `state` as far as it can go now. `spec` is the workflow's spec
// with a workflowTemplateRef already merged in.
Actions Operate(const WorkflowSpec& spec, WorkflowState& state, const Environment& env);

// The nodes running the entrypoint would make if every loop whose size the
// manifest writes out ran in full (a loop sized by a parameter or output,
// and a templateRef, count once: Operate bounds those as it expands them),
// capped just above kMaxWorkflowNodes. What a workflow is checked against
// before it is stored.
std::size_t PlannedNodes(const WorkflowSpec& spec);

// The job name a pod node runs as, in the shape of Argo's pod names (v2):
// WORKFLOW-TEMPLATE-HASH, the prefix shortened to fit and made a valid job
// name ('.', '_' and upper case as '-' and lower case), the hash of the
// node's name and the workflow's uid, at most 63 characters. The template's
// name is what `get jobs` shows of the step.
std::string JobNameFor(std::string_view workflow, std::string_view uid, std::string_view node_name,
                       std::string_view template_name);
// Argo's node id for a node name.
std::string NodeIdFor(std::string_view workflow, std::string_view node_name);

// Operations a user asks for; each returns false (with `error`) when it does
// not apply. The caller then runs Operate.
// Suspends the workflow: running steps go on, no new step starts.
bool Suspend(WorkflowState& state, std::string* error);
// Lifts a suspend, and ends every waiting suspend node (Succeeded).
bool Resume(WorkflowState& state, Time now, std::string* error);
// Stop: running steps are stopped, nothing new starts, exit handlers run.
// Terminate: the same without exit handlers.
bool RequestShutdown(WorkflowState& state, Shutdown how, std::string* error);
// `argo retry`: the failed and errored nodes (and the nodes above them) are
// removed so that the next Operate runs them again, with what they depend
// on kept; a node whose name matches `node_filter` (empty: all) is reset.
// With `restart_successful`, succeeded pod nodes matching the filter run
// again too. The workflow becomes Running.
bool Retry(WorkflowState& state, bool restart_successful, const std::string& node_filter,
           std::string* error);

// The `parameters` of `argo retry -p` and `argo resubmit -p` ("NAME=VALUE"
// each) applied to a workflow's arguments as Argo does: the given ones
// first, then the workflow's own that none of them names. False (with
// `error`) for one without '='.
bool OverrideParameters(Arguments& arguments, const std::vector<std::string>& parameters,
                        std::string* error);

}  // namespace headway::workflow
