// What the files of JobController (job_controller*.cc) share beyond the
// class: internal to server/.
#pragma once

#include <cstdint>
#include <string>

namespace headway::internal {

// Five characters for a generateName, as Kubernetes makes them (no vowels).
std::string RandomJobSuffix();
// The monotonic clock, in nanoseconds (exec sessions' idle times).
std::int64_t SteadyNanos();
// Fault injection for the crash-recovery tests: with HEADWAY_TEST_CRASH_AT
// naming `point`, the server dies there as if killed (-9).
void CrashPointForTests(const std::string& point);

}  // namespace headway::internal
