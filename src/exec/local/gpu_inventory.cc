#include "exec/local/gpu_inventory.h"

#include <cstdio>
#include <sstream>

namespace headway {
namespace {

std::string Trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t\r\n") + 1);
  return s;
}

}  // namespace

std::vector<GpuDevice> ParseNvidiaSmiCsv(const std::string& text) {
  std::vector<GpuDevice> gpus;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    std::string index, uuid, name;
    if (!std::getline(in, index, ',') || !std::getline(in, uuid, ',') || !std::getline(in, name)) {
      continue;
    }
    index = Trim(index);
    if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos ||
        index.size() > 4) {
      continue;
    }
    gpus.push_back({std::stoi(index), Trim(uuid), Trim(name)});
  }
  return gpus;
}

std::vector<GpuDevice> DetectNvidiaGpus() {
  FILE* pipe = popen("nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader 2>/dev/null",
                     "r");
  if (pipe == nullptr) return {};
  std::string text;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) text += buf;
  pclose(pipe);
  return ParseNvidiaSmiCsv(text);
}

std::vector<GpuDevice> LogicalGpus(int count) {
  std::vector<GpuDevice> gpus;
  for (int i = 0; i < count; ++i) gpus.push_back({i, "", "logical"});
  return gpus;
}

}  // namespace headway
