#include "core/job_spec_json.h"

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

}  // namespace

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
        {"on_plateau", ActionText(spec.policies.on_plateau)}}},
  };
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
  return j;
}

}  // namespace headway
