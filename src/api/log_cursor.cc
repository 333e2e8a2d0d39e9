#include "api/log_cursor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <vector>

namespace headway {
namespace {

std::string Rotated(const std::string& path) { return path + ".1"; }

}  // namespace

LogCursor::LogCursor(std::string path, bool from_rotated) : path_(std::move(path)) {
  if (!from_rotated) return;
  int fd = ::open(Rotated(path_).c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd >= 0 && ::fstat(fd, &st) == 0) {
    Adopt(fd, st, Rotated(path_), 0);
  } else if (fd >= 0) {
    ::close(fd);
  }
}

LogCursor::LogCursor(LogCursor&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      dev_(other.dev_),
      ino_(other.ino_),
      opened_as_(std::move(other.opened_as_)),
      offset_(other.offset_),
      times_(std::exchange(other.times_, Times{})),
      rotations_(other.rotations_) {}

LogCursor& LogCursor::operator=(LogCursor&& other) noexcept {
  if (this != &other) {
    Close();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    dev_ = other.dev_;
    ino_ = other.ino_;
    opened_as_ = std::move(other.opened_as_);
    offset_ = other.offset_;
    times_ = std::exchange(other.times_, Times{});
    rotations_ = other.rotations_;
  }
  return *this;
}

LogCursor::~LogCursor() { Close(); }

void LogCursor::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (times_.fd >= 0) ::close(times_.fd);
  times_ = Times{};
}

void LogCursor::Adopt(int fd, const struct stat& st, std::string name, std::uint64_t offset) {
  Close();
  fd_ = fd;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  opened_as_ = std::move(name);
  offset_ = offset;
}

bool LogCursor::OpenCurrent() {
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return false;
  }
  Adopt(fd, st, path_, 0);
  return true;
}

