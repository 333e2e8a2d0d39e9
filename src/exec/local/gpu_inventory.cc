#include "exec/local/gpu_inventory.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
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
  FILE* pipe =
      popen("nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader 2>/dev/null", "r");
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
  CommandOutput read =
      runner.Run({nvidia_smi, "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits"},
                 std::chrono::seconds(10));
  if (read.exit_code != 0) return {};
  return ParseGpuUtilizationCsv(read.out);
}

std::vector<GpuDevice> LogicalGpus(int count) {
  std::vector<GpuDevice> gpus;
  for (int i = 0; i < count; ++i) gpus.push_back({i, "", "logical"});
  return gpus;
}

std::pair<std::string, int> ParseNvidiaGpuInformation(const std::string& text) {
  std::pair<std::string, int> found{"", -1};
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = Trim(line.substr(0, colon));
    const std::string value = Trim(line.substr(colon + 1));
    if (key == "GPU UUID") {
      found.first = value;
    } else if (key == "Device Minor" && !value.empty() && value.size() <= 6 &&
               value.find_first_not_of("0123456789") == std::string::npos) {
      found.second = std::stoi(value);
    }
  }
  return found;
}

std::map<std::string, int> ReadNvidiaDeviceMinors(const std::string& proc_dir) {
  std::map<std::string, int> minors;
  std::error_code ec;
  for (const auto& gpu : std::filesystem::directory_iterator(proc_dir, ec)) {
    std::ifstream in(gpu.path() / "information");
    std::stringstream text;
    text << in.rdbuf();
    auto [uuid, minor] = ParseNvidiaGpuInformation(text.str());
    if (!uuid.empty() && minor >= 0) minors[uuid] = minor;
  }
  return minors;
}

std::map<int, int> DeviceMinorsByIndex(const std::vector<GpuDevice>& gpus,
                                       const std::map<std::string, int>& minor_by_uuid) {
  std::map<int, int> minors;
  for (const GpuDevice& gpu : gpus) {
    auto it = minor_by_uuid.find(gpu.uuid);
    minors[gpu.index] = it != minor_by_uuid.end() ? it->second : gpu.index;
  }
  return minors;
}

}  // namespace headway
