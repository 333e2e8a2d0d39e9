#include "exec/local/container.h"

#include <elf.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "exec/local/local_executor.h"

namespace headway::internal {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr long kContainerTmpfsMagic = 0x01021994;
constexpr long kContainerCgroup2Magic = 0x63677270;

Status ContainerErrno(const std::string& what) {
  return Unavailable(what + ": " + std::strerror(errno));
}

}  // namespace

json ContainerLaunch::ToJson() const { return {{"lower", lower}, {"dir", dir}, {"crun", crun}}; }

ContainerLaunch ContainerLaunch::FromJson(const json& j) {
  ContainerLaunch out;
  out.lower = j.value("lower", "");
  out.dir = j.value("dir", "");
  out.crun = j.value("crun", "");
  return out;
}

std::string StaticBusybox() {
  for (const char* path : {"/bin/busybox", "/usr/bin/busybox"}) {
    std::ifstream in(path, std::ios::binary);
    Elf64_Ehdr header{};
    if (!in.read(reinterpret_cast<char*>(&header), sizeof header)) continue;
    if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
        header.e_ident[EI_CLASS] != ELFCLASS64) {
      continue;
    }
    bool dynamic = false;
    for (int i = 0; i < header.e_phnum; ++i) {
      Elf64_Phdr program{};
      in.seekg(static_cast<std::streamoff>(header.e_phoff +
                                           static_cast<std::uint64_t>(i) * header.e_phentsize));
      if (!in.read(reinterpret_cast<char*>(&program), sizeof program)) break;
      if (program.p_type == PT_INTERP) dynamic = true;
    }
    if (!dynamic) return path;
  }
  return "";
}

Result<std::string> FindContainerRuntime() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr && *path != '\0' ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/crun";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return Unavailable(
      "jobs in images need crun, skopeo and umoci (apt-get install crun skopeo umoci)");
}

Status LayOutContainer(const ContainerLaunch& launch, uid_t uid, gid_t gid,
                       const std::vector<json>& configs) {
  std::error_code ec;
  fs::remove_all(launch.dir, ec);
  for (const char* sub : {"upper", "work", "root", "state"}) {
    fs::create_directories(fs::path(launch.dir) / sub, ec);
    if (ec) return Unavailable("cannot create " + launch.dir + "/" + sub + ": " + ec.message());
  }
  // The merged root takes the upper layer's owner and mode: the job's own root.
  const std::string upper = launch.dir + "/upper";
  if (::chown(upper.c_str(), uid, gid) != 0 || ::chmod(upper.c_str(), 0755) != 0) {
    return ContainerErrno("cannot hand " + upper + " to the job");
  }
  for (std::size_t rank = 0; rank < configs.size(); ++rank) {
    const fs::path bundle = launch.Bundle(static_cast<int>(rank));
    fs::create_directories(bundle, ec);
    std::ofstream out(bundle / "config.json", std::ios::trunc);
    out << configs[rank].dump();
    if (!out) return Unavailable("cannot write " + (bundle / "config.json").string());
    ::chmod((bundle / "config.json").c_str(), 0600);
  }
  return Status::Ok();
}

Status MountContainerRoot(const ContainerLaunch& launch) {
  // The image's lock (held shared since the launch, on kImageLockFd) stays with
  // the supervisor, not with the ranks.
  ::fcntl(kImageLockFd, F_SETFD, FD_CLOEXEC);
  const std::string options = "lowerdir=" + launch.lower + ",upperdir=" + launch.dir +
                              "/upper,workdir=" + launch.dir + "/work";
  const std::string root = launch.Root();
  if (::mount("overlay", root.c_str(), "overlay", MS_NODEV, options.c_str()) != 0) {
    return ContainerErrno("cannot mount the image's root at " + root);
  }
  return Status::Ok();
}

bool ShowRuntimeUnifiedCgroups() {
  struct statfs cgroup_fs {};
  struct statfs unified_fs {};
  if (::statfs("/sys/fs/cgroup", &cgroup_fs) != 0 || cgroup_fs.f_type != kContainerTmpfsMagic ||
      ::statfs("/sys/fs/cgroup/unified", &unified_fs) != 0 ||
      unified_fs.f_type != kContainerCgroup2Magic) {
    return true;  // not hybrid: nothing to hide
  }
  if (::unshare(CLONE_NEWNS) != 0) return false;
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  return ::mount("/sys/fs/cgroup/unified", "/sys/fs/cgroup", nullptr, MS_BIND, nullptr) == 0;
}

std::vector<std::string> ContainerRankArgv(const ContainerLaunch& launch, int rank) {
  return {launch.crun,
          "--cgroup-manager=disabled",
          "--root",
          launch.dir + "/state",
          "run",
          "--bundle",
          launch.Bundle(rank),
          "rank-" + std::to_string(rank)};
}

}  // namespace headway::internal
