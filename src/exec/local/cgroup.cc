#include "exec/local/cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "exec/local/kernel_files.h"

namespace headway::internal {
namespace {

std::vector<pid_t> Procs(const std::string& dir) {
  std::vector<pid_t> pids;
  std::istringstream in(ReadKernelFile(dir + "/cgroup.procs"));
  pid_t pid = 0;
  while (in >> pid) pids.push_back(pid);
  return pids;
}

// Creates `dir` (its parent must exist); an existing one is fine if we may
// create cgroups in it.
bool MakeDir(const std::string& dir, std::string& problem) {
  if ((::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) && ::access(dir.c_str(), W_OK) == 0) {
    return true;
  }
  problem = "cannot create cgroups in " + dir + ": " + std::strerror(errno);
  return false;
}

struct Mount {
  std::string root;   // the hierarchy path the mount shows (field 4 of mountinfo)
  std::string point;  // where it is mounted
};

// The directory of our own cgroup in a hierarchy mounted at `mount`, given
// our path in it from /proc/self/cgroup.
std::string OwnDir(const Mount& mount, std::string own) {
  if (mount.root != "/" && own.rfind(mount.root, 0) == 0) own = own.substr(mount.root.size());
  if (own == "/") own.clear();
  return mount.point + own;
}

bool HasWord(const std::string& text, const std::string& word) {
  std::istringstream in(text);
  std::string w;
  while (in >> w) {
    if (w == word) return true;
  }
  return false;
}

}  // namespace

nlohmann::json AttemptCgroup::ToJson() const {
  return {{"unified", unified}, {"freezer", freezer}, {"limiters", limiters}};
}

AttemptCgroup AttemptCgroup::FromJson(const nlohmann::json& j) {
  AttemptCgroup cg;
  if (!j.is_object()) return cg;
  if (j.contains("unified") && j["unified"].is_string()) cg.unified = j["unified"];
  if (j.contains("freezer") && j["freezer"].is_string()) cg.freezer = j["freezer"];
  if (j.contains("limiters") && j["limiters"].is_array()) {
    for (const auto& l : j["limiters"]) {
      if (l.is_string()) cg.limiters.push_back(l);
    }
  }
  return cg;
}

bool AttemptCgroup::JoinSelf() const {
  bool ok = true;
  for (const std::string* dir : {&unified, &freezer}) {
    if (!dir->empty()) ok = WriteKernelFile(*dir + "/cgroup.procs", "0") && ok;
  }
  for (const std::string& dir : limiters) ok = WriteKernelFile(dir + "/cgroup.procs", "0") && ok;
  return ok;
}

bool AttemptCgroup::Populated() const {
  if (!unified.empty()) {
    std::string events = ReadKernelFile(unified + "/cgroup.events");
    // A directory that is gone holds nothing.
    if (events.empty()) return false;
    return events.find("populated 1") != std::string::npos;
  }
  if (!freezer.empty()) return !Procs(freezer).empty();
  return false;
}

Status AttemptCgroup::Kill() const {
  if (!unified.empty() && ::access((unified + "/cgroup.kill").c_str(), W_OK) == 0) {
    if (!WriteKernelFile(unified + "/cgroup.kill", "1") && errno != ENOENT) {
      return Unavailable("cannot write " + unified + "/cgroup.kill: " + std::strerror(errno));
    }
    return Status::Ok();
  }
  if (!freezer.empty()) {
    // Frozen processes cannot fork while they are killed one by one.
    WriteKernelFile(freezer + "/freezer.state", "FROZEN");
    for (int i = 0; i < 100 && ReadKernelFile(freezer + "/freezer.state").rfind("FROZEN", 0) != 0;
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (pid_t pid : Procs(freezer)) ::kill(pid, SIGKILL);
    WriteKernelFile(freezer + "/freezer.state", "THAWED");
    return Status::Ok();
  }
  if (!unified.empty()) SignalAll(SIGKILL);  // v2 before cgroup.kill (Linux < 5.14)
  return Status::Ok();
}

void AttemptCgroup::SignalAll(int signal) const {
  const std::string& dir = !unified.empty() ? unified : freezer;
  if (dir.empty()) return;
  for (pid_t pid : Procs(dir)) ::kill(pid, signal);
}

std::vector<pid_t> AttemptCgroup::Processes() const {
  const std::string& dir = !unified.empty() ? unified : freezer;
  return dir.empty() ? std::vector<pid_t>{} : Procs(dir);
}

bool AttemptCgroup::OomKilled() const {
  auto count = [](const std::string& text) {
    auto at = text.find("oom_kill ");
    return at != std::string::npos && std::atoll(text.c_str() + at + 9) > 0;
  };
  if (!unified.empty() && count(ReadKernelFile(unified + "/memory.events"))) return true;
  for (const std::string& dir : limiters) {
    if (count(ReadKernelFile(dir + "/memory.oom_control"))) return true;
  }
  return false;
}

void AttemptCgroup::Remove() const {
  for (const std::string* dir : {&unified, &freezer}) {
    if (!dir->empty()) ::rmdir(dir->c_str());
  }
  for (const std::string& dir : limiters) ::rmdir(dir.c_str());
}

CgroupManager CgroupManager::Detect() {
  CgroupManager m;
  std::optional<Mount> unified;
  std::map<std::string, Mount> v1;  // controller -> mount
  std::istringstream mountinfo(ReadKernelFile("/proc/self/mountinfo"));
  for (std::string line; std::getline(mountinfo, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point, skip;
    fields >> id >> parent >> dev >> root >> point;
    while (fields >> skip && skip != "-") {
    }
    std::string type, source, options;
    fields >> type >> source >> options;
    if (type == "cgroup2") {
      unified = Mount{root, point};
    } else if (type == "cgroup") {
      std::istringstream opts(options);
      for (std::string opt; std::getline(opts, opt, ',');) v1.emplace(opt, Mount{root, point});
    }
  }
  std::string own_unified;
  std::map<std::string, std::string> own_v1;
  std::istringstream self(ReadKernelFile("/proc/self/cgroup"));
  for (std::string line; std::getline(self, line);) {
    auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    if (line.substr(0, first) == "0" && controllers.empty()) {
      own_unified = path;
      continue;
    }
    std::istringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');) own_v1[c] = path;
  }

  std::string problem;
  if (unified && !own_unified.empty()) {
    std::string own = OwnDir(*unified, own_unified);
    std::string base = own + "/headway";
    if (MakeDir(base, problem)) {
      m.unified_base_ = base;
      std::string available = ReadKernelFile(own + "/cgroup.controllers");
      bool moved_to_leaf = false;
      for (const char* controller : {"memory", "cpu"}) {
        if (!HasWord(available, controller)) continue;
        // Our own cgroup must delegate the controller to "headway" first. In
        // v2 a cgroup other than the root that holds processes cannot (no
        // internal processes): under systemd with Delegate=yes the server is
        // in its service's cgroup, so it moves itself into a leaf of it,
        // "server", as systemd's delegation rules ask, and tries again. If
        // that fails too, the limits fall back to v1.
        const std::string enable = std::string("+") + controller;
        if (!WriteKernelFile(own + "/cgroup.subtree_control", enable) && !moved_to_leaf &&
            own_unified != "/") {
          std::string leaf = own + "/server";
          std::string ignored;
          moved_to_leaf = MakeDir(leaf, ignored) && WriteKernelFile(leaf + "/cgroup.procs", "0");
          if (moved_to_leaf) WriteKernelFile(own + "/cgroup.subtree_control", enable);
        }
        WriteKernelFile(base + "/cgroup.subtree_control", enable);
      }
      std::string enabled = ReadKernelFile(base + "/cgroup.subtree_control");
      m.unified_memory_ = HasWord(enabled, "memory");
      m.unified_cpu_ = HasWord(enabled, "cpu");
    }
  }
  auto v1_base = [&](const std::string& controller) -> std::string {
    auto mount = v1.find(controller);
    auto own = own_v1.find(controller);
    if (mount == v1.end() || own == own_v1.end()) return "";
    std::string base = OwnDir(mount->second, own->second) + "/headway";
    return MakeDir(base, problem) ? base : "";
  };
  if (m.unified_base_.empty()) m.freezer_base_ = v1_base("freezer");
  if (!m.unified_memory_) m.memory_v1_base_ = v1_base("memory");
  if (!m.unified_cpu_) m.cpu_v1_base_ = v1_base("cpu");
  if (!m.usable()) {
    m.problem_ = !problem.empty() ? problem
                 : unified        ? "this process's cgroup v2 path is unknown"
                                  : "neither cgroup v2 nor the v1 freezer is mounted";
  }
  return m;
}

std::string CgroupManager::Describe() const {
  if (!usable()) {
    return "cgroups unavailable (" + problem_ +
           "): each attempt is still contained and ended by its PID namespace, but memory and "
           "CPU limits are not enforced";
  }
  std::string text = unified_base_.empty() ? "cgroup v1 freezer at " + freezer_base_
                                           : "cgroup v2 at " + unified_base_;
  std::string memory = unified_memory_ ? "v2" : memory_v1_base_.empty() ? "" : "v1";
  std::string cpu = unified_cpu_ ? "v2" : cpu_v1_base_.empty() ? "" : "v1";
  text += "; memory limits: " + (memory.empty() ? std::string("unavailable") : memory);
  text += "; cpu limits: " + (cpu.empty() ? std::string("unavailable") : cpu);
  return text;
}

Result<AttemptCgroup> CgroupManager::Create(const std::string& name, const CgroupLimits& limits,
                                            std::vector<std::string>& warnings) const {
  AttemptCgroup cg;
  if (!usable()) {
    if (limits.memory_bytes > 0 || limits.cpus > 0) {
      warnings.push_back("memory and CPU limits are not enforced: " + problem_);
    }
    return cg;
  }
  std::string problem;
  auto make = [&](const std::string& base) -> Result<std::string> {
    std::string dir = base + "/" + name;
    if (!MakeDir(dir, problem)) return Unavailable(problem);
    return dir;
  };
  if (!unified_base_.empty()) {
    auto dir = make(unified_base_);
    if (!dir.ok()) return dir.status();
    cg.unified = *dir;
  } else {
    auto dir = make(freezer_base_);
    if (!dir.ok()) return dir.status();
    cg.freezer = *dir;
  }
  const std::string quota =
      std::to_string(static_cast<std::int64_t>(std::ceil(limits.cpus * 100000)));
  if (limits.memory_bytes > 0) {
    std::string bytes = std::to_string(limits.memory_bytes);
    if (unified_memory_) {
      if (!WriteKernelFile(cg.unified + "/memory.max", bytes)) {
        return Unavailable("cannot set memory.max in " + cg.unified + ": " + std::strerror(errno));
      }
    } else if (!memory_v1_base_.empty()) {
      auto dir = make(memory_v1_base_);
      if (!dir.ok()) return dir.status();
      cg.limiters.push_back(*dir);
      if (!WriteKernelFile(*dir + "/memory.limit_in_bytes", bytes)) {
        return Unavailable("cannot set memory.limit_in_bytes in " + *dir + ": " +
                           std::strerror(errno));
      }
    } else {
      warnings.push_back("the memory limit is not enforced: no memory controller is available");
    }
  }
  if (limits.cpus > 0) {
    if (unified_cpu_) {
      if (!WriteKernelFile(cg.unified + "/cpu.max", quota + " 100000")) {
        return Unavailable("cannot set cpu.max in " + cg.unified + ": " + std::strerror(errno));
      }
    } else if (!cpu_v1_base_.empty()) {
      auto dir = make(cpu_v1_base_);
      if (!dir.ok()) return dir.status();
      cg.limiters.push_back(*dir);
      if (!WriteKernelFile(*dir + "/cpu.cfs_period_us", "100000") ||
          !WriteKernelFile(*dir + "/cpu.cfs_quota_us", quota)) {
        return Unavailable("cannot set the CPU quota in " + *dir + ": " + std::strerror(errno));
      }
    } else {
      warnings.push_back("the CPU limit is not enforced: no cpu controller is available");
    }
  }
  return cg;
}

}  // namespace headway::internal
