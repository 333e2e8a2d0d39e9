// A local attempt that runs in an OCI image (JobSpec::image): the executor
// lays out RUN_DIR/image (an overlay's upper layer and work directory owned
// by the job's account, a crun bundle per rank), the supervisor mounts the
// image's root there inside its sandbox and starts each rank with crun.
//
// crun runs in the attempt's sandbox with --cgroup-manager=disabled, so the
// container stays in the attempt's cgroup, PID and network namespaces (see
// exec/oci/runtime_config.h). crun does not run on a host whose cgroup v1
// and v2 hierarchies are mounted side by side ("hybrid"); the supervisor's
// mount namespace shows it only the v2 one, which is the one the attempt's
// cgroup lives in.
//
// Internal to exec/local.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace headway::internal {

struct ContainerLaunch {
  std::string lower;  // the image's root filesystem (exec/oci/image_store.h)
  std::string dir;    // RUN_DIR/image
  std::string crun;   // the runtime's path

  std::string Root() const { return dir + "/root"; }
  std::string Bundle(int rank) const { return dir + "/rank-" + std::to_string(rank); }

  nlohmann::json ToJson() const;
  static ContainerLaunch FromJson(const nlohmann::json& j);
};

// A statically linked busybox of the host's (Debian's busybox-static), bound
// into every container at kContainerBusybox; empty when there is none.
std::string StaticBusybox();

// The runtime on this machine's PATH ("/usr/bin/crun"), or an error naming
// the package to install.
Result<std::string> FindContainerRuntime();

// Executor side: makes `launch.dir` afresh with an upper layer owned by
// uid:gid and writes each rank's config.json (`configs`, by rank).
Status LayOutContainer(const ContainerLaunch& launch, uid_t uid, gid_t gid,
                       const std::vector<nlohmann::json>& configs);

// Supervisor side, inside its sandbox: mounts the image's root (an overlay
// of `lower` under the attempt's layer) at Root(); keeps the image's lock
// (inherited on kImageLockFd) from the ranks.
Status MountContainerRoot(const ContainerLaunch& launch);

// In a rank's child, after it joined the attempt's cgroup and before it
// runs crun: on a hybrid host, a mount namespace of its own in which
// /sys/fs/cgroup is the v2 hierarchy. Returns false (errno set) on failure.
bool ShowRuntimeUnifiedCgroups();

// The argv that runs rank `rank`'s container in the foreground.
std::vector<std::string> ContainerRankArgv(const ContainerLaunch& launch, int rank);

}  // namespace headway::internal
