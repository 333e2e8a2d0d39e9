// The per-attempt supervisor behind the local executor (see local_executor.h).
// It runs detached from the server, so it must never depend on it: it reads
// launch.json, runs the ranks, and leaves result.json behind.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/log_times.h"
#include "exec/local/cgroup.h"
#include "exec/local/container.h"
#include "exec/local/local_executor.h"
#include "exec/local/process_identity.h"
#include "exec/local/sandbox.h"

namespace headway {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What the server sends an attempt: a stop (SIGTERM; SIGINT from a
// terminal) and the checkpoint warning (SIGUSR1).
constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGUSR1};

volatile sig_atomic_t g_terminating = 0;
void OnTerminate(int) { g_terminating = 1; }
// The checkpoint warning (SIGUSR1) is for the ranks. A caught signal is reset
// to its default action by exec, so the ranks see SIGUSR1 as if the
// supervisor did not exist (SIG_IGN would be inherited instead).
void OnCheckpointWarning(int) {}

// A rank's log, with the times file that says when each part of it was
// written (core/log_times.h). With a `limit`, bounded to that many bytes:
// past half of it the file is renamed to NAME.1 (replacing the older one,
// its times file with it) and a new NAME started, on a line boundary where
// one fits, so the newest output is always kept. Written through
// descriptors opened before the sandbox hides the run directory.
class RankLogWriter {
 public:
  // `limit` 0: unbounded.
  RankLogWriter(int dir_fd, std::string name, int fd, std::uint64_t limit)
      : dir_fd_(dir_fd),
        name_(std::move(name)),
        fd_(fd),
        half_(limit == 0 ? 0 : std::max<std::uint64_t>(limit / 2, 1)) {
    struct stat st {};
    if (::fstat(fd_, &st) == 0) size_ = static_cast<std::uint64_t>(st.st_size);
    OpenTimes();
  }
  ~RankLogWriter() {
    if (times_fd_ >= 0) ::close(times_fd_);
  }
  RankLogWriter(const RankLogWriter&) = delete;
  RankLogWriter& operator=(const RankLogWriter&) = delete;

  void Write(const char* data, std::size_t n) {
    while (n > 0) {
      // The log's index counts toward the bound too: a rank that writes a
      // little every millisecond makes an index larger than its log.
      const std::uint64_t used = size_ + times_size_ + kMarkRoom;
      if (half_ == 0 || used + n <= half_) {
        Append(data, n);
        return;
      }
      // What still fits, up to its last complete line.
      std::size_t room = used < half_ ? static_cast<std::size_t>(half_ - used) : 0;
      std::size_t take = 0;
      for (std::size_t i = std::min(room, n); i > 0; --i) {
        if (data[i - 1] == '\n') {
          take = i;
          break;
        }
      }
      // A line longer than the whole file is cut.
      if (take == 0 && size_ == 0) take = std::min<std::size_t>(n, static_cast<std::size_t>(half_));
      Append(data, take);
      data += take;
      n -= take;
      if (n > 0) Rotate();
    }
  }

 private:
  std::string TimesName() const { return LogTimesPath(name_); }

