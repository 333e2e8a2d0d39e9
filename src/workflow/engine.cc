#include "workflow/engine.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <set>

#include "core/artifact.h"
#include "workflow/loops.h"
#include "workflow/substitute.h"

namespace headway::workflow {
namespace {

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

using nlohmann::json;

constexpr std::string_view kStopped = "Stopped with strategy 'Stop'";
constexpr std::string_view kTerminated = "Stopped with strategy 'Terminate'";
constexpr std::string_view kDeadline = "Max duration limit exceeded";
// Argo caps outputs.result and output parameters at 256 kB.
constexpr std::size_t kMaxOutputBytes = 256 * 1024;

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

// One call of a template: what ExecuteTemplate needs besides the name.
struct Call {
  const Template* tmpl = nullptr;
  std::string template_ref;  // "WFT/TEMPLATE" when resolved by templateRef
  std::vector<NodeParameter> arguments;
  std::vector<Artifact> artifact_arguments;    // a task's arguments.artifacts, substituted
  std::vector<InputArtifact> input_artifacts;  // resolved for the template
  std::string display_name;
  bool on_exit = false;
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
  // Runs a step's or task's onExit handler once `node` is done; true when
  // there is none or it is done too.
  bool ExitHandlerDone(const Node& node, const std::string& on_exit, const std::string& boundary,
                       const Scope& scope);
  void FinishWithOutputs(Node& node, const Call& call, const Scope& scope, NodePhase phase,
                         std::string message = "");

