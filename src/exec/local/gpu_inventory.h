// What GPUs this machine has.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace headway {

struct GpuDevice {
  int index = 0;
  std::string uuid;  // empty for logical GPUs
  std::string name;
};

// Real GPUs as listed by `nvidia-smi`; empty when there is none or no driver.
std::vector<GpuDevice> DetectNvidiaGpus();
// Parses `nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader`;
// lines that are not GPUs (driver warnings) are skipped.
std::vector<GpuDevice> ParseNvidiaSmiCsv(const std::string& text);
// Utilisation (percent) of each GPU by index, from `NVIDIA_SMI
// --query-gpu=index,utilization.gpu --format=csv,noheader,nounits`; empty
// where that program is missing, fails or takes more than 10 s.
class CommandRunner;
std::map<int, double> ReadGpuUtilization(CommandRunner& runner, const std::string& nvidia_smi);
// Lines without a reading ("[N/A]", "[Not Supported]") are skipped.
std::map<int, double> ParseGpuUtilizationCsv(const std::string& text);
// `count` logical GPUs, for machines without any: they schedule like real ones
// and CUDA_VISIBLE_DEVICES names their indices.
std::vector<GpuDevice> LogicalGpus(int count);

// The driver's device minor of each GPU by UUID (/dev/nvidiaMINOR), from
// the "GPU UUID:" and "Device Minor:" lines of each
// /proc/driver/nvidia/gpus/*/information; empty without the driver.
std::map<std::string, int> ReadNvidiaDeviceMinors(
    const std::string& proc_dir = "/proc/driver/nvidia/gpus");
// One such file: the UUID and minor it names; minor -1 when it has none.
std::pair<std::string, int> ParseNvidiaGpuInformation(const std::string& text);
// Each GPU's device node minor by its pool index: the driver's where it
// names the GPU's UUID, else the index (logical GPUs, and nvidia-smi's
// order, which is the minors' without MIG or a changed PCI order).
std::map<int, int> DeviceMinorsByIndex(const std::vector<GpuDevice>& gpus,
                                       const std::map<std::string, int>& minor_by_uuid);

}  // namespace headway
