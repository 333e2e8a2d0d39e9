// The readers of a manifest's YAML fields (manifest_internal.h): a map's
// fields dispatched by name, with typos and fields Argo has but Headway
// ignores reported; scalars, lists and maps of text; opaque values as JSON.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "workflow/manifest_internal.h"

namespace headway::workflow::internal {

using nlohmann::json;
using yaml_fields::IsQuoted;

namespace {

constexpr int kMaxOpaqueDepth = 64;

std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                  std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The known field closest to `key`, when it is close enough to be a typo.
std::string ClosestField(const std::string& key, const FieldRules& rules) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, key.size() / 3) + 1;
  auto consider = [&](const std::string& name) {
    std::size_t d = EditDistance(key, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  };
  for (const auto& [name, unused] : rules.parse) consider(name);
  for (const auto& [name, unused] : rules.ignored) consider(name);
  for (const auto& [name, unused] : rules.refused) consider(name);
  return best;
}

bool IsEmptyOrFalse(const YAML::Node& node) {
  if (node.IsNull()) return true;
  if (node.IsSequence() || node.IsMap()) return node.size() == 0;
  return node.IsScalar() && !IsQuoted(node) && node.Scalar() == "false";
}

}  // namespace

Result<json> ToJsonValue(Context& ctx, const std::string& path, const YAML::Node& node, int depth) {
  HEADWAY_RETURN_IF_ERROR(ctx.Visit(path, node));
  if (depth > kMaxOpaqueDepth) return FieldError(path, node, "is nested too deeply");
  if (node.IsMap()) {
    json out = json::object();
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) return FieldError(path, kv.first, "keys must be strings");
      auto value = ToJsonValue(ctx, path + "." + kv.first.Scalar(), kv.second, depth + 1);
      if (!value.ok()) return value.status();
      out[kv.first.Scalar()] = std::move(*value);
    }
    return out;
  }
  if (node.IsSequence()) {
    json out = json::array();
    for (std::size_t i = 0; i < node.size(); ++i) {
      auto value = ToJsonValue(ctx, Index(path, i), node[i], depth + 1);
      if (!value.ok()) return value.status();
      out.push_back(std::move(*value));
    }
    return out;
  }
  if (!node.IsScalar()) return json(nullptr);
  const std::string& text = node.Scalar();
  if (IsQuoted(node)) return json(text);
  if (text == "true" || text == "false") return json(text == "true");
  if (text == "null" || text == "~") return json(nullptr);
  std::int64_t integer = 0;
  auto [iend, iec] = std::from_chars(text.data(), text.data() + text.size(), integer);
  if (iec == std::errc() && iend == text.data() + text.size()) return json(integer);
  double real = 0;
  auto [dend, dec] = std::from_chars(text.data(), text.data() + text.size(), real);
  if (dec == std::errc() && dend == text.data() + text.size() && std::isfinite(real))
    return json(real);
  return json(text);
}

Status WalkFields(Context& ctx, const std::string& path, const YAML::Node& map,
                  const FieldRules& rules, RecordedFields* recorded) {
  HEADWAY_RETURN_IF_ERROR(ctx.Visit(path, map));
  if (map.IsNull()) return Status::Ok();
  if (!map.IsMap()) return FieldError(path, map, "must be a map, got " + TypeName(map));
  std::set<std::string> seen;
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) return FieldError(path, kv.first, "field names must be strings");
    const std::string& key = kv.first.Scalar();
    std::string field = path.empty() ? key : path + "." + key;
    if (!seen.insert(key).second) return FieldError(field, kv.first, "is given twice");
    ctx.Mark(field, kv.first);
    if (auto it = rules.parse.find(key); it != rules.parse.end()) {
      HEADWAY_RETURN_IF_ERROR(it->second(field, kv.second));
    } else if (auto ig = rules.ignored.find(key); ig != rules.ignored.end()) {
      if (recorded) {
        auto value = ToJsonValue(ctx, field, kv.second, 0);
        if (!value.ok()) return value.status();
        (*recorded)[key] = std::move(*value);
      }
      ctx.warnings.push_back({field, LineOf(kv.first), "ignored: " + ig->second});
    } else if (auto rf = rules.refused.find(key); rf != rules.refused.end()) {
      if (!IsEmptyOrFalse(kv.second)) {
        return FieldError(field, kv.first, "is not supported by Headway: " + rf->second);
      }
    } else {
      std::string hint = ClosestField(key, rules);
      return FieldError(field, kv.first,
                        "unknown field" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
    }
  }
  return Status::Ok();
}

