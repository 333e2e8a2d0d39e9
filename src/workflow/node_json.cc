// Workflow nodes to and from JSON (engine.h), as the status of a stored
// workflow keeps them.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/artifact.h"
#include "workflow/engine.h"

namespace headway::workflow {

using nlohmann::json;

namespace {
json ParametersJson(const std::vector<NodeParameter>& params) {
  json out = json::array();
  for (const NodeParameter& p : params) out.push_back({{"name", p.name}, {"value", p.value}});
  return out;
}

json ArtifactsJson(const std::vector<NodeArtifact>& list) {
  json out = json::array();
  for (const NodeArtifact& a : list) {
    json entry = {{"name", a.name}};
    if (!a.path.empty()) entry["path"] = a.path;
    if (!a.ref.empty()) entry["headway"] = {{"artifact", a.ref}};
    out.push_back(std::move(entry));
  }
  return out;
}

std::vector<NodeArtifact> ArtifactsFrom(const json& list) {
  std::vector<NodeArtifact> out;
  if (!list.is_array()) return out;
  for (const json& a : list) {
    if (!a.is_object()) continue;
    NodeArtifact artifact;
    artifact.name = a.value("name", "");
    artifact.path = a.value("path", "");
    if (a.contains("headway") && a["headway"].is_object()) {
      artifact.ref = a["headway"].value("artifact", "");
    }
    out.push_back(std::move(artifact));
  }
  return out;
}

Result<std::vector<NodeParameter>> ParametersFrom(const json& list) {
  std::vector<NodeParameter> out;
  if (!list.is_array()) return InvalidArgument("parameters must be a list");
  for (const json& p : list) {
    if (!p.is_object() || !p.contains("name") || !p["name"].is_string()) {
      return InvalidArgument("a parameter needs a name");
    }
    out.push_back({p["name"], p.contains("value") && p["value"].is_string()
                                  ? p["value"].get<std::string>()
                                  : ""});
  }
  return out;
}
}  // namespace

json ToJson(const Node& node) {
  json j = {{"id", node.id},
            {"name", node.name},
            {"displayName", node.display_name},
            {"type", std::string(NodeTypeName(node.type))},
            {"phase", std::string(NodePhaseName(node.phase))}};
  if (!node.template_name.empty()) j["templateName"] = node.template_name;
  if (!node.template_ref.empty()) {
    auto slash = node.template_ref.find('/');
    j["templateRef"] = {
        {"name", node.template_ref.substr(0, slash)},
        {"template", slash == std::string::npos ? "" : node.template_ref.substr(slash + 1)}};
  }
  j["templateScope"] = "local/";
  if (!node.boundary_id.empty()) j["boundaryID"] = node.boundary_id;
  if (!node.message.empty()) j["message"] = node.message;
  if (node.started_at) j["startedAt"] = headway::FormatRfc3339(*node.started_at);
  if (node.finished_at) j["finishedAt"] = headway::FormatRfc3339(*node.finished_at);
  if (!node.progress.empty()) j["progress"] = node.progress;
  if (!node.children.empty()) j["children"] = node.children;
  if (!node.inputs.empty()) j["inputs"] = {{"parameters", ParametersJson(node.inputs)}};
  if (!node.input_artifacts.empty()) j["inputs"]["artifacts"] = ArtifactsJson(node.input_artifacts);
  json outputs = json::object();
  if (!node.outputs.empty()) outputs["parameters"] = ParametersJson(node.outputs);
  if (!node.output_artifacts.empty()) outputs["artifacts"] = ArtifactsJson(node.output_artifacts);
  if (node.result) outputs["result"] = *node.result;
  if (node.exit_code) outputs["exitCode"] = *node.exit_code;
  if (!outputs.empty()) j["outputs"] = outputs;
  if (node.memo_hit) {
    j["memoizationStatus"] = {{"hit", *node.memo_hit},
                              {"key", node.memo_key},
                              {"cacheName", node.memo_cache.empty() ? "default" : node.memo_cache}};
  }
  if (node.on_exit) j["nodeFlag"] = {{"hooked", true}};
  json headway = json::object();
  if (!node.job.empty()) headway["job"] = node.job;
  if (node.retry_after) headway["retryAfter"] = headway::FormatRfc3339(*node.retry_after);
  if (node.on_exit) headway["onExit"] = true;
  if (!node.memo_key.empty()) headway["memoKey"] = node.memo_key;
  if (!node.artifact_names.empty()) headway["artifactNames"] = node.artifact_names;
  if (!headway.empty()) j["headway"] = headway;
  return j;
}

Result<Node> NodeFromJson(const json& j) {
  if (!j.is_object()) return InvalidArgument("a workflow node must be an object");
  auto str = [&](const char* key) -> std::string {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : "";
  };
  auto time = [&](const json& obj, const char* key) -> std::optional<Time> {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_string()) return std::nullopt;
    return ParseRfc3339(it->get<std::string>());
  };
  Node node;
  node.id = str("id");
  node.name = str("name");
  if (node.id.empty() || node.name.empty())
    return InvalidArgument("a workflow node needs id and name");
  node.display_name = str("displayName");
  auto type = ParseNodeType(str("type"));
  auto phase = ParseNodePhase(str("phase"));
  if (!type || !phase) return InvalidArgument("workflow node " + node.id + ": bad type or phase");
  node.type = *type;
  node.phase = *phase;
  node.template_name = str("templateName");
  if (j.contains("templateRef") && j["templateRef"].is_object()) {
    node.template_ref =
        j["templateRef"].value("name", "") + "/" + j["templateRef"].value("template", "");
  }
  node.boundary_id = str("boundaryID");
  node.message = str("message");
  node.started_at = time(j, "startedAt");
  node.finished_at = time(j, "finishedAt");
  node.progress = str("progress");
  if (j.contains("children") && j["children"].is_array()) {
    for (const json& c : j["children"]) {
      if (c.is_string()) node.children.push_back(c);
    }
  }
  if (j.contains("inputs") && j["inputs"].is_object()) {
    if (j["inputs"].contains("parameters")) {
      auto p = ParametersFrom(j["inputs"]["parameters"]);
      if (!p.ok()) return p.status();
      node.inputs = *p;
    }
    if (j["inputs"].contains("artifacts"))
      node.input_artifacts = ArtifactsFrom(j["inputs"]["artifacts"]);
  }
  if (j.contains("outputs") && j["outputs"].is_object()) {
    const json& o = j["outputs"];
    if (o.contains("parameters")) {
      auto p = ParametersFrom(o["parameters"]);
      if (!p.ok()) return p.status();
      node.outputs = *p;
    }
    if (o.contains("artifacts")) node.output_artifacts = ArtifactsFrom(o["artifacts"]);
    if (o.contains("result") && o["result"].is_string())
      node.result = o["result"].get<std::string>();
    if (o.contains("exitCode") && o["exitCode"].is_string())
      node.exit_code = o["exitCode"].get<std::string>();
  }
  if (j.contains("memoizationStatus") && j["memoizationStatus"].is_object()) {
    node.memo_hit = j["memoizationStatus"].value("hit", false);
    node.memo_cache = j["memoizationStatus"].value("cacheName", "");
  }
  if (j.contains("headway") && j["headway"].is_object()) {
    const json& h = j["headway"];
    node.job = h.value("job", "");
    node.retry_after = time(h, "retryAfter");
    node.on_exit = h.value("onExit", false);
    node.memo_key = h.value("memoKey", "");
    if (h.contains("artifactNames") && h["artifactNames"].is_object()) {
      for (const auto& [name, stored] : h["artifactNames"].items()) {
        if (stored.is_string()) node.artifact_names[name] = stored.get<std::string>();
      }
    }
  }
  return node;
}

Result<std::string> ArtifactNameForKey(std::string_view key) {
  std::string name;
  for (char c : key) name += c == '/' ? '.' : c;
  while (!name.empty() && name.front() == '.') name.erase(name.begin());
  while (!name.empty() && name.back() == '.') name.pop_back();
  if (!IsValidArtifactName(name)) {
    return InvalidArgument("key '" + std::string(key) + "' makes no artifact name ('" + name +
                           "'): use lowercase letters, digits and - _ . / (at most 200)");
  }
  return name;
}

}  // namespace headway::workflow