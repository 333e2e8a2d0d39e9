// Checks on a parsed workflow spec (ValidateWorkflowSpec): template
// references, names, inputs and arguments, DAG cycles. Split from
// the parser (manifest.cc, manifest_templates.cc, manifest_fields.cc).
#include <algorithm>
#include <charconv>
#include <functional>
#include <set>

#include "workflow/manifest.h"
#include "workflow/manifest_internal.h"

namespace headway::workflow {
namespace internal {

std::optional<std::pair<std::string, std::string>> BadHeadwayKey(
    const std::map<std::string, std::string>& labels,
    const std::map<std::string, std::string>& annotations) {
  for (const auto& [map, side] :
       {std::pair{&annotations, "annotations"}, std::pair{&labels, "labels"}}) {
    if (auto it = map->find(std::string(kPriorityKey)); it != map->end()) {
      int priority = 0;
      const std::string& text = it->second;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), priority);
      if (ec != std::errc() || end != text.data() + text.size()) {
        return std::pair{std::string(side) + "." + it->first,
                         "must be an integer priority, got '" + text + "'"};
      }
    }
    for (std::string_view key : {kTeamKey, kQueueKey}) {
      if (auto it = map->find(std::string(key)); it != map->end() && it->second.empty()) {
        return std::pair{std::string(side) + "." + it->first, "must not be empty"};
      }
    }
  }
  return std::nullopt;
}

}  // namespace internal
namespace {

using internal::BadHeadwayKey;
using internal::Index;

// ---- validation --------------------------------------------------------------------

// Checks on a parsed spec; errors carry the line of their field (or its
// closest ancestor) when a LineMap is given.
class Validator {
 public:
  Validator(const WorkflowSpec& spec, SpecOwner owner, const LineMap* lines)
      : spec_(spec), owner_(owner), lines_(lines) {}

  Status Run(const std::string& prefix) {
    HEADWAY_RETURN_IF_ERROR(CheckIo(prefix + ".arguments", spec_.arguments));
    // A WorkflowTemplate's arguments may get their values when it is submitted.
    if (owner_ == SpecOwner::kWorkflow) {
      HEADWAY_RETURN_IF_ERROR(CheckArgumentValues(prefix + ".arguments", spec_.arguments));
    }
    HEADWAY_RETURN_IF_ERROR(CheckTemplateNames(prefix));
    HEADWAY_RETURN_IF_ERROR(CheckEntrypoint(prefix));
    for (std::size_t i = 0; i < spec_.templates.size(); ++i) {
      HEADWAY_RETURN_IF_ERROR(CheckTemplate(Index(prefix + ".templates", i), spec_.templates[i]));
    }
    return Status::Ok();
  }

 private:
  Status Error(const std::string& field, std::string message) const {
    Status s = InvalidArgument(std::move(message));
    return s.WithField(field, LineOf(field));
  }

  std::optional<int> LineOf(std::string field) const {
    if (!lines_) return std::nullopt;
    while (!field.empty()) {
      if (auto it = lines_->find(field); it != lines_->end()) return it->second;
      auto cut = field.find_last_of(".[");
      if (cut == std::string::npos) break;
      field.resize(cut);
    }
    return std::nullopt;
  }

  // Templates can be checked against references only when they are here:
  // a Workflow running a workflowTemplateRef gets them from the template.
  bool TemplatesAreHere() const { return !spec_.workflow_template_ref; }

  Status CheckTemplateNames(const std::string& prefix) {
    std::set<std::string> names;
    for (std::size_t i = 0; i < spec_.templates.size(); ++i) {
      std::string field = Index(prefix + ".templates", i) + ".name";
      const std::string& name = spec_.templates[i].name;
      if (!IsValidTemplateName(name)) return Error(field, BadFieldName("template", name));
      if (!names.insert(name).second)
        return Error(field, "template name '" + name + "' is not unique");
    }
    if (spec_.templates.empty() && TemplatesAreHere()) {
      return Error(prefix + ".templates", "needs at least one template");
    }
    if (!spec_.templates.empty() && !TemplatesAreHere()) {
      return Error(prefix + ".templates",
                   "must be empty when workflowTemplateRef names the templates to run");
    }
    return Status::Ok();
  }

