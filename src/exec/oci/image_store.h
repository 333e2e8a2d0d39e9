// The local executor's images: pulled from their registries with skopeo
// into one OCI image layout, unpacked with umoci into a root filesystem per
// image and account, kept within a disk bound, least recently used first.
//
// Why these tools and not podman: crun runs the unpacked root inside the
// attempt's own sandbox and cgroup (runtime_config.h), so a containerised
// job keeps every guarantee a host job has, and podman's own storage,
// cgroups and network would each need undoing. skopeo reads a Docker
// config.json for credentials, as podman and Kubernetes do.
//
// Each root filesystem is owned by the account that runs it: the job runs
// as its account (not as the image's root), yet may write anywhere in its
// root, as it could in a container (its writes go to the attempt's overlay).
//
// Thread safety: Prepare serialises on an internal mutex.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/image_ref.h"
#include "core/status.h"
#include "exec/command_runner.h"
#include "exec/oci/runtime_config.h"

namespace headway::oci {

struct ImageStoreOptions {
  std::string dir;              // the cache (root's, 0700)
  std::uint64_t max_bytes = 0;  // bound on the cache; 0: none
  // Registries reached over plain HTTP or without checking certificates
  // ("127.0.0.1:5000"), as containers-registries.conf's insecure = true.
  std::vector<std::string> insecure_registries;
  // A Docker config.json with a team's registry credentials, by team; "*"
  // for every team without one.
  std::map<std::string, std::string> auth_files;
  std::chrono::milliseconds pull_timeout = std::chrono::minutes(30);
};

struct PreparedImage {
  std::string reference;  // as the spec gave it
  std::string digest;     // the manifest's
  std::string bundle;     // umoci's bundle directory; its rootfs/ is the image
  std::string rootfs;
  // BUNDLE/lock, held shared (flock) by each attempt that runs the image,
  // so eviction passes it by; opened and locked by Prepare (the caller
  // hands it to the attempt or closes it).
  std::string lock_path;
  int lock_fd = -1;
  ImageDefaults defaults;
  bool pulled = false;  // whether this call pulled it
  double pull_seconds = 0;
  std::uint64_t pull_bytes = 0;  // the layers' size as the registry sent them
  std::uint64_t evicted = 0;     // images removed to keep the cache in bounds
};

class ImageStore {
 public:
  ImageStore(ImageStoreOptions options, CommandRunner& runner);

  // The image `reference` ready to run as uid:gid, pulled as `policy` says
  // with `team`'s credentials, its lock held (PreparedImage::lock_fd). Errors say which image and
  // why: a refused login, a missing image, a Never policy without the image, a failed unpack.
  Result<PreparedImage> Prepare(const std::string& reference, ImagePullPolicy policy,
                                const std::string& team, uid_t uid, gid_t gid);

  // The cache's size on disk now.
  std::uint64_t Bytes() const;

 private:
  std::string LayoutDir() const;
  Status Pull(const ImageRef& ref, const std::string& tag, const std::string& team,
              PreparedImage& out);
  void Evict(const std::string& keep, PreparedImage& out);

  ImageStoreOptions options_;
  CommandRunner& runner_;
  std::mutex mu_;
};

// The manifest digest `tag` names in the OCI layout at `layout` (index.json),
// or empty when it names none.
std::string LayoutDigest(const std::string& layout, const std::string& tag);

}  // namespace headway::oci
