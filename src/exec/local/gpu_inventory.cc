#include "exec/local/gpu_inventory.h"

#include <cstdio>
#include <sstream>

namespace headway {

std::vector<GpuDevice> DetectNvidiaGpus() {
  std::vector<GpuDevice> gpus;
  FILE* pipe = popen("nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader 2>/dev/null",
                     "r");
  if (pipe == nullptr) return gpus;
  char line[512];
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    std::istringstream in(line);
    std::string index, uuid, name;
    if (!std::getline(in, index, ',') || !std::getline(in, uuid, ',') || !std::getline(in, name)) {
      continue;
    }
    auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(" \t"));
      s.erase(s.find_last_not_of(" \t\r\n") + 1);
      return s;
    };
    try {
      gpus.push_back({std::stoi(trim(index)), trim(uuid), trim(name)});
    } catch (const std::exception&) {
      continue;  // not a GPU line (driver warning); skip it
    }
  }
  pclose(pipe);
  return gpus;
}

std::vector<GpuDevice> LogicalGpus(int count) {
  std::vector<GpuDevice> gpus;
  for (int i = 0; i < count; ++i) gpus.push_back({i, "", "logical"});
  return gpus;
}

}  // namespace headway
