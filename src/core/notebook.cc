#include "core/notebook.h"

#include <algorithm>
#include <set>

#include "core/yaml_fields.h"

namespace headway {

using namespace yaml_fields;

namespace {

Result<NotebookProfile> ParseProfile(const std::string& field, const YAML::Node& node) {
  NotebookProfile p;
  p.name.clear();
  if (!node.IsMap()) return FieldError(field, node, "must be a map, got " + TypeName(node));
  double gpu_idle = p.gpu_idle_below_percent;
  HEADWAY_RETURN_IF_ERROR(ForEachField(field, node,
                                       {{"name", Assign(p.name, AsString)},
                                        {"description", Assign(p.description, AsString)},
                                        {"gpus", AssignInt(p.gpus, 0, 64)},
                                        {"cpus", Assign(p.cpus, AsDouble)},
                                        {"memory", Assign(p.memory_bytes, AsMemory)},
                                        {"time_limit",
                                         [&](const std::string& f, const YAML::Node& v) -> Status {
                                           auto d = AsDuration(f, v);
                                           if (!d.ok()) return d.status();
                                           p.time_limit = *d;
                                           return Status::Ok();
                                         }},
                                        {"queue", Assign(p.queue, AsString)},
                                        {"env", Assign(p.env, AsStringMap)},
                                        {"idle_timeout", Assign(p.idle_timeout, AsDuration)},
                                        {"cull_warning", Assign(p.cull_warning, AsDuration)},
                                        {"gpu_idle_below_percent", Assign(gpu_idle, AsDouble)}}));
  if (!IsValidJobName(p.name) || p.name.size() > 40) {
    return FieldError(field + ".name", node["name"] ? node["name"] : node,
                      "must be 1-40 lowercase letters, digits or '-', got '" + p.name + "'");
  }
  if (p.cpus < 0) return FieldError(field + ".cpus", node["cpus"], "must not be negative");
  if (gpu_idle < 0 || gpu_idle > 100) {
    return FieldError(field + ".gpu_idle_below_percent", node["gpu_idle_below_percent"],
                      "must be between 0 and 100");
  }
  p.gpu_idle_below_percent = gpu_idle;
  if (p.idle_timeout.count() < 0 || p.cull_warning.count() < 0) {
    return FieldError(field, node, "idle_timeout and cull_warning must not be negative");
  }
  if (p.idle_timeout.count() > 0 && p.cull_warning > p.idle_timeout) {
    return FieldError(field + ".cull_warning", node["cull_warning"],
                      "must not be longer than idle_timeout");
  }
  return p;
}

}  // namespace

Result<std::vector<NotebookProfile>> ParseNotebookProfiles(std::string_view yaml) {
  return CatchYamlErrors<std::vector<NotebookProfile>>(
      [&]() -> Result<std::vector<NotebookProfile>> {
        auto root = Load(yaml);
        if (!root.ok()) return root.status();
        if (!root->IsDefined() || root->IsNull()) return std::vector<NotebookProfile>{{}};
        if (!root->IsMap()) {
          return FieldError("profiles", *root, "the file must be a map with 'profiles'");
        }
        std::vector<NotebookProfile> out;
        HEADWAY_RETURN_IF_ERROR(ForEachField(
            "", *root, {{"profiles", [&](const std::string& f, const YAML::Node& list) -> Status {
                           if (!list.IsSequence() || list.size() == 0) {
                             return FieldError(f, list, "must be a non-empty list of profiles");
                           }
                           std::set<std::string> names;
                           for (std::size_t i = 0; i < list.size(); ++i) {
                             std::string field = f + "[" + std::to_string(i) + "]";
                             auto p = ParseProfile(field, list[i]);
                             if (!p.ok()) return p.status();
                             if (!names.insert(p->name).second) {
                               return FieldError(field + ".name", list[i]["name"],
                                                 "profile '" + p->name + "' is defined twice");
                             }
                             out.push_back(std::move(*p));
                           }
                           return Status::Ok();
                         }}}));
        if (out.empty()) return std::vector<NotebookProfile>{{}};
        return out;
      });
}

std::string_view NotebookStateName(NotebookState state) {
  switch (state) {
    case NotebookState::kRunning:
      return "Running";
    case NotebookState::kStopped:
      return "Stopped";
    case NotebookState::kCulled:
      return "Culled";
    case NotebookState::kFailed:
      return "Failed";
  }
  return "Unknown";
}

std::optional<NotebookState> ParseNotebookState(std::string_view name) {
  for (NotebookState s : {NotebookState::kRunning, NotebookState::kStopped, NotebookState::kCulled,
                          NotebookState::kFailed}) {
    if (NotebookStateName(s) == name) return s;
  }
  return std::nullopt;
}

std::string NotebookJobName(std::string_view notebook, int start) {
  return "notebook-" + std::string(notebook) + "-" + std::to_string(start);
}

IdleVerdict DecideIdle(const NotebookActivity& activity, std::optional<Time> warned_at,
                       const NotebookProfile& profile, Time now) {
  IdleVerdict verdict;
  Time since = activity.started_at;
  for (const auto& t : {activity.kernel_activity, activity.gpu_busy_at, activity.opened_at}) {
    if (t) since = std::max(since, *t);
  }
  verdict.idle_since = std::min(since, now);
  if (activity.kernel_busy || activity.gpu_busy) {
    verdict.idle_since = now;
    return verdict;
  }
  verdict.idle_for = now - verdict.idle_since;
  if (profile.idle_timeout.count() <= 0) return verdict;
  const bool warned_this_spell = warned_at && *warned_at >= verdict.idle_since;
  if (verdict.idle_for >= profile.idle_timeout && warned_this_spell &&
      now - *warned_at >= profile.cull_warning) {
    verdict.action = IdleVerdict::Action::kCull;
  } else if (verdict.idle_for >= profile.idle_timeout - profile.cull_warning &&
             !warned_this_spell) {
    verdict.action = IdleVerdict::Action::kWarn;
  }
  return verdict;
}

}  // namespace headway
