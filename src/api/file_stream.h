// A file sent as a chunked response body, 1 MiB per turn (artifact
// downloads, Argo's artifact-files).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "api/http_server.h"

namespace headway::api {

class FileStream final : public ResponseStream {
 public:
  // The file at `path`; null when it cannot be opened.
  static std::shared_ptr<FileStream> Open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nullptr;
    return Adopt(fd);
  }
  // A descriptor opened before the answer was made; the stream closes it.
  static std::shared_ptr<FileStream> Adopt(int fd) {
    return std::shared_ptr<FileStream>(new FileStream(fd));
  }
  ~FileStream() override { ::close(fd_); }
  FileStream(const FileStream&) = delete;
  FileStream& operator=(const FileStream&) = delete;

  bool Next(std::string& out) override {
    std::size_t at = out.size();
    out.resize(at + (1 << 20));
    ssize_t n = ::read(fd_, out.data() + at, 1 << 20);
    out.resize(at + (n > 0 ? static_cast<std::size_t>(n) : 0));
    return n > 0;
  }
  std::chrono::milliseconds interval() const override { return std::chrono::milliseconds(0); }

 private:
  explicit FileStream(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace headway::api
