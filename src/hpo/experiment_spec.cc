#include "hpo/experiment_spec.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/job_spec_json.h"
#include "core/progress_report.h"
#include "core/yaml_fields.h"
#include "hpo/internal/katib.h"
#include "hpo/internal/shell_script.h"
#include "workflow/manifest.h"

namespace headway::hpo {
namespace {

using namespace yaml_fields;  // NOLINT: the parser is written in terms of these helpers

constexpr std::size_t kMaxExperimentName = 56;  // leaves room for "-<trial index>" in a job name
constexpr std::string_view kPlaceholder = "${params.";

// Whether `text` holds a C1 control character (U+0080-009F) in UTF-8.
bool HasC1(const std::string& text) {
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    auto next = static_cast<unsigned char>(text[i + 1]);
    if (static_cast<unsigned char>(text[i]) == 0xC2 && next >= 0x80 && next <= 0x9F) {
      return true;
    }
  }
  return false;
}

bool IsParamName(const std::string& name) {
  if (name.empty() || name.size() > 64 || std::isdigit(static_cast<unsigned char>(name[0]))) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

Result<ParamSpec> ParseParam(const std::string& field, const YAML::Node& node) {
  ParamSpec p;
  std::string type;
  std::optional<double> min, max;
  YAML::Node values;
  bool has_values = false;  // a default YAML::Node is a defined null, so keep track
  HEADWAY_RETURN_IF_ERROR(
      ForEachField(field, node,
                   {{"name", Assign(p.name, AsString)},
                    {"type", Assign(type, AsString)},
                    {"min",
                     [&](const std::string& f, const YAML::Node& v) -> Status {
                       auto d = AsDouble(f, v);
                       if (!d.ok()) return d.status();
                       min = *d;
                       return Status::Ok();
                     }},
                    {"max",
                     [&](const std::string& f, const YAML::Node& v) -> Status {
                       auto d = AsDouble(f, v);
                       if (!d.ok()) return d.status();
                       max = *d;
                       return Status::Ok();
                     }},
                    {"log", Assign(p.log, AsBool)},
                    {"values", [&](const std::string&, const YAML::Node& v) -> Status {
                       values = v;
                       has_values = true;
                       return Status::Ok();
                     }}}));
  if (!IsParamName(p.name)) {
    return FieldError(field + ".name", node["name"] ? node["name"] : node,
                      "must be 1-64 letters, digits or '_', not starting with a digit");
  }
  if (type == "double" || type == "int") {
    p.type = type == "double" ? ParamType::kDouble : ParamType::kInt;
    if (!min || !max) return FieldError(field, node, "a " + type + " parameter needs min and max");
    if (has_values)
      return FieldError(field + ".values", values, "is for discrete and categorical parameters");
    if (p.type == ParamType::kInt && (*min != std::floor(*min) || *max != std::floor(*max))) {
      return FieldError(field, node, "an int parameter needs integer min and max");
    }
    if (!(*min < *max)) return FieldError(field + ".max", node["max"], "must be greater than min");
    if (p.log && *min <= 0)
      return FieldError(field + ".min", node["min"], "must be > 0 with log: true");
    p.min = *min;
    p.max = *max;
  } else if (type == "discrete" || type == "categorical") {
    if (min || max || p.log)
      return FieldError(field, node, "a " + type + " parameter takes only values");
    if (!has_values || !values.IsSequence() || values.size() == 0) {
      return FieldError(field + ".values", has_values ? values : node, "must be a non-empty list");
    }
    for (std::size_t i = 0; i < values.size(); ++i) {
      std::string f = field + ".values[" + std::to_string(i) + "]";
      if (type == "discrete") {
        auto d = AsDouble(f, values[i]);
        if (!d.ok()) return d.status();
        p.values.push_back(*d);
      } else {
        auto s = AsString(f, values[i]);
        if (!s.ok()) return s.status();
        // Values go into commands and onto terminals: no line breaks, escapes
        // or other control characters (YAML's "\e" and JSON's "\u001b" would
        // otherwise get them past the spec's check for raw bytes).
        if (std::any_of(s->begin(), s->end(),
                        [](char c) {
                          auto u = static_cast<unsigned char>(c);
                          return u < 0x20 || u == 0x7F;
                        }) ||
            HasC1(*s)) {
          return FieldError(f, values[i], "must be printable text (no control characters)");
        }
        p.categories.push_back(*s);
      }
    }
    if (type == "discrete") {
      p.type = ParamType::kDiscrete;
      std::sort(p.values.begin(), p.values.end());
      if (std::adjacent_find(p.values.begin(), p.values.end()) != p.values.end()) {
        return FieldError(field + ".values", values, "has a value twice");
      }
    } else {
      p.type = ParamType::kCategorical;
      if (std::set<std::string>(p.categories.begin(), p.categories.end()).size() !=
          p.categories.size()) {
        return FieldError(field + ".values", values, "has a value twice");
      }
    }
  } else {
    return FieldError(field + ".type", node["type"] ? node["type"] : node,
                      "must be double, int, discrete or categorical");
  }
  return p;
}

// Names of the parameters `${params.NAME}` refers to in `text`.
std::vector<std::string> Placeholders(const std::string& text) {
  std::vector<std::string> names;
  for (std::size_t at = text.find(kPlaceholder); at != std::string::npos;
       at = text.find(kPlaceholder, at + 1)) {
    std::size_t begin = at + kPlaceholder.size();
    std::size_t end = text.find('}', begin);
    names.push_back(end == std::string::npos ? text.substr(begin)
                                             : text.substr(begin, end - begin));
  }
  return names;
}

// The placeholder `${params.NAME}` at text[at] with NAME one of `params`:
// its length and value.
std::optional<std::pair<std::size_t, std::string>> PlaceholderAt(std::string_view text,
                                                                 std::size_t at,
                                                                 const Assignment& params) {
  if (text.substr(at, kPlaceholder.size()) != kPlaceholder) return std::nullopt;
  std::size_t begin = at + kPlaceholder.size();
  std::size_t end = text.find('}', begin);
  if (end == std::string_view::npos) return std::nullopt;
  auto it = params.find(std::string(text.substr(begin, end - begin)));
  if (it == params.end()) return std::nullopt;
  return std::pair<std::size_t, std::string>{end + 1 - at, FormatValue(it->second)};
}

// Every placeholder replaced by its value as is, in one pass (a value that
// looks like a placeholder stays what it is): for argv elements and env
// values, which no shell reads.
std::string Substitute(std::string_view text, const Assignment& params) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (auto p = PlaceholderAt(text, i, params)) {
      out += p->second;
      i += p->first;
    } else {
      out += text[i++];
    }
  }
  return out;
}

