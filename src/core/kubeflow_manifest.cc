#include "core/kubeflow_manifest.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>

#include "core/yaml_fields.h"

namespace headway {
namespace {

using namespace yaml_fields;  // NOLINT: the parser is written in terms of these helpers

constexpr std::string_view kTrainerGroup = "trainer.kubeflow.org/";

// The torchrun variables Kubeflow's torch runtime sets; a TrainJob may not.
// "MIN:MAX" of PET_NNODES, 1 <= MIN <= MAX <= 4096; nullopt otherwise.
std::optional<std::pair<int, int>> ElasticNodes(const std::string& value) {
  const auto colon = value.find(':');
  if (colon == std::string::npos) return std::nullopt;
  auto number = [](std::string_view text) -> std::optional<int> {
    if (text.empty() || text.size() > 4) return std::nullopt;
    int n = 0;
    for (char c : text) {
      if (c < '0' || c > '9') return std::nullopt;
      n = n * 10 + (c - '0');
    }
    return n;
  };
  const auto min = number(std::string_view(value).substr(0, colon));
  const auto max = number(std::string_view(value).substr(colon + 1));
  if (!min || !max || *min < 1 || *max < *min || *max > 4096) return std::nullopt;
  return std::pair{*min, *max};
}

const std::set<std::string> kTorchReserved = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK",
                                              "PET_MASTER_ADDR", "PET_MASTER_PORT"};

// Kubernetes CPU quantities: "2", "1.5", "500m".
Result<double> AsCpuQuantity(const std::string& field, const YAML::Node& node) {
  auto text = AsString(field, node);
  if (!text.ok()) return text.status();
  std::string s = *text;
  double scale = 1;
  if (!s.empty() && s.back() == 'm') {
    scale = 0.001;
    s.pop_back();
  }
  char* end = nullptr;
  double value = std::strtod(s.c_str(), &end);
  if (s.empty() || end == nullptr || *end != '\0' || !std::isfinite(value) || value <= 0 ||
      value * scale > 4096) {
    return FieldError(field, node,
                      "must be a CPU quantity such as 2, 1.5 or 500m, got '" + *text + "'");
  }
  return value * scale;
}

// resourcesPerNode: limits win over requests, as the torch runtime reads them.
Status ApplyResources(const std::string& field, const YAML::Node& node, JobSpec& spec) {
  if (!node.IsMap()) return FieldError(field, node, "must be a map, got " + TypeName(node));
  auto apply = [&](const std::string& f, const YAML::Node& list, bool limits) -> Status {
    if (list.IsNull()) return Status::Ok();
    if (!list.IsMap()) return FieldError(f, list, "must be a map of quantities");
    for (const auto& kv : list) {
      const std::string name = kv.first.Scalar();
      const std::string path = f + "." + name;
      if (name == "nvidia.com/gpu") {
        auto gpus = AsInt(path, kv.second, 0, 64);
        if (!gpus.ok()) return gpus.status();
        if (limits || spec.resources.gpus_per_process == 0) {
          spec.resources.gpus_per_process = static_cast<int>(*gpus);
        }
      } else if (name == "cpu") {
        auto cpus = AsCpuQuantity(path, kv.second);
        if (!cpus.ok()) return cpus.status();
        if (limits || spec.resources.cpus == 0) spec.resources.cpus = *cpus;
      } else if (name == "memory") {
        auto bytes = AsMemory(path, kv.second);
        if (!bytes.ok()) return bytes.status();
        if (limits || spec.resources.memory_bytes == 0) spec.resources.memory_bytes = *bytes;
      } else {
        return UnsupportedField(path, kv.first,
                                "Headway allocates nvidia.com/gpu, cpu and memory per node only");
      }
    }
    return Status::Ok();
  };
  // Requests first so that limits, read second, take precedence.
  if (node["requests"])
    HEADWAY_RETURN_IF_ERROR(apply(field + ".requests", node["requests"], false));
  if (node["limits"]) HEADWAY_RETURN_IF_ERROR(apply(field + ".limits", node["limits"], true));
  for (const auto& kv : node) {
    std::string key = kv.first.Scalar();
    if (key != "limits" && key != "requests") {
      return UnsupportedField(field + "." + key, kv.first, "only limits and requests are read");
    }
  }
  return Status::Ok();
}

// Kubernetes env: [{name: A, value: "1"}]; valueFrom (secrets, fields) has
// no source here.
Result<std::map<std::string, std::string>> AsEnvList(const std::string& field,
                                                     const YAML::Node& node) {
  std::map<std::string, std::string> env;
  if (node.IsNull()) return env;
  if (!node.IsSequence()) return FieldError(field, node, "must be a list of {name, value}");
  for (std::size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    const std::string path = field + "[" + std::to_string(i) + "]";
    if (!item.IsMap()) return FieldError(path, item, "must be a map with name and value");
    std::string name, value;
    HEADWAY_RETURN_IF_ERROR(
        ForEachField(path, item,
                     {{"name", Assign(name, AsString)},
                      {"value", Assign(value, AsString)},
                      {"valueFrom", [](const std::string& f, const YAML::Node& v) -> Status {
                         return UnsupportedField(
                             f, v,
                             "there are no Kubernetes secrets or fields to read; set the value, "
                             "or pass a server variable with `headway server --job-env NAME`");
                       }}}));
    if (name.empty()) return FieldError(path + ".name", item, "is required");
    // PET_NNODES=MIN:MAX is how an elastic torch job is asked for.
    if (kTorchReserved.count(name) && !(name == "PET_NNODES" && ElasticNodes(value))) {
      return FieldError(path + ".name", item["name"],
                        "'" + name + "' is set by the torch runtime and may not be given");
    }
    env[name] = value;
  }
  return env;
}

// The handler of a Kubernetes `env` list: its variables join the spec's.
FieldHandler MergeEnvList(JobSpec& spec) {
  return [&spec](const std::string& f, const YAML::Node& v) -> Status {
    auto env = AsEnvList(f, v);
    if (!env.ok()) return env.status();
    for (auto& [k, value] : *env) spec.env[k] = std::move(value);
    return Status::Ok();
  };
}

Status ParseTrainer(const std::string& field, const YAML::Node& node, JobSpec& spec,
                    std::string& procs_per_node) {
  if (!node.IsMap()) return FieldError(field, node, "must be a map, got " + TypeName(node));
  return ForEachField(
      field, node,
      {{"image",
        [&](const std::string& f, const YAML::Node& v) -> Status {
          auto image = AsString(f, v);
          if (!image.ok()) return image.status();
          spec.labels["trainer.kubeflow.org/image"] = *image;
          return Status::Ok();
        }},
       {"command", Assign(spec.command, AsStringList)},
       {"args", Assign(spec.args, AsStringList)},
       {"env", MergeEnvList(spec)},
       {"numNodes", AssignInt(spec.resources.nodes, 1, 4096)},
       {"numProcPerNode",
        [&](const std::string& f, const YAML::Node& v) -> Status {
          if (v.IsScalar() && !IsQuoted(v) &&
              v.Scalar().find_first_not_of("0123456789") == std::string::npos) {
            auto n = AsInt(f, v, 1, 256);
            if (!n.ok()) return n.status();
            procs_per_node = std::to_string(*n);
            return Status::Ok();
          }
          auto text = AsString(f, v);
          if (!text.ok()) return text.status();
          if (*text != "auto" && *text != "gpu" && *text != "cpu") {
            return FieldError(
                f, v, "must have an int value or one of [auto cpu gpu], got '" + *text + "'");
          }
          procs_per_node = *text;
          return Status::Ok();
        }},
       {"resourcesPerNode",
        [&](const std::string& f, const YAML::Node& v) { return ApplyResources(f, v, spec); }}});
}

// OpenShift AI's annotations for polled progress: progression-tracking
// "true", metrics-port (default 28080), metrics-poll-interval ("30s", "1m"
// or seconds; kept within 5-300 s as OpenShift AI does).
Status ApplyProgressionAnnotations(const std::string& field, const YAML::Node& node,
                                   const std::map<std::string, std::string>& annotations,
                                   JobSpec& spec) {
  const std::string kPrefix = "trainer.opendatahub.io/";
  auto get = [&](const std::string& key) -> std::optional<std::string> {
    auto it = annotations.find(kPrefix + key);
    if (it == annotations.end()) return std::nullopt;
    return it->second;
  };
  auto tracking = get("progression-tracking");
  if (!tracking || (*tracking != "true" && *tracking != "enabled")) return Status::Ok();
  ProgressEndpoint endpoint;
  if (auto port = get("metrics-port")) {
    char* end = nullptr;
    long value = std::strtol(port->c_str(), &end, 10);
    if (port->empty() || *end != '\0' || value < 1024 || value > 65535) {
      return FieldError(field + "." + kPrefix + "metrics-port", node,
                        "must be a port from 1024 to 65535, got '" + *port + "'");
    }
    endpoint.port = static_cast<int>(value);
  }
  if (auto interval = get("metrics-poll-interval")) {
    std::string text = *interval;
    if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) text += "s";
    auto d = ParseDuration(text);
    if (!d) {
      return FieldError(field + "." + kPrefix + "metrics-poll-interval", node,
                        "must be a duration such as 30s or 1m, got '" + *interval + "'");
    }
    endpoint.interval =
        std::clamp<Duration>(*d, std::chrono::seconds(5), std::chrono::seconds(300));
  }
  spec.progress_endpoint = endpoint;
  return Status::Ok();
}

