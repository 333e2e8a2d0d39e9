// The sandbox a local attempt's processes run in, as Slurm and bubblewrap
// build theirs:
//  - a mount namespace in which the server's data directory (its database,
//    tokens, other jobs' run directories, logs and checkpoints) is an empty
//    tmpfs, with only the attempt's own directories bound back in;
//  - a PID namespace, so a job sees only its own processes (not the server's
//    or another job's environment in /proc) and every process of it ends
//    when the namespace's first process, a small reaper, is killed;
//  - for a server run by an ordinary user, a user namespace that maps only
//    that user, which is what lets it build the other two; mounts made there
//    are locked, so the job cannot undo them;
//  - for a server run as root, the job's own unprivileged account: root inside
//    a mount namespace is not isolated, since root can unmount.
//
// Internal to exec/local; the supervisor (shim.cc) calls these in order:
// EnterSandbox, StartNamespaceReaper, then BecomeAccount in each rank's child.
#pragma once

#include <sys/types.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/local/job_network.h"

namespace headway::internal {

struct UnixAccount {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups
  std::string home;
  std::string shell;

  nlohmann::json ToJson() const;
  static UnixAccount FromJson(const nlohmann::json& j);
};

// The passwd and group entries of `name`; NotFound if there is none.
Result<UnixAccount> LookUpAccount(const std::string& name);
// The account this process runs as.
UnixAccount CurrentAccount();

struct SandboxPlan {
  // Replaced by an empty tmpfs inside the sandbox.
  std::vector<std::string> hidden;
  // Bound back at the same path, read-write (directories) or read-only
  // (files), after the hidden ones are covered.
  std::vector<std::string> exposed;
  std::vector<std::string> exposed_read_only;
  // A directory (first) bound over another path (second), before the
  // exposed ones: a job's own /tmp.
  std::vector<std::pair<std::string, std::string>> mapped;
  // Fresh, empty tmpfs mounts (the job's own /dev/shm).
  std::vector<std::string> fresh;
  // Non-empty: the job sees the host's /tmp through an overlay whose upper
  // layer is made in this (attempt's own, hidden) directory, so it reads what
  // the host keeps there but what it writes is its own: no other job sees or
  // changes it. Laid before the hidden paths are covered, as the overlay
  // shows the lower /tmp's folders without the mounts on them. Where the
  // directory cannot hold an upper layer (it lies in /tmp itself, or on an
  // overlay), a tmpfs mounted on it does.
  std::string tmp_layer;
  // Device nodes covered by /dev/null (as runc's masked paths are): the
  // GPUs of the machine that are not the job's.
  std::vector<std::string> masked;
  // Isolated: a network namespace of the attempt's own (job_network.h).
  NetworkPlan network;

  nlohmann::json ToJson() const;
  static SandboxPlan FromJson(const nlohmann::json& j);
};

// Moves the calling (single-threaded) process into new mount and PID
// namespaces, a user namespace when it is not root, and a network namespace
// with its loopback up when plan.network is isolated, and lays out the
// mounts of `plan`. Only the process's later children enter the PID
// namespace. Paths the caller needs afterwards must be opened before.
Status EnterSandbox(const SandboxPlan& plan);

// Forks the PID namespace's first process: it mounts a /proc of the new
// namespace, then reaps orphans until it is killed, which ends every process
// left in the namespace. It dies with its parent. `before_mount` runs in the
// child first (joining the attempt's cgroup). Returns its pid once /proc is
// mounted, or an error.
Result<pid_t> StartNamespaceReaper(const std::function<void()>& before_mount);

// In a forked child, before exec: takes on `account` (groups, gid, uid) if
// the process is root and the account is another; checks the switch held.
// Returns false (errno set) when it did not.
bool BecomeAccount(const UnixAccount& account);

// `path` (a PATH) without the folders this process may not search: once a
// root server's job has become its account, root's folders on the PATH it
// passed on would make a missing command "Permission denied" (126) instead
// of "not found" (127). Empty entries (the working directory) are kept.
std::string SearchablePath(const std::string& path);

// Whether this process can build a sandbox here; the error says why not.
// Forks a child that tries, so it changes nothing in the caller.
Status ProbeSandbox(bool network = false);

}  // namespace headway::internal
