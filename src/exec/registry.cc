#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "exec/executor.h"
#include "exec/local/local_executor.h"
#include "exec/slurm/slurm_executor.h"

namespace headway {

Result<int> Executor::ConnectToJob(const std::string& handle, int port) {
  auto host = PrimaryHost(handle);
  if (!host.ok()) return host.status();
  return ConnectTcp(*host, port);
}

Result<int> ConnectTcp(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int e = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); e != 0) {
    return Unavailable("cannot resolve " + host + ": " + ::gai_strerror(e));
  }
  int error = ECONNREFUSED;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // bounds connect(2) too
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ::freeaddrinfo(found);
      return fd;
    }
    error = errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return Unavailable("cannot connect to " + host + ":" + std::to_string(port) + ": " +
                     std::strerror(error));
}

std::vector<std::string_view> ExecutorNames() { return {"local", "slurm"}; }

Result<std::unique_ptr<Executor>> MakeExecutor(std::string_view name,
                                               const ExecutorOptions& options) {
  if (name == "local") return MakeLocalExecutor(options);
  if (name == "slurm") {
    if (options.runner == nullptr) return Internal("the slurm executor needs a command runner");
    return MakeSlurmExecutor(*options.runner, options.max_log_bytes, options.self_executable);
  }
  return NotFound("no executor named '" + std::string(name) + "' (known: local, slurm)");
}

}  // namespace headway
