// Katib Experiment -> Headway experiment document (hpo/internal/katib.h).
//
//   metadata.name, namespace                 -> name, the trials' team
//   spec.objective.type, goal, objectiveMetricName -> objective
//   spec.algorithm.algorithmName             -> random, grid, tpe; multivariate-tpe ->
//                                               tpe-multivariate; bayesianoptimization -> gp
//     algorithmSettings random_state, n_startup_trials / n_initial_points -> seed, startup_trials
//   spec.parameters[] (double, int, categorical, discrete; feasibleSpace
//     min, max, list, distribution uniform|logUniform) -> parameters
//   spec.maxTrialCount, parallelTrialCount, maxFailedTrialCount -> limits
//   spec.earlyStopping medianstop (min_trials_required, start_step) -> median rule
//   spec.trialTemplate.trialSpec: a batch/v1 Job (its primary container) or
//     a Kubeflow TrainJob -> trial_template; ${trialParameters.X} -> the
//     parameter X refers to
//   spec.metricsCollectorSpec StdOut (the default) -> the trial's `name=value`
//     output lines are read as metrics (label headway.dev/stdout-metrics)
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <map>
#include <string>

#include "core/job_spec_json.h"
#include "core/yaml_fields.h"
#include "hpo/internal/katib.h"

namespace headway::hpo::internal {
namespace {

using namespace yaml_fields;  // NOLINT: the translation is written in terms of these helpers

// Katib writes numbers as strings ("0.01"); the native document wants numbers.
Result<double> KatibNumber(const std::string& field, const YAML::Node& node) {
  if (!node.IsScalar()) return FieldError(field, node, "must be a number");
  char* end = nullptr;
  const std::string& text = node.Scalar();
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value)) {
    return FieldError(field, node, "must be a number, got '" + text + "'");
  }
  return value;
}

// algorithmSettings and earlyStopping settings: [{name, value}].
Result<std::map<std::string, YAML::Node>> Settings(const std::string& field,
                                                   const YAML::Node& node) {
  std::map<std::string, YAML::Node> out;
  if (!node || node.IsNull()) return out;
  if (!node.IsSequence()) return FieldError(field, node, "must be a list of {name, value}");
  for (std::size_t i = 0; i < node.size(); ++i) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    const YAML::Node item = node[i];
    if (!item.IsMap() || !item["name"] || !item["name"].IsScalar()) {
      return FieldError(f, item, "must be a map with name and value");
    }
    out[item["name"].Scalar()] = item["value"] ? item["value"] : item;
  }
  return out;
}

Result<YAML::Node> Parameter(const std::string& field, const YAML::Node& item) {
  if (!item.IsMap())
    return FieldError(field, item, "must be a map with name, parameterType and feasibleSpace");
  YAML::Node out;
  std::string type;
  YAML::Node space;
  HEADWAY_RETURN_IF_ERROR(
      ForEachField(field, item,
                   {{"name",
                     [&](const std::string& f, const YAML::Node& v) -> Status {
                       auto name = AsString(f, v);
                       if (!name.ok()) return name.status();
                       out["name"] = *name;
                       return Status::Ok();
                     }},
                    {"parameterType", Assign(type, AsString)},
                    {"feasibleSpace", [&](const std::string&, const YAML::Node& v) {
                       space = v;
                       return Status::Ok();
                     }}}));
  if (type != "double" && type != "int" && type != "categorical" && type != "discrete") {
    return FieldError(field + ".parameterType",
                      item["parameterType"] ? item["parameterType"] : item,
                      "must be double, int, categorical or discrete");
  }
  out["type"] = type;
  const std::string sf = field + ".feasibleSpace";
  if (!space || !space.IsMap()) return FieldError(sf, item, "is required (a map)");
  bool has_list = false;
  std::string distribution = "uniform";
  HEADWAY_RETURN_IF_ERROR(ForEachField(
      sf, space,
      {{"min",
        [&](const std::string& f, const YAML::Node& v) -> Status {
          auto d = KatibNumber(f, v);
          if (!d.ok()) return d.status();
          out["min"] = *d;
          return Status::Ok();
        }},
       {"max",
        [&](const std::string& f, const YAML::Node& v) -> Status {
          auto d = KatibNumber(f, v);
          if (!d.ok()) return d.status();
          out["max"] = *d;
          return Status::Ok();
        }},
       {"list",
        [&](const std::string& f, const YAML::Node& v) -> Status {
          if (!v.IsSequence() || v.size() == 0) return FieldError(f, v, "must be a non-empty list");
          YAML::Node values(YAML::NodeType::Sequence);
          for (std::size_t i = 0; i < v.size(); ++i) {
            const std::string vf = f + "[" + std::to_string(i) + "]";
            if (type == "discrete") {
              auto d = KatibNumber(vf, v[i]);
              if (!d.ok()) return d.status();
              values.push_back(*d);
            } else {
              auto s = AsString(vf, v[i]);
              if (!s.ok()) return s.status();
              values.push_back(*s);
            }
          }
          out["values"] = values;
          has_list = true;
          return Status::Ok();
        }},
       {"step",
        [&](const std::string& f, const YAML::Node& v) -> Status {
          auto d = KatibNumber(f, v);
          if (!d.ok()) return d.status();
          if (type == "int" && *d == 1) return Status::Ok();  // every integer: what int means here
          return UnsupportedField(f, v,
                                  "a search over steps of a range; list the values with "
                                  "parameterType discrete");
        }},
       {"distribution", Assign(distribution, AsString)}}));
  if (distribution == "logUniform") {
    out["log"] = true;
  } else if (distribution != "uniform") {
    return UnsupportedField(sf + ".distribution", space["distribution"],
                            "distributions are uniform or logUniform");
  }
  if ((type == "categorical" || type == "discrete") != has_list) {
    return FieldError(
        sf, space,
        type == "categorical" || type == "discrete" ? "needs list" : "needs min and max, not list");
  }
  return out;
}