  Status CheckEntrypoint(const std::string& prefix) {
    if (!TemplatesAreHere()) return Status::Ok();
    if (!spec_.on_exit.empty() && !spec_.FindTemplate(spec_.on_exit)) {
      return Error(prefix + ".onExit", "no template named '" + spec_.on_exit + "'");
    }
    if (spec_.exit_hook && !spec_.exit_hook->template_ref &&
        !spec_.FindTemplate(spec_.exit_hook->template_name)) {
      return Error(prefix + ".hooks.exit.template",
                   "no template named '" + spec_.exit_hook->template_name + "'");
    }
    if (spec_.entrypoint.empty()) {
      if (owner_ == SpecOwner::kWorkflowTemplate) return Status::Ok();
      return Error(prefix + ".entrypoint", "is required: the name of the template to run first");
    }
    const Template* entry = spec_.FindTemplate(spec_.entrypoint);
    if (!entry)
      return Error(prefix + ".entrypoint", "no template named '" + spec_.entrypoint + "'");
    if (owner_ == SpecOwner::kWorkflowTemplate)
      return Status::Ok();  // arguments come at submission
    return CheckSupplied(prefix + ".arguments", *entry, spec_.arguments, "spec.arguments");
  }

  static std::string BadFieldName(const std::string& what, const std::string& name) {
    return what + " name '" + name +
           "' is invalid: it must be at most 128 letters, digits or '-', starting with a letter or "
           "digit";
  }

  Status CheckIo(const std::string& path, const ParametersAndArtifacts& io) const {
    std::set<std::string> names;
    for (std::size_t i = 0; i < io.parameters.size(); ++i) {
      std::string field = Index(path + ".parameters", i) + ".name";
      const std::string& name = io.parameters[i].name;
      if (!IsValidParameterName(name)) {
        return Error(field,
                     "parameter name '" + name + "' is invalid: use letters, digits, '_' or '-'");
      }
      if (!names.insert(name).second)
        return Error(field, "parameter name '" + name + "' is not unique");
    }
    names.clear();
    for (std::size_t i = 0; i < io.artifacts.size(); ++i) {
      std::string field = Index(path + ".artifacts", i) + ".name";
      const std::string& name = io.artifacts[i].name;
      if (!IsValidParameterName(name)) {
        return Error(field,
                     "artifact name '" + name + "' is invalid: use letters, digits, '_' or '-'");
      }
      if (!names.insert(name).second)
        return Error(field, "artifact name '" + name + "' is not unique");
    }
    return Status::Ok();
  }

  // Inputs of `callee` that have no value of their own must be in `args`.
  Status CheckSupplied(const std::string& path, const Template& callee, const Arguments& args,
                       const std::string& caller) const {
    for (const auto& p : callee.inputs.parameters) {
      if (p.value || p.default_value || p.value_from) continue;
      const Parameter* given = args.FindParameter(p.name);
      if (!given || (!given->value && !given->value_from && !given->default_value)) {
        return Error(path, "input parameter '" + p.name + "' of template '" + callee.name +
                               "' has no value, default or valueFrom and " + caller +
                               " does not supply it");
      }
    }
    for (const auto& a : callee.inputs.artifacts) {
      if (a.optional || a.HasSource()) continue;
      if (!args.FindArtifact(a.name)) {
        return Error(path, "input artifact '" + a.name + "' of template '" + callee.name +
                               "' is not supplied by " + caller);
      }
    }
    return Status::Ok();
  }

