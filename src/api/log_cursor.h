// Reading one rank's log while its writer may rotate it, as `tail -F` does.
// The local executor's supervisor bounds each rank's log by renaming PATH to
// PATH.1 (replacing an older PATH.1, whose output is then gone) and starting
// a new PATH. A cursor holds the file it reads open, so it drains a renamed
// file before it moves on to the new one (and to a PATH.1 it has not read
// yet, when the log rotated twice between two reads).
//
// On request it also says when each part it read was written, from the
// times file kept next to the log (core/log_times.h).
//
// Thread safety: none; one reader owns a cursor. Movable, not copyable.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "core/log_times.h"

namespace headway {

// The bytes of a read from `pos` (an index into the string read into) on
// were written at `unix_ms`, until the next mark.
struct LogTimeAt {
  std::size_t pos = 0;
  std::int64_t unix_ms = 0;
};

class LogCursor {
 public:
  // Reads PATH from its start (or, with `from_rotated`, PATH.1 first when
  // there is one). A file that does not exist yet is waited for.
  explicit LogCursor(std::string path, bool from_rotated = false);
  // Positioned at the start of the newest output of PATH.1 followed by PATH
  // that holds at most `lines` lines and at most `bytes` bytes, starting on
  // a line boundary (nullopt: no bound of that kind).
  static LogCursor Tail(std::string path, std::optional<std::uint64_t> lines,
                        std::optional<std::uint64_t> bytes);
  LogCursor(LogCursor&& other) noexcept;
  LogCursor& operator=(LogCursor&& other) noexcept;
  LogCursor(const LogCursor&) = delete;
  LogCursor& operator=(const LogCursor&) = delete;
  ~LogCursor();

  // Appends up to `max` bytes written since the last read, following the
  // log across rotations. Returns how many bytes it appended (0: nothing new).
  // With `times`, appends there when the bytes appended were written (a
  // mark at their first byte, then one wherever the time moved on); a log
  // without a times file gives no marks.
  std::size_t Read(std::string& out, std::size_t max, std::vector<LogTimeAt>* times = nullptr);

  // How many times this cursor moved on to a newer file.
  int rotations() const { return rotations_; }
  const std::string& path() const { return path_; }

 private:
  // The times file of the open log, read as far as the log is.
  struct Times {
    int fd = -1;
    bool opened = false;                   // tried to open it for the current log
    std::string pending;                   // an incomplete last line
    std::optional<LogTimeMark> in_effect;  // the last mark at or before the read position
    std::deque<LogTimeMark> ahead;         // marks beyond it, read already
  };
  void Close();
  bool OpenCurrent();
  // Takes `fd` (opened as `name`) as the file to read from `offset` on.
  void Adopt(int fd, const struct stat& st, std::string name, std::uint64_t offset);
  void OpenTimes();
  void LoadTimesUntil(std::uint64_t end);
  void MarkTimes(std::uint64_t from, std::uint64_t to, std::size_t out_pos,
                 std::vector<LogTimeAt>& marks);

  std::string path_;
  int fd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  std::string opened_as_;     // the name fd_ was opened by (PATH or PATH.1)
  std::uint64_t offset_ = 0;  // read position in fd_
  Times times_;
  int rotations_ = 0;
};

}  // namespace headway
