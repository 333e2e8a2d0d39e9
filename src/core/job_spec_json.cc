#include "core/job_spec_json.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/progress_report.h"

namespace headway {
namespace {

std::string DurationText(Duration d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

const char* ActionText(HealthAction a) {
  switch (a) {
    case HealthAction::kStop:
      return "stop";
    case HealthAction::kReclaim:
      return "reclaim";
    case HealthAction::kNotify:
      break;
  }
  return "notify";
}

std::optional<HealthAction> ActionFromText(const nlohmann::json& j) {
  if (!j.is_string()) return std::nullopt;
  const std::string& text = j.get_ref<const std::string&>();
  if (text == "notify") return HealthAction::kNotify;
  if (text == "stop") return HealthAction::kStop;
  if (text == "reclaim") return HealthAction::kReclaim;
  return std::nullopt;
}

const char* GoalText(MetricGoal g) {
  switch (g) {
    case MetricGoal::kMinimize:
      return "minimize";
    case MetricGoal::kMaximize:
      return "maximize";
    case MetricGoal::kAuto:
      break;
  }
  return "auto";
}

std::optional<MetricGoal> GoalFromText(const nlohmann::json& j) {
  if (!j.is_string()) return std::nullopt;
  const std::string& text = j.get_ref<const std::string&>();
  if (text == "minimize") return MetricGoal::kMinimize;
  if (text == "maximize") return MetricGoal::kMaximize;
  if (text == "auto") return MetricGoal::kAuto;
  return std::nullopt;
}

std::optional<Duration> DurationFrom(const nlohmann::json& j) {
  if (!j.is_string()) return std::nullopt;
  return ParseDuration(j.get_ref<const std::string&>());
}

// Reads the fields of `j` named in `readers`, each exactly once; false for a
// field not named or a reader that refused its value.
template <typename Readers>
bool ReadFields(const nlohmann::json& j, const Readers& readers) {
  if (!j.is_object()) return false;
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const auto& [name, read] : readers) {
      if (key != name) continue;
      known = true;
      if (!read(value)) return false;
    }
    if (!known) return false;
  }
  return true;
}

template <typename T>
bool Get(const nlohmann::json& j, T& out) {
  try {
    out = j.get<T>();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

}  // namespace

std::optional<JobSpec> JobSpecFromStoredJson(const nlohmann::json& j) {
  using Reader = std::function<bool(const nlohmann::json&)>;
  JobSpec spec;
  int required = 0;  // the fields JobSpecToJson always writes
  auto need = [&required](bool ok) {
    required += ok ? 1 : 0;
    return ok;
  };
  const std::vector<std::pair<std::string, Reader>> resources = {
      {"gpus_per_process", [&](auto& v) { return Get(v, spec.resources.gpus_per_process); }},
      {"processes_per_node", [&](auto& v) { return Get(v, spec.resources.processes_per_node); }},
      {"nodes", [&](auto& v) { return Get(v, spec.resources.nodes); }},
      {"memory",
       [&](auto& v) {
         if (!v.is_string()) return false;
         auto bytes = ParseMemoryQuantity(v.template get_ref<const std::string&>());
         if (bytes) spec.resources.memory_bytes = *bytes;
         return bytes.has_value();
       }},
      {"cpus", [&](auto& v) { return v.is_number() && Get(v, spec.resources.cpus); }},
  };
  const std::vector<std::pair<std::string, Reader>> policies = {
      {"on_stall",
       [&](auto& v) {
         auto a = ActionFromText(v);
         if (a) spec.policies.on_stall = *a;
         return a.has_value();
       }},
      {"on_diverge",
       [&](auto& v) {
         auto a = ActionFromText(v);
         if (a) spec.policies.on_diverge = *a;
         return a.has_value();
       }},
      {"on_plateau",
       [&](auto& v) {
         auto a = ActionFromText(v);
         if (a) spec.policies.on_plateau = *a;
         return a.has_value();
       }},
      {"on_overfit",
       [&](auto& v) {
         auto a = ActionFromText(v);
         if (a) spec.policies.on_overfit = *a;
         return a.has_value();
       }},
      {"objective",
       [&](auto& v) {
         return v.is_string() && IsValidMetricName(v.template get_ref<const std::string&>()) &&
                Get(v, spec.policies.objective);
       }},
      {"objective_goal",
       [&](auto& v) {
         auto g = GoalFromText(v);
         if (g) spec.policies.objective_goal = *g;
         return g.has_value();
       }},
      {"on_gpu_idle",
       [&](auto& v) {
         spec.policies.on_gpu_idle = ActionFromText(v);
         return spec.policies.on_gpu_idle.has_value();
       }},
      {"gpu_idle_after",
       [&](auto& v) {
         auto d = DurationFrom(v);
         if (d) spec.policies.gpu_idle_after = *d;
         return d.has_value();
       }},
      {"gpu_idle_below_percent",
       [&](auto& v) { return v.is_number() && Get(v, spec.policies.gpu_idle_below_percent); }},
  };
  const std::vector<std::pair<std::string, Reader>> endpoint = {
      {"port", [&](auto& v) { return Get(v, spec.progress_endpoint->port); }},
      {"path", [&](auto& v) { return Get(v, spec.progress_endpoint->path); }},
      {"interval",
       [&](auto& v) {
         auto d = DurationFrom(v);
         if (d) spec.progress_endpoint->interval = *d;
         return d.has_value();
       }},
  };
  auto optional_duration = [](std::optional<Duration>& out) {
    return [&out](const nlohmann::json& v) {
      out = DurationFrom(v);
      return out.has_value();
    };
  };
  const std::vector<std::pair<std::string, Reader>> top = {
      {"name", [&](auto& v) { return need(Get(v, spec.name)); }},
      {"team", [&](auto& v) { return need(Get(v, spec.team)); }},
      {"queue", [&](auto& v) { return need(Get(v, spec.queue)); }},
      {"priority", [&](auto& v) { return need(v.is_number_integer() && Get(v, spec.priority)); }},
      {"command", [&](auto& v) { return need(Get(v, spec.command)); }},
      {"args", [&](auto& v) { return need(Get(v, spec.args)); }},
      {"working_dir", [&](auto& v) { return need(Get(v, spec.working_dir)); }},
      {"env", [&](auto& v) { return need(Get(v, spec.env)); }},
      {"resources", [&](auto& v) { return need(ReadFields(v, resources)); }},
      {"restart_policy",
       [&](auto& v) {
         return need(v.is_object() && v.size() == 1 && v.contains("max_restarts") &&
                     v["max_restarts"].is_number_integer() &&
                     Get(v["max_restarts"], spec.max_restarts));
       }},
      {"termination_grace",
       [&](auto& v) {
         auto d = DurationFrom(v);
         if (d) spec.termination_grace = *d;
         return need(d.has_value());
       }},
      {"labels", [&](auto& v) { return need(Get(v, spec.labels)); }},
      {"policies", [&](auto& v) { return need(ReadFields(v, policies)); }},
      {"time_limit", optional_duration(spec.time_limit)},
      {"checkpoint_warning", optional_duration(spec.checkpoint_warning)},
      {"ttl_after_finished", optional_duration(spec.ttl_after_finished)},
      {"progress_endpoint",
       [&](auto& v) {
         spec.progress_endpoint.emplace();
         return ReadFields(v, endpoint);
       }},
      {"private_tmp", [&](auto& v) { return v.is_boolean() && Get(v, spec.private_tmp); }},
      {"persistent_home", [&](auto& v) { return v.is_boolean() && Get(v, spec.persistent_home); }},
      {"host_network", [&](auto& v) { return v.is_boolean() && Get(v, spec.host_network); }},
      {"image", [&](auto& v) { return Get(v, spec.image) && ParseImageRef(spec.image).ok(); }},
      {"elastic",
       [&](auto& v) {
         ElasticRange range;
         const std::vector<std::pair<std::string, Reader>> fields = {
             {"min_nodes", [&](auto& x) { return Get(x, range.min_nodes); }},
             {"max_nodes", [&](auto& x) { return Get(x, range.max_nodes); }},
             {"min_ranks", [&](auto& x) { return Get(x, range.min_ranks); }},
             {"max_ranks", [&](auto& x) { return Get(x, range.max_ranks); }},
         };
         if (!ReadFields(v, fields) || range.MinUnits() < 1 ||
             range.MaxUnits() < range.MinUnits()) {
           return false;
         }
         spec.elastic = range;
         return true;
       }},
      {"image_pull_policy",
       [&](auto& v) {
         std::string text;
         if (!Get(v, text)) return false;
         auto policy = ParseImagePullPolicy(text);
         if (!policy) return false;
         spec.image_pull_policy = *policy;
         return true;
       }},
  };
  if (!ReadFields(j, top) || required != 13) return std::nullopt;
  return spec;
}

nlohmann::json JobSpecToJson(const JobSpec& spec) {
  nlohmann::json j = {
      {"name", spec.name},
      {"team", spec.team},
      {"queue", spec.queue},
      {"priority", spec.priority},
      {"command", spec.command},
      {"args", spec.args},
      {"working_dir", spec.working_dir},
      {"env", spec.env},
      {"resources",
       {{"gpus_per_process", spec.resources.gpus_per_process},
        {"processes_per_node", spec.resources.processes_per_node},
        {"nodes", spec.resources.nodes}}},
      {"restart_policy", {{"max_restarts", spec.max_restarts}}},
      {"termination_grace", DurationText(spec.termination_grace)},
      {"labels", spec.labels},
      {"policies",
       {{"on_stall", ActionText(spec.policies.on_stall)},
        {"on_diverge", ActionText(spec.policies.on_diverge)},
        {"on_plateau", ActionText(spec.policies.on_plateau)},
        {"on_overfit", ActionText(spec.policies.on_overfit)}}},
  };
  if (!spec.policies.objective.empty()) j["policies"]["objective"] = spec.policies.objective;
  if (spec.policies.objective_goal != MetricGoal::kAuto) {
    j["policies"]["objective_goal"] = GoalText(spec.policies.objective_goal);
  }
  if (spec.policies.on_gpu_idle) {
    j["policies"]["on_gpu_idle"] = ActionText(*spec.policies.on_gpu_idle);
    j["policies"]["gpu_idle_after"] = DurationText(spec.policies.gpu_idle_after);
    j["policies"]["gpu_idle_below_percent"] = spec.policies.gpu_idle_below_percent;
  }
  if (spec.resources.memory_bytes > 0) {
    j["resources"]["memory"] = FormatMemoryQuantity(spec.resources.memory_bytes);
  }
  if (spec.resources.cpus > 0) j["resources"]["cpus"] = spec.resources.cpus;
  if (spec.time_limit) j["time_limit"] = DurationText(*spec.time_limit);
  if (spec.checkpoint_warning) j["checkpoint_warning"] = DurationText(*spec.checkpoint_warning);
  if (spec.progress_endpoint) {
    j["progress_endpoint"] = {{"port", spec.progress_endpoint->port},
                              {"path", spec.progress_endpoint->path},
                              {"interval", DurationText(spec.progress_endpoint->interval)}};
  }
  if (spec.ttl_after_finished) j["ttl_after_finished"] = DurationText(*spec.ttl_after_finished);
  if (spec.private_tmp) j["private_tmp"] = true;
  if (spec.persistent_home) j["persistent_home"] = true;
  if (spec.host_network) j["host_network"] = true;
  if (!spec.image.empty()) j["image"] = spec.image;
  if (spec.image_pull_policy != ImagePullPolicy::kDefault) {
    j["image_pull_policy"] = ImagePullPolicyName(spec.image_pull_policy);
  }
  if (spec.elastic) {
    const ElasticRange& e = *spec.elastic;
    j["elastic"] = e.ByNodes()
                       ? nlohmann::json{{"min_nodes", e.min_nodes}, {"max_nodes", e.max_nodes}}
                       : nlohmann::json{{"min_ranks", e.min_ranks}, {"max_ranks", e.max_ranks}};
  }
  return j;
}

}  // namespace headway
