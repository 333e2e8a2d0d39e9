#include "exec/attached_command.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

extern char** environ;

namespace headway {

Result<ExecProcess> StartAttached(const std::vector<std::string>& argv_in,
                                  const ExecRequest& request, const AttachOptions& options) {
  if (argv_in.empty()) return InvalidArgument("no command to start");
  // The descriptors the command gets as 0, 1, 2, and the ones kept here.
  int child_fds[3] = {-1, -1, -1};
  ExecProcess process;
  process.tty = request.tty;
  auto close_all = [&] {
    for (int fd :
         {child_fds[0], child_fds[1], child_fds[2], process.input, process.output, process.error}) {
      if (fd >= 0) ::close(fd);
    }
  };
  if (request.tty) {
    int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    char name[128];
    if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0 ||
        ::ptsname_r(master, name, sizeof name) != 0) {
      if (master >= 0) ::close(master);
      return Unavailable(std::string("cannot open a terminal: ") + std::strerror(errno));
    }
    int slave = ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0) {
      ::close(master);
      return Unavailable(std::string("cannot open a terminal: ") + std::strerror(errno));
    }
    struct winsize size {};
    size.ws_col = static_cast<unsigned short>(std::clamp(request.columns, 1, 1000));
    size.ws_row = static_cast<unsigned short>(std::clamp(request.rows, 1, 1000));
    ::ioctl(master, TIOCSWINSZ, &size);
    process.input = master;
    process.output = ::fcntl(master, F_DUPFD_CLOEXEC, 0);
    child_fds[0] = slave;
    child_fds[1] = ::fcntl(slave, F_DUPFD_CLOEXEC, 0);
    child_fds[2] = ::fcntl(slave, F_DUPFD_CLOEXEC, 0);
  } else {
    int in[2], out[2], err[2];
    if (::pipe2(in, O_CLOEXEC) != 0) return Unavailable("pipe failed");
    if (::pipe2(out, O_CLOEXEC) != 0) {
      ::close(in[0]);
      ::close(in[1]);
      return Unavailable("pipe failed");
    }
    if (::pipe2(err, O_CLOEXEC) != 0) {
      for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
      return Unavailable("pipe failed");
    }
    child_fds[0] = in[0];
    child_fds[1] = out[1];
    child_fds[2] = err[1];
    process.input = in[1];
    process.output = out[0];
    process.error = err[0];
  }
  if (child_fds[1] < 0 || child_fds[2] < 0 || process.output < 0) {
    close_all();
    return Unavailable("cannot set up the command's descriptors");
  }
  std::vector<std::string> args = argv_in;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_copy = options.env;
  std::vector<char*> envp;
  for (auto& e : env_copy) envp.push_back(e.data());
  envp.push_back(nullptr);
  char** child_env = options.env.empty() ? environ : envp.data();
  const bool session = options.new_session;
  const bool tty = request.tty;
  pid_t pid = ::fork();
  if (pid < 0) {
    close_all();
    return Unavailable(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Async-signal-safe calls only: the server has other threads.
    if (session) {
      ::setsid();
    } else {
      ::setpgid(0, 0);
    }
    for (int i = 0; i < 3; ++i) ::dup2(child_fds[i], i);
    if (session && tty) ::ioctl(0, TIOCSCTTY, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv.data(), child_env);
    ::_exit(127);
  }
  for (int& fd : child_fds) {
    ::close(fd);
    fd = -1;
  }
  process.pid = pid;
  return process;
}

}  // namespace headway
