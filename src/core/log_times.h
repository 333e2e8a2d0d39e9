// When each part of a job's log was written: the "times" file kept next to
// every rank log (rank-N.log.times beside rank-N.log, and moved with it when
// the log rotates). Its lines are "OFFSET UNIX_MS": the log's bytes from
// OFFSET on arrived at UNIX_MS, until the next line's OFFSET. A first line
// "# ino N" names the log file it describes, so a reader that raced a
// rotation can tell. The writer adds a line only when the time moved on,
// so a chatty rank adds at most one per millisecond.
//
// Pure format and lookup; the supervisor and the Slurm task write the
// files, the API reads them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace headway {

struct LogTimeMark {
  std::uint64_t offset = 0;  // first byte of the log this time applies to
  std::int64_t unix_ms = 0;
};

// The name of the times file of the log at `log_path`.
std::string LogTimesPath(const std::string& log_path);
std::string LogTimesHeader(std::uint64_t inode);
std::string LogTimesLine(const LogTimeMark& mark);

// One parsed line of a times file.
struct LogTimesEntry {
  std::optional<std::uint64_t> inode;  // from a header line
  std::optional<LogTimeMark> mark;     // from a data line
};
// nullopt: not a line of this format (ignored by readers; a torn last line
// is read again once complete).
std::optional<LogTimesEntry> ParseLogTimesLine(std::string_view line);

}  // namespace headway