  void OpenTimes() {
    times_fd_ =
        ::openat(dir_fd_, TimesName().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    struct stat log {
    }, times{};
    if (times_fd_ < 0 || ::fstat(fd_, &log) != 0 || ::fstat(times_fd_, &times) != 0) return;
    if (times.st_size == 0) {
      const std::string header = LogTimesHeader(log.st_ino);
      WriteAll(times_fd_, header);
      times_size_ = header.size();
    } else {
      times_size_ = static_cast<std::uint64_t>(times.st_size);
    }
    last_ms_ = -1;
  }

  static void WriteAll(int fd, const std::string& text) {
    const char* p = text.data();
    std::size_t n = text.size();
    while (n > 0) {
      ssize_t w = ::write(fd, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return;
      p += w;
      n -= static_cast<std::size_t>(w);
    }
  }

  void Append(const char* data, std::size_t n) {
    if (n == 0) return;
    if (times_fd_ >= 0) {
      const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count();
      if (now_ms != last_ms_) {
        const std::string mark = LogTimesLine({size_, now_ms});
        WriteAll(times_fd_, mark);
        times_size_ += mark.size();
        last_ms_ = now_ms;
      }
    }
    while (n > 0) {
      ssize_t w = ::write(fd_, data, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return;  // disk full or gone: output is lost, the job goes on
      data += w;
      n -= static_cast<std::size_t>(w);
      size_ += static_cast<std::uint64_t>(w);
    }
  }

  void Rotate() {
    std::string old = name_ + ".1";
    int fresh = -1;
    if (::renameat(dir_fd_, name_.c_str(), dir_fd_, old.c_str()) == 0) {
      (void)::renameat(dir_fd_, TimesName().c_str(), dir_fd_, LogTimesPath(old).c_str());
      fresh = ::openat(dir_fd_, name_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC,
                       0600);
    }
    if (fresh >= 0) {
      ::close(fd_);
      fd_ = fresh;
    } else if (::ftruncate(fd_, 0) != 0) {
      return;  // cannot bound it: keep appending rather than lose the newest output
    } else {
      (void)::unlinkat(dir_fd_, TimesName().c_str(), 0);  // it described the bytes just dropped
    }
    if (times_fd_ >= 0) ::close(times_fd_);
    OpenTimes();
    size_ = 0;
  }

  int dir_fd_;
  std::string name_;
  int fd_;
  std::uint64_t half_;  // 0: never rotated
  std::uint64_t size_ = 0;
  int times_fd_ = -1;
  std::uint64_t times_size_ = 0;  // bytes of the times file
  std::int64_t last_ms_ = -1;     // the time of the last line of the times file
  // Room kept for the next line of the times file ("OFFSET UNIX_MS\n").
  static constexpr std::uint64_t kMarkRoom = 40;
};

struct Rank {
  int rank = 0;
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string cwd;
  std::string log;
  int log_fd = -1;  // opened before the sandbox hides the run directory
  // The rank writes into a pipe that the supervisor copies into `log_writer`
  // (straight into log_fd when the pipe or the writer could not be set up).
  int pipe_write = -1;
  int pipe_read = -1;
  std::unique_ptr<RankLogWriter> log_writer;
  pid_t pid = -1;
  int pid_fd = -1;    // readable once the rank exits (a pidfd); -1 where there is none
  bool done = false;  // also: not started (a rank group of an elastic job above its size)
  int exit_code = 0;
  // Stopped by a shrink: its exit is not the job's failure, and the rank
  // may be started again by a later growth.
  bool leaving = false;
  // The end of what it wrote: a failed rank's last line goes into the
  // job's message (why it failed, without a trip to its log).
  std::string tail;
};

constexpr std::size_t kRankTailBytes = 1024;

// The last non-empty line of `tail`, printable, at most 200 characters.
std::string LastLine(const std::string& tail) {
  std::size_t end = tail.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return {};
  std::size_t start = tail.rfind('\n', end);
  start = start == std::string::npos ? 0 : start + 1;
  std::string line;
  for (std::size_t i = start; i <= end && line.size() < 200; ++i) {
    const auto c = static_cast<unsigned char>(tail[i]);
    line += (c < 0x20 || c == 0x7f) ? ' ' : static_cast<char>(c);
  }
  return line;
}

// Elastic jobs (launch.json "elastic"): the ranks are rank groups, each an
// elastic agent (torchrun) that restarts the job's workers at every new
// size. Ranks [0, active) run. The server's resize.json sets a new size
// ({"seq", "size", "gpus": [[ids of rank group 0], ...]}): ranks above it
// are stopped (SIGTERM; SIGKILL after the grace), ranks below it started
// with the GPUs it gives them. Rank group 0 holds the rendezvous: it is
// never stopped by a shrink.
struct ElasticGroups {
  bool on = false;
  int active = 0;
  std::int64_t seq = -1;
};

// A descriptor that becomes readable when `pid` exits (close-on-exec, as
// every pidfd is); -1 where the kernel has no pidfd_open (then the
// supervisor polls).
int PidFd(pid_t pid) {
#ifdef SYS_pidfd_open
  if (pid <= 0) return -1;
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

// Copies what the ranks wrote into their logs; with `until_eof`, also what
// is still buffered once they are gone. Returns whether anything was read.
bool PumpLogs(std::vector<Rank>& ranks, bool until_eof) {
  static char buf[1 << 16];
  bool any = false;
  for (Rank& r : ranks) {
    if (r.pipe_read < 0) continue;
    // A bounded share per pass, so one chatty rank cannot starve the others;
    // at the end, what the pipe holds (a daemon left writing cannot hold us).
    const int passes = until_eof ? 64 : 16;
    for (int i = 0; i < passes; ++i) {
      ssize_t n = ::read(r.pipe_read, buf, sizeof buf);
      if (n > 0) {
        r.log_writer->Write(buf, static_cast<std::size_t>(n));
        r.tail.append(buf, static_cast<std::size_t>(n));
        if (r.tail.size() > 2 * kRankTailBytes) r.tail.erase(0, r.tail.size() - kRankTailBytes);
        any = true;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) {  // every writer is gone
        ::close(r.pipe_read);
        r.pipe_read = -1;
      }
      break;  // EAGAIN: nothing more for now
    }
  }
  return any;
}

// Sleeps until something needs the supervisor: a rank writes or exits, the
// namespace's reaper exits, the run directory gains a file (the server's
// kill-requested), a signal comes, or `timeout` passes. Idle jobs then cost
// no wake-ups (a 20 ms poll did: 128 idle jobs took 18% of a core).
// Returns whether the run directory changed.
bool WaitForEvents(const std::vector<Rank>& ranks, int reaper_fd, int dir_watch,
                   std::chrono::milliseconds timeout) {
  std::vector<pollfd> fds;
  for (const Rank& r : ranks) {
    if (r.pipe_read >= 0) fds.push_back({r.pipe_read, POLLIN, 0});
    if (!r.done && r.pid_fd >= 0) fds.push_back({r.pid_fd, POLLIN, 0});
  }
  if (reaper_fd >= 0) fds.push_back({reaper_fd, POLLIN, 0});
  if (dir_watch >= 0) fds.push_back({dir_watch, POLLIN, 0});
  if (fds.empty()) {
    std::this_thread::sleep_for(timeout);
    return false;
  }
  if (::poll(fds.data(), fds.size(), static_cast<int>(timeout.count())) <= 0) return false;
  if (dir_watch < 0 || !(fds.back().revents & POLLIN)) return false;
  alignas(inotify_event) char events[4096];
  while (::read(dir_watch, events, sizeof events) > 0) {
  }
  return true;
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// What every rank's child does between fork and exec, in this order: join
// the attempt's cgroup (while it may still write there), take on the job's
// account, then enter the working directory as that account.
struct RankSetup {
  const internal::AttemptCgroup* cgroup = nullptr;
  const internal::UnixAccount* account = nullptr;
  bool container = false;  // the rank runs crun (exec/local/container.h)
};

pid_t StartRank(Rank& r, const RankSetup& setup) {
  std::vector<char*> argv, envp;
  for (auto& a : r.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : r.env) envp.push_back(e.data());
  envp.push_back(nullptr);
  // PATH lookup uses the job's PATH, as a shell would.
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (auto& e : r.env) {
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  }
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  // Child (single-threaded process: ordinary calls are fine here).
  // A stop sent to the process group from here on is pending in this child
  // and acts once the mask is cleared.
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGINT, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  int out_fd = r.pipe_write >= 0 ? r.pipe_write : r.log_fd;
  if (out_fd >= 0) {
    ::dup2(out_fd, 1);
    ::dup2(out_fd, 2);
  }
  int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) ::dup2(null_fd, 0);
  if (setup.cgroup != nullptr && !setup.cgroup->JoinSelf()) {
    std::fprintf(stderr, "headway: cannot join the job's cgroup: %s\n", std::strerror(errno));
    ::_exit(126);
  }
  if (setup.container && !internal::ShowRuntimeUnifiedCgroups()) {
    std::fprintf(stderr, "headway: cannot show the container runtime the cgroup v2 hierarchy: %s\n",
                 std::strerror(errno));
    ::_exit(126);
  }
  if (setup.account != nullptr && !internal::BecomeAccount(*setup.account)) {
    std::fprintf(stderr, "headway: cannot run as %s: %s\n", setup.account->name.c_str(),
                 std::strerror(errno));
    ::_exit(126);
  }
  // The server keeps its files private (umask 077); the job's are its own business.
  ::umask(022);
  if (::chdir(r.cwd.c_str()) != 0) {
    std::fprintf(stderr, "headway: cannot enter working directory %s: %s\n", r.cwd.c_str(),
                 std::strerror(errno));
    ::_exit(126);
  }
  // As the account: what it may search of the PATH (its own and its lookup).
  path = internal::SearchablePath(path);
  std::string path_entry = "PATH=" + path;
  for (char*& e : envp) {
    if (e != nullptr && std::strncmp(e, "PATH=", 5) == 0) e = path_entry.data();
  }
  ::setenv("PATH", path.c_str(), 1);
  ::execvpe(argv[0], argv.data(), envp.data());
  std::fprintf(stderr, "headway: cannot run '%s': %s\n", argv[0], std::strerror(errno));
  ::_exit(errno == ENOENT ? 127 : 126);
}

// Written through a descriptor of the run directory: inside the sandbox the
// directory's path shows an empty tmpfs.
bool WriteFileAt(int dir_fd, const std::string& name, const std::string& text) {
  std::string tmp = name + ".tmp";
  int fd = ::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  ::close(fd);
  return ok && ::renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) == 0;
}

bool WriteResult(int dir_fd, const json& result) {
  return WriteFileAt(dir_fd, "result.json", result.dump());
}

// Ends whatever is left of the attempt and waits until nothing is: only then
// may the server hand its GPUs to another job.
void EndEverything(pid_t reaper, const internal::AttemptCgroup& cgroup) {
  if (reaper > 0) {
    // The PID namespace's first process: when it dies the kernel kills the
    // rest, and it is gone once every process of the namespace is reaped,
    // ours (the network's connector) too: reap all until it is.
    ::kill(reaper, SIGKILL);
    for (pid_t pid; (pid = ::waitpid(-1, nullptr, 0)) != reaper;) {
      if (pid < 0 && errno != EINTR) break;
    }
  }
  if (cgroup.empty()) return;
  // Usually empty within a millisecond or two of the kill: poll fast first.
  auto pause = std::chrono::microseconds(250);
  auto next_kill = std::chrono::steady_clock::now();
  while (cgroup.Populated()) {
    if (std::chrono::steady_clock::now() >= next_kill) {
      (void)cgroup.Kill();
      next_kill = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(20));
  }
}

// Starts `r` (again, for a rank group of an elastic job), its output
// through a fresh pipe; the stop signals are blocked meanwhile, so one that
// comes is pending in the child and acts once it exec's.
void StartLaterRank(Rank& r, const RankSetup& setup) {
  sigset_t stop_signals, old;
  sigemptyset(&stop_signals);
  for (int sig : kStopSignals) sigaddset(&stop_signals, sig);
  ::sigprocmask(SIG_BLOCK, &stop_signals, &old);
  int fds[2];
  if (r.log_writer && r.pipe_read < 0 && ::pipe2(fds, O_CLOEXEC) == 0) {
    r.pipe_read = fds[0];
    r.pipe_write = fds[1];
    ::fcntl(r.pipe_read, F_SETFL, O_NONBLOCK);
  }
  r.done = false;
  r.leaving = false;
  r.exit_code = 0;
  r.pid = StartRank(r, setup);
  r.pid_fd = PidFd(r.pid);
  if (r.pipe_write >= 0) {
    ::close(r.pipe_write);
    r.pipe_write = -1;
  }
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
}

void SetEnv(std::vector<std::string>& env, const std::string& name, const std::string& value) {
  const std::string prefix = name + "=";
  std::erase_if(env, [&](const std::string& e) { return e.rfind(prefix, 0) == 0; });
  env.push_back(prefix + value);
}

void RecordRanks(int dir_fd, const std::vector<Rank>& ranks) {
  json record = json::array();
  for (const Rank& r : ranks) {
    if (!r.done) record.push_back({{"rank", r.rank}, {"pid", r.pid}});
  }
  (void)WriteFileAt(dir_fd, "ranks.json", record.dump());
}

// The sandbox's masks of other jobs' GPU device nodes (/dev/null bound
// over /dev/nvidiaN) made to match `wanted`: the job's new GPUs are
// revealed, the ones it gave back covered again. Only /dev/nvidiaN paths.
void MatchGpuMasks(const json& wanted, std::set<std::string>& masked_now) {
  if (!wanted.is_array()) return;
  std::set<std::string> want;
  for (const auto& p : wanted) {
    if (!p.is_string()) continue;
    const std::string path = p.get<std::string>();
    if (path.rfind("/dev/nvidia", 0) == 0 && path.size() > 11 &&
        path.find_first_not_of("0123456789", 11) == std::string::npos) {
      want.insert(path);
    }
  }
  for (auto it = masked_now.begin(); it != masked_now.end();) {
    if (want.count(*it) == 0 && ::umount2(it->c_str(), MNT_DETACH) == 0) {
      it = masked_now.erase(it);
    } else {
      ++it;
    }
  }
  for (const std::string& path : want) {
    if (masked_now.count(path) == 0 &&
        ::mount("/dev/null", path.c_str(), nullptr, MS_BIND, nullptr) == 0) {
      masked_now.insert(path);
    }
  }
}

// Applies the server's resize.json if it is new; returns how many ranks it
// started (they count toward the ranks still running). `masked_now`: the
// sandbox's GPU masks (null without a sandbox).
int ApplyResize(int dir_fd, ElasticGroups& groups, std::vector<Rank>& ranks, const RankSetup& setup,
                bool container, std::set<std::string>* masked_now) {
  int fd = ::openat(dir_fd, "resize.json", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  const json resize = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!resize.is_object() || !resize.contains("seq") || !resize.contains("size")) return 0;
  const auto seq = resize["seq"].get<std::int64_t>();
  if (seq <= groups.seq) return 0;
  const int size = std::clamp(resize["size"].get<int>(), 1, static_cast<int>(ranks.size()));
  // A rank group still leaving from an earlier shrink cannot start again
  // yet: the file is looked at again once it is gone.
  for (int i = groups.active; i < size; ++i) {
    if (ranks[static_cast<std::size_t>(i)].leaving) return 0;
  }
  groups.seq = seq;
  if (masked_now != nullptr && resize.contains("masked"))
    MatchGpuMasks(resize["masked"], *masked_now);
  int started = 0;
  for (int i = size; i < static_cast<int>(ranks.size()); ++i) {
    Rank& r = ranks[static_cast<std::size_t>(i)];
    if (r.done || r.leaving) continue;
    r.leaving = true;
    ::kill(r.pid, SIGTERM);
  }
  const json gpus = resize.value("gpus", json::array());
  // Only slots above the old size: a rank below it that is done has ended
  // its part of the run and is not started again.
  for (int i = groups.active; i < size; ++i) {
    Rank& r = ranks[static_cast<std::size_t>(i)];
    if (!r.done) continue;
    std::string ids;
    if (gpus.is_array() && static_cast<std::size_t>(i) < gpus.size() && gpus[i].is_array()) {
      for (const auto& id : gpus[i])
        ids += (ids.empty() ? "" : ",") + std::to_string(id.get<int>());
    }
    // In an image the rank's environment is its container's config.json.
    if (!container) SetEnv(r.env, "CUDA_VISIBLE_DEVICES", ids);
    StartLaterRank(r, setup);
    ++started;
  }
  groups.active = size;
  RecordRanks(dir_fd, ranks);
  return started;
}

}  // namespace

int RunLocalShim(const std::string& run_dir) {
  std::ifstream in(fs::path(run_dir) / "launch.json");
  auto launch = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!launch.is_object() || !launch.contains("ranks")) {
    std::fprintf(stderr, "headway shim: unreadable %s/launch.json\n", run_dir.c_str());
    return 2;
  }
  // The lock stays with this process: not with ranks (exec closes it) nor
  // with the namespace's reaper (it closes it).
  ::fcntl(internal::kSupervisorLockFd, F_SETFD, FD_CLOEXEC);
  int dir_fd = ::open(run_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    std::fprintf(stderr, "headway shim: cannot open %s: %s\n", run_dir.c_str(),
                 std::strerror(errno));
    return 2;
  }
  // Wakes the wait below when the server leaves kill-requested here; set up
  // while the path is still visible (the sandbox may hide it). Without it
  // (no inotify), the directory is looked at every 100 ms.
  int dir_watch = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (dir_watch >= 0 &&
      ::inotify_add_watch(dir_watch, run_dir.c_str(), IN_CREATE | IN_MOVED_TO) < 0) {
    ::close(dir_watch);
    dir_watch = -1;
  }
  // The server stops a job by signalling the whole process group; the ranks
  // act on it, the supervisor outlives them to record how they ended.
  // Until every rank is started these signals stay blocked here (the
  // executor starts this process with them blocked already): one that comes
  // earlier is passed on to the ranks it could not reach.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (int sig : kStopSignals) sigaddset(&stop_signals, sig);
  ::sigprocmask(SIG_BLOCK, &stop_signals, nullptr);
  struct sigaction sa {};
  sa.sa_handler = OnTerminate;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  struct sigaction warn {};
  warn.sa_handler = OnCheckpointWarning;
  ::sigaction(SIGUSR1, &warn, nullptr);

  std::vector<Rank> ranks;
  for (const auto& r : launch["ranks"]) {
    Rank rank;
    rank.rank = r["rank"].get<int>();
    rank.argv = r["argv"].get<std::vector<std::string>>();
    rank.env = r["env"].get<std::vector<std::string>>();
    rank.cwd = r["cwd"].get<std::string>();
    rank.log = r["log"].get<std::string>();
    ranks.push_back(std::move(rank));
  }
  ElasticGroups groups;
  if (launch.contains("elastic") && launch["elastic"].is_object()) {
    groups.on = true;
    groups.active =
        std::clamp(launch["elastic"].value("active", 1), 1, static_cast<int>(ranks.size()));
  }
  const std::uint64_t max_log_bytes = launch.value("max_log_bytes", std::uint64_t{0});
  std::vector<int> log_dir_fds;
  for (Rank& r : ranks) {
    r.log_fd = ::open(r.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (r.log_fd < 0) continue;
    fs::path log_path(r.log);
    int log_dir = ::open(log_path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (log_dir < 0) continue;  // cannot rotate: unbounded, without times
    log_dir_fds.push_back(log_dir);
    r.log_writer = std::make_unique<RankLogWriter>(log_dir, log_path.filename().string(), r.log_fd,
                                                   max_log_bytes);
  }
  const auto cgroup = internal::AttemptCgroup::FromJson(launch.value("cgroup", json::object()));
  std::optional<internal::UnixAccount> account;
  if (launch.contains("account") && launch["account"].is_object()) {
    account = internal::UnixAccount::FromJson(launch["account"]);
  }
  auto fail_to_start = [&](const std::string& why) {
    std::fprintf(stderr, "headway shim: %s\n", why.c_str());
    json result = {{"exit_code", 126},
                   {"ranks", json::array()},
                   {"terminated", false},
                   {"message", "the job's sandbox could not be set up: " + why}};
    EndEverything(-1, cgroup);
    cgroup.Remove();
    return WriteResult(dir_fd, result) ? 0 : 1;
  };
  // Crash-recovery tests widen the window between the supervisor's start and
  // its record, as a loaded machine does.
  if (std::getenv("HEADWAY_TEST_SLOW_SUPERVISOR") != nullptr) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  // Before any rank starts (and while /proc still shows this process): the
  // record by which a server that crashed while launching this attempt finds
  // and adopts it instead of starting it a second time.
  {
    auto start_time = internal::ProcessStartTime(::getpid());
    json record = {{"pid", ::getpid()}, {"start_time", start_time ? *start_time : 0}};
    if (!WriteFileAt(dir_fd, "supervisor.json", record.dump())) {
      return fail_to_start(std::string("cannot record the supervisor: ") + std::strerror(errno));
    }
  }
  // A job in an image: each rank is its container, started by crun as root
  // (crun takes on the job's account inside; see exec/local/container.h).
  std::optional<internal::ContainerLaunch> container;
  if (launch.contains("container") && launch["container"].is_object()) {
    if (!launch.contains("sandbox")) return fail_to_start("a job in an image needs its sandbox");
    container = internal::ContainerLaunch::FromJson(launch["container"]);
    for (Rank& r : ranks) {
      r.argv = internal::ContainerRankArgv(*container, r.rank);
      r.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
      r.cwd = "/";
    }
  }
  pid_t reaper = -1;
  std::set<std::string> masked_now;  // the sandbox's GPU masks, as they stand
  bool sandboxed = false;
  if (launch.contains("sandbox") && launch["sandbox"].is_object()) {
    const internal::SandboxPlan plan = internal::SandboxPlan::FromJson(launch["sandbox"]);
    sandboxed = true;
    masked_now.insert(plan.masked.begin(), plan.masked.end());
    // The network's helpers run as the job does: in its cgroup (ended with
    // it), as its account.
    auto as_the_job = [&cgroup, &account] {
      (void)cgroup.JoinSelf();
      if (account && !internal::BecomeAccount(*account)) ::_exit(126);
    };
    internal::NetworkHelper relay, egress;
    int connect_listener = -1;
    if (plan.network.isolated) {
      // Made while this process still has the host's network and sees the run directory.
      auto started_relay = internal::StartControlPlaneRelay(plan.network, as_the_job);
      if (!started_relay.ok()) return fail_to_start(started_relay.status().message());
      relay = *started_relay;
      auto started_egress = internal::StartEgressProxy(plan.network, as_the_job);
      if (!started_egress.ok()) return fail_to_start(started_egress.status().message());
      egress = *started_egress;
      auto bound = internal::BindConnectSocket(plan.network.connect_socket);
      if (!bound.ok()) return fail_to_start(bound.status().message());
      connect_listener = *bound;
    }
    Status entered = internal::EnterSandbox(plan);
    if (entered.ok()) entered = internal::OpenControlPlane(plan.network, relay);
    if (entered.ok()) entered = internal::OpenEgressProxy(egress);
    if (relay.channel >= 0) ::close(relay.channel);
    if (egress.channel >= 0) ::close(egress.channel);
    if (!entered.ok()) return fail_to_start(entered.message());
    if (container) {
      Status mounted = internal::MountContainerRoot(*container);
      if (!mounted.ok()) return fail_to_start(mounted.message());
    }
    auto started = internal::StartNamespaceReaper([&cgroup] {
      ::close(internal::kSupervisorLockFd);
      (void)cgroup.JoinSelf();
    });
    if (!started.ok()) return fail_to_start(started.status().message());
    reaper = *started;
    if (connect_listener >= 0) {
      auto connector = internal::StartConnector(connect_listener, as_the_job);
      ::close(connect_listener);
      if (!connector.ok()) return fail_to_start(connector.status().message());
    }
  }
  const auto failure_grace = std::chrono::milliseconds(launch.value("failure_grace_ms", 10000));
  RankSetup setup{cgroup.empty() ? nullptr : &cgroup, account && !container ? &*account : nullptr,
                  container.has_value()};
  // Rank groups above an elastic job's size wait, as if done, for a growth.
  const std::size_t first_dormant =
      groups.on ? static_cast<std::size_t>(groups.active) : ranks.size();
  for (std::size_t i = first_dormant; i < ranks.size(); ++i) ranks[i].done = true;
  for (Rank& r : ranks) {
    if (r.done) continue;
    int fds[2];
    if (r.log_writer && ::pipe2(fds, O_CLOEXEC) == 0) {
      r.pipe_read = fds[0];
      r.pipe_write = fds[1];
      ::fcntl(r.pipe_read, F_SETFL, O_NONBLOCK);
      (void)::fcntl(r.pipe_read, F_SETPIPE_SZ, 1 << 20);  // fewer stalls of a chatty rank
    } else {
      r.log_writer.reset();
    }
  }
  // A signal pending before a rank is forked never reached that rank (nor
  // any later one): each such rank gets it from here.
  std::map<int, std::size_t> first_rank_not_reached;
  for (std::size_t i = 0; i < first_dormant; ++i) {
    sigset_t pending;
    sigemptyset(&pending);
    ::sigpending(&pending);
    for (int sig : kStopSignals) {
      if (sigismember(&pending, sig) == 1) first_rank_not_reached.try_emplace(sig, i);
    }
    Rank& r = ranks[i];
    r.pid = StartRank(r, setup);
    r.pid_fd = PidFd(r.pid);
    if (r.pipe_write >= 0) {
      ::close(r.pipe_write);
      r.pipe_write = -1;
    }
  }
  for (const auto& [sig, first] : first_rank_not_reached) {
    for (std::size_t i = first; i < first_dormant; ++i) ::kill(ranks[i].pid, sig);
  }
  // Where each rank runs, for `headway exec` (exec_helper.cc). This
  // process's /proc may be its job's PID namespace's, where these pids do
  // not exist: the helper checks that a pid is still this supervisor's child.
  RecordRanks(dir_fd, ranks);
  ::sigprocmask(SIG_UNBLOCK, &stop_signals, nullptr);  // runs the handlers of those pending

  // torchrun semantics: when one rank fails, the others are torn down
  // (SIGTERM, then SIGKILL after the grace period) and the job fails with
  // the first failing rank's exit code.
  int first_failed = -1;
  std::chrono::steady_clock::time_point kill_at{};
  bool killed = false;
  auto next_kill_check = std::chrono::steady_clock::now();
  std::size_t remaining = first_dormant;
  std::chrono::steady_clock::time_point leaving_kill_at{};
  int reaper_fd = PidFd(reaper);
  // Every exit and the kill request wake the wait: it then needs no timeout
  // but a slow safety net (orphans this process reaps, a missed event).
  // Otherwise, as before, a 20 ms poll.
  bool woken_by_events = dir_watch >= 0 && (reaper <= 0 || reaper_fd >= 0) &&
                         std::all_of(ranks.begin(), ranks.end(),
                                     [](const Rank& r) { return r.done || r.pid_fd >= 0; });
  bool dir_changed = false;
  while (remaining > 0) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      if (pid == reaper) {
        reaper = -1;  // killed from outside: the ranks went with it
        if (reaper_fd >= 0) ::close(reaper_fd);
        reaper_fd = -1;
      }
      for (Rank& r : ranks) {
        if (r.pid != pid || r.done) continue;
        r.done = true;
        if (r.pid_fd >= 0) ::close(r.pid_fd);
        r.pid_fd = -1;
        r.exit_code = ExitCodeOf(status);
        --remaining;
        if (r.leaving) {  // a shrink stopped it: it waits for a growth
          r.leaving = false;
          r.exit_code = 0;
          r.pid = -1;
          dir_changed = true;  // a growth may have waited for it
          continue;
        }
        if (r.exit_code != 0 && first_failed < 0) {
          first_failed = r.rank;
          for (Rank& other : ranks) {
            if (!other.done) ::kill(other.pid, SIGTERM);
          }
          kill_at = std::chrono::steady_clock::now() + failure_grace;
        }
      }
      continue;
    }
    if (pid < 0 && errno == ECHILD) break;
    // The server killed the attempt (stop --force, a grace that ran out); a
    // rank that joined the cgroup after that kill must not be left running.
    const auto now = std::chrono::steady_clock::now();
    if (!cgroup.empty() && (dir_changed || now >= next_kill_check)) {
      next_kill_check = now + std::chrono::milliseconds(100);
      if (::faccessat(dir_fd, "kill-requested", F_OK, 0) == 0) (void)cgroup.Kill();
    }
    // Without inotify the file is read at each turn of the loop.
    if (groups.on && first_failed < 0 && g_terminating == 0 && (dir_changed || dir_watch < 0)) {
      const int started = ApplyResize(dir_fd, groups, ranks, setup, container.has_value(),
                                      sandboxed && !container ? &masked_now : nullptr);
      remaining += static_cast<std::size_t>(started);
      for (const Rank& r : ranks) {
        if (!r.done && r.pid_fd < 0) woken_by_events = false;
        if (r.leaving && leaving_kill_at == std::chrono::steady_clock::time_point{}) {
          leaving_kill_at = now + failure_grace;
        }
      }
    }
    if (leaving_kill_at != std::chrono::steady_clock::time_point{} && now >= leaving_kill_at) {
      for (Rank& r : ranks) {
        if (r.leaving && !r.done) ::kill(r.pid, SIGKILL);
      }
      leaving_kill_at = {};
    }
    dir_changed = false;
    if (first_failed >= 0 && !killed && now >= kill_at) {
      for (Rank& other : ranks) {
        if (!other.done) ::kill(other.pid, SIGKILL);
      }
      killed = true;
    }
    if (PumpLogs(ranks, false)) continue;
    auto wait = std::chrono::milliseconds(woken_by_events ? 5000 : 20);
    if (first_failed >= 0 && !killed) {
      auto until_kill = std::chrono::duration_cast<std::chrono::milliseconds>(kill_at - now);
      wait = std::clamp(until_kill, std::chrono::milliseconds(0), wait);
    }
    dir_changed = WaitForEvents(ranks, reaper_fd, dir_watch, wait);
  }
  if (reaper_fd >= 0) ::close(reaper_fd);
  if (dir_watch >= 0) ::close(dir_watch);
  for (Rank& r : ranks) {
    if (r.pid_fd >= 0) ::close(r.pid_fd);
  }
  // Daemons a rank left behind (setsid, double fork) would otherwise keep
  // GPUs busy after the job is recorded as finished.
  EndEverything(reaper, cgroup);
  // The ranks' last words, before the result says they are done.
  PumpLogs(ranks, true);

  json rank_results = json::array();
  for (const Rank& r : ranks)
    rank_results.push_back({{"rank", r.rank}, {"exit_code", r.exit_code}});
  int exit_code = first_failed >= 0 ? ranks[static_cast<std::size_t>(first_failed)].exit_code : 0;
  std::string message, reason;
  if (first_failed >= 0) {
    message =
        "rank " + std::to_string(first_failed) + " exited with code " + std::to_string(exit_code);
    if (exit_code > 128) message += " (signal " + std::to_string(exit_code - 128) + ")";
    if (cgroup.OomKilled()) {
      reason = "OOMKilled";
      message += ": out of memory (the kernel killed a process at the job's memory limit)";
    }
    const std::string last = LastLine(ranks[static_cast<std::size_t>(first_failed)].tail);
    if (!last.empty()) message += "; its last line: " + last;
  }
  cgroup.Remove();
  json result = {{"exit_code", exit_code},
                 {"ranks", rank_results},
                 {"terminated", g_terminating != 0},
                 {"message", message},
                 {"reason", reason}};
  if (!WriteResult(dir_fd, result)) {
    std::fprintf(stderr, "headway shim: cannot write result.json: %s\n", std::strerror(errno));
    return 1;
  }
  // Without a PID namespace or cgroup, the process group is what is left to
  // end. This ends the supervisor too, which is fine now that the result is on disk.
  if (::getpgrp() == ::getpid()) ::kill(0, SIGKILL);
  return 0;
}

}  // namespace headway
