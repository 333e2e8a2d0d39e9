// Identifies a process across pid reuse: pid plus kernel start time.
// Internal to exec/local.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace headway::internal {

// Start time in clock ticks since boot (field 22 of /proc/PID/stat);
// nullopt when the process does not exist or is a zombie.
std::optional<std::uint64_t> ProcessStartTime(pid_t pid);

}  // namespace headway::internal
