// Reading one rank's log while its writer may rotate it, as `tail -F` does.
// The local executor's supervisor bounds each rank's log by renaming PATH to
// PATH.1 (replacing an older PATH.1, whose output is then gone) and starting
// a new PATH. A cursor holds the file it reads open, so it drains a renamed
// file before it moves on to the new one (and to a PATH.1 it has not read
// yet, when the log rotated twice between two reads).
//
// Thread safety: none; one reader owns a cursor. Movable, not copyable.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace headway {

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
  std::size_t Read(std::string& out, std::size_t max);

  // How many times this cursor moved on to a newer file.
  int rotations() const { return rotations_; }
  const std::string& path() const { return path_; }

 private:
  void Close();
  bool OpenCurrent();

  std::string path_;
  int fd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  int rotations_ = 0;
};

}  // namespace headway
