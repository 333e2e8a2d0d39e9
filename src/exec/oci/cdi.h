// The Container Device Interface (CDI) spec of a pool's GPUs, as
// nvidia-ctk writes one ("nvidia.com/gpu=0" ...), and the edits a container
// gets for the devices it is granted. Pure: JSON in, JSON out; the executor
// writes the spec where podman and other CDI consumers read it and applies
// the edits to its own runtime configurations (runtime_config.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/oci/runtime_config.h"

namespace headway::oci {

inline constexpr const char* kCdiGpuKind = "nvidia.com/gpu";

struct CdiGpu {
  int index = 0;                  // the pool's GPU index: the device is named by it
  std::vector<DeviceNode> nodes;  // /dev/nvidiaMINOR; none for a logical GPU
};

// A CDI spec (cdiVersion 0.6.0) naming each GPU by its index, with `common`
// (nvidiactl, nvidia-uvm ...) as edits every GPU container gets.
nlohmann::json CdiSpec(const std::vector<CdiGpu>& gpus, const std::vector<DeviceNode>& common);

struct CdiEdits {
  std::vector<DeviceNode> devices;
  std::vector<std::string> env;  // "NAME=value"
};

// The edits for `names` ("nvidia.com/gpu=1" or "1") in `spec`, the spec's
// common edits first; NotFound names a device the spec lacks.
Result<CdiEdits> CdiEditsFor(const nlohmann::json& spec, const std::vector<std::string>& names);

}  // namespace headway::oci