// The trial template from trialSpec, with ${trialParameters.X} placeholders
// rewritten to the native ${params.<parameter X refers to>}.
Result<YAML::Node> TrialTemplate(const std::string& field, const YAML::Node& node,
                                 const std::string& team, const std::vector<std::string>& metrics,
                                 bool stdout_metrics) {
  if (!node || !node.IsMap()) return InvalidArgument("is required (a map)").WithField(field);
  std::map<std::string, std::string> references;  // trialParameter name -> parameter name
  YAML::Node trial_spec;
  std::string primary;
  HEADWAY_RETURN_IF_ERROR(ForEachField(
      field, node,
      {{"primaryContainerName", Assign(primary, AsString)},
       {"trialParameters",
        [&](const std::string& f, const YAML::Node& v) -> Status {
          if (!v.IsSequence()) return FieldError(f, v, "must be a list of {name, reference}");
          for (std::size_t i = 0; i < v.size(); ++i) {
            const std::string pf = f + "[" + std::to_string(i) + "]";
            std::string name, reference;
            HEADWAY_RETURN_IF_ERROR(ForEachField(pf, v[i],
                                                 {{"name", Assign(name, AsString)},
                                                  {"reference", Assign(reference, AsString)},
                                                  {"description", Ignore()}}));
            if (name.empty() || reference.empty()) {
              return FieldError(pf, v[i], "needs name and reference");
            }
            references[name] = reference;
          }
          return Status::Ok();
        }},
       {"trialSpec",
        [&](const std::string&, const YAML::Node& v) {
          trial_spec = v;
          return Status::Ok();
        }},
       // Headway judges a trial by its exit code and its reported objective.
       {"successCondition", Ignore()},
       {"failureCondition", Ignore()},
       {"retain", Ignore()},
       {"primaryPodLabels", Ignore()},
       {"configMap", [](const std::string& f, const YAML::Node& v) -> Status {
          return UnsupportedField(f, v, "put the trial's spec in trialSpec");
        }}}));
  const std::string sf = field + ".trialSpec";
  if (!trial_spec || !trial_spec.IsMap())
    return InvalidArgument("is required (a map)").WithField(sf);

  JobSpec job;
  if (IsManifestOf(trial_spec, "trainer.kubeflow.org/", "TrainJob")) {
    auto parsed = ParseTrainJobNode(trial_spec, sf, /*name_required=*/false);
    if (!parsed.ok()) return parsed.status();
    job = std::move(parsed.value());
  } else if (IsManifestOf(trial_spec, "batch/", "Job")) {
    const YAML::Node pod = trial_spec["spec"]["template"]["spec"];
    const std::string pf = sf + ".spec.template.spec";
    if (!pod || !pod.IsMap() || !pod["containers"] || !pod["containers"].IsSequence() ||
        pod["containers"].size() == 0) {
      return InvalidArgument("needs containers").WithField(pf);
    }
    const YAML::Node containers = pod["containers"];
    std::size_t chosen = containers.size();
    for (std::size_t i = 0; i < containers.size(); ++i) {
      const YAML::Node name = containers[i]["name"];
      if (containers.size() == 1 || (name && name.IsScalar() && name.Scalar() == primary))
        chosen = i;
    }
    if (chosen == containers.size()) {
      return FieldError(field + ".primaryContainerName",
                        node["primaryContainerName"] ? node["primaryContainerName"] : node,
                        "must name one of the Job's containers");
    }
    for (const auto& kv : pod) {
      const std::string key = kv.first.Scalar();
      if (key != "containers" && key != "restartPolicy") {
        return UnsupportedField(pf + "." + key, kv.first,
                                "a trial runs as processes, not as a pod");
      }
    }
    job.team = "default";
    HEADWAY_RETURN_IF_ERROR(ApplyKubernetesContainer(
        containers[chosen], pf + ".containers[" + std::to_string(chosen) + "]", job));
    if (job.command.empty()) {
      return InvalidArgument("is required: Headway runs the command, not the image's entrypoint")
          .WithField(pf + ".containers[" + std::to_string(chosen) + "].command");
    }
  } else {
    return UnsupportedField(sf + ".kind", trial_spec["kind"] ? trial_spec["kind"] : trial_spec,
                            "trials are a batch/v1 Job or a trainer.kubeflow.org TrainJob");
  }
  job.name.clear();
  job.team = team;
  if (stdout_metrics) {
    std::string names;
    for (const std::string& m : metrics) names += (names.empty() ? "" : ",") + m;
    job.labels["headway.dev/stdout-metrics"] = names;
  }
  nlohmann::json native = JobSpecToJson(job);
  native.erase("name");
  std::string text = native.dump();
  const std::string open = "${trialParameters.";
  for (std::size_t at = text.find(open); at != std::string::npos; at = text.find(open, at)) {
    std::size_t close = text.find('}', at);
    std::string name =
        close == std::string::npos ? "" : text.substr(at + open.size(), close - at - open.size());
    auto ref = references.find(name);
    if (ref == references.end()) {
      return InvalidArgument("refers to ${trialParameters." + name +
                             "}, which trialTemplate.trialParameters does not define")
          .WithField(sf);
    }
    std::string replacement = "${params." + ref->second + "}";
    text.replace(at, close + 1 - at, replacement);
    at += replacement.size();
  }
  if (text.find("${trialSpec.") != std::string::npos) {
    return UnsupportedField(sf, trial_spec, "${trialSpec.*} metadata placeholders");
  }
  return YAML::Load(text);
}

}  // namespace

