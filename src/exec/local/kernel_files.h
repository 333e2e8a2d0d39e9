// Reading and writing the kernel's small control files (cgroupfs, procfs)
// in one piece. Internal to exec/local.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace headway::internal {

// The whole file; empty when it cannot be read.
inline std::string ReadKernelFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One write(2) of `text`, as these files expect; false (errno set) on failure.
inline bool WriteKernelFile(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

}  // namespace headway::internal
