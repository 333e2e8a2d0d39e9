#include "workflow/engine.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <set>

#include "core/artifact.h"
#include "workflow/engine_operator.h"

namespace headway::workflow {
namespace internal {

// A key-only S3 location's name in the artifact store: the workflow's
// artifacts live in Headway's store, so a bucket or endpoint elsewhere is refused.
Result<std::string> KeyOnly(const S3Location& s3, const std::string& key) {
  if (!s3.bucket.empty() || !s3.endpoint.empty()) {
    return InvalidArgument(
        "give only `key`: a workflow's artifacts live in Headway's artifact "
        "store (its artifact repository), not in bucket '" +
        s3.bucket + "'" + (s3.endpoint.empty() ? "" : " at " + s3.endpoint));
  }
  return ArtifactNameForKey(key);
}

// The tasks whose outputs `text` reads: "tasks.NAME." in its tags and expressions.
void AddReferencedTasks(const std::string& text, std::set<std::string>& out) {
  constexpr std::string_view kPrefix = "tasks.";
  for (std::size_t at = text.find(kPrefix); at != std::string::npos;
       at = text.find(kPrefix, at + 1)) {
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_')) {
      continue;  // "subtasks.x" is not a reference
    }
    std::size_t begin = at + kPrefix.size();
    std::size_t end = text.find('.', begin);
    if (end != std::string::npos && end > begin) out.insert(text.substr(begin, end - begin));
  }
}

// Every task a DAG task's arguments, `when` or loop read the outputs of.
void AddReferencedTasks(const Task& task, std::set<std::string>& out) {
  AddReferencedTasks(task.when, out);
  AddReferencedTasks(task.with_param, out);
  if (task.with_items) {
    for (const nlohmann::json& item : *task.with_items) {
      if (item.is_string()) AddReferencedTasks(item.get<std::string>(), out);
    }
  }
  for (const Parameter& p : task.arguments.parameters) {
    if (p.value) AddReferencedTasks(*p.value, out);
    if (p.default_value) AddReferencedTasks(*p.default_value, out);
    if (p.value_from) {
      AddReferencedTasks(p.value_from->parameter, out);
      AddReferencedTasks(p.value_from->expression, out);
    }
  }
  for (const Artifact& a : task.arguments.artifacts) {
    AddReferencedTasks(a.from, out);
    AddReferencedTasks(a.from_expression, out);
  }
}

std::uint32_t Fnv32a(std::string_view text) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : text) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