const char* TypeText(ParamType t) {
  switch (t) {
    case ParamType::kDouble:
      return "double";
    case ParamType::kInt:
      return "int";
    case ParamType::kDiscrete:
      return "discrete";
    case ParamType::kCategorical:
      return "categorical";
  }
  return "double";
}

// Calls `visit` on every DAG task and step of `wf`'s own templates until it
// returns true; whether one did.
template <typename Visit>
bool AnyTask(const workflow::Workflow& wf, Visit visit) {
  for (const workflow::Template& t : wf.spec.templates) {
    if (t.dag) {
      for (const workflow::Task& task : t.dag->tasks) {
        if (visit(task)) return true;
      }
    }
    if (t.steps) {
      for (const auto& group : *t.steps) {
        for (const workflow::Task& step : group) {
          if (visit(step)) return true;
        }
      }
    }
  }
  return false;
}

// Whether a DAG task or step of `wf` is called `name`.
bool HasStep(const workflow::Workflow& wf, const std::string& name) {
  return AnyTask(wf, [&](const workflow::Task& t) { return t.name == name; });
}

// Whether `wf` runs templates of WorkflowTemplates (whose steps it cannot see).
bool UsesTemplateRefs(const workflow::Workflow& wf) {
  return wf.spec.workflow_template_ref.has_value() ||
         AnyTask(wf, [](const workflow::Task& t) { return t.template_ref.has_value(); });
}

