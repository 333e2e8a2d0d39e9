#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <set>

#include "core/artifact.h"
#include "workflow/engine_operator.h"

namespace headway::workflow::internal {

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

void Operator::PublishGlobalOutputs(const Template& tmpl, const Node& node) {
  for (const Parameter& p : tmpl.outputs.parameters) {
    if (p.global_name.empty()) continue;
    auto value = std::find_if(node.outputs.begin(), node.outputs.end(),
                              [&](const NodeParameter& o) { return o.name == p.name; });
    if (value == node.outputs.end()) continue;
    global_["workflow.outputs.parameters." + p.global_name] = value->value;
    auto g = std::find_if(state_.outputs.begin(), state_.outputs.end(),
                          [&](const NodeParameter& o) { return o.name == p.global_name; });
    if (g == state_.outputs.end()) {
      state_.outputs.push_back({p.global_name, value->value});
    } else if (g->value != value->value) {
      g->value = value->value;
    } else {
      continue;
    }
    out_.changed = true;
  }
  for (const Artifact& a : tmpl.outputs.artifacts) {
    if (a.global_name.empty()) continue;
    auto stored = std::find_if(node.output_artifacts.begin(), node.output_artifacts.end(),
                               [&](const NodeArtifact& o) { return o.name == a.name; });
    if (stored == node.output_artifacts.end()) continue;
    global_["workflow.outputs.artifacts." + a.global_name] = stored->ref;
    // As Argo: named by its globalName, without the path it had in the step.
    auto g = std::find_if(state_.output_artifacts.begin(), state_.output_artifacts.end(),
                          [&](const NodeArtifact& o) { return o.name == a.global_name; });
    if (g == state_.output_artifacts.end()) {
      state_.output_artifacts.push_back({a.global_name, "", stored->ref});
    } else if (g->ref != stored->ref) {
      g->ref = stored->ref;
    } else {
      continue;
    }
    out_.changed = true;
  }
}

void Operator::AddGlobalOutputs(Scope& scope) const {
  for (auto it = global_.lower_bound("workflow.outputs.");
       it != global_.end() && it->first.rfind("workflow.outputs.", 0) == 0; ++it) {
    scope[it->first] = it->second;
  }
}

bool Operator::ExitHandlerDone(const Node& node, const Task& task, const std::string& prefix,
                               const std::string& boundary, const Scope& scope,
                               const Call& parent) {
  if ((task.on_exit.empty() && !task.exit_hook) || state_.shutdown == Shutdown::kTerminate) {
    return true;
  }
  // Argo (GetExitHook, runOnExitNode): onExit is an exit hook without
  // arguments; a hook without arguments is given the workflow's, and its
  // arguments may read the node's outputs by its step's or task's name.
  Task hook;
  hook.name = task.name;
  if (!task.on_exit.empty()) {
    hook.template_name = task.on_exit;
  } else {
    hook.template_name = task.exit_hook->template_name;
    hook.template_ref = task.exit_hook->template_ref;
    hook.arguments = task.exit_hook->arguments;
  }
  if (hook.arguments.empty()) hook.arguments = spec_.arguments;
  Scope exit_scope = scope;
  exit_scope["steps.status"] = exit_scope["tasks.status"] = std::string(NodePhaseName(node.phase));
  AddNodeVariables(prefix, OutputsOf(node), &exit_scope);
  AddArtifactRefs(prefix, node, &exit_scope);
  const std::string name = node.name + ".onExit";
  auto call = CallOf(hook, exit_scope, node.display_name + ".onExit", parent);
  if (!call.ok()) {
    if (Find(name) == nullptr) {
      Create(name, NodeType::kPod, Call{}, boundary, NodePhase::kError, call.status().message())
          .on_exit = true;
    }
    return true;
  }
  call->on_exit = true;
  Shutdown saved = state_.shutdown;
  if (saved == Shutdown::kStop) state_.shutdown = Shutdown::kNone;
  const bool outer = in_exit_handler_;
  in_exit_handler_ = true;
  Node* handler = Execute(name, *call, boundary, exit_scope);
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
        auto step_call = CallOf(step, item_scope, step.name + suffix, call);
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
        if (!ExitHandlerDone(*child, step, "steps." + step.name, steps_id, item_scope, call)) {
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
    AddGlobalOutputs(scope);
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
      AddGlobalOutputs(scope);
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
        ExitHandlerDone(*existing, *task, "tasks." + task->name, dag_id, scope, call)) {
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
        auto task_call = CallOf(*task, s, task->name + item.node_suffix, call);
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
      if (!ExitHandlerDone(g, *task, "tasks." + task->name, dag_id, scope, call)) {
        all_done = false;
        continue;
      }
      record(g);
      continue;
    }
    auto task_call = CallOf(*task, scope, task->name, call);
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
    if (!child->Fulfilled() ||
        !ExitHandlerDone(*child, *task, "tasks." + task->name, dag_id, scope, call)) {
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

}  // namespace headway::workflow::internal