// ---- scalars ---------------------------------------------------------------

Result<std::string> AsText(const std::string& path, const YAML::Node& node) {
  if (!node.IsScalar()) {
    return FieldError(path, node, "must be a string, number or boolean, got " + TypeName(node));
  }
  return node.Scalar();
}

Handler Text(std::string& out) {
  return [&out](const std::string& path, const YAML::Node& node) -> Status {
    auto text = AsText(path, node);
    if (!text.ok()) return text.status();
    out = std::move(*text);
    return Status::Ok();
  };
}

Handler NonEmptyText(std::string& out) {
  return [&out](const std::string& path, const YAML::Node& node) -> Status {
    auto text = AsText(path, node);
    if (!text.ok()) return text.status();
    if (text->find_first_not_of(" \t\r\n") == std::string::npos) {
      return FieldError(path, node, "must be a non-empty expression");
    }
    out = std::move(*text);
    return Status::Ok();
  };
}

Handler OptionalText(std::optional<std::string>& out) {
  return [&out](const std::string& path, const YAML::Node& node) -> Status {
    if (node.IsNull()) return Status::Ok();
    auto text = AsText(path, node);
    if (!text.ok()) return text.status();
    out = std::move(*text);
    return Status::Ok();
  };
}

Handler Bool(bool& out) {
  return [&out](const std::string& path, const YAML::Node& node) -> Status {
    auto value = yaml_fields::AsBool(path, node);
    if (!value.ok()) return value.status();
    out = *value;
    return Status::Ok();
  };
}

Handler OptionalBool(std::optional<bool>& out) {
  return [&out](const std::string& path, const YAML::Node& node) -> Status {
    if (node.IsNull()) return Status::Ok();
    auto value = yaml_fields::AsBool(path, node);
    if (!value.ok()) return value.status();
    out = *value;
    return Status::Ok();
  };
}

Handler IntOrStr(std::optional<IntOrString>& out) {
  return [&out](const std::string& path, const YAML::Node& node) -> Status {
    if (node.IsNull()) return Status::Ok();
    if (!node.IsScalar())
      return FieldError(path, node, "must be an integer or a string, got " + TypeName(node));
    const std::string& text = node.Scalar();
    std::int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    bool is_int = !IsQuoted(node) && ec == std::errc() && end == text.data() + text.size();
    if (!IsQuoted(node) && !is_int && text.find("{{") == std::string::npos) {
      return FieldError(path, node, "must be an integer or a quoted string, got '" + text + "'");
    }
    // A number is kept in its plain decimal form ("09" is 9), as it is
    // written back.
    out = IntOrString{is_int ? std::to_string(value) : text, is_int};
    return Status::Ok();
  };
}

Handler TextList(Context& ctx, std::vector<std::string>& out) {
  return [&ctx, &out](const std::string& path, const YAML::Node& node) -> Status {
    return ParseList(ctx, path, node, out,
                     [](const std::string& p, const YAML::Node& n, std::string& v) -> Status {
                       auto text = AsText(p, n);
                       if (!text.ok()) return text.status();
                       v = std::move(*text);
                       return Status::Ok();
                     });
  };
}

Handler TextMap(Context& ctx, std::map<std::string, std::string>& out) {
  return [&ctx, &out](const std::string& path, const YAML::Node& node) -> Status {
    HEADWAY_RETURN_IF_ERROR(ctx.Visit(path, node));
    if (node.IsNull()) return Status::Ok();
    if (!node.IsMap()) return FieldError(path, node, "must be a map, got " + TypeName(node));
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) return FieldError(path, kv.first, "keys must be strings");
      std::string field = path + "." + kv.first.Scalar();
      ctx.Mark(field, kv.first);
      if (out.count(kv.first.Scalar())) return FieldError(field, kv.first, "is given twice");
      auto value = AsText(field, kv.second);
      if (!value.ok()) return value.status();
      out[kv.first.Scalar()] = std::move(*value);
    }
    return Status::Ok();
  };
}

}  // namespace headway::workflow::internal