std::uint64_t Fnv64a(std::string_view text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool IsFailure(NodePhase p) { return p == NodePhase::kFailed || p == NodePhase::kError; }

bool IsDone(NodePhase p) {
  return p == NodePhase::kSucceeded || p == NodePhase::kFailed || p == NodePhase::kError ||
         p == NodePhase::kSkipped || p == NodePhase::kOmitted;
}

std::string TrimTrailingNewlines(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

std::optional<std::int64_t> ParseInteger(std::string_view text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  std::size_t i = text[0] == '-' ? 1 : 0;
  if (i == text.size()) return std::nullopt;
  for (std::size_t j = i; j < text.size(); ++j) {
    if (text[j] < '0' || text[j] > '9') return std::nullopt;
  }
  return std::stoll(std::string(text));
}

// Argo's durations: Go's time.ParseDuration, or a bare number of seconds.
std::optional<Duration> ParseArgoDuration(std::string_view text) { return ParseDuration(text); }

}  // namespace internal

using internal::Fnv32a;
using internal::Fnv64a;
using internal::IsDone;
using internal::IsFailure;
using internal::kDeadline;
using internal::kStopped;
using internal::kTerminated;
using internal::Operator;
using internal::ParseInteger;
using nlohmann::json;

// ---------------------------------------------------------------------------

bool Node::Fulfilled() const { return IsDone(phase); }

const Node* WorkflowState::FindByName(std::string_view node_name) const {
  auto it = nodes.find(NodeIdFor(name, node_name));
  return it == nodes.end() ? nullptr : &it->second;
}

std::string_view NodeTypeName(NodeType type) {
  switch (type) {
    case NodeType::kPod:
      return "Pod";
    case NodeType::kSteps:
      return "Steps";
    case NodeType::kStepGroup:
      return "StepGroup";
    case NodeType::kDag:
      return "DAG";
    case NodeType::kTaskGroup:
      return "TaskGroup";
    case NodeType::kRetry:
      return "Retry";
    case NodeType::kSkipped:
      return "Skipped";
    case NodeType::kSuspend:
      return "Suspend";
  }
  return "Pod";
}

std::optional<NodeType> ParseNodeType(std::string_view name) {
  for (NodeType t :
       {NodeType::kPod, NodeType::kSteps, NodeType::kStepGroup, NodeType::kDag,
        NodeType::kTaskGroup, NodeType::kRetry, NodeType::kSkipped, NodeType::kSuspend}) {
    if (NodeTypeName(t) == name) return t;
  }
  return std::nullopt;
}

std::string NodeIdFor(std::string_view workflow, std::string_view node_name) {
  if (node_name == workflow) return std::string(workflow);
  return std::string(workflow) + "-" + std::to_string(Fnv32a(node_name));
}

bool OverrideParameters(Arguments& arguments, const std::vector<std::string>& parameters,
                        std::string* error) {
  if (parameters.empty()) return true;
  std::vector<Parameter> given;
  std::set<std::string> named;
  for (const std::string& text : parameters) {
    const auto eq = text.find('=');
    if (eq == std::string::npos) {
      if (error) *error = "expected parameter of the form: NAME=VALUE. Received: " + text;
      return false;
    }
    Parameter p;
    p.name = text.substr(0, eq);
    p.value = text.substr(eq + 1);
    named.insert(p.name);
    given.push_back(std::move(p));
  }
  for (Parameter& own : arguments.parameters) {
    if (named.count(own.name) == 0) given.push_back(std::move(own));
  }
  arguments.parameters = std::move(given);
  return true;
}

std::string JobNameFor(std::string_view workflow, std::string_view uid, std::string_view node_name,
                       std::string_view template_name) {
  // Argo keeps 63 - 1 - 10 characters for the prefix; so does this.
  constexpr std::size_t kMaxPrefix = 52;
  std::string prefix;
  const std::string wanted = template_name.empty()
                                 ? std::string(workflow)
                                 : std::string(workflow) + "-" + std::string(template_name);
  for (char c : wanted) {
    if (prefix.size() == kMaxPrefix) break;
    const bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    const char lowered = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : '-';
    const char next = keep ? c : lowered;
    if (next == '-' && (prefix.empty() || prefix.back() == '-')) continue;
    prefix += next;
  }
  while (!prefix.empty() && prefix.back() == '-') prefix.pop_back();
  char hash[17];
  std::snprintf(hash, sizeof hash, "%010" PRIx64,
                static_cast<std::uint64_t>(Fnv64a(std::string(uid) + "/" + std::string(node_name)) &
                                           0xffffffffffull));
  return prefix.empty() ? std::string("wf-") + hash : prefix + "-" + hash;
}

namespace {

// How many times a loop written out in the manifest runs; 1 when its size
// is known only once it expands.
std::size_t WrittenLoopSize(const Task& task) {
  if (task.with_items) return task.with_items->size();
  if (!task.with_sequence) return 1;
  auto number = [](const std::optional<IntOrString>& v) -> std::optional<std::int64_t> {
    if (!v) return std::nullopt;
    return ParseInteger(v->text);
  };
  const Sequence& seq = *task.with_sequence;
  if (auto count = number(seq.count))
    return static_cast<std::size_t>(std::max<std::int64_t>(0, *count));
  auto start = seq.start ? number(seq.start) : std::optional<std::int64_t>(0);
  auto end = number(seq.end);
  if (!start || !end) return 1;
  // (Both within int64: their distance, in unsigned arithmetic, cannot wrap.)
  const std::uint64_t distance =
      *end >= *start ? static_cast<std::uint64_t>(*end) - static_cast<std::uint64_t>(*start)
                     : static_cast<std::uint64_t>(*start) - static_cast<std::uint64_t>(*end);
  return static_cast<std::size_t>(std::min<std::uint64_t>(distance, kMaxWorkflowNodes) + 1);
}

// Each template's count once (memo): a chain of templates calling the next
// twice would otherwise be walked 2^depth times. A template that calls one
// still being counted (recursion, bounded by the engine's depth) counts once.
std::size_t PlannedNodesOf(const WorkflowSpec& spec, const Template* tmpl,
                           std::map<const Template*, std::size_t>& memo) {
  constexpr std::size_t kCap = kMaxWorkflowNodes + 1;
  if (tmpl == nullptr) return 1;
  if (auto it = memo.find(tmpl); it != memo.end()) return it->second;
  memo[tmpl] = 1;  // while it is being counted
  std::size_t total = 1;
  auto add = [&](const Task& task) {
    const Template* called = task.template_ref ? nullptr : spec.FindTemplate(task.template_name);
    const std::size_t each = PlannedNodesOf(spec, called, memo);
    const std::size_t times = WrittenLoopSize(task);
    const std::size_t nodes = times == 0 ? 1 : (each > kCap / times ? kCap : each * times + 1);
    total = std::min(kCap, total + nodes);
  };
  if (tmpl->steps) {
    for (const auto& group : *tmpl->steps) {
      total = std::min(kCap, total + 1);
      for (const Task& task : group) add(task);
    }
  }
  if (tmpl->dag) {
    for (const Task& task : tmpl->dag->tasks) add(task);
  }
  return memo[tmpl] = total;
}

}  // namespace

std::size_t PlannedNodes(const WorkflowSpec& spec) {
  std::map<const Template*, std::size_t> memo;
  std::size_t total = PlannedNodesOf(spec, spec.FindTemplate(spec.entrypoint), memo);
  if (!spec.on_exit.empty()) {
    total = std::min(kMaxWorkflowNodes + 1,
                     total + PlannedNodesOf(spec, spec.FindTemplate(spec.on_exit), memo));
  }
  return total;
}

Actions Operate(const WorkflowSpec& spec, WorkflowState& state, const Environment& env) {
  Actions out;
  Operator op(spec, state, env, out);
  op.Run();
  return out;
}

bool Suspend(WorkflowState& state, std::string* error) {
  if (state.Finished()) {
    *error = "cannot suspend a workflow that has ended";
    return false;
  }
  state.suspended = true;
  return true;
}

bool Resume(WorkflowState& state, Time now, std::string* error) {
  if (state.Finished()) {
    *error = "cannot resume a workflow that has ended";
    return false;
  }
  bool any = state.suspended;
  state.suspended = false;
  for (auto& [id, node] : state.nodes) {
    if (node.type == NodeType::kSuspend && !node.Fulfilled()) {
      node.phase = NodePhase::kSucceeded;
      node.message = "resumed";
      node.finished_at = now;
      any = true;
    }
  }
  if (!any) {
    *error = "workflow is not suspended";
    return false;
  }
  return true;
}

bool RequestShutdown(WorkflowState& state, Shutdown how, std::string* error) {
  if (state.Finished()) {
    *error = "cannot stop a workflow that has ended";
    return false;
  }
  if (state.shutdown == Shutdown::kTerminate ||
      (state.shutdown == Shutdown::kStop && how == Shutdown::kStop)) {
    return true;
  }
  state.shutdown = how;
  state.suspended = false;
  return true;
}

bool Retry(WorkflowState& state, bool restart_successful, const std::string& node_filter,
           std::string* error) {
  if (!state.Finished() || state.phase == NodePhase::kSucceeded) {
    if (!(restart_successful && state.Finished())) {
      *error = state.Finished() ? "workflow succeeded: nothing to retry (use --restart-successful)"
                                : "workflow must be Failed or Error to retry";
      return false;
    }
  }
  auto matches = [&](const Node& node) {
    return node_filter.empty() || node.name.find(node_filter) != std::string::npos ||
           node.display_name == node_filter;
  };
  // Nodes to run again: failed or errored ones (and, when asked, succeeded
  // pods matching the filter), with every node above them up to the root, and
  // onExit handlers (they run again at the end).
  std::map<std::string, std::string> parent;
  for (const auto& [id, node] : state.nodes) {
    for (const std::string& child : node.children) parent[child] = id;
  }
  std::set<std::string> reset;
  for (const auto& [id, node] : state.nodes) {
    bool again = false;
    if (node.on_exit) again = true;
    if (node.type == NodeType::kPod || node.type == NodeType::kSkipped ||
        node.type == NodeType::kSuspend) {
      if (IsFailure(node.phase) && matches(node)) again = true;
      if (node.type == NodeType::kPod && restart_successful &&
          node.phase == NodePhase::kSucceeded && !node_filter.empty() && matches(node)) {
        again = true;
      }
      // Omitted and failFast-never-started tasks come back by themselves.
      if (node.phase == NodePhase::kOmitted) again = true;
    }
    if (!again) continue;
    for (std::string at = id; !at.empty();) {
      if (!reset.insert(at).second) break;
      auto p = parent.find(at);
      at = p == parent.end() ? "" : p->second;
    }
  }
  // A removed node's whole subtree goes too: its attempts, loop children.
  std::vector<std::string> stack(reset.begin(), reset.end());
  std::set<std::string> removed;
  while (!stack.empty()) {
    std::string id = stack.back();
    stack.pop_back();
    auto it = state.nodes.find(id);
    if (it == state.nodes.end()) continue;
    const Node& node = it->second;
    const bool structural = node.type == NodeType::kDag || node.type == NodeType::kSteps ||
                            node.type == NodeType::kStepGroup || node.type == NodeType::kTaskGroup;
    if (structural && reset.count(id) && node.id != state.name) {
      // Re-opened, keeping the children that succeeded.
      continue;
    }
    if (!structural && node.id != state.name) {
      removed.insert(id);
      for (const std::string& child : node.children) stack.push_back(child);
    }
  }
  for (const std::string& id : reset) {
    auto it = state.nodes.find(id);
    if (it == state.nodes.end() || removed.count(id)) continue;
    Node& node = it->second;
    node.phase = NodePhase::kRunning;
    node.message.clear();
    node.finished_at.reset();
    node.outputs.clear();
    if (node.type == NodeType::kPod) {
      // A single-container entrypoint (the root, kept): its step runs again
      // as a new job, named for the new generation, as a new node would.
      node.phase = NodePhase::kPending;
      node.job.clear();
      node.started_at.reset();
      node.exit_code.reset();
      node.result.reset();
      node.output_artifacts.clear();
      node.artifact_names.clear();
    }
  }
  for (const std::string& id : removed) state.nodes.erase(id);
  for (auto& [id, node] : state.nodes) {
    std::erase_if(node.children, [&](const std::string& c) { return removed.count(c) > 0; });
  }
  if (reset.empty() && removed.empty()) {
    *error = "no node matches: nothing to retry";
    return false;
  }
  state.phase = NodePhase::kRunning;
  state.message.clear();
  state.finished_at.reset();
  state.shutdown = Shutdown::kNone;
  ++state.generation;
  return true;
}

}  // namespace headway::workflow