// trial_workflow: an Argo Workflow without a name, read by the workflow
// parser (every check a submitted workflow gets) with a workflow argument
// declared for each experiment parameter it does not declare itself.
Result<workflow::Workflow> ParseTrialWorkflow(const YAML::Node& node, const std::string& experiment,
                                              const std::set<std::string>& params) {
  const std::string field = "trial_workflow";
  if (!node.IsMap())
    return FieldError(field, node, "must be an Argo Workflow (a map), got " + TypeName(node));
  YAML::Node wf = YAML::Clone(node);
  if (wf["metadata"] && (wf["metadata"]["name"] || wf["metadata"]["generateName"])) {
    return FieldError(
        field + ".metadata.name", node["metadata"],
        "must not be set: trials are named " + experiment + "-0, " + experiment + "-1, ...");
  }
  if (!wf["apiVersion"]) wf["apiVersion"] = std::string(workflow::kApiVersion);
  if (!wf["kind"]) wf["kind"] = "Workflow";
  wf["metadata"]["name"] = experiment + "-0";
  if (wf["spec"] && wf["spec"].IsMap()) {
    std::set<std::string> declared;
    YAML::Node args = wf["spec"]["arguments"]["parameters"];
    if (args.IsSequence()) {
      for (const YAML::Node& p : args) {
        if (p.IsMap() && p["name"] && p["name"].IsScalar()) declared.insert(p["name"].Scalar());
      }
    }
    for (const std::string& name : params) {
      if (declared.count(name)) continue;
      YAML::Node p;
      p["name"] = name;
      p["value"] = "0";  // each trial sets its own value
      wf["spec"]["arguments"]["parameters"].push_back(p);
    }
  }
  YAML::Emitter out;
  out << wf;
  auto manifest = workflow::ParseManifest(out.c_str());
  if (!manifest.ok()) {
    // Lines are of the workflow as re-read, not the document: give the field only.
    const Status& s = manifest.status();
    Status prefixed(s.code(), s.message());
    prefixed.WithField(s.field().empty() ? field : field + "." + s.field());
    return prefixed;
  }
  auto* parsed = std::get_if<workflow::Workflow>(&manifest->resource);
  if (parsed == nullptr) return FieldError(field + ".kind", node["kind"], "must be Workflow");
  parsed->metadata.name.clear();
  return std::move(*parsed);
}

}  // namespace

std::string_view DirectionName(Direction d) {
  return d == Direction::kMaximize ? "maximize" : "minimize";
}

std::string_view StoppingRuleName(StoppingRule r) {
  switch (r) {
    case StoppingRule::kMedian:
      return "median";
    case StoppingRule::kAsha:
      return "asha";
    case StoppingRule::kNone:
      break;
  }
  return "none";
}

namespace {
Result<ExperimentSpec> ParseExperimentSpecDocument(std::string_view document);
}  // namespace

Result<ExperimentSpec> ParseExperimentSpec(std::string_view document) {
  return CatchYamlErrors<ExperimentSpec>([&] { return ParseExperimentSpecDocument(document); });
}

