#include "core/job_spec_parser.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <functional>
#include <limits>
#include <set>

namespace headway {
namespace {

int LineOf(const YAML::Node& node) { return node.Mark().line + 1; }

Status FieldError(const std::string& field, const YAML::Node& node, std::string message) {
  Status s = InvalidArgument(std::move(message));
  s.WithField(field, node.Mark().line >= 0 ? std::optional<int>(LineOf(node)) : std::nullopt);
  return s;
}

std::string TypeName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Scalar: return "a scalar";
    case YAML::NodeType::Null: return "null";
    default: return "nothing";
  }
}

// A quoted scalar ("1") stays a string even where an integer is wanted.
bool IsQuoted(const YAML::Node& node) { return node.Tag() == "!"; }

Result<std::string> AsString(const std::string& field, const YAML::Node& node) {
  if (!node.IsScalar()) return FieldError(field, node, "must be a string, got " + TypeName(node));
  return node.Scalar();
}

Result<std::int64_t> AsInt(const std::string& field, const YAML::Node& node, std::int64_t min,
                           std::int64_t max) {
  if (!node.IsScalar() || IsQuoted(node)) {
    return FieldError(field, node, "must be an integer, got " + (node.IsScalar() ? std::string("a string") : TypeName(node)));
  }
  const std::string& text = node.Scalar();
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return FieldError(field, node, "must be an integer, got '" + text + "'");
  }
  if (value < min || value > max) {
    return FieldError(field, node,
                      "must be between " + std::to_string(min) + " and " + std::to_string(max) +
                          ", got " + text);
  }
  return value;
}

Result<std::vector<std::string>> AsStringList(const std::string& field, const YAML::Node& node) {
  if (!node.IsSequence()) return FieldError(field, node, "must be a list of strings, got " + TypeName(node));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < node.size(); ++i) {
    auto item = AsString(field + "[" + std::to_string(i) + "]", node[i]);
    if (!item.ok()) return item.status();
    out.push_back(std::move(item.value()));
  }
  return out;
}

Result<std::map<std::string, std::string>> AsStringMap(const std::string& field,
                                                       const YAML::Node& node) {
  if (node.IsNull()) return std::map<std::string, std::string>{};
  if (!node.IsMap()) return FieldError(field, node, "must be a map of strings, got " + TypeName(node));
  std::map<std::string, std::string> out;
  for (const auto& kv : node) {
    std::string key = kv.first.as<std::string>();
    auto value = AsString(field + "." + key, kv.second);
    if (!value.ok()) return value.status();
    out[key] = std::move(value.value());
  }
  return out;
}

Result<Duration> AsDuration(const std::string& field, const YAML::Node& node) {
  if (!node.IsScalar()) return FieldError(field, node, "must be a duration like 90s, 30m or 2h");
  auto d = ParseDuration(node.Scalar());
  if (!d) {
    return FieldError(field, node,
                      "must be a duration like 90s, 30m or 2h, got '" + node.Scalar() + "'");
  }
  return *d;
}

Result<HealthAction> AsAction(const std::string& field, const YAML::Node& node) {
  auto text = AsString(field, node);
  if (!text.ok()) return text.status();
  if (*text == "notify") return HealthAction::kNotify;
  if (*text == "stop") return HealthAction::kStop;
  if (*text == "reclaim") return HealthAction::kReclaim;
  return FieldError(field, node, "must be 'notify', 'stop' or 'reclaim', got '" + *text + "'");
}

using FieldHandler = std::function<Status(const std::string& field, const YAML::Node& value)>;

// Walks a map, dispatching each key to its handler; unknown keys are errors.
Status ForEachField(const std::string& prefix, const YAML::Node& map,
                    const std::map<std::string, FieldHandler>& handlers) {
  if (!map.IsMap()) {
    return FieldError(prefix.empty() ? "spec" : prefix, map, "must be a map, got " + TypeName(map));
  }
  std::set<std::string> seen;
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) return FieldError(prefix, kv.first, "field names must be strings");
    std::string key = kv.first.Scalar();
    std::string field = prefix.empty() ? key : prefix + "." + key;
    if (!seen.insert(key).second) return FieldError(field, kv.first, "is given twice");
    auto handler = handlers.find(key);
    if (handler == handlers.end()) {
      std::string known;
      for (const auto& [name, unused] : handlers) known += (known.empty() ? "" : ", ") + name;
      return FieldError(field, kv.first, "unknown field (known fields: " + known + ")");
    }
    HEADWAY_RETURN_IF_ERROR(handler->second(field, kv.second));
  }
  return Status::Ok();
}

