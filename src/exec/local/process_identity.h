// Identifies a process across pid reuse: pid plus kernel start time.
// Internal to exec/local.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace headway::internal {

// Start time in clock ticks since boot (field 22 of /proc/PID/stat);
// nullopt when the process does not exist or is a zombie.
std::optional<std::uint64_t> ProcessStartTime(pid_t pid);

// The socket inodes listening on TCP `port` in a /proc/net/tcp or tcp6
// table (any local address).
std::vector<std::uint64_t> ListeningSocketInodes(const std::string& table, int port);
// Whether one of `pids` holds a socket listening on TCP `port` in this
// process's network namespace: so that a port a job names (its notebook's,
// its progress endpoint's) is one the job serves, not another service's.
bool AnyListensOn(const std::vector<pid_t>& pids, int port);

}  // namespace headway::internal
