#include "workflow/substitute.h"

#include <ctime>
#include <nlohmann/json.hpp>

namespace headway::workflow {

namespace {

// Go's strings.TrimSpace for ASCII white-space.
std::string_view TrimSpace(std::string_view s) {
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

Status Unclosed(std::string_view text, size_t pos) {
  return InvalidArgument("unclosed '{{' at position " + std::to_string(pos) + " in '" +
                         std::string(text) + "'");
}

Status SubstituteInto(std::string_view text, const Scope& scope, Unresolved mode,
                      std::string* out) {
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{", pos);
    if (open == std::string_view::npos) {
      out->append(text.substr(pos));
      return Status::Ok();
    }
    out->append(text.substr(pos, open - pos));
    size_t close = text.find("}}", open + 2);
    if (close == std::string_view::npos) return Unclosed(text, open);
    std::string_view tag = text.substr(open + 2, close - open - 2);
    pos = close + 2;

    if (!tag.empty() && tag.front() == '=') {
      auto value = EvaluateExprTag(tag.substr(1), scope);
      if (value.ok()) {
        out->append(*value);
      } else if (mode == Unresolved::kKeep) {
        out->append("{{").append(tag).append("}}");
      } else {
        return InvalidArgument("failed to resolve {{" + std::string(tag) + "}} at position " +
                               std::to_string(open) + ": " + value.status().message());
      }
      continue;
    }

    auto it = scope.find(TrimSpace(tag));
    if (it != scope.end()) {
      out->append(it->second);
      continue;
    }
    // Argo simpleReplace: "{{a{{b}}" resolves the inner "b" when it can.
    size_t inner = tag.rfind("{{");
    if (inner != std::string_view::npos && inner > 0) {
      auto nested = scope.find(tag.substr(inner + 2));
      if (nested != scope.end()) {
        out->append("{{").append(tag.substr(0, inner)).append(nested->second);
        continue;
      }
    }
    if (mode == Unresolved::kKeep) {
      out->append("{{").append(tag).append("}}");
      continue;
    }
    return InvalidArgument("failed to resolve {{" + std::string(tag) + "}} at position " +
                           std::to_string(open));
  }
}

Status SubstituteTree(const nlohmann::json& in, const Scope& scope, Unresolved mode,
                      const std::string& path, nlohmann::json* out) {
  auto fail = [&](const Status& s) {
    Status e = s;
    return e.WithField(path.empty() ? std::string("(document)") : path);
  };
  if (in.is_string()) {
    std::string s;
    Status st = SubstituteInto(in.get_ref<const std::string&>(), scope, mode, &s);
    if (!st.ok()) return fail(st);
    *out = std::move(s);
    return Status::Ok();
  }
  if (in.is_array()) {
    *out = nlohmann::json::array();
    for (size_t i = 0; i < in.size(); ++i) {
      nlohmann::json v;
      HEADWAY_RETURN_IF_ERROR(
          SubstituteTree(in[i], scope, mode, path + "[" + std::to_string(i) + "]", &v));
      out->push_back(std::move(v));
    }
    return Status::Ok();
  }
  if (in.is_object()) {
    *out = nlohmann::json::object();
    for (auto it = in.begin(); it != in.end(); ++it) {
      std::string child = path.empty() ? it.key() : path + "." + it.key();
      std::string key;
      Status st = SubstituteInto(it.key(), scope, mode, &key);
      if (!st.ok()) {
        Status e = st;
        return e.WithField(child);
      }
      nlohmann::json v;
      HEADWAY_RETURN_IF_ERROR(SubstituteTree(it.value(), scope, mode, child, &v));
      (*out)[key] = std::move(v);
    }
    return Status::Ok();
  }
  *out = in;
  return Status::Ok();
}

std::string ParamsJson(const std::vector<std::pair<std::string, std::string>>& params) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& [name, value] : params) a.push_back({{"name", name}, {"value", value}});
  return a.dump();
}

// A value as an element of an aggregated JSON list: JSON when it parses as
// JSON, otherwise the string itself (Argo aggregatedJsonValueList / Item).
nlohmann::json AsJsonItem(const std::string& v) {
  auto parsed = nlohmann::json::parse(v, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return v;
  return parsed;
}

}  // namespace

Result<std::string> Substitute(std::string_view text, const Scope& scope, Unresolved mode) {
  std::string out;
  out.reserve(text.size());
  HEADWAY_RETURN_IF_ERROR(SubstituteInto(text, scope, mode, &out));
  return out;
}

Result<nlohmann::json> SubstituteJson(const nlohmann::json& doc, const Scope& scope,
                                      Unresolved mode) {
  nlohmann::json out;
  HEADWAY_RETURN_IF_ERROR(SubstituteTree(doc, scope, mode, "", &out));
  return out;
}

Result<bool> ShouldExecute(std::string_view when, const Scope& scope) {
  if (when.empty()) return true;
  auto text = Substitute(when, scope, Unresolved::kError);
  if (!text.ok()) {
    return InvalidArgument("when '" + std::string(when) + "': " + text.status().message());
  }
  return EvaluateWhen(*text);
}

Result<std::vector<TemplateTag>> FindTags(std::string_view text) {
  std::vector<TemplateTag> tags;
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{", pos);
    if (open == std::string_view::npos) return tags;
    size_t close = text.find("}}", open + 2);
    if (close == std::string_view::npos) return Unclosed(text, open);
    std::string_view tag = text.substr(open + 2, close - open - 2);
    TemplateTag t;
    t.position = open;
    if (!tag.empty() && tag.front() == '=') {
      t.expression = true;
      t.name = std::string(tag.substr(1));
    } else {
      t.name = std::string(TrimSpace(tag));
    }
    tags.push_back(std::move(t));
    pos = close + 2;
  }
}

std::string FormatRfc3339(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void AddWorkflowVariables(const WorkflowMeta& meta, Scope* scope) {
  Scope& s = *scope;
  s["workflow.name"] = meta.name;
  s["workflow.namespace"] = meta.namespace_;
  s["workflow.uid"] = meta.uid;
  s["workflow.serviceAccountName"] = meta.service_account_name;
  s["workflow.mainEntrypoint"] = meta.main_entrypoint;
  if (meta.priority) s["workflow.priority"] = std::to_string(*meta.priority);
  for (const auto& [name, value] : meta.parameters) s["workflow.parameters." + name] = value;
  std::string params = ParamsJson(meta.parameters);
  s["workflow.parameters"] = params;
  s["workflow.parameters.json"] = params;
  nlohmann::json labels = nlohmann::json::object();
  for (const auto& [k, v] : meta.labels) {
    s["workflow.labels." + k] = v;
    labels[k] = v;
  }
  s["workflow.labels.json"] = labels.dump();
  nlohmann::json annotations = nlohmann::json::object();
  for (const auto& [k, v] : meta.annotations) {
    s["workflow.annotations." + k] = v;
    annotations[k] = v;
  }
  s["workflow.annotations.json"] = annotations.dump();

  std::string rfc = FormatRfc3339(meta.creation_unix_seconds);
  s["workflow.creationTimestamp"] = rfc;
  s["workflow.creationTimestamp.RFC3339"] = rfc;
  std::time_t t = static_cast<std::time_t>(meta.creation_unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  // argoproj/pkg strftime.FormatChars, plus ".s" (Unix seconds).
  for (char c : std::string_view("BbmAadHIMSYypZzLs")) {
    std::string value;
    if (c == 's') {
      value = std::to_string(meta.creation_unix_seconds);
    } else if (c == 'z') {
      value = "+0000";
    } else if (c == 'Z') {
      value = "UTC";
    } else if (c == 'L') {
      value = ".000";  // Kubernetes timestamps have whole seconds
    } else {
      char fmt[3] = {'%', c, 0};
      char buf[64];
      size_t n = std::strftime(buf, sizeof(buf), fmt, &tm);
      value.assign(buf, n);
    }
    s["workflow.creationTimestamp." + std::string(1, c)] = value;
  }
}

void AddInputVariables(const std::vector<std::pair<std::string, std::string>>& parameters,
                       const std::map<std::string, std::string>& artifact_paths, Scope* scope) {
  for (const auto& [name, value] : parameters) (*scope)["inputs.parameters." + name] = value;
  (*scope)["inputs.parameters"] = ParamsJson(parameters);
  for (const auto& [name, path] : artifact_paths) {
    (*scope)["inputs.artifacts." + name + ".path"] = path;
  }
}

void AddNodeVariables(std::string_view prefix, const NodeOutputs& node, Scope* scope) {
  Scope& s = *scope;
  std::string p(prefix);
  s[p + ".id"] = node.id;
  s[p + ".status"] = node.phase;
  s[p + ".startedAt"] = node.started_at;
  s[p + ".finishedAt"] = node.finished_at;
  if (!node.host_node_name.empty()) s[p + ".hostNodeName"] = node.host_node_name;
  if (!node.ip.empty()) s[p + ".ip"] = node.ip;
  if (node.result) s[p + ".outputs.result"] = *node.result;
  if (node.exit_code) {
    s[p + ".exitCode"] = *node.exit_code;
    s[p + ".outputs.exitCode"] = *node.exit_code;
  }
  for (const auto& [name, value] : node.parameters) s[p + ".outputs.parameters." + name] = value;
  for (const auto& [name, path] : node.artifact_paths) {
    s[p + ".outputs.artifacts." + name + ".path"] = path;
  }
}

void AddAggregateVariables(std::string_view prefix, const std::vector<NodeOutputs>& children,
                           Scope* scope) {
  std::string p(prefix);
  nlohmann::json results = nlohmann::json::array();
  nlohmann::json param_maps = nlohmann::json::array();
  std::map<std::string, std::vector<std::string>> per_name;
  for (const auto& c : children) {
    if (c.phase != "Succeeded") continue;
    if (!c.parameters.empty()) {
      nlohmann::json m = nlohmann::json::object();
      for (const auto& [name, value] : c.parameters) {
        m[name] = value;
        per_name[name].push_back(value);
      }
      param_maps.push_back(std::move(m));
    }
    if (c.result) results.push_back(AsJsonItem(*c.result));
  }
  (*scope)[p + ".outputs.result"] = results.dump();
  (*scope)[p + ".outputs.parameters"] = param_maps.dump();
  // Argo aggregatedJsonValueList: when any value parses as JSON the list holds
  // the values that do, parsed; otherwise it holds every value as a string.
  for (const auto& [name, values] : per_name) {
    nlohmann::json parsed = nlohmann::json::array();
    for (const auto& v : values) {
      auto j = nlohmann::json::parse(v, nullptr, /*allow_exceptions=*/false);
      if (!j.is_discarded()) parsed.push_back(std::move(j));
    }
    (*scope)[p + ".outputs.parameters." + name] =
        parsed.empty() ? nlohmann::json(values).dump() : parsed.dump();
  }
}

}  // namespace headway::workflow
