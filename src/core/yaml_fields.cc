#include "core/yaml_fields.h"

#include <charconv>
#include <cmath>
#include <set>

namespace headway::yaml_fields {


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


Result<double> AsDouble(const std::string& field, const YAML::Node& node) {
  if (!node.IsScalar() || IsQuoted(node)) {
    return FieldError(field, node, "must be a number, got " + (node.IsScalar() ? std::string("a string") : TypeName(node)));
  }
  const std::string& text = node.Scalar();
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return FieldError(field, node, "must be a finite number, got '" + text + "'");
  }
  return value;
}

Result<bool> AsBool(const std::string& field, const YAML::Node& node) {
  if (node.IsScalar() && !IsQuoted(node)) {
    if (node.Scalar() == "true") return true;
    if (node.Scalar() == "false") return false;
  }
  return FieldError(field, node, "must be true or false");
}

Result<YAML::Node> Load(std::string_view document) {
  try {
    return YAML::Load(std::string(document));
  } catch (const YAML::ParserException& e) {
    Status s = InvalidArgument("not valid YAML or JSON: " + e.msg);
    s.WithField("spec", e.mark.line + 1);
    return s;
  }
}

}  // namespace headway::yaml_fields