namespace {

Result<ExperimentSpec> ParseExperimentSpecDocument(std::string_view document) {
  auto root = Load(document);
  if (!root.ok()) return root.status();
  // A Katib Experiment manifest is read as the native document it maps to.
  if (internal::IsKatibExperiment(*root)) {
    root = internal::KatibToNative(*root);
    if (!root.ok()) return root.status();
  }
  if (!root->IsMap()) {
    return InvalidArgument("an experiment spec must be a map of fields, got " + TypeName(*root))
        .WithField("spec");
  }
  ExperimentSpec spec;
  std::string direction = "minimize", rule = "none";
  YAML::Node params_node, template_node, objective_node, workflow_node;
  std::map<std::string, FieldHandler> objective = {
      {"metric", Assign(spec.objective.metric, AsString)},
      {"direction", Assign(direction, AsString)},
      {"step", Assign(spec.objective.step, AsString)},
      {"goal", [&](const std::string& f, const YAML::Node& v) -> Status {
         auto d = AsDouble(f, v);
         if (!d.ok()) return d.status();
         spec.objective.goal = *d;
         return Status::Ok();
       }}};
  std::int64_t seed = 0;
  std::map<std::string, FieldHandler> algorithm = {
      {"name", Assign(spec.algorithm, AsString)},
      {"seed",
       [&](const std::string& f, const YAML::Node& v) -> Status {
         auto n = AsInt(f, v, 0, std::numeric_limits<std::int64_t>::max());
         if (!n.ok()) return n.status();
         seed = *n;
         return Status::Ok();
       }},
      {"startup_trials", AssignInt(spec.sampler.startup_trials, 0, 1000)},
      {"grid_points", AssignInt(spec.sampler.grid_points, 2, 100)}};
  int min_trials = spec.early_stopping.min_trials;
  std::map<std::string, FieldHandler> early = {
      {"rule", Assign(rule, AsString)},
      {"min_trials", AssignInt(min_trials, 1, 1000)},
      {"start_step",
       [&](const std::string& f, const YAML::Node& v) -> Status {
         auto n = AsInt(f, v, 0, std::numeric_limits<std::int64_t>::max());
         if (!n.ok()) return n.status();
         spec.early_stopping.start_step = *n;
         return Status::Ok();
       }},
      {"min_resource",
       [&](const std::string& f, const YAML::Node& v) -> Status {
         auto n = AsInt(f, v, 1, std::numeric_limits<std::int64_t>::max());
         if (!n.ok()) return n.status();
         spec.early_stopping.min_resource = *n;
         return Status::Ok();
       }},
      {"reduction_factor",
       [&](const std::string& f, const YAML::Node& v) -> Status {
         auto d = AsDouble(f, v);
         if (!d.ok()) return d.status();
         if (*d <= 1 || *d > 100) return FieldError(f, v, "must be > 1 and <= 100");
         spec.early_stopping.reduction_factor = *d;
         return Status::Ok();
       }},
      {"health", [&](const std::string& f, const YAML::Node& v) -> Status {
         if (!v.IsSequence()) return FieldError(f, v, "must be a list of verdicts");
         std::vector<Health> verdicts;
         for (const YAML::Node& item : v) {
           std::optional<Health> h = item.IsScalar() ? ParseHealth(item.Scalar()) : std::nullopt;
           if (!h || (*h != Health::kDiverging && *h != Health::kOverfitting &&
                      *h != Health::kPlateaued && *h != Health::kStalled)) {
             return FieldError(f, item, "must be Diverging, Overfitting, Plateaued or Stalled");
           }
           if (std::find(verdicts.begin(), verdicts.end(), *h) == verdicts.end()) {
             verdicts.push_back(*h);
           }
         }
         spec.early_stopping.stop_on_health = std::move(verdicts);
         return Status::Ok();
       }}};
  std::map<std::string, FieldHandler> top = {
      {"apiVersion", Ignore()},
      {"kind",
       [](const std::string& f, const YAML::Node& v) -> Status {
         if (!v.IsScalar() || v.Scalar() != "Experiment")
           return FieldError(f, v, "must be 'Experiment'");
         return Status::Ok();
       }},
      {"name", Assign(spec.name, AsString)},
      {"objective",
       [&](const std::string& f, const YAML::Node& v) {
         objective_node = v;
         return ForEachField(f, v, objective);
       }},
      {"algorithm",
       [&](const std::string& f, const YAML::Node& v) { return ForEachField(f, v, algorithm); }},
      {"parameters",
       [&](const std::string&, const YAML::Node& v) -> Status {
         params_node = v;
         return Status::Ok();
       }},
      {"max_trials", AssignInt(spec.max_trials, 1, 10000)},
      {"parallel_trials", AssignInt(spec.parallel_trials, 1, 1000)},
      {"max_failed_trials", AssignInt(spec.max_failed_trials, 0, 10000)},
      {"early_stopping",
       [&](const std::string& f, const YAML::Node& v) { return ForEachField(f, v, early); }},
      {"trial_template",
       [&](const std::string&, const YAML::Node& v) -> Status {
         template_node = v;
         return Status::Ok();
       }},
      {"trial_workflow", [&](const std::string&, const YAML::Node& v) -> Status {
         workflow_node = v;
         return Status::Ok();
       }}};
  HEADWAY_RETURN_IF_ERROR(ForEachField("", *root, top));

  const YAML::Node& r = *root;
  if (!r["name"]) return InvalidArgument("is required").WithField("name");
  if (!IsValidJobName(spec.name) || spec.name.size() > kMaxExperimentName) {
    return FieldError("name", r["name"],
                      "must be 1-56 lowercase letters, digits or '-', starting and ending with a "
                      "letter or digit, got '" +
                          spec.name + "'");
  }
  if (!r["objective"]) return InvalidArgument("is required").WithField("objective");
  if (!IsValidMetricName(spec.objective.metric)) {
    return FieldError("objective.metric",
                      objective_node["metric"] ? objective_node["metric"] : objective_node,
                      "must name a reported metric ([A-Za-z0-9_./-])");
  }
  if (direction == "maximize") {
    spec.objective.direction = Direction::kMaximize;
  } else if (direction != "minimize") {
    return FieldError("objective.direction", objective_node["direction"],
                      "must be minimize or maximize");
  }
  spec.sampler.seed = static_cast<std::uint64_t>(seed);
  if (auto sampler = MakeSampler(spec.algorithm, spec.sampler); !sampler.ok()) {
    return FieldError("algorithm.name",
                      r["algorithm"]["name"] ? r["algorithm"]["name"] : r["algorithm"],
                      sampler.status().message());
  }
  if (!r["parameters"]) return InvalidArgument("is required").WithField("parameters");
  if (!params_node.IsSequence() || params_node.size() == 0) {
    return FieldError("parameters", params_node, "must be a non-empty list");
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < params_node.size(); ++i) {
    std::string f = "parameters[" + std::to_string(i) + "]";
    auto p = ParseParam(f, params_node[i]);
    if (!p.ok()) return p.status();
    if (!names.insert(p->name).second)
      return FieldError(f + ".name", params_node[i]["name"], "is given twice");
    spec.parameters.push_back(std::move(p.value()));
  }
  spec.early_stopping.min_trials = min_trials;
  if (rule == "median") {
    spec.early_stopping.rule = StoppingRule::kMedian;
  } else if (rule == "asha") {
    spec.early_stopping.rule = StoppingRule::kAsha;
  } else if (rule != "none") {
    return FieldError("early_stopping.rule", r["early_stopping"]["rule"],
                      "must be none, median or asha");
  }
  if (r["trial_workflow"]) {
    if (r["trial_template"]) {
      return FieldError(
          "trial_template", template_node,
          "a trial is a job (trial_template) or a workflow (trial_workflow), not both");
    }
    auto wf = ParseTrialWorkflow(workflow_node, spec.name, names);
    if (!wf.ok()) return wf.status();
    if (spec.objective.step.empty()) {
      return FieldError("objective", objective_node,
                        "needs a step: the DAG task or step of trial_workflow whose job reports '" +
                            spec.objective.metric + "'");
    }
    // Steps of referenced WorkflowTemplates are not known here.
    if (!HasStep(*wf, spec.objective.step) && !UsesTemplateRefs(*wf)) {
      return FieldError(
          "objective.step", objective_node["step"],
          "trial_workflow has no DAG task or step named '" + spec.objective.step + "'");
    }
    // The workflow's team, or the default one admission may replace (as for a job).
    spec.trial_template.team = workflow::HeadwayValue(wf->metadata, nullptr, workflow::kTeamKey)
                                   .value_or(spec.trial_template.team);
    spec.trial_workflow = std::move(wf.value());
    return spec;
  }
  if (!spec.objective.step.empty()) {
    return FieldError("objective.step", objective_node["step"], "is for trial_workflow");
  }
  if (!r["trial_template"]) return InvalidArgument("is required").WithField("trial_template");
  if (template_node.IsMap() && template_node["name"]) {
    return FieldError(
        "trial_template.name", template_node["name"],
        "must not be set: trials are named " + spec.name + "-0, " + spec.name + "-1, ...");
  }
  auto job = ParseJobSpecNode(template_node, "trial_template", /*name_required=*/false);
  if (!job.ok()) return job.status();
  spec.trial_template = std::move(job.value());
  auto check = [&](const std::string& field, const std::string& text) -> Status {
    for (const std::string& name : Placeholders(text)) {
      if (!names.count(name)) {
        return FieldError(field, template_node, "refers to unknown parameter '" + name + "'");
      }
    }
    return Status::Ok();
  };
  const JobSpec& t = spec.trial_template;
  for (std::size_t i = 0; i < t.command.size(); ++i) {
    HEADWAY_RETURN_IF_ERROR(
        check("trial_template.command[" + std::to_string(i) + "]", t.command[i]));
  }
  for (std::size_t i = 0; i < t.args.size(); ++i) {
    HEADWAY_RETURN_IF_ERROR(check("trial_template.args[" + std::to_string(i) + "]", t.args[i]));
  }
  for (const auto& [key, value] : t.env)
    HEADWAY_RETURN_IF_ERROR(check("trial_template.env." + key, value));
  return spec;
}

}  // namespace

