#include "exec/local/nvml.h"

#include <dlfcn.h>

namespace headway {
// The parts of nvml.h used here, as NVML's stable ABI defines them (the
// header is not packaged in Debian's main archive). Named, not anonymous:
// Nvml::Api's members have these types.
namespace nvml_abi {
using NvmlReturn = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlUtilization {
  unsigned int gpu;     // percent of time a kernel was running
  unsigned int memory;  // percent of time memory was read or written
};
}  // namespace nvml_abi

namespace {

using nvml_abi::NvmlDevice;
using nvml_abi::NvmlReturn;
using nvml_abi::NvmlUtilization;
constexpr NvmlReturn kSuccess = 0;

template <class F>
bool Bind(void* handle, const char* name, F& function) {
  function = reinterpret_cast<F>(::dlsym(handle, name));
  return function != nullptr;
}

}  // namespace

struct Nvml::Api {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*count)(unsigned int*) = nullptr;
  NvmlReturn (*by_index)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*uuid)(NvmlDevice, char*, unsigned int) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned int) = nullptr;
};

std::unique_ptr<Nvml> Nvml::Load(const std::string& library) {
  if (library.empty()) return nullptr;
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return nullptr;
  auto api = std::make_unique<Api>();
  if (!Bind(handle, "nvmlInit_v2", api->init) || !Bind(handle, "nvmlShutdown", api->shutdown) ||
      !Bind(handle, "nvmlDeviceGetCount_v2", api->count) ||
      !Bind(handle, "nvmlDeviceGetHandleByIndex_v2", api->by_index) ||
      !Bind(handle, "nvmlDeviceGetUtilizationRates", api->utilization) ||
      !Bind(handle, "nvmlDeviceGetUUID", api->uuid) ||
      !Bind(handle, "nvmlDeviceGetName", api->name) || api->init() != kSuccess) {
    ::dlclose(handle);
    return nullptr;
  }
  return std::unique_ptr<Nvml>(new Nvml(handle, std::move(api)));
}

Nvml::Nvml(void* handle, std::unique_ptr<Api> api) : handle_(handle), api_(std::move(api)) {}

Nvml::~Nvml() {
  api_->shutdown();
  ::dlclose(handle_);
}

std::vector<GpuDevice> Nvml::Devices() const {
  std::vector<GpuDevice> devices;
  unsigned int count = 0;
  if (api_->count(&count) != kSuccess) return devices;
  for (unsigned int i = 0; i < count && i < 1024; ++i) {
    NvmlDevice device = nullptr;
    if (api_->by_index(i, &device) != kSuccess) continue;
    char uuid[96] = {}, name[96] = {};
    if (api_->uuid(device, uuid, sizeof uuid - 1) != kSuccess) uuid[0] = '\0';
    if (api_->name(device, name, sizeof name - 1) != kSuccess) name[0] = '\0';
    devices.push_back({static_cast<int>(i), uuid, name});
  }
  return devices;
}

std::map<int, double> Nvml::Utilization() const {
  std::map<int, double> readings;
  unsigned int count = 0;
  if (api_->count(&count) != kSuccess) return readings;
  for (unsigned int i = 0; i < count && i < 1024; ++i) {
    NvmlDevice device = nullptr;
    NvmlUtilization rates{};
    if (api_->by_index(i, &device) != kSuccess || api_->utilization(device, &rates) != kSuccess) {
      continue;  // e.g. NVML_ERROR_NOT_SUPPORTED: no reading, never "idle"
    }
    if (rates.gpu <= 100) readings[static_cast<int>(i)] = rates.gpu;
  }
  return readings;
}

}  // namespace headway
