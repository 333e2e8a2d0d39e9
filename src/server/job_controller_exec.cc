#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <tuple>

#include "exec/ssh_server.h"
#include "server/job_controller.h"
#include "server/job_controller_support.h"

namespace headway {

using internal::SteadyNanos;

Result<std::shared_ptr<api::AttachedProcess>> JobController::Exec(std::string_view name,
                                                                  const api::ExecOptions& options,
                                                                  const std::string& who) {
  auto running = RunningJob(name);
  if (!running.ok()) return running.status();
  const Job job = std::move(*running);
  if (options.rank < 0 || options.rank >= api::RankSlots(job.spec)) {
    return InvalidArgument("job '" + job.name() + "' has ranks 0 to " +
                           std::to_string(api::RankSlots(job.spec) - 1) + ", not " +
                           std::to_string(options.rank));
  }
  ExecRequest request;
  request.rank = options.rank;
  request.argv = options.argv;
  request.tty = options.tty;
  request.columns = options.columns;
  request.rows = options.rows;
  if (options.ssh) {
    // One host key for every job this server reaches, so that a client
    // trusts it once; made at the first session.
    request.ssh_host_key_file =
        (std::filesystem::path(options_.data_dir) / "ssh_host_ed25519_key").string();
    if (auto key = LoadOrCreateSshHostKey(request.ssh_host_key_file); !key.ok()) {
      return key.status();
    }
  }
  auto started = ExecutorFor(job).Exec(job.executor_handle, request);
  if (!started.ok()) return started.status();
  // Audited: who ran what, where, and how it ended. The command is shown as
  // typed, cut short; a secret typed into an interactive shell never is.
  std::string what = options.ssh            ? std::string("an SSH session")
                     : options.argv.empty() ? std::string("a login shell")
                                            : std::string();
  for (const std::string& a : options.argv) what += (what.empty() ? "`" : " ") + a;
  if (!options.argv.empty()) what = what.substr(0, 200) + "`";
  const std::string where =
      " in rank " + std::to_string(options.rank) + (options.tty ? " on a terminal" : "");
  const std::string actor = who.empty() ? std::string("someone (authentication is off)") : who;
  (void)AddEvent(job.name(), "Exec", actor + " ran " + what + where);

  // A second descriptor of a terminal's master, for resizes: the HTTP server
  // owns the others and closes them when it is done.
  int resize_fd = started->tty ? ::fcntl(started->input, F_DUPFD_CLOEXEC, 0) : -1;
  struct Reaped {
    Reaped(pid_t p, int fd, Duration grace) : pid(p), resize_fd(fd), stop_grace(grace) {}
    Reaped(const Reaped&) = delete;
    Reaped& operator=(const Reaped&) = delete;
    pid_t pid;
    int resize_fd;
    Duration stop_grace;
    // When it was asked to end (a SIGHUP; steady-clock nanoseconds, 0: not
    // yet), for the SIGKILL after stop_grace. Atomic: the connection's reader
    // and writer may run on different threads.
    std::atomic<std::int64_t> hung_up{0};
    std::optional<int> code;
    ~Reaped() {
      if (resize_fd >= 0) ::close(resize_fd);
      if (!code && pid > 0) {
        ::kill(-pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  };
  auto reaped = std::make_shared<Reaped>(started->pid, resize_fd, started->stop_grace);
  if (!options.tty && !options.stdin) {
    ::close(started->input);  // nothing will come: the command reads the end at once
    started->input = -1;
  }
  auto attached = std::make_shared<api::AttachedProcess>();
  attached->input = started->input;
  attached->output = started->output;
  attached->error = started->error;
  attached->resize = [reaped](int columns, int rows) {
    if (reaped->resize_fd < 0) return;
    struct winsize size {};
    size.ws_col = static_cast<unsigned short>(std::clamp(columns, 1, 1000));
    size.ws_row = static_cast<unsigned short>(std::clamp(rows, 1, 1000));
    ::ioctl(reaped->resize_fd, TIOCSWINSZ, &size);
  };
  attached->exit_code = [reaped]() -> std::optional<int> {
    if (reaped->code) return reaped->code;
    const std::int64_t hung_up = reaped->hung_up.load();
    if (hung_up != 0 &&
        SteadyNanos() - hung_up >= std::chrono::nanoseconds(reaped->stop_grace).count()) {
      ::kill(-reaped->pid, SIGKILL);
    }
    int status = 0;
    pid_t done = ::waitpid(reaped->pid, &status, WNOHANG);
    if (done < 0 && errno == ECHILD) {
      reaped->code = 255;  // reaped elsewhere: how it ended is unknown
      return reaped->code;
    }
    if (done != reaped->pid) return std::nullopt;
    reaped->code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return reaped->code;
  };
  attached->kill = [reaped] {
    // SIGHUP first, as a closed terminal would; the local helper passes it
    // on and the command's PR_SET_PDEATHSIG ends it with the helper. A
    // cluster's client gets its grace (SIGKILL comes from exit_code's polls).
    std::int64_t never = 0;
    if (reaped->code || !reaped->hung_up.compare_exchange_strong(never, SteadyNanos())) return;
    ::kill(-reaped->pid, SIGHUP);
    if (reaped->stop_grace <= Duration(0)) ::kill(-reaped->pid, SIGKILL);
  };
  const std::string job_name = job.name();
  const std::string ended = actor + (options.ssh ? "'s SSH session" : "'s command") + where;
  attached->on_end = [this, job_name, ended, reaped,
                      after_hang_up = started->after_hang_up](std::optional<int> code) {
    if (after_hang_up && reaped->hung_up.load() != 0) after_hang_up();
    (void)AddEvent(
        job_name, "ExecEnded",
        ended + (code ? " exited with " + std::to_string(*code) : std::string(" was ended")));
  };
  return attached;
}

}  // namespace headway