nlohmann::json ExperimentSpecToJson(const ExperimentSpec& spec) {
  nlohmann::json params = nlohmann::json::array();
  for (const ParamSpec& p : spec.parameters) {
    nlohmann::json j = {{"name", p.name}, {"type", TypeText(p.type)}};
    if (p.type == ParamType::kDouble || p.type == ParamType::kInt) {
      j["min"] = p.min;
      j["max"] = p.max;
      j["log"] = p.log;
    } else if (p.type == ParamType::kDiscrete) {
      j["values"] = p.values;
    } else {
      j["values"] = p.categories;
    }
    params.push_back(j);
  }
  nlohmann::json objective = {{"metric", spec.objective.metric},
                              {"direction", DirectionName(spec.objective.direction)}};
  if (spec.objective.goal) objective["goal"] = *spec.objective.goal;
  if (!spec.objective.step.empty()) objective["step"] = spec.objective.step;
  nlohmann::json trial = JobSpecToJson(spec.trial_template);
  trial.erase("name");
  const EarlyStoppingOptions& e = spec.early_stopping;
  nlohmann::json out = {{"name", spec.name},
                        {"objective", objective},
                        {"algorithm",
                         {{"name", spec.algorithm},
                          {"seed", static_cast<std::int64_t>(spec.sampler.seed)},
                          {"startup_trials", spec.sampler.startup_trials},
                          {"grid_points", spec.sampler.grid_points}}},
                        {"parameters", params},
                        {"max_trials", spec.max_trials},
                        {"parallel_trials", spec.parallel_trials},
                        {"max_failed_trials", spec.max_failed_trials},
                        {"early_stopping",
                         {{"rule", StoppingRuleName(e.rule)},
                          {"min_trials", e.min_trials},
                          {"start_step", e.start_step},
                          {"min_resource", e.min_resource},
                          {"reduction_factor", e.reduction_factor},
                          {"health",
                           [&] {
                             nlohmann::json names = nlohmann::json::array();
                             for (Health h : e.stop_on_health)
                               names.push_back(std::string(HealthName(h)));
                             return names;
                           }()}}},
                        {"trial_template", trial}};
  if (spec.trial_workflow) {
    out.erase("trial_template");
    nlohmann::json wf = workflow::ToJson(*spec.trial_workflow);
    if (wf.contains("metadata")) wf["metadata"].erase("name");
    out["trial_workflow"] = std::move(wf);
  }
  return out;
}