  Status CheckTemplate(const std::string& path, const Template& t) {
    HEADWAY_RETURN_IF_ERROR(CheckIo(path + ".inputs", t.inputs));
    HEADWAY_RETURN_IF_ERROR(CheckIo(path + ".outputs", t.outputs));
    if (auto bad = BadHeadwayKey(t.metadata.labels, t.metadata.annotations)) {
      return Error(path + ".metadata." + bad->first, bad->second);
    }
    auto resources = NodeResourcesOf(t);
    if (!resources.ok()) {
      std::string where = resources.status().field().rfind("metadata", 0) == 0
                              ? path
                              : path + "." + std::string(TemplateKindName(t.kind));
      return Error(where + "." + resources.status().field(), resources.status().message());
    }
    HEADWAY_RETURN_IF_ERROR(CheckLeafOnlyFields(path, t));
    HEADWAY_RETURN_IF_ERROR(CheckArtifactPaths(path + ".inputs", t, t.inputs));
    HEADWAY_RETURN_IF_ERROR(CheckArtifactPaths(path + ".outputs", t, t.outputs));
    HEADWAY_RETURN_IF_ERROR(CheckOutputParameters(path + ".outputs", t));
    if (t.dag) return CheckDag(path + ".dag", *t.dag);
    if (t.steps) return CheckSteps(path + ".steps", *t.steps);
    return Status::Ok();
  }

  // Templates that run a process (Argo's "leaf" templates).
  static bool IsLeaf(const Template& t) {
    return t.kind == TemplateKind::kContainer || t.kind == TemplateKind::kScript;
  }
  static bool IsParent(const Template& t) {
    return t.kind == TemplateKind::kDag || t.kind == TemplateKind::kSteps;
  }

  Status CheckLeafOnlyFields(const std::string& path, const Template& t) const {
    if (IsParent(t) && t.active_deadline_seconds) {
      return Error(path + ".activeDeadlineSeconds",
                   "is only valid for container, script and suspend templates; use timeout on "
                   "the tasks' templates");
    }
    if (!IsParent(t) && t.parallelism) {
      return Error(path + ".parallelism", "is only valid for steps and dag templates");
    }
    if (const auto& d = t.active_deadline_seconds; d && d->is_int && d->text.front() == '-') {
      return Error(path + ".activeDeadlineSeconds", "must be >= 0");
    }
    if (!t.timeout.empty()) {
      if (!IsLeaf(t)) {
        return Error(path + ".timeout", "is only valid for container and script templates");
      }
      bool whole_number = std::all_of(t.timeout.begin(), t.timeout.end(),
                                      [](char c) { return c >= '0' && c <= '9'; });
      if (whole_number) {
        return Error(path + ".timeout", "must be a duration with a unit, like " + t.timeout +
                                            "s or 10m, got '" + t.timeout + "'");
      }
    }
    return Status::Ok();
  }

  // A container or script reads inputs and writes outputs at a path; a dag
  // or steps template passes them on with `from`.
  Status CheckArtifactPaths(const std::string& path, const Template& t,
                            const ParametersAndArtifacts& io) const {
    bool inputs = path.size() >= 7 && path.compare(path.size() - 7, 7, ".inputs") == 0;
    for (std::size_t i = 0; i < io.artifacts.size(); ++i) {
      const Artifact& a = io.artifacts[i];
      std::string field = Index(path + ".artifacts", i);
      if (IsLeaf(t) && a.path.empty()) {
        return Error(field, "artifact '" + a.name + "' needs a path in a " +
                                std::string(TemplateKindName(t.kind)) + " template");
      }
      if (!IsLeaf(t) && !a.path.empty()) {
        return Error(field + ".path", "is only valid in container and script templates");
      }
      if (inputs && (!a.from.empty() || !a.from_expression.empty())) {
        return Error(field + (a.from.empty() ? ".fromExpression" : ".from"),
                     "is not valid in inputs: pass the artifact in the caller's arguments");
      }
    }
    return Status::Ok();
  }

  Status CheckOutputParameters(const std::string& path, const Template& t) const {
    for (std::size_t i = 0; i < t.outputs.parameters.size(); ++i) {
      const Parameter& p = t.outputs.parameters[i];
      std::string field = Index(path + ".parameters", i);
      if (p.value && p.value_from) return Error(field, "has both value and valueFrom: give one");
      if (!p.value && !p.value_from) return Error(field, "needs a value or valueFrom");
      if (!p.value_from) continue;
      const ValueFrom& v = *p.value_from;
      int sources = !v.path.empty() + !v.json_path.empty() + !v.jq_filter.empty() +
                    !v.parameter.empty() + !v.expression.empty() + v.supplied + !v.event.empty() +
                    v.config_map_key_ref.has_value();
      if (sources != 1) {
        return Error(field + ".valueFrom",
                     sources == 0 ? "needs one of path, parameter, expression or supplied"
                                  : "has more than one of path, parameter, expression, supplied");
      }
      if (IsLeaf(t) && v.path.empty() && v.expression.empty()) {
        return Error(field + ".valueFrom", "needs a path in a container or script template");
      }
      if (IsParent(t) && v.parameter.empty() && v.expression.empty()) {
        return Error(field + ".valueFrom",
                     "needs a parameter or expression in a dag or steps template");
      }
    }
    return Status::Ok();
  }