bool IsKatibExperiment(const YAML::Node& root) {
  return IsManifestOf(root, "kubeflow.org/", "Experiment");
}

Result<YAML::Node> KatibToNative(const YAML::Node& root) {
  YAML::Node out;
  std::string team = "default";
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    if (key != "apiVersion" && key != "kind" && key != "metadata" && key != "spec" &&
        key != "status") {
      return FieldError(key, kv.first, "is not a field of a Katib Experiment");
    }
  }
  const YAML::Node metadata = root["metadata"];
  if (!metadata || !metadata.IsMap())
    return InvalidArgument("is required (a map with name)").WithField("metadata");
  std::map<std::string, FieldHandler> metadata_fields = {
      {"name",
       [&](const std::string& f, const YAML::Node& v) -> Status {
         auto name = AsString(f, v);
         if (!name.ok()) return name.status();
         out["name"] = *name;
         return Status::Ok();
       }},
      {"namespace", Assign(team, AsString)},
      {"labels", Ignore()},
      {"annotations", Ignore()}};
  IgnoreServerWrittenMetadata(metadata_fields);
  HEADWAY_RETURN_IF_ERROR(ForEachField("metadata", metadata, metadata_fields));
  if (!out["name"]) return InvalidArgument("is required").WithField("metadata.name");

  const YAML::Node spec = root["spec"];
  if (!spec || !spec.IsMap()) return InvalidArgument("is required (a map)").WithField("spec");
  std::vector<std::string> metrics;
  bool stdout_metrics = true;
  YAML::Node objective, algorithm, early, template_node;
  out["parallel_trials"] = 3;  // Katib's default
  HEADWAY_RETURN_IF_ERROR(ForEachField(
      "spec", spec,
      {{"objective",
        [&](const std::string&, const YAML::Node& v) {
          objective = v;
          return Status::Ok();
        }},
       {"algorithm",
        [&](const std::string&, const YAML::Node& v) {
          algorithm = v;
          return Status::Ok();
        }},
       {"earlyStopping",
        [&](const std::string&, const YAML::Node& v) {
          early = v;
          return Status::Ok();
        }},
       {"trialTemplate",
        [&](const std::string&, const YAML::Node& v) {
          template_node = v;
          return Status::Ok();
        }},
       {"parameters",
        [&](const std::string& f, const YAML::Node& v) -> Status {
          if (!v.IsSequence() || v.size() == 0) return FieldError(f, v, "must be a non-empty list");
          YAML::Node params(YAML::NodeType::Sequence);
          for (std::size_t i = 0; i < v.size(); ++i) {
            auto p = Parameter(f + "[" + std::to_string(i) + "]", v[i]);
            if (!p.ok()) return p.status();
            params.push_back(*p);
          }
          out["parameters"] = params;
          return Status::Ok();
        }},
       {"maxTrialCount",
        [&](const std::string& f, const YAML::Node& v) -> Status {
          auto n = AsInt(f, v, 1, 10000);
          if (!n.ok()) return n.status();
          out["max_trials"] = *n;
          return Status::Ok();
        }},
       {"parallelTrialCount",
        [&](const std::string& f, const YAML::Node& v) -> Status {
          auto n = AsInt(f, v, 1, 1000);
          if (!n.ok()) return n.status();
          out["parallel_trials"] = *n;
          return Status::Ok();
        }},
       {"maxFailedTrialCount",
        [&](const std::string& f, const YAML::Node& v) -> Status {
          auto n = AsInt(f, v, 0, 10000);
          if (!n.ok()) return n.status();
          out["max_failed_trials"] = *n;
          return Status::Ok();
        }},
       {"metricsCollectorSpec",
        [&](const std::string& f, const YAML::Node& v) -> Status {
          const YAML::Node kind = v["collector"]["kind"];
          if (v.IsMap() && v["source"]) {
            return UnsupportedField(
                f + ".source", v["source"],
                "metrics are read from `name=value` output lines as Katib's default "
                "StdOut collector reads them");
          }
          if (!kind || (kind.IsScalar() && kind.Scalar() == "StdOut")) return Status::Ok();
          if (kind.IsScalar() && kind.Scalar() == "None") {
            stdout_metrics = false;  // the trial reports through Headway's own protocol
            return Status::Ok();
          }
          return UnsupportedField(
              f + ".collector.kind", kind,
              "collectors are StdOut (name=value output lines) or None (the trial "
              "reports with Headway's SDK or the Kubeflow progress API)");
        }},
       {"resumePolicy", Ignore()},
       {"nasConfig", [](const std::string& f, const YAML::Node& v) -> Status {
          return UnsupportedField(f, v, "neural architecture search");
        }}}));

  // Objective.
  if (!objective || !objective.IsMap())
    return InvalidArgument("is required (a map)").WithField("spec.objective");
  {
    YAML::Node o;
    std::string type;
    HEADWAY_RETURN_IF_ERROR(ForEachField(
        "spec.objective", objective,
        {{"type", Assign(type, AsString)},
         {"goal",
          [&](const std::string& f, const YAML::Node& v) -> Status {
            auto d = KatibNumber(f, v);
            if (!d.ok()) return d.status();
            o["goal"] = *d;
            return Status::Ok();
          }},
         {"objectiveMetricName",
          [&](const std::string& f, const YAML::Node& v) -> Status {
            auto name = AsString(f, v);
            if (!name.ok()) return name.status();
            o["metric"] = *name;
            metrics.insert(metrics.begin(), *name);
            return Status::Ok();
          }},
         {"additionalMetricNames",
          [&](const std::string& f, const YAML::Node& v) -> Status {
            auto names = AsStringList(f, v);
            if (!names.ok()) return names.status();
            metrics.insert(metrics.end(), names->begin(), names->end());
            return Status::Ok();
          }},
         {"metricStrategies", [&](const std::string& f, const YAML::Node& v) -> Status {
            if (!v.IsSequence()) return FieldError(f, v, "must be a list of {name, value}");
            for (std::size_t i = 0; i < v.size(); ++i) {
              const YAML::Node value = v[i]["value"];
              const YAML::Node name = v[i]["name"];
              if (!name || !value || !name.IsScalar() || !value.IsScalar()) {
                return FieldError(f + "[" + std::to_string(i) + "]", v[i], "needs name and value");
              }
              std::string best = type == "maximize" ? "max" : "min";
              if (o["metric"] && name.Scalar() == o["metric"].Scalar() && value.Scalar() != best) {
                return UnsupportedField(f + "[" + std::to_string(i) + "].value", value,
                                        "a trial's objective is its best value (" + best + ")");
              }
            }
            return Status::Ok();
          }}}));
    if (type != "minimize" && type != "maximize") {
      return FieldError("spec.objective.type", objective["type"] ? objective["type"] : objective,
                        "must be minimize or maximize");
    }
    if (!o["metric"])
      return InvalidArgument("is required").WithField("spec.objective.objectiveMetricName");
    o["direction"] = type;
    out["objective"] = o;
  }

  // Algorithm.
  if (!algorithm || !algorithm.IsMap())
    return InvalidArgument("is required (a map)").WithField("spec.algorithm");
  {
    YAML::Node a;
    std::string name;
    YAML::Node settings_node;
    HEADWAY_RETURN_IF_ERROR(
        ForEachField("spec.algorithm", algorithm,
                     {{"algorithmName", Assign(name, AsString)},
                      {"algorithmSettings", [&](const std::string&, const YAML::Node& v) {
                         settings_node = v;
                         return Status::Ok();
                       }}}));
    static const std::map<std::string, std::string> kAlgorithms = {
        {"random", "random"},
        {"grid", "grid"},
        {"tpe", "tpe"},
        {"multivariate-tpe", "tpe-multivariate"},
        {"bayesianoptimization", "gp"}};
    auto known = kAlgorithms.find(name);
    if (known == kAlgorithms.end()) {
      return UnsupportedField("spec.algorithm.algorithmName",
                              algorithm["algorithmName"] ? algorithm["algorithmName"] : algorithm,
                              "'" + name +
                                  "'; algorithms are random, grid, tpe, multivariate-tpe and "
                                  "bayesianoptimization");
    }
    a["name"] = known->second;
    auto settings = Settings("spec.algorithm.algorithmSettings", settings_node);
    if (!settings.ok()) return settings.status();
    for (const auto& [key, value] : *settings) {
      const std::string f = "spec.algorithm.algorithmSettings." + key;
      if (key == "random_state") {
        auto d = KatibNumber(f, value);
        if (!d.ok()) return d.status();
        a["seed"] = static_cast<std::int64_t>(*d);
      } else if ((key == "n_startup_trials" && (name == "tpe" || name == "multivariate-tpe")) ||
                 (key == "n_initial_points" && name == "bayesianoptimization")) {
        auto d = KatibNumber(f, value);
        if (!d.ok()) return d.status();
        a["startup_trials"] = static_cast<std::int64_t>(*d);
      } else {
        return UnsupportedField(f, value,
                                "Headway's " + known->second + " sampler has no such setting");
      }
    }
    out["algorithm"] = a;
  }

  // Early stopping.
  if (early && !early.IsNull()) {
    YAML::Node e;
    std::string name;
    YAML::Node settings_node;
    HEADWAY_RETURN_IF_ERROR(
        ForEachField("spec.earlyStopping", early,
                     {{"algorithmName", Assign(name, AsString)},
                      {"algorithmSettings", [&](const std::string&, const YAML::Node& v) {
                         settings_node = v;
                         return Status::Ok();
                       }}}));
    if (name != "medianstop") {
      return UnsupportedField("spec.earlyStopping.algorithmName",
                              early["algorithmName"] ? early["algorithmName"] : early,
                              "'" + name + "'; early stopping is medianstop");
    }
    e["rule"] = "median";
    auto settings = Settings("spec.earlyStopping.algorithmSettings", settings_node);
    if (!settings.ok()) return settings.status();
    for (const auto& [key, value] : *settings) {
      const std::string f = "spec.earlyStopping.algorithmSettings." + key;
      auto d = KatibNumber(f, value);
      if (!d.ok()) return d.status();
      if (key == "min_trials_required") {
        e["min_trials"] = static_cast<std::int64_t>(*d);
      } else if (key == "start_step") {
        e["start_step"] = static_cast<std::int64_t>(*d);
      } else {
        return UnsupportedField(f, value, "medianstop takes min_trials_required and start_step");
      }
    }
    out["early_stopping"] = e;
  }

  auto trial = TrialTemplate("spec.trialTemplate", template_node, team, metrics, stdout_metrics);
  if (!trial.ok()) return trial.status();
  out["trial_template"] = *trial;
  return out;
}

}  // namespace headway::hpo::internal
