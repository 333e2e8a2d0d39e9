// This machine's GPUs through NVIDIA's management library (NVML), the one
// nvidia-smi itself reads, loaded at run time: the server builds and runs
// where there is no driver, and reads the GPUs where the driver is installed
// without nvidia-smi (as in many containers, which get libnvidia-ml but not
// the tools). Each reading is a library call, not a process.
//
// Thread safety: NVML's calls are thread-safe; so is this class.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/local/gpu_inventory.h"

namespace headway {

class Nvml {
 public:
  // `library` as dlopen takes it ("libnvidia-ml.so.1": the driver's, found
  // as the dynamic linker finds libraries). nullptr when it cannot be loaded,
  // lacks a function used here, or finds no driver (nvmlInit fails).
  static std::unique_ptr<Nvml> Load(const std::string& library);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // Every GPU, by NVML's index (nvidia-smi's).
  std::vector<GpuDevice> Devices() const;
  // Utilisation (percent of the last sample period a kernel ran) by index;
  // GPUs that give no reading are left out.
  std::map<int, double> Utilization() const;

 private:
  struct Api;
  Nvml(void* handle, std::unique_ptr<Api> api);
  void* handle_;
  std::unique_ptr<Api> api_;
};

}  // namespace headway
