// The OCI runtime configuration (config.json) of one rank of a job that runs
// in an image: what crun is handed. Pure: builds JSON, reads no files.
//
// The container shares the attempt's sandbox (exec/local/sandbox.h): its
// PID and network namespaces, its cgroup (crun runs with
// --cgroup-manager=disabled inside it) and its limits. It gets a mount
// namespace of its own whose root is the image (an overlay whose upper layer
// is the attempt's), the job's own directories and files bound in at their
// host paths, and the default /proc, /dev and /sys of a container. It runs
// as the job's account with no capabilities and no_new_privs, as Kubernetes'
// runAsUser does; the image's USER is not used.
#pragma once

#include <sys/types.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace headway::oci {

// What an image's configuration says about how to run it (the "config" of
// an OCI image configuration).
struct ImageDefaults {
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::vector<std::string> env;  // "NAME=value"
  std::string working_dir;

  static ImageDefaults FromImageConfig(const nlohmann::json& image_config);
};

struct ContainerProcess {
  // The job's command and args (JobSpec): a command replaces the image's
  // entrypoint and cmd; args alone replace its cmd, as Kubernetes does.
  std::vector<std::string> command;
  std::vector<std::string> args;
  // The job's variables; they win over the image's.
  std::map<std::string, std::string> env;
  std::string cwd;  // empty: the image's working directory, or "/"
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

struct BindMount {
  std::string source;
  std::string destination;
  bool read_only = false;
};

struct DeviceNode {
  std::string path;
  char type = 'c';
  int major = 0;
  int minor = 0;
};

struct ContainerPlan {
  std::string rootfs;  // the merged overlay, as the runtime sees it
  std::vector<BindMount> binds;
  std::vector<DeviceNode> devices;
  std::vector<std::string> extra_env;  // "NAME=value", e.g. from CDI edits
};

// The argv the container starts with; empty when neither the job nor the
// image names one.
std::vector<std::string> ContainerArgv(const ImageDefaults& image, const ContainerProcess& process);

// The image's variables, then the plan's, then the process's, each later one
// replacing an earlier one of the same name, in name order; PATH defaults
// to the usual one when none gives it.
std::vector<std::string> ContainerEnv(const ImageDefaults& image, const ContainerProcess& process,
                                      const ContainerPlan& plan);

// The whole config.json. The caller checks ContainerArgv is not empty.
nlohmann::json RuntimeConfig(const ImageDefaults& image, const ContainerProcess& process,
                             const ContainerPlan& plan);

}  // namespace headway::oci
