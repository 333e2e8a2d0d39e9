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
    fd_ = fd;
    dev_ = st.st_dev;
    ino_ = st.st_ino;
  } else if (fd >= 0) {
    ::close(fd);
  }
}

LogCursor::LogCursor(LogCursor&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      dev_(other.dev_),
      ino_(other.ino_),
      rotations_(other.rotations_) {}

LogCursor& LogCursor::operator=(LogCursor&& other) noexcept {
  if (this != &other) {
    Close();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    dev_ = other.dev_;
    ino_ = other.ino_;
    rotations_ = other.rotations_;
  }
  return *this;
}

LogCursor::~LogCursor() { Close(); }

void LogCursor::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool LogCursor::OpenCurrent() {
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return false;
  }
  fd_ = fd;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  return true;
}

std::size_t LogCursor::Read(std::string& out, std::size_t max) {
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
        fd_ = fd;
        dev_ = st.st_dev;
        ino_ = st.st_ino;
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
    cursor.fd_ = std::exchange(parts[keep].fd, -1);
    cursor.dev_ = parts[keep].st.st_dev;
    cursor.ino_ = parts[keep].st.st_ino;
  }
  for (Part& p : parts) {
    if (p.fd >= 0) ::close(p.fd);
  }
  return cursor;
}

}  // namespace headway