void LogCursor::OpenTimes() {
  times_.opened = true;
  // The writer renames the log and then its times file: a reader in
  // between finds the old times file under the new name. The header says
  // which log a times file describes; the Slurm task's has none (its
  // rotation is the same two renames, far apart from any reader's open).
  for (const std::string& name : {opened_as_, Rotated(path_)}) {
    int fd = ::open(LogTimesPath(name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[64];
    ssize_t n = ::pread(fd, buf, sizeof buf, 0);
    std::string_view first(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
    std::size_t nl = first.find('\n');
    auto entry =
        nl == std::string_view::npos ? std::nullopt : ParseLogTimesLine(first.substr(0, nl));
    if (entry && entry->inode && *entry->inode != static_cast<std::uint64_t>(ino_)) {
      ::close(fd);
      continue;
    }
    times_.fd = fd;
    return;
  }
}

void LogCursor::LoadTimesUntil(std::uint64_t end) {
  if (!times_.opened) OpenTimes();
  if (times_.fd < 0) return;
  char buf[4096];
  while (times_.ahead.empty() || times_.ahead.back().offset < end) {
    ssize_t n = ::read(times_.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the rest is not written yet
    times_.pending.append(buf, static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (std::size_t nl; (nl = times_.pending.find('\n', start)) != std::string::npos;
         start = nl + 1) {
      auto entry = ParseLogTimesLine(std::string_view(times_.pending).substr(start, nl - start));
      if (entry && entry->mark) times_.ahead.push_back(*entry->mark);
    }
    times_.pending.erase(0, start);
  }
}

void LogCursor::MarkTimes(std::uint64_t from, std::uint64_t to, std::size_t out_pos,
                          std::vector<LogTimeAt>& marks) {
  LoadTimesUntil(to);
  while (!times_.ahead.empty() && times_.ahead.front().offset <= from) {
    times_.in_effect = times_.ahead.front();
    times_.ahead.pop_front();
  }
  if (times_.in_effect) marks.push_back({out_pos, times_.in_effect->unix_ms});
  while (!times_.ahead.empty() && times_.ahead.front().offset < to) {
    times_.in_effect = times_.ahead.front();
    times_.ahead.pop_front();
    marks.push_back({out_pos + static_cast<std::size_t>(times_.in_effect->offset - from),
                     times_.in_effect->unix_ms});
  }
}

std::size_t LogCursor::Read(std::string& out, std::size_t max, std::vector<LogTimeAt>* times) {
  std::size_t total = 0;
  bool saw_rotation = false;
  while (total < max) {
    if (fd_ < 0 && !OpenCurrent()) break;  // not created yet, or between rename and create
    std::size_t want = std::min<std::size_t>(max - total, 1 << 16);
    std::size_t at = out.size();
    out.resize(at + want);
    ssize_t n = ::read(fd_, out.data() + at, want);
    out.resize(at + (n > 0 ? static_cast<std::size_t>(n) : 0));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    if (n > 0) {
      if (times != nullptr) {
        MarkTimes(offset_, offset_ + static_cast<std::uint64_t>(n), at, *times);
      }
      offset_ += static_cast<std::uint64_t>(n);
      total += static_cast<std::size_t>(n);
      saw_rotation = false;
      continue;
    }
    // At the end of this file. Has the writer moved on to a new one?
    struct stat now {};
    if (::stat(path_.c_str(), &now) != 0 || (now.st_dev == dev_ && now.st_ino == ino_)) break;
    if (!saw_rotation) {
      // What was written between the last read and the rename is still to come.
      saw_rotation = true;
      continue;
    }
    saw_rotation = false;
    struct stat rotated {};
    bool skipped_one = ::stat(Rotated(path_).c_str(), &rotated) == 0 &&
                       !(rotated.st_dev == dev_ && rotated.st_ino == ino_) &&
                       !(rotated.st_dev == now.st_dev && rotated.st_ino == now.st_ino);
    Close();
    ++rotations_;
    if (skipped_one) {
      // Rotated twice since the last read: the file in between is PATH.1 now.
      int fd = ::open(Rotated(path_).c_str(), O_RDONLY | O_CLOEXEC);
      struct stat st {};
      if (fd >= 0 && ::fstat(fd, &st) == 0) {
        Adopt(fd, st, Rotated(path_), 0);
      } else if (fd >= 0) {
        ::close(fd);
      }
    }
  }
  return total;
}

LogCursor LogCursor::Tail(std::string path, std::optional<std::uint64_t> lines,
                          std::optional<std::uint64_t> bytes) {
  // The kept output is PATH.1 followed by PATH; find the start of the newest
  // part that fits, walking back from the end in blocks.
  struct Part {
    int fd = -1;
    std::uint64_t size = 0;
    struct stat st {};
  };
  Part parts[2];
  std::string names[2] = {Rotated(path), path};
  for (int i = 0; i < 2; ++i) {
    int fd = ::open(names[i].c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    if (::fstat(fd, &parts[i].st) != 0) {
      ::close(fd);
      continue;
    }
    parts[i].fd = fd;
    parts[i].size = static_cast<std::uint64_t>(parts[i].st.st_size);
  }
  const std::uint64_t total = parts[0].size + parts[1].size;
  auto byte_at_ends_line = [&](std::uint64_t pos, char c) { return pos + 1 == total && c == '\n'; };
  std::uint64_t start = total;  // nothing yet
  std::uint64_t counted = 0;    // lines in [start, total)
  bool done = false;
  std::vector<char> block(1 << 16);
  std::uint64_t end = total;
  while (!done && end > 0) {
    std::uint64_t begin = end > block.size() ? end - block.size() : 0;
    // Read [begin, end) across the two parts.
    std::uint64_t pos = begin;
    std::size_t filled = 0;
    while (pos < end) {
      int i = pos < parts[0].size ? 0 : 1;
      std::uint64_t off = i == 0 ? pos : pos - parts[0].size;
      std::uint64_t lim = i == 0 ? std::min(end, parts[0].size) : end;
      ssize_t n = ::pread(parts[i].fd, block.data() + filled, lim - pos, static_cast<off_t>(off));
      if (n <= 0) break;  // shrank meanwhile: take what was read
      pos += static_cast<std::uint64_t>(n);
      filled += static_cast<std::size_t>(n);
    }
    if (pos < end) break;
    for (std::uint64_t p = end; p > begin; --p) {
      char c = block[p - 1 - begin];
      if (c != '\n' || byte_at_ends_line(p - 1, c)) continue;
      // A line starts at p.
      std::uint64_t n_lines = counted + 1;
      if ((lines && n_lines > *lines) || (bytes && total - p > *bytes)) {
        done = true;
        break;
      }
      counted = n_lines;
      start = p;
    }
    end = begin;
  }
  if (!done && end == 0 && total > 0) {
    // The whole kept output is one more line (the first).
    std::uint64_t n_lines = counted + 1;
    if (!(lines && n_lines > *lines) && !(bytes && total > *bytes)) start = 0;
  }
  LogCursor cursor(path);
  int keep = start < parts[0].size ? 0 : 1;
  if (parts[keep].fd >= 0) {
    std::uint64_t off = keep == 0 ? start : start - parts[0].size;
    ::lseek(parts[keep].fd, static_cast<off_t>(off), SEEK_SET);
    cursor.Adopt(std::exchange(parts[keep].fd, -1), parts[keep].st, names[keep], off);
  }
  for (Part& p : parts) {
    if (p.fd >= 0) ::close(p.fd);
  }
  return cursor;
}

}  // namespace headway
