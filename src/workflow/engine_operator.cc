#include "workflow/engine_operator.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <set>

#include "core/artifact.h"

namespace headway::workflow::internal {

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
  // A CronWorkflow's run: the fire time it was started for.
  if (auto it = env_.metadata.annotations.find(std::string(kScheduledTimeAnnotation));
      it != env_.metadata.annotations.end()) {
    global_["workflow.scheduledTime"] = it->second;
  }
  for (const NodeParameter& p : state_.outputs)
    global_["workflow.outputs.parameters." + p.name] = p.value;
  for (const NodeArtifact& a : state_.output_artifacts)
    global_["workflow.outputs.artifacts." + a.name] = a.ref;

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
  // spec.arguments.artifacts: the entrypoint's input artifacts.
  for (const Artifact& a : spec_.arguments.artifacts) {
    Artifact given = a;
    if (a.raw_data) {
      auto raw = Substitute(*a.raw_data, global_, Unresolved::kKeep);
      if (raw.ok()) given.raw_data = *raw;
    }
    root_call.artifact_arguments.push_back(std::move(given));
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
  if ((!spec_.on_exit.empty() || spec_.exit_hook) && state_.shutdown != Shutdown::kTerminate) {
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
    // onExit, or spec.hooks.exit (Argo's GetExitHook): without arguments
    // of its own, the handler is given the workflow's.
    Task hook;
    hook.name = "onExit";
    if (!spec_.on_exit.empty()) {
      hook.template_name = spec_.on_exit;
    } else {
      hook.template_name = spec_.exit_hook->template_name;
      hook.template_ref = spec_.exit_hook->template_ref;
      hook.arguments = spec_.exit_hook->arguments;
    }
    if (hook.arguments.empty()) hook.arguments = spec_.arguments;
    auto exit_call = CallOf(hook, scope, state_.name + ".onExit", Call{});
    if (!exit_call.ok()) {
      phase = NodePhase::kError;
      message = "onExit: " + exit_call.status().message();
    } else {
      exit_call->on_exit = true;
      // Exit handlers run even after a stop: lift it for them.
      Shutdown saved = state_.shutdown;
      if (saved == Shutdown::kStop) state_.shutdown = Shutdown::kNone;
      in_exit_handler_ = true;
      Node* handler = Execute(state_.name + ".onExit", *exit_call, "", scope);
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
    // The published outputs are the global scope's: the caller's may be older.
    if (it->first.rfind("workflow.outputs.", 0) == 0) continue;
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
    // Argo substitutes the template with the global variables (an exit
    // handler's workflow.status among them) before its inputs.
    auto substituted = Substitute(*value, scope, Unresolved::kKeep);
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
        n.memo_cache = cache;
        n.outputs = hit->outputs;
        n.result = hit->result;
        PublishGlobalOutputs(tmpl, n);
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
      node->memo_cache =
          tmpl.memoize->config_map_name.empty() ? "default" : tmpl.memoize->config_map_name;
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
  // Argo publishes a node's global outputs as soon as it finishes, so the
  // steps after it read them as workflow.outputs.*.
  if (node->phase == NodePhase::kSucceeded) PublishGlobalOutputs(tmpl, *node);
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
        node.name, tmpl.name);
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
      if (auto policy = c.recorded.find("imagePullPolicy");
          policy != c.recorded.end() && policy->second.is_string()) {
        job.image_pull_policy = policy->second.get<std::string>();
      }
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

const Template* Operator::Resolve(const std::string& name, const Call& parent,
                                  std::string* template_ref) const {
  if (!parent.ref_scope) return spec_.FindTemplate(name);
  if (!env_.resolve_ref) return nullptr;
  TemplateRef ref = *parent.ref_scope;
  ref.template_name = name;
  *template_ref = ref.name + "/" + name;
  return env_.resolve_ref(ref);
}

Result<Call> Operator::CallOf(const Task& task, const Scope& scope, const std::string& display,
                              const Call& parent) {
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
    call.ref_scope = task.template_ref;
  } else {
    // Argo resolves a plain template name in the scope of the template
    // that holds the step: inside a WorkflowTemplate, in that one.
    call.tmpl = Resolve(task.template_name, parent, &call.template_ref);
    call.ref_scope = parent.ref_scope;
    if (call.tmpl == nullptr) {
      return NotFound("no template named '" + task.template_name + "'" +
                      (parent.ref_scope ? " in WorkflowTemplate '" + parent.ref_scope->name + "'"
                                        : std::string()));
    }
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

}  // namespace headway::workflow::internal