workflow::Workflow TrialWorkflow(const ExperimentSpec& spec, std::int64_t index,
                                 const Assignment& params) {
  workflow::Workflow wf = spec.trial_workflow.value_or(workflow::Workflow{});
  wf.metadata.name = spec.name + "-" + std::to_string(index);
  wf.metadata.generate_name.clear();
  wf.metadata.labels["experiment"] = spec.name;
  wf.metadata.labels["trial"] = std::to_string(index);
  for (workflow::Parameter& p : wf.spec.arguments.parameters) {
    auto it = params.find(p.name);
    if (it == params.end()) continue;
    p.value = FormatValue(it->second);
    p.value_from.reset();
  }
  return wf;
}

JobSpec TrialJobSpec(const ExperimentSpec& spec, std::int64_t index, const Assignment& params) {
  JobSpec job = spec.trial_template;
  job.name = spec.name + "-" + std::to_string(index);
  // The script of a shell command (a command string runs under /bin/sh -c)
  // gets its values shell-quoted; argv elements and env values, which no
  // shell parses, get them as they are.
  std::optional<std::size_t> script = internal::ShellScriptIndex(job.Argv());
  auto value_of = [&](std::string_view name) -> std::optional<std::string> {
    auto it = params.find(std::string(name));
    if (it == params.end()) return std::nullopt;
    return FormatValue(it->second);
  };
  std::size_t position = 0;  // in Argv()
  auto substitute = [&](std::string& text) {
    text = script && position == *script ? internal::SubstituteInShellScript(text, value_of)
                                         : Substitute(text, params);
    ++position;
  };
  for (std::string& c : job.command) substitute(c);
  for (std::string& a : job.args) substitute(a);
  for (auto& [key, value] : job.env) value = Substitute(value, params);
  job.labels["experiment"] = spec.name;
  job.labels["trial"] = std::to_string(index);
  return job;
}

}  // namespace headway::hpo
