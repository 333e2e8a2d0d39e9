#include "exec/oci/runtime_config.h"

namespace headway::oci {
namespace {

using json = nlohmann::json;

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

std::vector<std::string> StringList(const json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.contains(key) || !j[key].is_array()) return out;
  for (const json& item : j[key]) {
    if (item.is_string()) out.push_back(item.get<std::string>());
  }
  return out;
}

void PutVariable(std::map<std::string, std::string>& vars, const std::string& entry) {
  const auto eq = entry.find('=');
  if (eq == std::string::npos || eq == 0) return;
  vars[entry.substr(0, eq)] = entry.substr(eq + 1);
}

// runc's defaults: what a container may not read or change of the kernel.
const std::vector<std::string>& MaskedPaths() {
  static const std::vector<std::string> paths = {"/proc/acpi",
                                                 "/proc/asound",
                                                 "/proc/kcore",
                                                 "/proc/keys",
                                                 "/proc/latency_stats",
                                                 "/proc/timer_list",
                                                 "/proc/timer_stats",
                                                 "/proc/sched_debug",
                                                 "/proc/scsi",
                                                 "/sys/firmware",
                                                 "/sys/devices/virtual/powercap"};
  return paths;
}

const std::vector<std::string>& ReadonlyPaths() {
  static const std::vector<std::string> paths = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                                                 "/proc/sysrq-trigger"};
  return paths;
}

json Mount(const std::string& destination, const std::string& type, const std::string& source,
           std::vector<std::string> options) {
  return {{"destination", destination}, {"type", type}, {"source", source}, {"options", options}};
}

}  // namespace

ImageDefaults ImageDefaults::FromImageConfig(const json& image_config) {
  ImageDefaults out;
  if (!image_config.is_object() || !image_config.contains("config") ||
      !image_config["config"].is_object()) {
    return out;
  }
  const json& config = image_config["config"];
  out.entrypoint = StringList(config, "Entrypoint");
  out.cmd = StringList(config, "Cmd");
  out.env = StringList(config, "Env");
  if (config.contains("WorkingDir") && config["WorkingDir"].is_string()) {
    out.working_dir = config["WorkingDir"].get<std::string>();
  }
  return out;
}

std::vector<std::string> ContainerArgv(const ImageDefaults& image,
                                       const ContainerProcess& process) {
  std::vector<std::string> argv;
  if (!process.command.empty()) {
    argv = process.command;
    argv.insert(argv.end(), process.args.begin(), process.args.end());
    return argv;
  }
  argv = image.entrypoint;
  const std::vector<std::string>& tail = process.args.empty() ? image.cmd : process.args;
  argv.insert(argv.end(), tail.begin(), tail.end());
  return argv;
}

std::vector<std::string> ContainerEnv(const ImageDefaults& image, const ContainerProcess& process,
                                      const ContainerPlan& plan) {
  std::map<std::string, std::string> vars;
  for (const std::string& entry : image.env) PutVariable(vars, entry);
  for (const std::string& entry : plan.extra_env) PutVariable(vars, entry);
  for (const auto& [name, value] : process.env) vars[name] = value;
  vars.emplace("PATH", kDefaultPath);
  std::vector<std::string> out;
  out.reserve(vars.size());
  for (const auto& [name, value] : vars) out.push_back(name + "=" + value);
  return out;
}

json RuntimeConfig(const ImageDefaults& image, const ContainerProcess& process,
                   const ContainerPlan& plan) {
  json user = {{"uid", process.uid}, {"gid", process.gid}};
  if (!process.groups.empty()) user["additionalGids"] = process.groups;
  std::string cwd = process.cwd;
  if (cwd.empty()) cwd = image.working_dir.empty() ? "/" : image.working_dir;
  const json no_capabilities = json::array();
  json capabilities = {{"bounding", no_capabilities},
                       {"effective", no_capabilities},
                       {"inheritable", no_capabilities},
                       {"permitted", no_capabilities},
                       {"ambient", no_capabilities}};

  json mounts = json::array({
      Mount("/proc", "proc", "proc", {"nosuid", "noexec", "nodev"}),
      Mount("/dev", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k"}),
      Mount("/dev/pts", "devpts", "devpts",
            {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}),
      Mount("/dev/shm", "tmpfs", "shm", {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}),
      Mount("/dev/mqueue", "mqueue", "mqueue", {"nosuid", "noexec", "nodev"}),
      // The host's /sys, read-only, bound (a new sysfs needs a network
      // namespace of the container's own; it shares the attempt's).
      Mount("/sys", "bind", "/sys", {"rbind", "nosuid", "noexec", "nodev", "ro"}),
  });
  for (const BindMount& bind : plan.binds) {
    std::vector<std::string> options = {"rbind", "nosuid", "nodev"};
    options.push_back(bind.read_only ? "ro" : "rw");
    mounts.push_back(Mount(bind.destination, "bind", bind.source, options));
  }
  json devices = json::array();
  for (const DeviceNode& device : plan.devices) {
    devices.push_back({{"path", device.path},
                       {"type", std::string(1, device.type)},
                       {"major", device.major},
                       {"minor", device.minor},
                       {"fileMode", 0666},
                       {"uid", 0},
                       {"gid", 0}});
  }
  return {
      {"ociVersion", "1.0.2"},
      {"process",
       {{"terminal", false},
        {"user", user},
        {"args", ContainerArgv(image, process)},
        {"env", ContainerEnv(image, process, plan)},
        {"cwd", cwd},
        {"capabilities", capabilities},
        {"noNewPrivileges", true}}},
      {"root", {{"path", plan.rootfs}, {"readonly", false}}},
      {"mounts", mounts},
      {"linux",
       {// Only a mount namespace: PID, network and IPC are the attempt's.
        {"namespaces", json::array({{{"type", "mount"}}})},
        {"devices", devices},
        {"maskedPaths", MaskedPaths()},
        {"readonlyPaths", ReadonlyPaths()},
        {"rootfsPropagation", "private"}}},
  };
}

}  // namespace headway::oci
