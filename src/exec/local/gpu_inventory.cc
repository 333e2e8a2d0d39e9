#include "exec/local/gpu_inventory.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <sstream>

#include "exec/command_runner.h"

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

std::map<int, double> ParseGpuUtilizationCsv(const std::string& text) {
  std::map<int, double> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    int index = -1;
    double percent = -1;
    char comma = 0;
    std::istringstream fields(line);
    if (!(fields >> index >> comma >> percent) || comma != ',' || index < 0) continue;
    if (!(percent >= 0 && percent <= 100)) continue;  // NaN included
    out[index] = percent;
  }
  return out;
}

std::map<int, double> ReadGpuUtilization(CommandRunner& runner, const std::string& nvidia_smi) {
  if (nvidia_smi.empty() || ::access(nvidia_smi.c_str(), X_OK) != 0) return {};
  CommandOutput read = runner.Run({nvidia_smi, "--query-gpu=index,utilization.gpu",
                                   "--format=csv,noheader,nounits"},
                                  std::chrono::seconds(10));
  if (read.exit_code != 0) return {};
  return ParseGpuUtilizationCsv(read.out);
}

std::vector<GpuDevice> LogicalGpus(int count) {
  std::vector<GpuDevice> gpus;
  for (int i = 0; i < count; ++i) gpus.push_back({i, "", "logical"});
  return gpus;
}

}  // namespace headway