  // Arguments passed on must say what they are: a value (one of the enum
  // when there is one), or where an artifact comes from.
  Status CheckArgumentValues(const std::string& path, const Arguments& args) const {
    for (std::size_t i = 0; i < args.parameters.size(); ++i) {
      const Parameter& p = args.parameters[i];
      std::string field = Index(path + ".parameters", i);
      if (!p.value && !p.value_from && !p.default_value) {
        return Error(field, "parameter '" + p.name + "' needs a value");
      }
      if (p.value && !p.enum_values.empty() &&
          std::find(p.enum_values.begin(), p.enum_values.end(), *p.value) == p.enum_values.end()) {
        return Error(field + ".value", "'" + *p.value + "' is not one of the parameter's enum");
      }
    }
    for (std::size_t i = 0; i < args.artifacts.size(); ++i) {
      const Artifact& a = args.artifacts[i];
      std::string field = Index(path + ".artifacts", i);
      if (!a.HasSource()) {
        return Error(field,
                     "artifact '" + a.name + "' needs from, fromExpression, s3, raw or http");
      }
      if (!a.from.empty() && !a.from_expression.empty()) {
        return Error(field, "has both from and fromExpression: give one");
      }
    }
    return Status::Ok();
  }

  Status CheckCall(const std::string& path, const Task& task) const {
    if (task.template_name.empty() == !task.template_ref.has_value()) {
      return Error(path, "needs exactly one of template and templateRef");
    }
    HEADWAY_RETURN_IF_ERROR(CheckIo(path + ".arguments", task.arguments));
    HEADWAY_RETURN_IF_ERROR(CheckArgumentValues(path + ".arguments", task.arguments));
    if (!TemplatesAreHere()) return Status::Ok();
    if (!task.on_exit.empty() && !spec_.FindTemplate(task.on_exit)) {
      return Error(path + ".onExit", "no template named '" + task.on_exit + "'");
    }
    if (task.exit_hook && !task.exit_hook->template_ref) {
      const Template* hook = spec_.FindTemplate(task.exit_hook->template_name);
      if (!hook) {
        return Error(path + ".hooks.exit.template",
                     "no template named '" + task.exit_hook->template_name + "'");
      }
    }
    if (task.template_ref) return Status::Ok();  // resolved by the controller
    const Template* callee = spec_.FindTemplate(task.template_name);
    if (!callee) return Error(path + ".template", "no template named '" + task.template_name + "'");
    return CheckSupplied(path + ".arguments", *callee, task.arguments, "'" + task.name + "'");
  }

  Status CheckDag(const std::string& path, const Dag& dag) {
    std::map<std::string, std::size_t> index;
    bool uses_depends = false, uses_dependencies = false;
    for (std::size_t i = 0; i < dag.tasks.size(); ++i) {
      const Task& task = dag.tasks[i];
      std::string field = Index(path + ".tasks", i);
      if (!IsValidTemplateName(task.name))
        return Error(field + ".name", BadFieldName("task", task.name));
      if (!index.emplace(task.name, i).second) {
        return Error(field + ".name", "task name '" + task.name + "' is not unique in this dag");
      }
      uses_depends = uses_depends || !task.depends.empty();
      uses_dependencies = uses_dependencies || !task.dependencies.empty();
      HEADWAY_RETURN_IF_ERROR(CheckCall(field, task));
    }
    if (uses_depends && uses_dependencies) {
      return Error(path, "uses both 'depends' and 'dependencies': use one of them in a dag");
    }
    for (std::size_t i = 0; i < dag.tasks.size(); ++i) {
      const Task& task = dag.tasks[i];
      std::string field = Index(path + ".tasks", i);
      if (std::isdigit(static_cast<unsigned char>(task.name[0]))) {
        return Error(field + ".name",
                     "task name '" + task.name + "' cannot begin with a digit in a dag");
      }
      if (uses_depends && task.continue_on) {
        return Error(field + ".continueOn",
                     "cannot be used with 'depends': write 'task.Failed' or 'task.Errored' in it");
      }
      for (std::size_t d = 0; d < task.dependencies.size(); ++d) {
        const std::string& dep = task.dependencies[d];
        if (!index.count(dep)) {
          return Error(Index(field + ".dependencies", d),
                       "no task named '" + dep + "' in this dag");
        }
      }
    }
    HEADWAY_RETURN_IF_ERROR(CheckTarget(path, dag, index));
    return CheckAcyclic(path, dag, index);
  }

