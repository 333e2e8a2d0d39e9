// The workflow engine's operator (engine.h's Operate), shared by the files
// it is split into: engine_operator.cc (the run, progress, pods, calls and
// loops), engine_steps.cc (steps, DAGs, suspends, exit handlers and
// outputs) and engine.cc (the public functions). Internal to workflow/.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "workflow/engine.h"
#include "workflow/loops.h"
#include "workflow/substitute.h"

namespace headway::workflow::internal {

using nlohmann::json;

// Argo's messages for a workflow that was stopped, terminated or ran past
// its activeDeadlineSeconds.
inline constexpr std::string_view kStopped = "Stopped with strategy 'Stop'";
inline constexpr std::string_view kTerminated = "Stopped with strategy 'Terminate'";
inline constexpr std::string_view kDeadline = "Max duration limit exceeded";
// Argo caps outputs.result and output parameters at 256 kB.
inline constexpr std::size_t kMaxOutputBytes = 256 * 1024;

// A key-only S3 location's name in the artifact store: the workflow's
// artifacts live in Headway's store, so a bucket or endpoint elsewhere is refused.
Result<std::string> KeyOnly(const S3Location& s3, const std::string& key);

// The tasks whose outputs `text` reads: "tasks.NAME." in its tags and expressions.
void AddReferencedTasks(const std::string& text, std::set<std::string>& out);

// Every task a DAG task's arguments, `when` or loop read the outputs of.
void AddReferencedTasks(const Task& task, std::set<std::string>& out);

std::uint32_t Fnv32a(std::string_view text);

std::uint64_t Fnv64a(std::string_view text);

bool IsFailure(NodePhase p);

bool IsDone(NodePhase p);

std::string TrimTrailingNewlines(std::string text);

std::optional<std::int64_t> ParseInteger(std::string_view text);

// Argo's durations: Go's time.ParseDuration, or a bare number of seconds.
std::optional<Duration> ParseArgoDuration(std::string_view text);

// One call of a template: what ExecuteTemplate needs besides the name.
struct Call {
  const Template* tmpl = nullptr;
  std::string template_ref;  // "WFT/TEMPLATE" when resolved by templateRef
  std::vector<NodeParameter> arguments;
  std::vector<Artifact> artifact_arguments;    // a task's arguments.artifacts, substituted
  std::vector<InputArtifact> input_artifacts;  // resolved for the template
  std::string display_name;
  bool on_exit = false;
  // The WorkflowTemplate the template came from by templateRef: a plain
  // `template:` inside it names one of that WorkflowTemplate's templates.
  std::optional<TemplateRef> ref_scope;
};

class Operator {
 public:
  Operator(const WorkflowSpec& spec, WorkflowState& state, const Environment& env, Actions& out)
      : spec_(spec), state_(state), env_(env), out_(out) {}

  void Run();

 private:
  // --- nodes ---
  Node* Find(const std::string& name) {
    auto it = state_.nodes.find(NodeIdFor(state_.name, name));
    return it == state_.nodes.end() ? nullptr : &it->second;
  }
  Node& Create(const std::string& name, NodeType type, const Call& call,
               const std::string& boundary, NodePhase phase, std::string message = "");
  void SetPhase(Node& node, NodePhase phase, std::string message = "");
  // A started node whose call can no longer be made (its inputs do not
  // resolve): Error, its job stopped.
  void FailUnresolvable(Node& node, std::string message);
  // A node that ends as it is made (skipped, omitted, or an error found
  // before it could run), under `parent_id`.
  Node& Settled(const std::string& name, const std::string& display, NodeType type,
                const std::string& boundary, const std::string& parent_id, NodePhase phase,
                std::string message);
  void AddChild(Node& parent, const Node& child);

  // --- templates ---
  Node* Execute(const std::string& name, const Call& call, const std::string& boundary,
                const Scope& outer, bool in_retry = false, int retry_index = 0);
  Node* ExecuteRetry(Node* node, const std::string& name, const Call& call,
                     const std::string& boundary, const Scope& outer,
                     const RetryStrategy& strategy);
  void ExecutePod(Node& node, const Call& call, const Scope& scope);
  void ExecuteSteps(Node& node, const Call& call, Scope scope);
  void ExecuteDag(Node& node, const Call& call, Scope scope);
  void ExecuteSuspend(Node& node, const Call& call, const Scope& scope);
  // Runs a step's or task's onExit handler (or its exit hook) once `node` is
  // done; true when there is none or it is done too. `prefix` is how its
  // outputs are named ("steps.NAME", "tasks.NAME"); `parent` the call of the
  // steps or DAG template it is in.
  bool ExitHandlerDone(const Node& node, const Task& task, const std::string& prefix,
                       const std::string& boundary, const Scope& scope, const Call& parent);
  // Publishes a finished node's outputs that have a globalName as the
  // workflow's (workflow.outputs.parameters.G / .artifacts.G), at once.
  void PublishGlobalOutputs(const Template& tmpl, const Node& node);
  // Copies the workflow's published outputs into `scope`: those published
  // in this pass are not in the scope a template was entered with.
  void AddGlobalOutputs(Scope& scope) const;
  void FinishWithOutputs(Node& node, const Call& call, const Scope& scope, NodePhase phase,
                         std::string message = "");

  // Resolves a step's or task's template and arguments against `scope`.
  Result<Call> CallOf(const Task& task, const Scope& scope, const std::string& display,
                      const Call& parent);
  // A template by name, where `parent` was found: the workflow's, or the
  // WorkflowTemplate's that a templateRef reached. nullptr when none;
  // `template_ref` says "WFT/NAME" for one of a WorkflowTemplate.
  const Template* Resolve(const std::string& name, const Call& parent,
                          std::string* template_ref) const;
  // Expands a loop into (child name suffix, item scope) pairs, within the
  // workflow's node limit.
  Result<std::vector<LoopItem>> Items(const Task& task, const Scope& scope);
  Result<std::vector<LoopItem>> ExpandItems(const Task& task, const Scope& scope);

  bool MayStartPod() const {
    if (state_.suspended || state_.shutdown != Shutdown::kNone) return false;
    if (new_pods_ >= env_.max_new_pods) return false;
    return !spec_.parallelism || active_pods_ < *spec_.parallelism;
  }
  bool Stopping() const { return state_.shutdown != Shutdown::kNone; }
  std::string ShutdownMessage() const {
    if (!env_.stop_reason.empty()) return env_.stop_reason;
    if (deadline_passed_) return std::string(kDeadline);
    return std::string(state_.shutdown == Shutdown::kTerminate ? kTerminated : kStopped);
  }
  void Wake(Time at) {
    if (!out_.wake_at || at < *out_.wake_at) out_.wake_at = at;
  }
  void Progress(Node& node, int* done, int* total);

  const WorkflowSpec& spec_;
  WorkflowState& state_;
  const Environment& env_;
  Actions& out_;
  Scope global_;
  std::int64_t active_pods_ = 0;
  std::size_t new_pods_ = 0;  // started by this call (Environment::max_new_pods)
  bool deadline_passed_ = false;
  // Set while an exit handler runs: its nodes are marked on_exit, so a stop
  // (which lets exit handlers run) does not stop them.
  bool in_exit_handler_ = false;
  // How many templates deep this pass is (Execute calls nest).
  int depth_ = 0;
  static constexpr int kMaxDepth = 100;
};

}  // namespace headway::workflow::internal