  // Resolves a step's or task's template and arguments against `scope`.
  Result<Call> CallOf(const Task& task, const Scope& scope, const std::string& display);
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

Node& Operator::Create(const std::string& name, NodeType type, const Call& call,
                       const std::string& boundary, NodePhase phase, std::string message) {
  Node node;
  node.id = NodeIdFor(state_.name, name);
  node.name = name;
  node.display_name = call.display_name.empty() ? name : call.display_name;
  node.type = type;
  node.template_name = call.tmpl != nullptr ? call.tmpl->name : "";
  node.template_ref = call.template_ref;
  node.boundary_id = boundary;
  node.on_exit = call.on_exit || in_exit_handler_;
  node.inputs = call.arguments;
  node.message = std::move(message);
  node.started_at = env_.now;
  node.phase = phase;
  if (IsDone(phase)) node.finished_at = env_.now;
  out_.changed = true;
  return state_.nodes[node.id] = std::move(node);
}

Node& Operator::Settled(const std::string& name, const std::string& display, NodeType type,
                        const std::string& boundary, const std::string& parent_id, NodePhase phase,
                        std::string message) {
  Call call;
  call.display_name = display;
  Node& node = Create(name, type, call, boundary, phase, std::move(message));
  AddChild(state_.nodes.at(parent_id), node);
  return node;
}

void Operator::SetPhase(Node& node, NodePhase phase, std::string message) {
  if (node.phase == phase && node.message == message) return;
  if (node.type == NodeType::kPod && !node.job.empty() && !node.Fulfilled() && IsDone(phase)) {
    --active_pods_;
  }
  node.phase = phase;
  node.message = std::move(message);
  if (IsDone(phase) && !node.finished_at) node.finished_at = env_.now;
  if (phase == NodePhase::kRunning && !node.started_at) node.started_at = env_.now;
  out_.changed = true;
}

void Operator::FailUnresolvable(Node& node, std::string message) {
  if (node.type == NodeType::kPod && !node.job.empty()) out_.stop.push_back(node.job);
  SetPhase(node, NodePhase::kError, std::move(message));
}

void Operator::AddChild(Node& parent, const Node& child) {
  if (std::find(parent.children.begin(), parent.children.end(), child.id) ==
      parent.children.end()) {
    parent.children.push_back(child.id);
    out_.changed = true;
  }
}

void Operator::Run() {
  if (state_.Finished()) return;
  if (state_.phase == NodePhase::kPending) {
    state_.phase = NodePhase::kRunning;
    state_.started_at = env_.now;
    out_.changed = true;
  }
  for (const auto& [id, node] : state_.nodes) {
    if (node.type == NodeType::kPod && !node.Fulfilled()) ++active_pods_;
  }
  if (spec_.active_deadline_seconds && state_.started_at) {
    Time deadline = *state_.started_at + std::chrono::seconds(*spec_.active_deadline_seconds);
    if (env_.now >= deadline) {
      deadline_passed_ = true;
      if (state_.shutdown == Shutdown::kNone) {
        state_.shutdown = Shutdown::kStop;
        out_.changed = true;
      }
    } else {
      Wake(deadline);
    }
  }
  if (!env_.stop_reason.empty() && state_.shutdown != Shutdown::kTerminate) {
    state_.shutdown = Shutdown::kTerminate;
    out_.changed = true;
  }
  // Stopping: every unfinished step's job is asked to stop, once.
  if (Stopping()) {
    for (auto& [id, node] : state_.nodes) {
      if (node.Fulfilled()) continue;
      if (node.on_exit && state_.shutdown == Shutdown::kStop) continue;
      if (node.type == NodeType::kPod && !node.job.empty() && node.message != ShutdownMessage()) {
        out_.stop.push_back(node.job);
        node.message = ShutdownMessage();
        out_.changed = true;
      } else if (node.type == NodeType::kSuspend) {
        SetPhase(node, NodePhase::kFailed, ShutdownMessage());
      }
    }
  }

  WorkflowMeta meta;
  meta.name = state_.name;
  meta.uid = state_.uid;
  meta.service_account_name = spec_.service_account_name;
  meta.main_entrypoint = spec_.entrypoint;
  meta.creation_unix_seconds =
      state_.started_at ? ToUnixMillis(*state_.started_at) / 1000 : ToUnixMillis(env_.now) / 1000;
  meta.priority = spec_.priority;
  for (const Parameter& p : spec_.arguments.parameters) {
    meta.parameters.emplace_back(p.name, p.value.value_or(p.default_value.value_or("")));
  }
  meta.labels = env_.metadata.labels;
  meta.annotations = env_.metadata.annotations;
  AddWorkflowVariables(meta, &global_);
  for (const NodeParameter& p : state_.outputs)
    global_["workflow.outputs.parameters." + p.name] = p.value;

  const Template* entry = spec_.FindTemplate(spec_.entrypoint);
  if (entry == nullptr) {
    state_.phase = NodePhase::kError;
    state_.message = "entrypoint template '" + spec_.entrypoint + "' not found";
    state_.finished_at = env_.now;
    out_.changed = true;
    return;
  }
  Call root_call;
  root_call.tmpl = entry;
  root_call.display_name = state_.name;
  for (const Parameter& p : spec_.arguments.parameters) {
    if (p.value) root_call.arguments.push_back({p.name, *p.value});
  }
  Node* root = Execute(state_.name, root_call, "", global_);
  if (root == nullptr || !root->Fulfilled()) {
    if (root != nullptr) {
      int done = 0, total = 0;
      Progress(*root, &done, &total);
    }
    return;
  }
  int done = 0, total = 0;
  Progress(*root, &done, &total);
  NodePhase phase = root->phase == NodePhase::kSucceeded || root->phase == NodePhase::kSkipped
                        ? NodePhase::kSucceeded
                        : root->phase;
  std::string message = root->message;
  if (!spec_.on_exit.empty() && state_.shutdown != Shutdown::kTerminate) {
    Scope scope = global_;
    scope["workflow.status"] = std::string(NodePhaseName(phase));
    json failures = json::array();
    for (const auto& [id, node] : state_.nodes) {
      if (IsFailure(node.phase) && node.type == NodeType::kPod) {
        failures.push_back(
            {{"displayName", node.display_name},
             {"message", node.message},
             {"templateName", node.template_name},
             {"phase", std::string(NodePhaseName(node.phase))},
             {"podName", node.job},
             {"finishedAt", node.finished_at ? headway::FormatRfc3339(*node.finished_at) : ""}});
      }
    }
    scope["workflow.failures"] = failures.dump();
    if (state_.started_at) {
      scope["workflow.duration"] =
          FormatJsonNumber(static_cast<double>((env_.now - *state_.started_at).count()) / 1000.0);
    }
    Call exit_call;
    exit_call.tmpl = spec_.FindTemplate(spec_.on_exit);
    exit_call.display_name = state_.name + ".onExit";
    exit_call.on_exit = true;
    if (exit_call.tmpl == nullptr) {
      phase = NodePhase::kError;
      message = "onExit template '" + spec_.on_exit + "' not found";
    } else {
      // Exit handlers run even after a stop: lift it for them.
      Shutdown saved = state_.shutdown;
      if (saved == Shutdown::kStop) state_.shutdown = Shutdown::kNone;
      in_exit_handler_ = true;
      Node* handler = Execute(state_.name + ".onExit", exit_call, "", scope);
      in_exit_handler_ = false;
      state_.shutdown = saved;
      if (handler == nullptr || !handler->Fulfilled()) return;
      if (IsFailure(handler->phase) && phase == NodePhase::kSucceeded) {
        phase = handler->phase;
        message = "exit handler failed: " + handler->message;
      }
    }
  }
  state_.phase = phase;
  if (Stopping()) message = ShutdownMessage();
  state_.message = message;
  state_.finished_at = env_.now;
  out_.changed = true;
}

void Operator::Progress(Node& node, int* done, int* total) {
  int d = 0, t = 0;
  if (node.type == NodeType::kPod) {
    d = node.Fulfilled() ? 1 : 0;
    t = 1;
  }
  for (const std::string& child_id : node.children) {
    auto it = state_.nodes.find(child_id);
    if (it != state_.nodes.end()) Progress(it->second, &d, &t);
  }
  std::string progress = std::to_string(d) + "/" + std::to_string(t);
  if (node.progress != progress) {
    node.progress = progress;
    out_.changed = true;
  }
  *done += d;
  *total += t;
}

Node* Operator::Execute(const std::string& name, const Call& call, const std::string& boundary,
                        const Scope& outer, bool in_retry, int retry_index) {
  Node* node = Find(name);
  if (node != nullptr && node->Fulfilled()) return node;
  // A template that calls itself without waiting for anything would nest
  // for ever in one pass (Argo stops at the same depth).
  if (depth_ >= kMaxDepth) {
    if (node != nullptr) return node;
    return &Create(name, NodeType::kPod, call, boundary, NodePhase::kError,
                   "maximum recursion depth exceeded");
  }
  struct Deeper {
    int& depth;
    explicit Deeper(int& d) : depth(++d) {}
    ~Deeper() { --depth; }
  } deeper(depth_);
  const Template& tmpl = *call.tmpl;

  // Retries wrap the template: a Retry node whose children are the attempts.
  const std::optional<RetryStrategy>& strategy =
      tmpl.retry_strategy ? tmpl.retry_strategy : spec_.retry_strategy;
  if (!in_retry && strategy &&
      (tmpl.kind == TemplateKind::kContainer || tmpl.kind == TemplateKind::kScript ||
       tmpl.retry_strategy)) {
    return ExecuteRetry(node, name, call, boundary, outer, *strategy);
  }

  // Inputs: arguments by name, else the template's value or default.
  // A template sees the workflow's variables and its own inputs (Argo
  // resolves tasks.* and steps.* in the caller's arguments), plus what an
  // exit handler is given (workflow.status, steps.status ...). Built from
  // the small global scope, not the caller's: a DAG's scope holds every
  // finished task's outputs, and copying it per task would make a large
  // DAG quadratic.
  Scope scope = global_;
  for (auto it = outer.lower_bound("workflow.");
       it != outer.end() && it->first.rfind("workflow.", 0) == 0; ++it) {
    scope[it->first] = it->second;
  }
  for (const char* key : {"steps.status", "tasks.status"}) {
    auto it = outer.find(key);
    if (it != outer.end()) scope[key] = it->second;
  }
  std::vector<std::pair<std::string, std::string>> inputs;
  std::vector<NodeParameter> resolved;
  for (const Parameter& p : tmpl.inputs.parameters) {
    std::optional<std::string> value;
    for (const NodeParameter& a : call.arguments) {
      if (a.name == p.name) value = a.value;
    }
    if (!value) value = p.value ? p.value : p.default_value;
    if (!value) {
      if (node != nullptr) return node;
      Call bad = call;
      return &Create(name, NodeType::kPod, bad, boundary, NodePhase::kError,
                     "inputs.parameters." + p.name + " was not supplied");
    }
    auto substituted = Substitute(*value, global_, Unresolved::kKeep);
    if (substituted.ok()) value = *substituted;
    if (!p.enum_values.empty() &&
        std::find(p.enum_values.begin(), p.enum_values.end(), *value) == p.enum_values.end()) {
      if (node != nullptr) return node;
      return &Create(
          name, NodeType::kPod, call, boundary, NodePhase::kError,
          "inputs.parameters." + p.name + " value '" + *value + "' is not one of its enum values");
    }
    inputs.emplace_back(p.name, *value);
    resolved.push_back({p.name, *value});
  }
  // Input artifacts: from the call's arguments (by name), else the template's own source.
  std::vector<NodeArtifact> input_artifacts;
  std::vector<InputArtifact> to_stage;
  std::map<std::string, std::string> input_paths;
  for (const Artifact& a : tmpl.inputs.artifacts) {
    const Artifact* source = &a;
    for (const Artifact& given : call.artifact_arguments) {
      if (given.name == a.name) source = &given;
    }
    InputArtifact in;
    in.name = a.name;
    in.path = a.path;
    std::string error;
    if (source->raw_data) {
      in.raw = *source->raw_data;
    } else if (!source->from.empty()) {
      auto ref = Substitute(source->from, outer, Unresolved::kError);
      if (ref.ok()) {
        in.ref = *ref;
      } else {
        error = "inputs.artifacts." + a.name + ": " + ref.status().message();
      }
    } else if (source->s3) {
      auto key = Substitute(source->s3->key, outer, Unresolved::kError);
      auto stored = key.ok() ? KeyOnly(*source->s3, *key) : Result<std::string>(key.status());
      if (stored.ok()) {
        in.ref = *stored;  // its latest version
      } else {
        error = "inputs.artifacts." + a.name + ".s3: " + stored.status().message();
      }
    } else if (!source->http_url.empty()) {
      error = "inputs.artifacts." + a.name +
              ": http sources are not supported; pass artifacts with `from` or `s3.key`";
    } else if (!a.optional) {
      error = "inputs.artifacts." + a.name + " was not supplied";
    } else {
      continue;
    }
    if (!error.empty()) {
      if (node != nullptr) return node;
      return &Create(name, NodeType::kPod, call, boundary, NodePhase::kError, error);
    }
    input_artifacts.push_back({a.name, a.path, in.ref});
    to_stage.push_back(std::move(in));
  }
  AddInputVariables(inputs, {}, &scope);
  // Artifact paths may use parameters and workflow variables.
  for (std::size_t i = 0; i < to_stage.size(); ++i) {
    auto path = Substitute(to_stage[i].path, scope, Unresolved::kKeep);
    if (path.ok()) to_stage[i].path = input_artifacts[i].path = *path;
    input_paths[to_stage[i].name] = to_stage[i].path;
  }
  for (const auto& [artifact, path] : input_paths)
    scope["inputs.artifacts." + artifact + ".path"] = path;
  if (in_retry) scope["retries"] = std::to_string(retry_index);
  Call resolved_call = call;
  resolved_call.arguments = resolved;
  resolved_call.input_artifacts = std::move(to_stage);

  if (node == nullptr) {
    // Memoized: a fresh enough entry for the key ends the node at once.
    if (tmpl.memoize && env_.memo_lookup) {
      auto key = Substitute(tmpl.memoize->key, scope, Unresolved::kError);
      if (!key.ok()) {
        return &Create(name, NodeType::kPod, resolved_call, boundary, NodePhase::kError,
                       "memoize.key: " + key.status().message());
      }
      std::string cache =
          tmpl.memoize->config_map_name.empty() ? "default" : tmpl.memoize->config_map_name;
      std::optional<MemoEntry> hit = env_.memo_lookup(cache, *key);
      if (hit && !tmpl.memoize->max_age.empty()) {
        auto max_age = ParseArgoDuration(tmpl.memoize->max_age);
        if (max_age && env_.now - hit->saved_at > *max_age) hit.reset();
      }
      if (hit) {
        Node& n = Create(name, NodeType::kPod, resolved_call, boundary, NodePhase::kSucceeded);
        n.memo_key = *key;
        n.memo_hit = true;
        n.outputs = hit->outputs;
        n.result = hit->result;
        return &n;
      }
    }
    NodeType type = NodeType::kPod;
    switch (tmpl.kind) {
      case TemplateKind::kSteps:
        type = NodeType::kSteps;
        break;
      case TemplateKind::kDag:
        type = NodeType::kDag;
        break;
      case TemplateKind::kSuspend:
        type = NodeType::kSuspend;
        break;
      default:
        break;
    }
    if (type == NodeType::kPod && !MayStartPod()) return nullptr;
    if (type != NodeType::kPod && Stopping()) return nullptr;
    node = &Create(name, type, resolved_call, boundary,
                   type == NodeType::kPod ? NodePhase::kPending : NodePhase::kRunning);
    node->input_artifacts = std::move(input_artifacts);
    if (tmpl.memoize) {
      auto key = Substitute(tmpl.memoize->key, scope, Unresolved::kKeep);
      node->memo_key = key.ok() ? *key : tmpl.memoize->key;
      node->memo_hit = false;
    }
  }
  switch (tmpl.kind) {
    case TemplateKind::kContainer:
    case TemplateKind::kScript:
      ExecutePod(*node, resolved_call, scope);
      break;
    case TemplateKind::kSteps:
      ExecuteSteps(*node, resolved_call, std::move(scope));
      break;
    case TemplateKind::kDag:
      ExecuteDag(*node, resolved_call, std::move(scope));
      break;
    case TemplateKind::kSuspend:
      ExecuteSuspend(*node, resolved_call, scope);
      break;
  }
  if (node->Fulfilled() && node->phase == NodePhase::kSucceeded && tmpl.memoize &&
      !node->memo_hit.value_or(false) && !node->memo_key.empty()) {
    MemoEntry entry;
    entry.cache = tmpl.memoize->config_map_name.empty() ? "default" : tmpl.memoize->config_map_name;
    entry.key = node->memo_key;
    entry.outputs = node->outputs;
    entry.result = node->result;
    entry.saved_at = env_.now;
    out_.memoize.push_back(std::move(entry));
  }
  return node;
}

Node* Operator::ExecuteRetry(Node* node, const std::string& name, const Call& call,
                             const std::string& boundary, const Scope& outer,
                             const RetryStrategy& strategy) {
  if (node == nullptr) {
    if (call.tmpl->kind == TemplateKind::kContainer || call.tmpl->kind == TemplateKind::kScript) {
      if (!MayStartPod()) return nullptr;
    } else if (Stopping()) {
      return nullptr;
    }
    node = &Create(name, NodeType::kRetry, call, boundary, NodePhase::kRunning);
  }
  std::optional<std::int64_t> limit;
  if (strategy.limit) {
    auto text = Substitute(strategy.limit->text, outer, Unresolved::kKeep);
    limit = ParseInteger(text.ok() ? *text : strategy.limit->text);
    if (!limit || *limit < 0) {
      SetPhase(*node, NodePhase::kError,
               "retryStrategy.limit '" + strategy.limit->text + "' is not a whole number");
      return node;
    }
  }
  const std::string node_id = node->id;
  const std::size_t attempts = node->children.size();
  Node* last = nullptr;
  if (attempts > 0) {
    auto it = state_.nodes.find(state_.nodes.at(node_id).children.back());
    if (it != state_.nodes.end()) last = &it->second;
  }
  auto start_attempt = [&](std::size_t index) -> Node* {
    Call attempt = call;
    attempt.display_name = call.display_name + "(" + std::to_string(index) + ")";
    Node* child = Execute(name + "(" + std::to_string(index) + ")", attempt, boundary, outer,
                          /*in_retry=*/true, static_cast<int>(index));
    Node& self = state_.nodes.at(node_id);
    if (child != nullptr) AddChild(self, *child);
    return child;
  };
  if (last == nullptr) {
    start_attempt(0);
    return &state_.nodes.at(node_id);
  }
  if (!last->Fulfilled()) {
    const std::string last_name = last->name;
    Call attempt = call;
    attempt.display_name = call.display_name + "(" + std::to_string(attempts - 1) + ")";
    Execute(last_name, attempt, boundary, outer, true, static_cast<int>(attempts - 1));
    Node* now_last = &state_.nodes.at(state_.nodes.at(node_id).children.back());
    if (!now_last->Fulfilled()) return &state_.nodes.at(node_id);
    last = now_last;
  }
  Node& self = state_.nodes.at(node_id);
  if (last->phase == NodePhase::kSucceeded || last->phase == NodePhase::kSkipped) {
    self.outputs = last->outputs;
    self.output_artifacts = last->output_artifacts;
    self.result = last->result;
    self.exit_code = last->exit_code;
    self.retry_after.reset();
    SetPhase(self, last->phase);
    return &self;
  }
  // Which failures this strategy retries.
  bool retryable = false;
  switch (strategy.retry_policy) {
    case RetryPolicy::kAlways:
      retryable = IsFailure(last->phase);
      break;
    case RetryPolicy::kOnError:
    case RetryPolicy::kOnTransientError:
      retryable = last->phase == NodePhase::kError;
      break;
    case RetryPolicy::kDefault:
    case RetryPolicy::kOnFailure:
      retryable = last->phase == NodePhase::kFailed;
      break;
  }
  auto fail = [&](std::string message) {
    self.exit_code = last->exit_code;
    self.retry_after.reset();
    SetPhase(self, last->phase, std::move(message));
    return &self;
  };
  if (!retryable || Stopping()) return fail(last->message);
  if (limit && static_cast<std::int64_t>(attempts) > *limit) {
    return fail(last->message.empty() ? "No more retries left"
                                      : last->message + " (no more retries left)");
  }
  // Backoff: duration * factor^(attempts-1) after the last attempt ended,
  // within maxDuration of the first attempt's start.
  if (strategy.backoff && !strategy.backoff->duration.empty()) {
    auto base = ParseArgoDuration(strategy.backoff->duration);
    double factor = 1;
    if (strategy.backoff->factor) {
      auto f = ParseInteger(strategy.backoff->factor->text);
      if (f) factor = static_cast<double>(*f);
    }
    if (base) {
      double ms = static_cast<double>(base->count()) * std::pow(factor, attempts - 1);
      Time ready = last->finished_at.value_or(env_.now) +
                   Duration(static_cast<std::int64_t>(std::min(ms, 1e13)));
      if (!strategy.backoff->max_duration.empty()) {
        auto max = ParseArgoDuration(strategy.backoff->max_duration);
        Time first_start = self.started_at.value_or(env_.now);
        if (max && ready - first_start > *max) {
          return fail("Max duration limit exceeded: " + last->message);
        }
      }
      if (env_.now < ready) {
        if (self.retry_after != ready) {
          self.retry_after = ready;
          out_.changed = true;
        }
        Wake(ready);
        return &self;
      }
    }
  }
  if (!MayStartPod() &&
      (call.tmpl->kind == TemplateKind::kContainer || call.tmpl->kind == TemplateKind::kScript)) {
    return &self;
  }
  start_attempt(attempts);
  return &state_.nodes.at(node_id);
}

void Operator::ExecutePod(Node& node, const Call& call, const Scope& scope) {
  const Template& tmpl = *call.tmpl;
  if (node.job.empty()) {
    // A new pod node: its job, from the substituted template.
    // A node run again by a retry gets a new job: the old one keeps its logs.
    node.job = JobNameFor(
        state_.name,
        state_.generation == 0 ? state_.uid : state_.uid + "/" + std::to_string(state_.generation),
        node.name);
    ++active_pods_;
    ++new_pods_;
    out_.changed = true;
  }
  std::optional<JobObservation> seen =
      env_.observe ? env_.observe(node.job) : std::optional<JobObservation>();
  if (!seen) {
    if (node.started_at && node.phase == NodePhase::kRunning) {
      SetPhase(node, NodePhase::kError, "its job " + node.job + " is gone");
      return;
    }
    if (Stopping()) {
      SetPhase(node, NodePhase::kFailed, ShutdownMessage());
      return;
    }
    // Not created yet (or created and lost in a crash): (re)create it; a
    // job that exists already is found by name and not created twice.
    const Container& c = *tmpl.container;
    auto build = [&]() -> Result<JobToCreate> {
      JobToCreate job;
      job.node_id = node.id;
      job.image = c.image;
      JobSpec& spec = job.spec;
      spec.name = node.job;
      spec.team = env_.team;
      if (auto queue = HeadwayValue(env_.metadata, &tmpl.metadata, kQueueKey)) spec.queue = *queue;
      if (auto priority = HeadwayValue(env_.metadata, &tmpl.metadata, kPriorityKey)) {
        auto p = ParseInteger(*priority);
        if (!p)
          return InvalidArgument(std::string(kPriorityKey) + " '" + *priority +
                                 "' is not a whole number");
        spec.priority = static_cast<int>(*p);
      } else if (spec_.priority) {
        spec.priority = *spec_.priority;
      }
      // Argo's pod.name (here the job's name) and node.name.
      Scope pod_scope = scope;
      pod_scope["pod.name"] = node.job;
      pod_scope["node.name"] = node.name;
      auto subst = [&](const std::string& text, const std::string& field) -> Result<std::string> {
        auto r = Substitute(text, pod_scope, Unresolved::kError);
        if (!r.ok()) return InvalidArgument(field + ": " + r.status().message());
        return r;
      };
      for (std::size_t i = 0; i < c.command.size(); ++i) {
        auto v = subst(c.command[i], "command[" + std::to_string(i) + "]");
        if (!v.ok()) return v.status();
        spec.command.push_back(*v);
      }
      for (std::size_t i = 0; i < c.args.size(); ++i) {
        auto v = subst(c.args[i], "args[" + std::to_string(i) + "]");
        if (!v.ok()) return v.status();
        spec.args.push_back(*v);
      }
      if (spec.command.empty()) {
        if (tmpl.kind == TemplateKind::kScript) {
          return InvalidArgument(
              "script has no command: say which program runs its source "
              "(e.g. command: [python3])");
        }
        if (spec.args.empty()) {
          return InvalidArgument(
              "container has no command: steps run as processes on the "
              "pool, without the image's entrypoint");
        }
        // Argo runs args with the image's entrypoint; with none, args are the command.
        spec.command = std::move(spec.args);
        spec.args.clear();
      }
      for (const EnvVar& e : c.env) {
        auto v = subst(e.value, "env." + e.name);
        if (!v.ok()) return v.status();
        spec.env[e.name] = *v;
      }
      if (!c.working_dir.empty()) {
        auto v = subst(c.working_dir, "workingDir");
        if (!v.ok()) return v.status();
        spec.working_dir = *v;
      }
      if (tmpl.kind == TemplateKind::kScript) {
        auto v = subst(c.source, "source");
        if (!v.ok()) return v.status();
        job.script_source = *v;
      }
      auto resources = NodeResourcesOf(tmpl);
      if (!resources.ok()) return resources.status();
      int gpus = resources->gpus;
      if (gpus == 0) {
        if (auto g = HeadwayValue(env_.metadata, &tmpl.metadata, kGpusKey)) {
          auto n = ParseInteger(*g);
          if (!n || *n < 0)
            return InvalidArgument(std::string(kGpusKey) + " '" + *g + "' is not a whole number");
          gpus = static_cast<int>(*n);
        }
      }
      spec.resources.gpus_per_process = gpus;
      spec.resources.cpus = resources->cpus;
      spec.resources.memory_bytes = resources->memory_bytes;
      if (tmpl.active_deadline_seconds) {
        auto text = Substitute(tmpl.active_deadline_seconds->text, scope, Unresolved::kError);
        auto seconds = text.ok() ? ParseInteger(*text) : std::nullopt;
        if (!seconds || *seconds <= 0) {
          return InvalidArgument("activeDeadlineSeconds '" + tmpl.active_deadline_seconds->text +
                                 "' is not a positive whole number");
        }
        spec.time_limit = std::chrono::seconds(*seconds);
      } else if (!tmpl.timeout.empty()) {
        auto text = Substitute(tmpl.timeout, scope, Unresolved::kError);
        auto timeout = text.ok() ? ParseArgoDuration(*text) : std::nullopt;
        if (!timeout) return InvalidArgument("timeout '" + tmpl.timeout + "' is not a duration");
        spec.time_limit = *timeout;
      }
      for (const Parameter& p : tmpl.outputs.parameters) {
        if (p.value_from && !p.value_from->path.empty()) {
          auto v = subst(p.value_from->path, "outputs.parameters." + p.name + ".valueFrom.path");
          if (!v.ok()) return v.status();
          job.output_paths[p.name] = *v;
        }
      }
      for (const InputArtifact& in : call.input_artifacts) {
        InputArtifact staged = in;
        auto path = subst(in.path, "inputs.artifacts." + in.name + ".path");
        if (!path.ok()) return path.status();
        staged.path = *path;
        if (staged.path.empty() || staged.path[0] != '/') {
          return InvalidArgument("inputs.artifacts." + in.name + ".path must be absolute");
        }
        job.input_artifacts.push_back(std::move(staged));
      }
      for (const Artifact& a : tmpl.outputs.artifacts) {
        auto path = subst(a.path, "outputs.artifacts." + a.name + ".path");
        if (!path.ok()) return path.status();
        if (path->empty() || (*path)[0] != '/') {
          return InvalidArgument("outputs.artifacts." + a.name + ".path must be absolute");
        }
        std::string store_as;
        if (a.s3) {
          auto key = subst(a.s3->key, "outputs.artifacts." + a.name + ".s3.key");
          if (!key.ok()) return key.status();
          auto stored = KeyOnly(*a.s3, *key);
          if (!stored.ok()) {
            return InvalidArgument("outputs.artifacts." + a.name +
                                   ".s3: " + stored.status().message());
          }
          store_as = *stored;
        }
        job.output_artifacts.push_back({a.name, *path, a.optional, store_as});
      }
      spec.labels["workflows.argoproj.io/workflow"] = state_.name;
      return job;
    };
    auto job = build();
    if (!job.ok()) {
      SetPhase(node, NodePhase::kError, job.status().message());
      return;
    }
    node.artifact_names.clear();
    for (const OutputArtifact& a : job->output_artifacts) {
      if (!a.store_as.empty()) node.artifact_names[a.name] = a.store_as;
    }
    out_.create.push_back(std::move(*job));
    return;
  }
  switch (seen->state) {
    case JobState::kQueued:
    case JobState::kStarting:
    case JobState::kPreempted:
      if (node.phase != NodePhase::kPending) SetPhase(node, NodePhase::kPending, node.message);
      return;
    case JobState::kRunning:
      if (node.phase != NodePhase::kRunning) {
        if (seen->started_at) node.started_at = seen->started_at;
        SetPhase(node, NodePhase::kRunning, node.message);
      }
      return;
    case JobState::kSucceeded: {
      if (seen->started_at) node.started_at = seen->started_at;
      if (seen->finished_at) node.finished_at = seen->finished_at;
      node.exit_code = "0";
      node.outputs.clear();
      for (const Parameter& p : tmpl.outputs.parameters) {
        std::optional<std::string> value;
        if (p.value_from && !p.value_from->path.empty()) {
          auto it = seen->parameters.find(p.name);
          if (it != seen->parameters.end()) value = TrimTrailingNewlines(it->second);
          if (!value && p.value_from->default_value) value = *p.value_from->default_value;
          if (!value) {
            SetPhase(node, NodePhase::kError,
                     "outputs.parameters." + p.name + ": no file at " + p.value_from->path);
            return;
          }
        } else if (p.value) {
          auto v = Substitute(*p.value, scope, Unresolved::kKeep);
          value = v.ok() ? *v : *p.value;
        } else if (p.value_from && p.value_from->default_value) {
          value = *p.value_from->default_value;
        }
        if (value) {
          if (value->size() > kMaxOutputBytes) {
            SetPhase(node, NodePhase::kError,
                     "outputs.parameters." + p.name + " is larger than 256 kB");
            return;
          }
          node.outputs.push_back({p.name, *value});
          if (!p.global_name.empty()) {
            auto g = std::find_if(state_.outputs.begin(), state_.outputs.end(),
                                  [&](const NodeParameter& o) { return o.name == p.global_name; });
            if (g == state_.outputs.end()) {
              state_.outputs.push_back({p.global_name, *value});
            } else {
              g->value = *value;
            }
          }
        }
      }
      if (!seen->artifact_error.empty()) {
        SetPhase(node, NodePhase::kError, seen->artifact_error);
        return;
      }
      node.output_artifacts.clear();
      for (const Artifact& a : tmpl.outputs.artifacts) {
        auto it = seen->artifacts.find(a.name);
        if (it == seen->artifacts.end()) {
          if (a.optional) continue;
          SetPhase(node, NodePhase::kError,
                   "outputs.artifacts." + a.name + ": nothing at " + a.path);
          return;
        }
        node.output_artifacts.push_back({a.name, a.path, it->second});
      }
      if (seen->stdout_text) {
        std::string result = TrimTrailingNewlines(*seen->stdout_text);
        if (result.size() > kMaxOutputBytes) result.resize(kMaxOutputBytes);
        node.result = std::move(result);
      }
      SetPhase(node, NodePhase::kSucceeded, "");
      return;
    }
    case JobState::kFailed:
    case JobState::kStopped: {
      if (seen->started_at) node.started_at = seen->started_at;
      if (seen->finished_at) node.finished_at = seen->finished_at;
      if (seen->exit_code) node.exit_code = std::to_string(*seen->exit_code);
      std::string message = seen->message;
      if (Stopping()) {
        message = ShutdownMessage();
      } else if (seen->exit_code && (message.empty() || seen->reason == "ExitCode")) {
        // Argo's words for a step that exited non-zero.
        message = "Error (exit code " + std::to_string(*seen->exit_code) + ")";
      }
      if (seen->stdout_text) node.result = TrimTrailingNewlines(*seen->stdout_text);
      SetPhase(node, NodePhase::kFailed, message);
      return;
    }
  }
}

Result<Call> Operator::CallOf(const Task& task, const Scope& scope, const std::string& display) {
  Call call;
  call.display_name = display;
  if (task.template_ref) {
    if (!env_.resolve_ref) return NotFound("templateRef: no WorkflowTemplates here");
    call.tmpl = env_.resolve_ref(*task.template_ref);
    if (call.tmpl == nullptr) {
      return NotFound("templateRef: no template '" + task.template_ref->template_name +
                      "' in WorkflowTemplate '" + task.template_ref->name + "'");
    }
    call.template_ref = task.template_ref->name + "/" + task.template_ref->template_name;
  } else {
    call.tmpl = spec_.FindTemplate(task.template_name);
    if (call.tmpl == nullptr) return NotFound("no template named '" + task.template_name + "'");
  }
  for (const Parameter& p : task.arguments.parameters) {
    std::string value = p.value.value_or(p.default_value.value_or(""));
    if (p.value_from && !p.value_from->parameter.empty()) value = p.value_from->parameter;
    auto v = Substitute(value, scope, Unresolved::kError);
    if (!v.ok())
      return InvalidArgument("arguments.parameters." + p.name + ": " + v.status().message());
    call.arguments.push_back({p.name, *v});
  }
  for (const Artifact& a : task.arguments.artifacts) {
    Artifact given = a;
    if (!a.from.empty()) {
      auto ref = Substitute(a.from, scope, Unresolved::kError);
      if (!ref.ok()) {
        return InvalidArgument("arguments.artifacts." + a.name + ": " + ref.status().message());
      }
      given.from = *ref;
    }
    if (a.raw_data) {
      auto raw = Substitute(*a.raw_data, scope, Unresolved::kError);
      if (!raw.ok()) {
        return InvalidArgument("arguments.artifacts." + a.name + ": " + raw.status().message());
      }
      given.raw_data = *raw;
    }
    call.artifact_arguments.push_back(std::move(given));
  }
  return call;
}

Result<std::vector<LoopItem>> Operator::Items(const Task& task, const Scope& scope) {
  auto items = ExpandItems(task, scope);
  const std::size_t limit = std::min(env_.max_nodes, kMaxWorkflowNodes);
  if (items.ok() && state_.nodes.size() + items->size() > limit) {
    return InvalidArgument("its " + std::to_string(items->size()) +
                           " items would take the workflow past " + env_.node_limit_reason +
                           " of " + std::to_string(limit) + " nodes (it has " +
                           std::to_string(state_.nodes.size()) + ")");
  }
  return items;
}

Result<std::vector<LoopItem>> Operator::ExpandItems(const Task& task, const Scope& scope) {
  if (task.with_items) {
    // Strings inside items may hold variables.
    auto items = SubstituteJson(json(*task.with_items), scope, Unresolved::kError);
    if (!items.ok()) return InvalidArgument("withItems: " + items.status().message());
    return ExpandWithItems(*items);
  }
  if (!task.with_param.empty()) {
    auto text = Substitute(task.with_param, scope, Unresolved::kError);
    if (!text.ok()) return InvalidArgument("withParam: " + text.status().message());
    return ExpandWithParam(*text);
  }
  LoopSequence seq;
  auto field = [&](const std::optional<IntOrString>& v) -> Result<std::optional<std::string>> {
    if (!v) return std::optional<std::string>();
    auto text = Substitute(v->text, scope, Unresolved::kError);
    if (!text.ok()) return text.status();
    return std::optional<std::string>(*text);
  };
  auto count = field(task.with_sequence->count);
  auto start = field(task.with_sequence->start);
  auto end = field(task.with_sequence->end);
  for (auto* r : {&count, &start, &end}) {
    if (!r->ok()) return InvalidArgument("withSequence: " + r->status().message());
  }
  seq.count = *count;
  seq.start = *start;
  seq.end = *end;
  seq.format = task.with_sequence->format;
  return ExpandWithSequence(seq);
}

namespace {
// What `from: "{{tasks.A.outputs.artifacts.x}}"` reads: the version's ref.
void AddArtifactRefs(std::string_view prefix, const Node& node, Scope* scope) {
  for (const NodeArtifact& a : node.output_artifacts) {
    (*scope)[std::string(prefix) + ".outputs.artifacts." + a.name] = a.ref;
  }
}

NodeOutputs OutputsOf(const Node& node) {
  NodeOutputs out;
  out.id = node.id;
  out.phase = std::string(NodePhaseName(node.phase));
  out.result = node.result;
  out.exit_code = node.exit_code;
  if (node.started_at) out.started_at = headway::FormatRfc3339(*node.started_at);
  if (node.finished_at) out.finished_at = headway::FormatRfc3339(*node.finished_at);
  for (const NodeParameter& p : node.outputs) out.parameters.emplace_back(p.name, p.value);
  for (const NodeArtifact& a : node.output_artifacts) out.artifact_paths[a.name] = a.path;
  return out;
}
}  // namespace

bool Operator::ExitHandlerDone(const Node& node, const std::string& on_exit,
                               const std::string& boundary, const Scope& scope) {
  if (on_exit.empty() || state_.shutdown == Shutdown::kTerminate) return true;
  Call call;
  call.tmpl = spec_.FindTemplate(on_exit);
  call.display_name = node.display_name + ".onExit";
  call.on_exit = true;
  if (call.tmpl == nullptr) return true;
  Scope exit_scope = scope;
  exit_scope["steps.status"] = exit_scope["tasks.status"] = std::string(NodePhaseName(node.phase));
  Shutdown saved = state_.shutdown;
  if (saved == Shutdown::kStop) state_.shutdown = Shutdown::kNone;
  const bool outer = in_exit_handler_;
  in_exit_handler_ = true;
  Node* handler = Execute(node.name + ".onExit", call, boundary, exit_scope);
  in_exit_handler_ = outer;
  state_.shutdown = saved;
  return handler != nullptr && handler->Fulfilled();
}

void Operator::FinishWithOutputs(Node& node, const Call& call, const Scope& scope, NodePhase phase,
                                 std::string message) {
  if (phase == NodePhase::kSucceeded) {
    node.outputs.clear();
    for (const Parameter& p : call.tmpl->outputs.parameters) {
      std::string text;
      if (p.value_from && !p.value_from->parameter.empty()) {
        text = p.value_from->parameter;
      } else if (p.value) {
        text = *p.value;
      } else if (p.value_from && p.value_from->default_value) {
        text = *p.value_from->default_value;
      } else {
        continue;
      }
      auto v = Substitute(text, scope, Unresolved::kError);
      if (!v.ok()) {
        if (p.value_from && p.value_from->default_value) {
          v = *p.value_from->default_value;
        } else {
          SetPhase(node, NodePhase::kError,
                   "outputs.parameters." + p.name + ": " + v.status().message());
          return;
        }
      }
      node.outputs.push_back({p.name, *v});
      if (!p.global_name.empty()) state_.outputs.push_back({p.global_name, *v});
    }
    node.output_artifacts.clear();
    for (const Artifact& a : call.tmpl->outputs.artifacts) {
      if (a.from.empty()) continue;
      auto ref = Substitute(a.from, scope, Unresolved::kError);
      if (!ref.ok()) {
        if (a.optional) continue;
        SetPhase(node, NodePhase::kError,
                 "outputs.artifacts." + a.name + ": " + ref.status().message());
        return;
      }
      node.output_artifacts.push_back({a.name, a.path, *ref});
    }
  }
  SetPhase(node, phase, std::move(message));
}

void Operator::ExecuteSteps(Node& steps_node, const Call& call, Scope scope) {
  const std::string steps_id = steps_node.id;
  const std::string steps_name = steps_node.name;
  const StepGroups& groups = *call.tmpl->steps;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::string group_name = steps_name + "[" + std::to_string(g) + "]";
    Node* group = Find(group_name);
    if (group == nullptr) {
      if (Stopping()) break;
      Call group_call;
      group_call.display_name = "[" + std::to_string(g) + "]";
      group = &Create(group_name, NodeType::kStepGroup, group_call, steps_id, NodePhase::kRunning);
      group->template_name = call.tmpl->name;
      AddChild(state_.nodes.at(steps_id), *group);
    }
    const std::string group_id = group->id;
    bool all_done = true;
    bool failed = false;
    std::string failure;
    std::int64_t running = 0;
    for (const std::string& child_id : group->children) {
      auto it = state_.nodes.find(child_id);
      if (it != state_.nodes.end() && !it->second.Fulfilled()) ++running;
    }
    for (const Task& step : groups[g]) {
      const std::string step_name = group_name + "." + step.name;
      std::vector<std::pair<std::string, Scope>> instances;  // node name suffix, scope
      std::vector<std::string> members;                      // child nodes making up this step
      if (step.HasLoop()) {
        Node* skipped = Find(step_name);
        if (skipped != nullptr) continue;  // an empty loop: skipped once
        auto items = Items(step, scope);
        if (!items.ok()) {
          Node& n = Settled(step_name, step.name, NodeType::kSkipped, steps_id, group_id,
                            NodePhase::kError, items.status().message());
          failed = true;
          failure = n.message;
          continue;
        }
        if (items->empty()) {
          Settled(step_name, step.name, NodeType::kSkipped, steps_id, group_id, NodePhase::kSkipped,
                  "Skipped, empty params");
          continue;
        }
        for (const LoopItem& item : *items) {
          Scope s = scope;
          for (const auto& [k, v] : item.vars) s[k] = v;
          instances.emplace_back(item.node_suffix, std::move(s));
        }
      } else {
        instances.emplace_back("", scope);
      }
      for (auto& [suffix, item_scope] : instances) {
        const std::string name = step_name + suffix;
        Node* child = Find(name);
        if (child == nullptr) {
          auto when = ShouldExecute(step.when, item_scope);
          if (!when.ok()) {
            Node& n =
                Settled(name, step.name + suffix, NodeType::kSkipped, steps_id, group_id,
                        NodePhase::kError, "when '" + step.when + "': " + when.status().message());
            failed = true;
            failure = n.message;
            continue;
          }
          if (!*when) {
            Settled(name, step.name + suffix, NodeType::kSkipped, steps_id, group_id,
                    NodePhase::kSkipped,
                    "when '" + *Substitute(step.when, item_scope, Unresolved::kKeep) +
                        "' evaluated false");
            continue;
          }
          if (call.tmpl->parallelism && running >= *call.tmpl->parallelism) {
            all_done = false;
            continue;
          }
        }
        auto step_call = CallOf(step, item_scope, step.name + suffix);
        if (!step_call.ok()) {
          if (child == nullptr) {
            Settled(name, step.name + suffix, NodeType::kPod, steps_id, group_id, NodePhase::kError,
                    step_call.status().message());
          }
          failed = true;
          failure = step_call.status().message();
          continue;
        }
        const bool was_new = child == nullptr;
        child = Execute(name, *step_call, steps_id, item_scope);
        if (child == nullptr) {
          all_done = false;
          continue;
        }
        if (was_new && !child->Fulfilled()) ++running;
        AddChild(state_.nodes.at(group_id), *child);
        if (!child->Fulfilled()) {
          all_done = false;
          continue;
        }
        if (!ExitHandlerDone(*child, step.on_exit, steps_id, item_scope)) {
          all_done = false;
          continue;
        }
        if (IsFailure(child->phase)) {
          bool tolerated = step.continue_on &&
                           ((child->phase == NodePhase::kFailed && step.continue_on->failed) ||
                            (child->phase == NodePhase::kError && step.continue_on->error));
          if (!tolerated) {
            failed = true;
            failure = "child '" + child->id + "' failed";
          }
        }
      }
    }
    group = &state_.nodes.at(group_id);
    if (!all_done) {
      if (Stopping() && running == 0) {
        SetPhase(*group, NodePhase::kFailed, ShutdownMessage());
        SetPhase(state_.nodes.at(steps_id), NodePhase::kFailed, ShutdownMessage());
      }
      return;
    }
    if (failed) {
      SetPhase(*group, NodePhase::kFailed, failure);
      SetPhase(state_.nodes.at(steps_id), NodePhase::kFailed, failure);
      return;
    }
    SetPhase(*group, NodePhase::kSucceeded);
    // What later groups may read: steps.NAME.* (a loop's aggregated).
    for (const Task& step : groups[g]) {
      const std::string step_name = group_name + "." + step.name;
      std::string prefix = "steps." + step.name;
      if (step.HasLoop()) {
        std::vector<NodeOutputs> children;
        for (const std::string& child_id : group->children) {
          const Node& child = state_.nodes.at(child_id);
          if (child.name.rfind(step_name + "(", 0) == 0 && child.phase == NodePhase::kSucceeded) {
            children.push_back(OutputsOf(child));
          }
        }
        AddAggregateVariables(prefix, children, &scope);
      } else if (const Node* child = Find(step_name)) {
        AddNodeVariables(prefix, OutputsOf(*child), &scope);
        AddArtifactRefs(prefix, *child, &scope);
      }
    }
  }
  Node& self = state_.nodes.at(steps_id);
  if (self.Fulfilled()) return;
  if (Stopping() && self.children.size() < groups.size()) {
    SetPhase(self, NodePhase::kFailed, ShutdownMessage());
    return;
  }
  FinishWithOutputs(self, call, scope, NodePhase::kSucceeded);
}

void Operator::ExecuteDag(Node& dag_node, const Call& call, Scope scope) {
  const std::string dag_id = dag_node.id;
  const std::string dag_name = dag_node.name;
  const Dag& dag = *call.tmpl->dag;
  std::map<std::string, const Task*> by_name;
  for (const Task& t : dag.tasks) by_name[t.name] = &t;

  // Dependencies of each task.
  std::map<std::string, std::optional<DependsExpr>> depends;  // none: starts at once
  std::set<std::string> handled;  // tasks whose failure some `depends` deals with
  for (const Task& t : dag.tasks) {
    if (t.depends.empty() && t.dependencies.empty()) {
      depends.emplace(t.name, std::nullopt);
      continue;
    }
    auto expr = !t.depends.empty() ? DependsExpr::Parse(t.depends)
                                   : DependsExpr::FromDependencies(t.dependencies);
    if (!expr.ok()) {
      SetPhase(state_.nodes.at(dag_id), NodePhase::kError,
               "task " + t.name + ": depends: " + expr.status().message());
      return;
    }
    if (!t.depends.empty()) {
      for (const std::string& ref : expr->Tasks()) {
        std::string text = t.depends;
        if (text.find(ref + ".Failed") != std::string::npos ||
            text.find(ref + ".Errored") != std::string::npos ||
            text.find(ref + ".AllFailed") != std::string::npos ||
            text.find(ref + ".AnySucceeded") != std::string::npos) {
          handled.insert(ref);
        }
      }
    }
    depends.emplace(t.name, std::move(*expr));
  }
  // The tasks to run: all, or the targets and what they need.
  std::vector<const Task*> order;
  {
    std::set<std::string> wanted;
    if (!dag.target.empty()) {
      auto target = Substitute(dag.target, scope, Unresolved::kKeep);
      std::string list = target.ok() ? *target : dag.target;
      std::vector<std::string> stack;
      std::size_t start = 0;
      while (start <= list.size()) {
        std::size_t end = list.find_first_of(" ,", start);
        if (end == std::string::npos) end = list.size();
        if (end > start) stack.push_back(list.substr(start, end - start));
        start = end + 1;
      }
      while (!stack.empty()) {
        std::string n = stack.back();
        stack.pop_back();
        if (!by_name.count(n) || !wanted.insert(n).second) continue;
        if (depends.at(n)) {
          for (const std::string& d : depends.at(n)->Tasks()) stack.push_back(d);
        }
      }
    }
    // Dependencies first (depth-first, iterative: a 10,000-task chain must
    // not overflow the stack); a cycle, which validation refuses, just ends
    // the walk.
    std::set<std::string> placed, entered;
    for (const Task& root : dag.tasks) {
      if (!(wanted.empty() || wanted.count(root.name)) || placed.count(root.name)) continue;
      std::vector<std::pair<const Task*, bool>> stack = {{&root, false}};
      while (!stack.empty()) {
        auto [t, expanded] = stack.back();
        stack.pop_back();
        if (placed.count(t->name)) continue;
        if (expanded) {
          placed.insert(t->name);
          order.push_back(t);
          continue;
        }
        if (!entered.insert(t->name).second) continue;
        stack.push_back({t, true});
        if (!depends.at(t->name)) continue;
        for (const std::string& d : depends.at(t->name)->Tasks()) {
          auto it = by_name.find(d);
          if (it != by_name.end() && !placed.count(d)) stack.push_back({it->second, false});
        }
      }
    }
  }
  const bool fail_fast = dag.fail_fast.value_or(call.tmpl->fail_fast.value_or(true));
  // The tasks whose outputs a task not finished yet depends on: their
  // variables go into the scope (a task may only read its dependencies).
  // With outputs of its own the DAG reads any task's at the end.
  const bool all_vars = !call.tmpl->outputs.empty();
  std::set<std::string> needed;
  if (!all_vars) {
    for (const Task* task : order) {
      const Node* node = Find(dag_name + "." + task->name);
      if (node != nullptr && node->Fulfilled()) continue;
      if (depends.at(task->name)) {
        for (const std::string& d : depends.at(task->name)->Tasks()) needed.insert(d);
      }
      // Any ancestor's outputs, not just a direct dependency's, as Argo allows.
      AddReferencedTasks(*task, needed);
    }
  }
  std::map<std::string, TaskOutcome> outcomes;
  bool all_done = true;
  bool failed = false;
  std::string failure;
  std::int64_t running = 0;
  for (const std::string& child_id : state_.nodes.at(dag_id).children) {
    auto it = state_.nodes.find(child_id);
    if (it != state_.nodes.end() && !it->second.Fulfilled()) ++running;
  }
  for (const Task* task : order) {
    const std::string task_name = dag_name + "." + task->name;
    auto record = [&](const Node& node) {
      TaskOutcome outcome;
      outcome.phase = node.phase;
      if (task->continue_on) {
        outcome.continue_on_error = task->continue_on->error;
        outcome.continue_on_failed = task->continue_on->failed;
      }
      if (node.type == NodeType::kTaskGroup) {
        outcome.fanned_out = true;
        for (const std::string& c : node.children)
          outcome.children.push_back(state_.nodes.at(c).phase);
      }
      outcomes[task->name] = outcome;
      if (IsFailure(node.phase) && !handled.count(task->name) &&
          !(task->continue_on && ((node.phase == NodePhase::kFailed && task->continue_on->failed) ||
                                  (node.phase == NodePhase::kError && task->continue_on->error)))) {
        failed = true;
        if (failure.empty()) failure = "task '" + node.name + "' failed";
      }
      // Only what a task still to start (or the DAG's outputs) can read.
      if (!all_vars && !needed.count(task->name)) return;
      std::string prefix = "tasks." + task->name;
      if (node.type == NodeType::kTaskGroup) {
        std::vector<NodeOutputs> children;
        for (const std::string& c : node.children) {
          const Node& child = state_.nodes.at(c);
          if (child.phase == NodePhase::kSucceeded) children.push_back(OutputsOf(child));
        }
        AddAggregateVariables(prefix, children, &scope);
      } else {
        AddNodeVariables(prefix, OutputsOf(node), &scope);
        AddArtifactRefs(prefix, node, &scope);
      }
    };
    Node* existing = Find(task_name);
    if (existing != nullptr && existing->Fulfilled() &&
        ExitHandlerDone(*existing, task->on_exit, dag_id, scope)) {
      record(*existing);
      continue;
    }
    if (existing == nullptr) {
      DependsDecision decision = depends.at(task->name) ? depends.at(task->name)->Evaluate(outcomes)
                                                        : DependsDecision::kRun;
      if (decision == DependsDecision::kWait) {
        all_done = false;
        continue;
      }
      if (decision == DependsDecision::kOmit) {
        record(Settled(task_name, task->name, NodeType::kSkipped, dag_id, dag_id,
                       NodePhase::kOmitted, "omitted: depends condition not met"));
        continue;
      }
      if ((failed && fail_fast) || Stopping()) {
        // Nothing new starts after a failure (failFast) or a stop.
        continue;
      }
      auto when = ShouldExecute(task->when, scope);
      if (!when.ok() || !*when) {
        record(Settled(task_name, task->name, NodeType::kSkipped, dag_id, dag_id,
                       when.ok() ? NodePhase::kSkipped : NodePhase::kError,
                       when.ok() ? "when '" + *Substitute(task->when, scope, Unresolved::kKeep) +
                                       "' evaluated false"
                                 : "when '" + task->when + "': " + when.status().message()));
        continue;
      }
      if (call.tmpl->parallelism && running >= *call.tmpl->parallelism) {
        all_done = false;
        continue;
      }
    }
    if (task->HasLoop()) {
      Node* group = existing;
      if (group == nullptr) {
        auto items = Items(*task, scope);
        Call group_call;
        group_call.display_name = task->name;
        group_call.tmpl = spec_.FindTemplate(task->template_name);
        if (!items.ok()) {
          Node& n = Create(task_name, NodeType::kTaskGroup, group_call, dag_id, NodePhase::kError,
                           items.status().message());
          AddChild(state_.nodes.at(dag_id), n);
          record(n);
          continue;
        }
        group = &Create(task_name, NodeType::kTaskGroup, group_call, dag_id,
                        items->empty() ? NodePhase::kSkipped : NodePhase::kRunning,
                        items->empty() ? "Skipped, empty params" : "");
        AddChild(state_.nodes.at(dag_id), *group);
        ++running;
        if (items->empty()) {
          record(*group);
          continue;
        }
      }
      const std::string group_id = group->id;
      auto items = Items(*task, scope);
      if (!items.ok()) {
        SetPhase(state_.nodes.at(group_id), NodePhase::kError, items.status().message());
        record(state_.nodes.at(group_id));
        continue;
      }
      bool group_done = true, group_failed = false;
      std::string group_failure;
      std::int64_t group_running = 0;
      for (const std::string& c : state_.nodes.at(group_id).children) {
        if (!state_.nodes.at(c).Fulfilled()) ++group_running;
      }
      for (const LoopItem& item : *items) {
        Scope s = scope;
        for (const auto& [k, v] : item.vars) s[k] = v;
        const std::string name = task_name + item.node_suffix;
        Node* child = Find(name);
        if (child == nullptr) {
          auto when = ShouldExecute(task->when, s);
          if (!when.ok() || !*when) {
            Settled(name, task->name + item.node_suffix, NodeType::kSkipped, dag_id, group_id,
                    when.ok() ? NodePhase::kSkipped : NodePhase::kError,
                    when.ok() ? "when evaluated false" : when.status().message());
            continue;
          }
          if (call.tmpl->parallelism && group_running >= *call.tmpl->parallelism) {
            group_done = false;
            continue;
          }
        }
        auto task_call = CallOf(*task, s, task->name + item.node_suffix);
        if (!task_call.ok()) {
          if (child == nullptr) {
            Settled(name, task->name + item.node_suffix, NodeType::kPod, dag_id, group_id,
                    NodePhase::kError, task_call.status().message());
          } else if (!child->Fulfilled()) {
            FailUnresolvable(*child, task_call.status().message());
          }
          group_failed = true;
          group_failure = task_call.status().message();
          continue;
        }
        const bool was_new = child == nullptr;
        child = Execute(name, *task_call, dag_id, s);
        if (child == nullptr) {
          group_done = false;
          continue;
        }
        if (was_new && !child->Fulfilled()) ++group_running;
        AddChild(state_.nodes.at(group_id), *child);
        if (!child->Fulfilled()) {
          group_done = false;
        } else if (IsFailure(child->phase)) {
          group_failed = true;
          group_failure = "child '" + child->id + "' failed";
        }
      }
      Node& g = state_.nodes.at(group_id);
      if (!group_done) {
        if (Stopping() && group_running == 0) SetPhase(g, NodePhase::kFailed, ShutdownMessage());
        if (!g.Fulfilled()) {
          all_done = false;
          continue;
        }
      } else {
        SetPhase(g, group_failed ? NodePhase::kFailed : NodePhase::kSucceeded, group_failure);
      }
      if (!ExitHandlerDone(g, task->on_exit, dag_id, scope)) {
        all_done = false;
        continue;
      }
      record(g);
      continue;
    }
    auto task_call = CallOf(*task, scope, task->name);
    if (!task_call.ok()) {
      Node* n = existing;
      if (n == nullptr) {
        n = &Settled(task_name, task->name, NodeType::kPod, dag_id, dag_id, NodePhase::kError,
                     task_call.status().message());
      } else if (!n->Fulfilled()) {
        // Never read as done while its job may run: it ends in Error, saying why.
        FailUnresolvable(*n, task_call.status().message());
      }
      record(*n);
      continue;
    }
    Node* child = Execute(task_name, *task_call, dag_id, scope);
    if (child == nullptr) {
      all_done = false;
      continue;
    }
    if (existing == nullptr && !child->Fulfilled()) ++running;
    AddChild(state_.nodes.at(dag_id), *child);
    if (!child->Fulfilled() || !ExitHandlerDone(*child, task->on_exit, dag_id, scope)) {
      all_done = false;
      continue;
    }
    record(*child);
  }
  Node& self = state_.nodes.at(dag_id);
  if (self.Fulfilled()) return;
  // Unfinished tasks that will never start: after a failure with failFast,
  // or a stop. The DAG ends once nothing of it runs any more.
  std::int64_t still_running = 0;
  for (const std::string& child_id : self.children) {
    const Node& child = state_.nodes.at(child_id);
    if (!child.Fulfilled()) ++still_running;
  }
  if (!all_done) {
    if (still_running > 0) return;
    if (Stopping()) {
      SetPhase(self, NodePhase::kFailed, ShutdownMessage());
    } else if (failed && fail_fast) {
      SetPhase(self, NodePhase::kFailed, failure);
    }
    return;
  }
  if (failed) {
    SetPhase(self, NodePhase::kFailed, failure);
    return;
  }
  FinishWithOutputs(self, call, scope, NodePhase::kSucceeded);
}

void Operator::ExecuteSuspend(Node& node, const Call& call, const Scope& scope) {
  if (node.Fulfilled()) return;
  if (Stopping()) {
    SetPhase(node, NodePhase::kFailed, ShutdownMessage());
    return;
  }
  if (node.phase != NodePhase::kRunning) SetPhase(node, NodePhase::kRunning);
  const std::string& text = call.tmpl->suspend->duration;
  if (text.empty()) return;  // until resumed
  auto substituted = Substitute(text, scope, Unresolved::kError);
  auto duration = substituted.ok() ? ParseArgoDuration(*substituted) : std::nullopt;
  if (!duration) {
    SetPhase(node, NodePhase::kError, "suspend.duration '" + text + "' is not a duration");
    return;
  }
  Time until = node.started_at.value_or(env_.now) + *duration;
  if (env_.now >= until) {
    FinishWithOutputs(node, call, scope, NodePhase::kSucceeded);
  } else {
    Wake(until);
  }
}

}  // namespace

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

std::string JobNameFor(std::string_view workflow, std::string_view uid,
                       std::string_view node_name) {
  std::string prefix;
  for (char c : workflow.substr(0, 45)) prefix += c == '.' ? '-' : c;
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

// ---------------------------------------------------------------------------
// JSON

namespace {
json ParametersJson(const std::vector<NodeParameter>& params) {
  json out = json::array();
  for (const NodeParameter& p : params) out.push_back({{"name", p.name}, {"value", p.value}});
  return out;
}

json ArtifactsJson(const std::vector<NodeArtifact>& list) {
  json out = json::array();
  for (const NodeArtifact& a : list) {
    json entry = {{"name", a.name}};
    if (!a.path.empty()) entry["path"] = a.path;
    if (!a.ref.empty()) entry["headway"] = {{"artifact", a.ref}};
    out.push_back(std::move(entry));
  }
  return out;
}

std::vector<NodeArtifact> ArtifactsFrom(const json& list) {
  std::vector<NodeArtifact> out;
  if (!list.is_array()) return out;
  for (const json& a : list) {
    if (!a.is_object()) continue;
    NodeArtifact artifact;
    artifact.name = a.value("name", "");
    artifact.path = a.value("path", "");
    if (a.contains("headway") && a["headway"].is_object()) {
      artifact.ref = a["headway"].value("artifact", "");
    }
    out.push_back(std::move(artifact));
  }
  return out;
}

Result<std::vector<NodeParameter>> ParametersFrom(const json& list) {
  std::vector<NodeParameter> out;
  if (!list.is_array()) return InvalidArgument("parameters must be a list");
  for (const json& p : list) {
    if (!p.is_object() || !p.contains("name") || !p["name"].is_string()) {
      return InvalidArgument("a parameter needs a name");
    }
    out.push_back({p["name"], p.contains("value") && p["value"].is_string()
                                  ? p["value"].get<std::string>()
                                  : ""});
  }
  return out;
}
}  // namespace

json ToJson(const Node& node) {
  json j = {{"id", node.id},
            {"name", node.name},
            {"displayName", node.display_name},
            {"type", std::string(NodeTypeName(node.type))},
            {"phase", std::string(NodePhaseName(node.phase))}};
  if (!node.template_name.empty()) j["templateName"] = node.template_name;
  if (!node.template_ref.empty()) {
    auto slash = node.template_ref.find('/');
    j["templateRef"] = {
        {"name", node.template_ref.substr(0, slash)},
        {"template", slash == std::string::npos ? "" : node.template_ref.substr(slash + 1)}};
  }
  j["templateScope"] = "local/";
  if (!node.boundary_id.empty()) j["boundaryID"] = node.boundary_id;
  if (!node.message.empty()) j["message"] = node.message;
  if (node.started_at) j["startedAt"] = headway::FormatRfc3339(*node.started_at);
  if (node.finished_at) j["finishedAt"] = headway::FormatRfc3339(*node.finished_at);
  if (!node.progress.empty()) j["progress"] = node.progress;
  if (!node.children.empty()) j["children"] = node.children;
  if (!node.inputs.empty()) j["inputs"] = {{"parameters", ParametersJson(node.inputs)}};
  if (!node.input_artifacts.empty()) j["inputs"]["artifacts"] = ArtifactsJson(node.input_artifacts);
  json outputs = json::object();
  if (!node.outputs.empty()) outputs["parameters"] = ParametersJson(node.outputs);
  if (!node.output_artifacts.empty()) outputs["artifacts"] = ArtifactsJson(node.output_artifacts);
  if (node.result) outputs["result"] = *node.result;
  if (node.exit_code) outputs["exitCode"] = *node.exit_code;
  if (!outputs.empty()) j["outputs"] = outputs;
  if (node.memo_hit) {
    j["memoizationStatus"] = {
        {"hit", *node.memo_hit}, {"key", node.memo_key}, {"cacheName", "default"}};
  }
  if (node.on_exit) j["nodeFlag"] = {{"hooked", true}};
  json headway = json::object();
  if (!node.job.empty()) headway["job"] = node.job;
  if (node.retry_after) headway["retryAfter"] = headway::FormatRfc3339(*node.retry_after);
  if (node.on_exit) headway["onExit"] = true;
  if (!node.memo_key.empty()) headway["memoKey"] = node.memo_key;
  if (!node.artifact_names.empty()) headway["artifactNames"] = node.artifact_names;
  if (!headway.empty()) j["headway"] = headway;
  return j;
}

Result<Node> NodeFromJson(const json& j) {
  if (!j.is_object()) return InvalidArgument("a workflow node must be an object");
  auto str = [&](const char* key) -> std::string {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : "";
  };
  auto time = [&](const json& obj, const char* key) -> std::optional<Time> {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_string()) return std::nullopt;
    return ParseRfc3339(it->get<std::string>());
  };
  Node node;
  node.id = str("id");
  node.name = str("name");
  if (node.id.empty() || node.name.empty())
    return InvalidArgument("a workflow node needs id and name");
  node.display_name = str("displayName");
  auto type = ParseNodeType(str("type"));
  auto phase = ParseNodePhase(str("phase"));
  if (!type || !phase) return InvalidArgument("workflow node " + node.id + ": bad type or phase");
  node.type = *type;
  node.phase = *phase;
  node.template_name = str("templateName");
  if (j.contains("templateRef") && j["templateRef"].is_object()) {
    node.template_ref =
        j["templateRef"].value("name", "") + "/" + j["templateRef"].value("template", "");
  }
  node.boundary_id = str("boundaryID");
  node.message = str("message");
  node.started_at = time(j, "startedAt");
  node.finished_at = time(j, "finishedAt");
  node.progress = str("progress");
  if (j.contains("children") && j["children"].is_array()) {
    for (const json& c : j["children"]) {
      if (c.is_string()) node.children.push_back(c);
    }
  }
  if (j.contains("inputs") && j["inputs"].is_object()) {
    if (j["inputs"].contains("parameters")) {
      auto p = ParametersFrom(j["inputs"]["parameters"]);
      if (!p.ok()) return p.status();
      node.inputs = *p;
    }
    if (j["inputs"].contains("artifacts"))
      node.input_artifacts = ArtifactsFrom(j["inputs"]["artifacts"]);
  }
  if (j.contains("outputs") && j["outputs"].is_object()) {
    const json& o = j["outputs"];
    if (o.contains("parameters")) {
      auto p = ParametersFrom(o["parameters"]);
      if (!p.ok()) return p.status();
      node.outputs = *p;
    }
    if (o.contains("artifacts")) node.output_artifacts = ArtifactsFrom(o["artifacts"]);
    if (o.contains("result") && o["result"].is_string())
      node.result = o["result"].get<std::string>();
    if (o.contains("exitCode") && o["exitCode"].is_string())
      node.exit_code = o["exitCode"].get<std::string>();
  }
  if (j.contains("memoizationStatus") && j["memoizationStatus"].is_object()) {
    node.memo_hit = j["memoizationStatus"].value("hit", false);
  }
  if (j.contains("headway") && j["headway"].is_object()) {
    const json& h = j["headway"];
    node.job = h.value("job", "");
    node.retry_after = time(h, "retryAfter");
    node.on_exit = h.value("onExit", false);
    node.memo_key = h.value("memoKey", "");
    if (h.contains("artifactNames") && h["artifactNames"].is_object()) {
      for (const auto& [name, stored] : h["artifactNames"].items()) {
        if (stored.is_string()) node.artifact_names[name] = stored.get<std::string>();
      }
    }
  }
  return node;
}

Result<std::string> ArtifactNameForKey(std::string_view key) {
  std::string name;
  for (char c : key) name += c == '/' ? '.' : c;
  while (!name.empty() && name.front() == '.') name.erase(name.begin());
  while (!name.empty() && name.back() == '.') name.pop_back();
  if (!IsValidArtifactName(name)) {
    return InvalidArgument("key '" + std::string(key) + "' makes no artifact name ('" + name +
                           "'): use lowercase letters, digits and - _ . / (at most 200)");
  }
  return name;
}

}  // namespace headway::workflow
