#include "exec/oci/cdi.h"

namespace headway::oci {
namespace {

using json = nlohmann::json;

json NodeJson(const DeviceNode& node) {
  json j = {{"path", node.path}, {"type", std::string(1, node.type)}};
  if (node.major != 0 || node.minor != 0) {
    j["major"] = node.major;
    j["minor"] = node.minor;
  }
  return j;
}

void AddEdits(const json& edits, CdiEdits& out) {
  if (!edits.is_object()) return;
  if (edits.contains("deviceNodes") && edits["deviceNodes"].is_array()) {
    for (const json& node : edits["deviceNodes"]) {
      if (!node.is_object() || !node.contains("path") || !node["path"].is_string()) continue;
      DeviceNode device;
      device.path = node["path"].get<std::string>();
      if (node.contains("type") && node["type"].is_string() &&
          !node["type"].get<std::string>().empty()) {
        device.type = node["type"].get<std::string>()[0];
      }
      device.major = node.value("major", 0);
      device.minor = node.value("minor", 0);
      out.devices.push_back(device);
    }
  }
  if (edits.contains("env") && edits["env"].is_array()) {
    for (const json& entry : edits["env"]) {
      if (entry.is_string()) out.env.push_back(entry.get<std::string>());
    }
  }
}

}  // namespace

json CdiSpec(const std::vector<CdiGpu>& gpus, const std::vector<DeviceNode>& common) {
  json devices = json::array();
  for (const CdiGpu& gpu : gpus) {
    json nodes = json::array();
    for (const DeviceNode& node : gpu.nodes) nodes.push_back(NodeJson(node));
    devices.push_back(
        {{"name", std::to_string(gpu.index)},
         {"containerEdits",
          {{"deviceNodes", nodes}, {"env", json::array({"NVIDIA_VISIBLE_DEVICES=void"})}}}});
  }
  json common_nodes = json::array();
  for (const DeviceNode& node : common) common_nodes.push_back(NodeJson(node));
  return {{"cdiVersion", "0.6.0"},
          {"kind", kCdiGpuKind},
          {"devices", devices},
          {"containerEdits", {{"deviceNodes", common_nodes}}}};
}

Result<CdiEdits> CdiEditsFor(const json& spec, const std::vector<std::string>& names) {
  CdiEdits out;
  if (names.empty()) return out;
  if (!spec.is_object() || !spec.contains("devices") || !spec["devices"].is_array()) {
    return InvalidArgument("the CDI spec lists no devices");
  }
  const std::string kind = spec.value("kind", "");
  if (spec.contains("containerEdits")) AddEdits(spec["containerEdits"], out);
  for (const std::string& full : names) {
    std::string name = full;
    if (const auto eq = full.find('='); eq != std::string::npos) {
      if (full.substr(0, eq) != kind) {
        return NotFound("device " + full + " is not of kind " + kind);
      }
      name = full.substr(eq + 1);
    }
    bool found = false;
    for (const json& device : spec["devices"]) {
      if (device.is_object() && device.value("name", "") == name) {
        if (device.contains("containerEdits")) AddEdits(device["containerEdits"], out);
        found = true;
        break;
      }
    }
    if (!found) return NotFound("the CDI spec has no device " + kind + "=" + name);
  }
  return out;
}

}  // namespace headway::oci
