#include "core/job_spec_parser.h"

#include <algorithm>

#include "core/kubeflow_manifest.h"
#include "core/progress_report.h"
#include "core/yaml_fields.h"

namespace headway {
namespace {

using namespace yaml_fields;  // NOLINT: the parser is written in terms of these helpers

Result<HealthAction> AsAction(const std::string& field, const YAML::Node& node) {
  auto text = AsString(field, node);
  if (!text.ok()) return text.status();
  if (*text == "notify") return HealthAction::kNotify;
  if (*text == "stop") return HealthAction::kStop;
  if (*text == "reclaim") return HealthAction::kReclaim;
  return FieldError(field, node, "must be 'notify', 'stop' or 'reclaim', got '" + *text + "'");
}

Result<MetricGoal> AsGoal(const std::string& field, const YAML::Node& node) {
  auto text = AsString(field, node);
  if (!text.ok()) return text.status();
  if (*text == "minimize") return MetricGoal::kMinimize;
  if (*text == "maximize") return MetricGoal::kMaximize;
  return FieldError(field, node, "must be 'minimize' or 'maximize', got '" + *text + "'");
}

Result<std::string> AsObjectiveMetric(const std::string& field, const YAML::Node& node) {
  auto text = AsString(field, node);
  if (!text.ok()) return text.status();
  if (!IsValidMetricName(*text)) {
    return FieldError(
        field, node,
        "must be a metric name of 1-128 characters of [A-Za-z0-9_./-], got '" + *text + "'");
  }
  return *text;
}

}  // namespace

namespace yaml_fields {

Status CheckGenerateName(const std::string& field, const YAML::Node& node,
                         const std::string& prefix) {
  // The prefix plus 5 random characters must be a valid name.
  if (prefix.size() > kMaxGenerateNamePrefix || !IsValidJobName(prefix + "x")) {
    return FieldError(field, node,
                      "must be 1-" + std::to_string(kMaxGenerateNamePrefix) +
                          " lowercase letters, digits or '-', starting with a letter or "
                          "digit (5 random characters are appended), got '" +
                          prefix + "'");
  }
  return Status::Ok();
}

Result<ProgressEndpoint> AsProgressEndpoint(const std::string& field, const YAML::Node& node) {
  if (!node.IsMap()) return FieldError(field, node, "must be a map with port, path and interval");
  ProgressEndpoint endpoint;
  HEADWAY_RETURN_IF_ERROR(ForEachField(
      field, node,
      {{"port", AssignInt(endpoint.port, 1024, 65535)},
       {"path",
        [&](const std::string& f, const YAML::Node& v) -> Status {
          auto path = AsString(f, v);
          if (!path.ok()) return path.status();
          bool printable =
              std::all_of(path->begin(), path->end(), [](char c) { return c > ' ' && c != 0x7f; });
          if (path->empty() || path->front() != '/' || path->size() > 256 || !printable) {
            return FieldError(f, v, "must be a URL path such as /metrics");
          }
          endpoint.path = *path;
          return Status::Ok();
        }},
       {"interval", [&](const std::string& f, const YAML::Node& v) -> Status {
          auto d = AsDuration(f, v);
          if (!d.ok()) return d.status();
          if (*d < std::chrono::seconds(1) || *d > std::chrono::seconds(300)) {
            return FieldError(f, v, "must be between 1s and 300s");
          }
          endpoint.interval = *d;
          return Status::Ok();
        }}}));
  return endpoint;
}

// Checks an `elastic:` range and admits the job at its minimum.
static Status ApplyElastic(const std::string& prefix, const YAML::Node& root,
                           const ElasticRange& range, JobSpec& spec) {
  auto path = [&](const std::string& f) { return prefix.empty() ? f : prefix + "." + f; };
  const std::string field = path("elastic");
  const YAML::Node node = root["elastic"];
  const bool nodes = range.min_nodes > 0 || range.max_nodes > 0;
  const bool ranks = range.min_ranks > 0 || range.max_ranks > 0;
  if (nodes == ranks) {
    return FieldError(field, node,
                      "give min_nodes and max_nodes (whole nodes), or min_ranks and max_ranks "
                      "(ranks on one node), not both and not neither");
  }
  const int min = nodes ? range.min_nodes : range.min_ranks;
  const int max = nodes ? range.max_nodes : range.max_ranks;
  const std::string unit = nodes ? "nodes" : "ranks";
  if (min == 0 || max == 0) {
    return FieldError(field, node, "needs both min_" + unit + " and max_" + unit);
  }
  if (min > max) {
    return FieldError(field + ".min_" + unit, node["min_" + unit],
                      "must be at most max_" + unit + " (" + std::to_string(max) + ")");
  }
  const YAML::Node resources = root["resources"];
  if (spec.resources.gpus_per_process < 1) {
    return FieldError(
        path("resources.gpus_per_process"),
        resources && resources["gpus_per_process"] ? resources["gpus_per_process"] : node,
        "must be at least 1 for an elastic job: it grows into idle GPUs");
  }
  // The job is admitted at its minimum: the size fields say it already.
  const char* size_field = nodes ? "nodes" : "processes_per_node";
  int& size = nodes ? spec.resources.nodes : spec.resources.processes_per_node;
  if (resources && resources[size_field] && size != min) {
    return FieldError(path("resources." + std::string(size_field)), resources[size_field],
                      "is an elastic job's starting size, its elastic.min_" + unit + " (" +
                          std::to_string(min) + "): leave it out");
  }
  if (ranks && spec.resources.nodes != 1) {
    return FieldError(path("resources.nodes"), resources["nodes"],
                      "must be 1 for ranks that grow on one node (or use min_nodes/max_nodes)");
  }
  size = min;
  spec.elastic = range;
  return Status::Ok();
}

Result<JobSpec> ParseJobSpecNode(const YAML::Node& root, const std::string& prefix,
                                 bool name_required) {
  auto path = [&](const std::string& f) { return prefix.empty() ? f : prefix + "." + f; };
  if (!root.IsMap()) {
    return FieldError(prefix.empty() ? "spec" : prefix, root,
                      "a job spec must be a map of fields, got " + TypeName(root));
  }

  JobSpec spec;
  const int kMaxCount = 4096;
  std::map<std::string, FieldHandler> resources = {
      {"gpus_per_process", AssignInt(spec.resources.gpus_per_process, 0, 64)},
      {"processes_per_node", AssignInt(spec.resources.processes_per_node, 1, 256)},
      {"nodes", AssignInt(spec.resources.nodes, 1, kMaxCount)},
      {"memory", Assign(spec.resources.memory_bytes, AsMemory)},
      {"cpus",
       [&](const std::string& f, const YAML::Node& v) -> Status {
         auto cpus = AsDouble(f, v);
         if (!cpus.ok()) return cpus.status();
         if (*cpus <= 0 || *cpus > 4096)
           return FieldError(f, v, "must be above 0 and at most 4096");
         spec.resources.cpus = *cpus;
         return Status::Ok();
       }},
  };
  std::map<std::string, FieldHandler> restart_policy = {
      {"max_restarts", AssignInt(spec.max_restarts, 0, 100)},
  };
  std::map<std::string, FieldHandler> policies = {
      {"on_stall", Assign(spec.policies.on_stall, AsAction)},
      {"on_diverge", Assign(spec.policies.on_diverge, AsAction)},
      {"on_plateau", Assign(spec.policies.on_plateau, AsAction)},
      {"on_overfit", Assign(spec.policies.on_overfit, AsAction)},
      {"objective", Assign(spec.policies.objective, AsObjectiveMetric)},
      {"objective_goal", Assign(spec.policies.objective_goal, AsGoal)},
      {"on_gpu_idle",
       [&](const std::string& f, const YAML::Node& v) -> Status {
         auto action = AsAction(f, v);
         if (!action.ok()) return action.status();
         if (*action == HealthAction::kReclaim) {
           return FieldError(f, v, "must be 'notify' or 'stop', got 'reclaim'");
         }
         spec.policies.on_gpu_idle = *action;
         return Status::Ok();
       }},
      {"gpu_idle_after",
       [&](const std::string& f, const YAML::Node& v) -> Status {
         auto d = AsDuration(f, v);
         if (!d.ok()) return d.status();
         if (*d < std::chrono::seconds(1)) return FieldError(f, v, "must be at least 1s");
         spec.policies.gpu_idle_after = *d;
         return Status::Ok();
       }},
      {"gpu_idle_below_percent",
       [&](const std::string& f, const YAML::Node& v) -> Status {
         auto percent = AsDouble(f, v);
         if (!percent.ok()) return percent.status();
         if (!(*percent > 0 && *percent <= 100)) {
           return FieldError(f, v, "must be above 0 and at most 100");
         }
         spec.policies.gpu_idle_below_percent = *percent;
         return Status::Ok();
       }},
  };
  ElasticRange elastic;
  std::map<std::string, FieldHandler> elastic_fields = {
      {"min_nodes", AssignInt(elastic.min_nodes, 1, kMaxCount)},
      {"max_nodes", AssignInt(elastic.max_nodes, 1, kMaxCount)},
      {"min_ranks", AssignInt(elastic.min_ranks, 1, 256)},
      {"max_ranks", AssignInt(elastic.max_ranks, 1, 256)},
  };
  YAML::Node command_node;
  const FieldHandler pull_policy = [&](const std::string& f, const YAML::Node& v) -> Status {
    auto text = AsString(f, v);
    if (!text.ok()) return text.status();
    auto policy = ParseImagePullPolicy(*text);
    if (!policy || text->empty()) {
      return FieldError(f, v, "must be Always, IfNotPresent or Never");
    }
    spec.image_pull_policy = *policy;
    return Status::Ok();
  };
  std::map<std::string, FieldHandler> top = {
      {"apiVersion", Ignore()},
      {"kind",
       [](const std::string& field, const YAML::Node& v) -> Status {
         if (!v.IsScalar() || v.Scalar() != "Job") return FieldError(field, v, "must be 'Job'");
         return Status::Ok();
       }},
      {"name", Assign(spec.name, AsString)},
      {"generateName", Assign(spec.generate_name, AsString)},
      {"generate_name", Assign(spec.generate_name, AsString)},
      {"team", Assign(spec.team, AsString)},
      {"queue", Assign(spec.queue, AsString)},
      {"priority", AssignInt(spec.priority, -1000000, 1000000)},
      {"command",
       [&](const std::string& field, const YAML::Node& v) -> Status {
         command_node = v;
         if (v.IsScalar()) {
           spec.command = {"/bin/sh", "-c", v.Scalar()};
           return Status::Ok();
         }
         auto list = AsStringList(field, v);
         if (!list.ok()) return list.status();
         spec.command = std::move(list.value());
         return Status::Ok();
       }},
      {"args", Assign(spec.args, AsStringList)},
      {"working_dir", Assign(spec.working_dir, AsString)},
      {"private_tmp", Assign(spec.private_tmp, AsBool)},
      {"persistent_home", Assign(spec.persistent_home, AsBool)},
      {"host_network", Assign(spec.host_network, AsBool)},
      {"image",
       [&](const std::string& f, const YAML::Node& v) -> Status {
         auto text = AsString(f, v);
         if (!text.ok()) return text.status();
         auto ref = ParseImageRef(*text);
         if (!ref.ok()) return FieldError(f, v, std::string(ref.status().message()));
         spec.image = *text;
         return Status::Ok();
       }},
      {"imagePullPolicy", pull_policy},
      {"image_pull_policy", pull_policy},
      {"env", Assign(spec.env, AsStringMap)},
      {"labels", Assign(spec.labels, AsStringMap)},
      {"progress_endpoint",
       [&](const std::string& f, const YAML::Node& v) -> Status {
         auto endpoint = AsProgressEndpoint(f, v);
         if (!endpoint.ok()) return endpoint.status();
         spec.progress_endpoint = *endpoint;
         return Status::Ok();
       }},
      {"resources",
       [&](const std::string& f, const YAML::Node& v) { return ForEachField(f, v, resources); }},
      {"elastic", [&](const std::string& f,
                      const YAML::Node& v) { return ForEachField(f, v, elastic_fields); }},
      {"restart_policy", [&](const std::string& f,
                             const YAML::Node& v) { return ForEachField(f, v, restart_policy); }},
      {"policies",
       [&](const std::string& f, const YAML::Node& v) { return ForEachField(f, v, policies); }},
      {"time_limit",
       [&](const std::string& f, const YAML::Node& v) -> Status {
         auto d = AsDuration(f, v);
         if (!d.ok()) return d.status();
         if (d->count() <= 0) return FieldError(f, v, "must be positive");
         spec.time_limit = *d;
         return Status::Ok();
       }},
      {"termination_grace", Assign(spec.termination_grace, AsDuration)},
      {"checkpoint_warning", Assign(spec.checkpoint_warning, AsDuration)},
      {"ttl_after_finished",
       [&](const std::string& f, const YAML::Node& v) -> Status {
         auto d = AsDuration(f, v);
         if (!d.ok()) return d.status();
         if (d->count() < 0) return FieldError(f, v, "must not be negative");
         spec.ttl_after_finished = *d;
         return Status::Ok();
       }},
  };
  HEADWAY_RETURN_IF_ERROR(ForEachField(prefix, root, top));

  const bool generated = root["generateName"] || root["generate_name"];
  if (root["generateName"] && root["generate_name"]) {
    return FieldError(path("generate_name"), root["generate_name"],
                      "give generateName or generate_name, not both");
  }
  if (generated) {
    const YAML::Node node = root["generateName"] ? root["generateName"] : root["generate_name"];
    HEADWAY_RETURN_IF_ERROR(CheckGenerateName(path("generateName"), node, spec.generate_name));
  }
  if (!root["name"] && !generated && name_required) {
    return InvalidArgument("is required (or generateName, a prefix the server completes)")
        .WithField(path("name"));
  }
  if (root["name"] && !IsValidJobName(spec.name)) {
    return FieldError(path("name"), root["name"],
                      "must be 1-63 lowercase letters, digits or '-', starting and ending with a "
                      "letter or digit, got '" +
                          spec.name + "'");
  }
  if (root["imagePullPolicy"] && root["image_pull_policy"]) {
    return FieldError(path("image_pull_policy"), root["image_pull_policy"],
                      "give imagePullPolicy or image_pull_policy, not both");
  }
  if (spec.image.empty() && (root["imagePullPolicy"] || root["image_pull_policy"])) {
    return InvalidArgument("applies only to a job that names an image")
        .WithField(path("imagePullPolicy"));
  }
  // In an image, no command runs the image's own entrypoint, as in Kubernetes.
  if (!root["command"] && spec.image.empty()) {
    return InvalidArgument("is required (or an image whose entrypoint runs)")
        .WithField(path("command"));
  }
  if (root["command"] && (spec.command.empty() || spec.command.front().empty())) {
    return FieldError(path("command"), command_node, "must name a program to run");
  }
  for (const auto& [key, unused] : spec.env) {
    if (key.empty() || key.find('=') != std::string::npos || key.rfind("HEADWAY_", 0) == 0) {
      return FieldError(path("env." + key), root["env"],
                        "is not a valid variable name (HEADWAY_* is reserved for the platform)");
    }
  }
  if (spec.team.empty() || spec.team.size() > 63) {
    return FieldError(path("team"), root["team"], "must be 1-63 characters");
  }
  if (root["elastic"]) {
    HEADWAY_RETURN_IF_ERROR(ApplyElastic(prefix, root, elastic, spec));
  }
  return spec;
}

}  // namespace yaml_fields

Result<JobSpec> ParseJobSpec(std::string_view document, bool name_required) {
  auto root = yaml_fields::Load(document);
  if (!root.ok()) return root.status();
  if (!root->IsMap()) {
    Status s =
        InvalidArgument("a job spec must be a map of fields, got " + yaml_fields::TypeName(*root));
    return s.WithField("spec");
  }
  return yaml_fields::CatchYamlErrors<JobSpec>([&]() -> Result<JobSpec> {
    // A Kubeflow TrainJob manifest is submitted as it is (core/kubeflow_manifest.h).
    if (yaml_fields::IsManifestOf(*root, "trainer.kubeflow.org/", "TrainJob")) {
      return ParseTrainJobManifest(document);
    }
    if (yaml_fields::IsManifestOf(*root, "kubeflow.org/", "Experiment")) {
      return InvalidArgument(
                 "is a Katib Experiment, not a job: create it with `headway exp create -f` "
                 "(POST /api/v1/experiments); `headway submit -f` does that for you")
          .WithField("kind");
    }
    return yaml_fields::ParseJobSpecNode(*root, "", name_required);
  });
}

}  // namespace headway
