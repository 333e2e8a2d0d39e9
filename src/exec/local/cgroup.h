// Control groups for job attempts. Every process an attempt starts stays in
// the attempt's cgroup, daemons that left its session with setsid or a double
// fork included, so the attempt can be limited, counted and killed as one,
// and its GPUs are handed on only once nothing of it is left.
//
// cgroup v2 is used where it is mounted (cgroup.kill, cgroup.events); the v1
// freezer is the fallback for killing (freeze, SIGKILL each, thaw, as runc
// does). Memory and CPU limits go to whichever hierarchy has the controller,
// v2 first. Attempts live under a "headway" directory below the server's own
// cgroup in each hierarchy.
//
// Internal to exec/local. Thread safety: the manager is immutable after
// Detect(); AttemptCgroup methods only touch the kernel's files.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace headway::internal {

struct CgroupLimits {
  std::int64_t memory_bytes = 0;  // 0: none
  double cpus = 0;                // 0: none
};

// The directories of one attempt's cgroup, one per hierarchy it joins.
struct AttemptCgroup {
  std::string unified;                // the v2 directory; empty when v2 is not used
  std::string freezer;                // the v1 freezer directory; used to kill without v2
  std::vector<std::string> limiters;  // v1 memory/cpu directories holding limits

  bool empty() const { return unified.empty() && freezer.empty() && limiters.empty(); }
  nlohmann::json ToJson() const;
  static AttemptCgroup FromJson(const nlohmann::json& j);

  // Moves the calling process into every directory. Async-signal-safe: called
  // in a forked child before exec (and before it gives up root).
  bool JoinSelf() const;
  // Whether any process is still in it.
  bool Populated() const;
  // SIGKILL to every process in it, escaped daemons included.
  Status Kill() const;
  // Sends `signal` to every process in it (SIGTERM, SIGUSR1 reach daemons too).
  void SignalAll(int signal) const;
  // The processes in it now.
  std::vector<pid_t> Processes() const;
  // Whether the kernel OOM-killed a process of it.
  bool OomKilled() const;
  // Removes the directories; only works once it is empty.
  void Remove() const;
};

class CgroupManager {
 public:
  // Finds the hierarchies from /proc/self/mountinfo and /proc/self/cgroup
  // and creates the "headway" directory under the server's cgroup in each
  // it may write to, enabling the v2 memory and cpu controllers there.
  static CgroupManager Detect();

  // Whether attempts can be put in cgroups at all (a hierarchy to kill with).
  bool usable() const { return !unified_base_.empty() || !freezer_base_.empty(); }
  // For the start-up log: what is used, or why nothing is.
  std::string Describe() const;

  // Creates the attempt's directories (named `name`) with the limits.
  // `warnings` gets a line for each limit no controller can enforce.
  Result<AttemptCgroup> Create(const std::string& name, const CgroupLimits& limits,
                               std::vector<std::string>& warnings) const;

 private:
  std::string unified_base_;  // e.g. /sys/fs/cgroup/headway
  bool unified_memory_ = false, unified_cpu_ = false;
  std::string freezer_base_;
  std::string memory_v1_base_;
  std::string cpu_v1_base_;
  std::string problem_;  // why cgroups are not usable
};

}  // namespace headway::internal