  Status CheckTarget(const std::string& path, const Dag& dag,
                     const std::map<std::string, std::size_t>& index) const {
    if (dag.target.find("{{") != std::string::npos) return Status::Ok();
    std::size_t start = 0;
    while ((start = dag.target.find_first_not_of(' ', start)) != std::string::npos) {
      std::size_t end = dag.target.find(' ', start);
      std::string name =
          dag.target.substr(start, end == std::string::npos ? std::string::npos : end - start);
      if (!index.count(name))
        return Error(path + ".target", "no task named '" + name + "' in this dag");
      start = end;
    }
    return Status::Ok();
  }

  // Depth-first search over `dependencies` (iterative: a chain of 20,000
  // tasks must not exhaust the stack); an edge back onto the current path is
  // a cycle, named from the task where it starts.
  Status CheckAcyclic(const std::string& path, const Dag& dag,
                      const std::map<std::string, std::size_t>& index) const {
    enum class Mark { kNew, kOnPath, kDone };
    std::vector<Mark> marks(dag.tasks.size(), Mark::kNew);
    struct Frame {
      std::size_t task;
      std::size_t next_dependency;
    };
    for (std::size_t root = 0; root < dag.tasks.size(); ++root) {
      if (marks[root] != Mark::kNew) continue;
      std::vector<Frame> stack = {{root, 0}};
      marks[root] = Mark::kOnPath;
      while (!stack.empty()) {
        Frame& top = stack.back();
        const auto& deps = dag.tasks[top.task].dependencies;
        if (top.next_dependency == deps.size()) {
          marks[top.task] = Mark::kDone;
          stack.pop_back();
          continue;
        }
        std::size_t next = index.at(deps[top.next_dependency++]);
        if (marks[next] == Mark::kNew) {
          marks[next] = Mark::kOnPath;
          stack.push_back({next, 0});
        } else if (marks[next] == Mark::kOnPath) {
          auto from = std::find_if(stack.begin(), stack.end(),
                                   [&](const Frame& f) { return f.task == next; });
          std::string cycle;
          for (auto it = from; it != stack.end(); ++it) cycle += dag.tasks[it->task].name + " -> ";
          return Error(Index(path + ".tasks", from->task) + ".dependencies",
                       "dependency cycle: " + cycle + dag.tasks[next].name +
                           " (each task depends on the next)");
        }
      }
    }
    return Status::Ok();
  }

  Status CheckSteps(const std::string& path, const StepGroups& groups) const {
    std::set<std::string> names;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      for (std::size_t s = 0; s < groups[g].size(); ++s) {
        const Task& step = groups[g][s];
        std::string field = Index(Index(path, g), s);
        if (!IsValidTemplateName(step.name))
          return Error(field + ".name", BadFieldName("step", step.name));
        if (!names.insert(step.name).second) {
          return Error(field + ".name",
                       "step name '" + step.name + "' is not unique in this template");
        }
        HEADWAY_RETURN_IF_ERROR(CheckCall(field, step));
      }
    }
    return Status::Ok();
  }

  const WorkflowSpec& spec_;
  SpecOwner owner_;
  const LineMap* lines_;
};

}  // namespace

Status ValidateWorkflowSpec(const WorkflowSpec& spec, SpecOwner owner, const std::string& prefix,
                            const LineMap* lines) {
  return Validator(spec, owner, lines).Run(prefix);
}

}  // namespace headway::workflow