Status ParseMetadata(const YAML::Node& node, bool name_required, JobSpec& spec) {
  if (!node || !node.IsMap()) {
    if (name_required)
      return InvalidArgument("is required (a map with name)").WithField("metadata");
    return Status::Ok();
  }
  std::map<std::string, FieldHandler> fields = {
      {"name", Assign(spec.name, AsString)},
      {"namespace", Assign(spec.team, AsString)},
      {"labels",
       [&](const std::string& f, const YAML::Node& v) -> Status {
         auto labels = AsStringMap(f, v);
         if (!labels.ok()) return labels.status();
         for (auto& [k, value] : *labels) spec.labels[k] = std::move(value);
         return Status::Ok();
       }},
      // Notes for other tools; only OpenShift AI's progression tracking
      // (pull mode) changes the job.
      {"annotations",
       [&](const std::string& f, const YAML::Node& v) -> Status {
         auto annotations = AsStringMap(f, v);
         if (!annotations.ok()) return annotations.status();
         return ApplyProgressionAnnotations(f, v, *annotations, spec);
       }},
      {"generateName", Assign(spec.generate_name, AsString)}};
  IgnoreServerWrittenMetadata(fields);
  HEADWAY_RETURN_IF_ERROR(ForEachField("metadata", node, fields));
  if (node["generateName"]) {
    HEADWAY_RETURN_IF_ERROR(
        CheckGenerateName("metadata.generateName", node["generateName"], spec.generate_name));
  }
  if (name_required && spec.name.empty() && spec.generate_name.empty()) {
    return InvalidArgument("is required (or metadata.generateName)").WithField("metadata.name");
  }
  if (auto queue = spec.labels.find("kueue.x-k8s.io/queue-name"); queue != spec.labels.end()) {
    spec.queue = queue->second;
  }
  return Status::Ok();
}

}  // namespace