template <typename T, typename Parse>
FieldHandler Assign(T& target, Parse parse) {
  return [&target, parse](const std::string& field, const YAML::Node& value) -> Status {
    auto parsed = parse(field, value);
    if (!parsed.ok()) return parsed.status();
    target = std::move(parsed.value());
    return Status::Ok();
  };
}

FieldHandler AssignInt(int& target, std::int64_t min, std::int64_t max) {
  return [&target, min, max](const std::string& field, const YAML::Node& value) -> Status {
    auto parsed = AsInt(field, value, min, max);
    if (!parsed.ok()) return parsed.status();
    target = static_cast<int>(*parsed);
    return Status::Ok();
  };
}

FieldHandler Ignore() {
  return [](const std::string&, const YAML::Node&) { return Status::Ok(); };
}

}  // namespace

Result<JobSpec> ParseJobSpec(std::string_view document) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(document));
  } catch (const YAML::ParserException& e) {
    Status s = InvalidArgument("not valid YAML or JSON: " + e.msg);
    s.WithField("spec", e.mark.line + 1);
    return s;
  }
  if (!root.IsMap()) {
    Status s = InvalidArgument("a job spec must be a map of fields, got " + TypeName(root));
    return s.WithField("spec");
  }

  JobSpec spec;
  const int kMaxCount = 4096;
  std::map<std::string, FieldHandler> resources = {
      {"gpus_per_process", AssignInt(spec.resources.gpus_per_process, 0, 64)},
      {"processes_per_node", AssignInt(spec.resources.processes_per_node, 1, 256)},
      {"nodes", AssignInt(spec.resources.nodes, 1, kMaxCount)},
  };
  std::map<std::string, FieldHandler> restart_policy = {
      {"max_restarts", AssignInt(spec.max_restarts, 0, 100)},
  };
  std::map<std::string, FieldHandler> policies = {
      {"on_stall", Assign(spec.policies.on_stall, AsAction)},
      {"on_diverge", Assign(spec.policies.on_diverge, AsAction)},
      {"on_plateau", Assign(spec.policies.on_plateau, AsAction)},
  };
  YAML::Node command_node;
  std::map<std::string, FieldHandler> top = {
      {"apiVersion", Ignore()},
      {"kind",
       [](const std::string& field, const YAML::Node& v) -> Status {
         if (!v.IsScalar() || v.Scalar() != "Job") return FieldError(field, v, "must be 'Job'");
         return Status::Ok();
       }},
      {"name", Assign(spec.name, AsString)},
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
      {"env", Assign(spec.env, AsStringMap)},
      {"labels", Assign(spec.labels, AsStringMap)},
      {"resources",
       [&](const std::string& f, const YAML::Node& v) { return ForEachField(f, v, resources); }},
      {"restart_policy",
       [&](const std::string& f, const YAML::Node& v) {
         return ForEachField(f, v, restart_policy);
       }},
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
  };
  HEADWAY_RETURN_IF_ERROR(ForEachField("", root, top));

  if (!root["name"]) return InvalidArgument("is required").WithField("name");
  if (!IsValidJobName(spec.name)) {
    return FieldError("name", root["name"],
                      "must be 1-63 lowercase letters, digits or '-', starting and ending with a "
                      "letter or digit, got '" + spec.name + "'");
  }
  if (!root["command"]) return InvalidArgument("is required").WithField("command");
  if (spec.command.empty() || spec.command.front().empty()) {
    return FieldError("command", command_node, "must name a program to run");
  }
  for (const auto& [key, unused] : spec.env) {
    if (key.empty() || key.find('=') != std::string::npos || key.rfind("HEADWAY_", 0) == 0) {
      return FieldError("env." + key, root["env"],
                        "is not a valid variable name (HEADWAY_* is reserved for the platform)");
    }
  }
  if (spec.team.empty() || spec.team.size() > 63) {
    return FieldError("team", root["team"], "must be 1-63 characters");
  }
  return spec;
}

}  // namespace headway