namespace yaml_fields {

Status UnsupportedField(const std::string& field, const YAML::Node& node, const std::string& why) {
  return FieldError(field, node, "is not supported by Headway: " + why);
}

void IgnoreServerWrittenMetadata(std::map<std::string, FieldHandler>& handlers) {
  for (const char* key :
       {"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"}) {
    handlers.emplace(key, Ignore());
  }
}

Status ApplyKubernetesContainer(const YAML::Node& container, const std::string& field,
                                JobSpec& spec) {
  if (!container.IsMap()) return FieldError(field, container, "must be a container map");
  return ForEachField(field, container,
                      {{"name", Ignore()},
                       {"image",
                        [&](const std::string& f, const YAML::Node& v) -> Status {
                          auto image = AsString(f, v);
                          if (!image.ok()) return image.status();
                          spec.labels["kubeflow.org/image"] = *image;
                          return Status::Ok();
                        }},
                       {"imagePullPolicy", Ignore()},
                       {"command", Assign(spec.command, AsStringList)},
                       {"args", Assign(spec.args, AsStringList)},
                       {"workingDir", Assign(spec.working_dir, AsString)},
                       {"env", MergeEnvList(spec)},
                       {"resources", [&](const std::string& f, const YAML::Node& v) {
                          return ApplyResources(f, v, spec);
                        }}});
}

bool IsManifestOf(const YAML::Node& root, std::string_view group, std::string_view kind) {
  if (!root.IsMap()) return false;
  const YAML::Node api = root["apiVersion"], k = root["kind"];
  return api && k && api.IsScalar() && k.IsScalar() && api.Scalar().rfind(group, 0) == 0 &&
         k.Scalar() == kind;
}

Result<JobSpec> ParseTrainJobNode(const YAML::Node& root, const std::string& prefix,
                                  bool name_required) {
  auto path = [&](const std::string& f) { return prefix.empty() ? f : prefix + "." + f; };
  JobSpec spec;
  spec.labels["trainer.kubeflow.org/kind"] = "TrainJob";
  if (name_required || root["metadata"]) {
    HEADWAY_RETURN_IF_ERROR(ParseMetadata(root["metadata"], name_required, spec));
  }
  const YAML::Node body = root["spec"];
  if (!body || !body.IsMap()) return InvalidArgument("is required (a map)").WithField(path("spec"));
  std::string procs_per_node = "auto";
  bool has_trainer = false;
  HEADWAY_RETURN_IF_ERROR(ForEachField(
      path("spec"), body,
      {{"runtimeRef",
        [&](const std::string& f, const YAML::Node& v) -> Status {
          if (!v.IsMap()) return FieldError(f, v, "must be a map with name");
          std::string name, group = "trainer.kubeflow.org", kind = "ClusterTrainingRuntime";
          HEADWAY_RETURN_IF_ERROR(ForEachField(f, v,
                                               {{"name", Assign(name, AsString)},
                                                {"apiGroup", Assign(group, AsString)},
                                                {"kind", Assign(kind, AsString)}}));
          if (name.empty()) return FieldError(f + ".name", v, "is required");
          if (group != "trainer.kubeflow.org") {
            return FieldError(f + ".apiGroup", v["apiGroup"], "must be trainer.kubeflow.org");
          }
          if (kind != "ClusterTrainingRuntime" && kind != "TrainingRuntime") {
            return FieldError(f + ".kind", v["kind"],
                              "must be ClusterTrainingRuntime or TrainingRuntime");
          }
          spec.labels["trainer.kubeflow.org/runtime"] = name;
          return Status::Ok();
        }},
       {"trainer",
        [&](const std::string& f, const YAML::Node& v) {
          has_trainer = true;
          return ParseTrainer(f, v, spec, procs_per_node);
        }},
       {"activeDeadlineSeconds",
        [&](const std::string& f, const YAML::Node& v) -> Status {
          auto seconds = AsInt(f, v, 1, 10LL * 365 * 24 * 3600);
          if (!seconds.ok()) return seconds.status();
          spec.time_limit = std::chrono::seconds(*seconds);
          return Status::Ok();
        }},
       {"suspend",
        [&](const std::string& f, const YAML::Node& v) -> Status {
          auto suspend = AsBool(f, v);
          if (!suspend.ok()) return suspend.status();
          if (*suspend) return UnsupportedField(f, v, "submit the job when it should run");
          return Status::Ok();
        }},
       {"managedBy",
        [&](const std::string& f, const YAML::Node& v) -> Status {
          auto by = AsString(f, v);
          if (!by.ok()) return by.status();
          if (*by != "trainer.kubeflow.org/trainjob-controller") {
            return UnsupportedField(f, v, "Headway runs the job itself");
          }
          return Status::Ok();
        }},
       {"initializer",
        [](const std::string& f, const YAML::Node& v) -> Status {
          return UnsupportedField(f, v,
                                  "fetch datasets and models in the trainer's command (or a step "
                                  "before it)");
        }},
       {"runtimePatches",
        [](const std::string& f, const YAML::Node& v) -> Status {
          return UnsupportedField(f, v, "there are no pods to patch");
        }},
       {"podSpecOverrides", [](const std::string& f, const YAML::Node& v) -> Status {
          return UnsupportedField(f, v, "there are no pods to override");
        }}}));
  if (!has_trainer || spec.command.empty()) {
    return InvalidArgument(
               "is required: Headway has no training runtime images to take a default command "
               "from")
        .WithField(path("spec.trainer.command"));
  }
  if (spec.command.front().empty()) {
    return InvalidArgument("must name a program to run").WithField(path("spec.trainer.command"));
  }
  if (procs_per_node == "cpu") {
    procs_per_node = std::to_string(std::max(1, static_cast<int>(spec.resources.cpus)));
  } else if (procs_per_node == "gpu") {
    procs_per_node = std::to_string(std::max(1, spec.resources.gpus_per_process));
  }
  // One process per node, which is torchrun's to fan out, as on Kubeflow.
  spec.resources.processes_per_node = 1;
  if (auto nnodes = spec.env.find("PET_NNODES"); nnodes != spec.env.end()) {
    const auto [min, max] = *ElasticNodes(nnodes->second);
    if (root["spec"]["trainer"]["numNodes"] &&
        (spec.resources.nodes < min || spec.resources.nodes > max)) {
      return FieldError("spec.trainer.numNodes", root["spec"]["trainer"]["numNodes"],
                        "must be within PET_NNODES=" + nnodes->second);
    }
    // Admitted at its minimum; it grows to its maximum while GPUs are idle.
    spec.resources.nodes = min;
    ElasticRange range;
    range.min_nodes = min;
    range.max_nodes = max;
    spec.elastic = range;
  }
  spec.env["PET_NNODES"] = spec.elastic ? std::to_string(spec.elastic->min_nodes) + ":" +
                                              std::to_string(spec.elastic->max_nodes)
                                        : std::to_string(spec.resources.nodes);
  spec.env["PET_NPROC_PER_NODE"] = procs_per_node;
  if (spec.team.empty()) spec.team = "default";
  if (!spec.name.empty() && !IsValidJobName(spec.name)) {
    return FieldError("metadata.name", root["metadata"]["name"],
                      "must be 1-63 lowercase letters, digits or '-', starting and ending with a "
                      "letter or digit, got '" +
                          spec.name + "'");
  }
  for (const auto& [key, unused] : spec.env) {
    if (key.find('=') != std::string::npos || key.rfind("HEADWAY_", 0) == 0) {
      return InvalidArgument(
                 "is not a valid variable name (HEADWAY_* is reserved for the platform)")
          .WithField(path("spec.trainer.env." + key));
    }
  }
  if (spec.team.size() > 63) {
    return FieldError("metadata.namespace", root["metadata"]["namespace"],
                      "must be 1-63 characters");
  }
  return spec;
}

}  // namespace yaml_fields

bool IsTrainJobManifest(std::string_view document) {
  auto root = yaml_fields::Load(document);
  if (!root.ok()) return false;
  try {
    return yaml_fields::IsManifestOf(*root, kTrainerGroup, "TrainJob");
  } catch (const YAML::Exception&) {
    return false;
  }
}

Result<JobSpec> ParseTrainJobManifest(std::string_view document) {
  auto root = yaml_fields::Load(document);
  if (!root.ok()) return root.status();
  return yaml_fields::CatchYamlErrors<JobSpec>([&]() -> Result<JobSpec> {
    if (!yaml_fields::IsManifestOf(*root, kTrainerGroup, "TrainJob")) {
      return InvalidArgument("is not a trainer.kubeflow.org TrainJob").WithField("kind");
    }
    for (const auto& kv : *root) {
      std::string key = kv.first.Scalar();
      if (key != "apiVersion" && key != "kind" && key != "metadata" && key != "spec" &&
          key != "status") {
        return FieldError(key, kv.first, "is not a field of a TrainJob");
      }
    }
    return yaml_fields::ParseTrainJobNode(*root, "", /*name_required=*/true);
  });
}

}  // namespace headway
