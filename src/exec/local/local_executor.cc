#include "exec/local/local_executor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <nlohmann/json.hpp>

#include "exec/local/process_identity.h"

extern char** environ;

namespace headway {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A TCP port free right now on loopback, for MASTER_PORT. Another process may
// take it before rank 0 binds it; torchrun has the same window.
int FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 29500;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 29500;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

std::map<std::string, std::string> InheritedEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    std::string key(entry.substr(0, eq));
    // The server's own settings and any distributed env it was started with
    // must not leak into jobs: the executor sets these per job.
    if (key.rfind("HEADWAY_", 0) == 0 || key == "RANK" || key == "LOCAL_RANK" ||
        key == "WORLD_SIZE" || key == "MASTER_ADDR" || key == "MASTER_PORT" ||
        key == "CUDA_VISIBLE_DEVICES") {
      continue;
    }
    env[key] = std::string(entry.substr(eq + 1));
  }
  return env;
}

std::string JoinIds(const std::vector<int>& ids, std::size_t begin, std::size_t end) {
  std::string out;
  for (std::size_t i = begin; i < end && i < ids.size(); ++i) {
    if (!out.empty()) out += ",";
    out += std::to_string(ids[i]);
  }
  return out;
}

Status WriteFileAtomically(const fs::path& path, const std::string& content, mode_t mode) {
  fs::path tmp = path;
  tmp += ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Unavailable("cannot write " + tmp.string() + ": " + std::strerror(errno));
  bool ok = ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) &&
            ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    return Unavailable("cannot write " + path.string() + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

struct Handle {
  pid_t pid = 0;
  std::uint64_t start_time = 0;
  std::string run_dir;

  std::string Encode() const {
    return json{{"pid", pid}, {"start_time", start_time}, {"run_dir", run_dir}}.dump();
  }
  static std::optional<Handle> Decode(const std::string& text) {
    auto j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("pid") || !j.contains("start_time") ||
        !j.contains("run_dir")) {
      return std::nullopt;
    }
    return Handle{j["pid"].get<pid_t>(), j["start_time"].get<std::uint64_t>(),
                  j["run_dir"].get<std::string>()};
  }
  bool Alive() const {
    auto start = internal::ProcessStartTime(pid);
    return start && *start == start_time;
  }
};

class LocalExecutor final : public Executor {
 public:
  explicit LocalExecutor(std::string self) : self_(std::move(self)) {}

  std::string_view Name() const override { return "local"; }

  Status Admit(const JobSpec& spec) const override {
    if (spec.resources.nodes > 1) {
      return InvalidArgument("the local executor runs on one node; this job asks for " +
                             std::to_string(spec.resources.nodes) +
                             " (submit it to a Slurm queue instead)")
          .WithField("resources.nodes");
    }
    return Status::Ok();
  }

  Result<Launched> Launch(const LaunchRequest& request) override {
    std::error_code ec;
    fs::create_directories(request.run_dir, ec);
    if (ec) return Unavailable("cannot create " + request.run_dir + ": " + ec.message());

    const JobSpec& spec = request.spec;
    const int world = spec.resources.processes();
    const int gpus_each = spec.resources.gpus_per_process;
    const std::string master_port = std::to_string(FreeLoopbackPort());
    std::string cwd = spec.working_dir.empty() ? request.run_dir : spec.working_dir;

    std::map<std::string, std::string> base = InheritedEnvironment();
    for (const auto& [k, v] : spec.env) base[k] = v;
    for (const auto& [k, v] : request.platform_env) base[k] = v;
    base["HEADWAY_ATTEMPT"] = std::to_string(request.attempt);
    base["WORLD_SIZE"] = std::to_string(world);
    base["LOCAL_WORLD_SIZE"] = std::to_string(spec.resources.processes_per_node);
    base["MASTER_ADDR"] = "127.0.0.1";
    base["MASTER_PORT"] = master_port;
    base["NODE_RANK"] = "0";
    base["GROUP_RANK"] = "0";

    json ranks = json::array();
    Launched launched;
    for (int rank = 0; rank < world; ++rank) {
      std::map<std::string, std::string> env = base;
      env["RANK"] = std::to_string(rank);
      env["LOCAL_RANK"] = std::to_string(rank);
      // A job without GPUs sees none, so it cannot grab a device by accident.
      env["CUDA_VISIBLE_DEVICES"] = JoinIds(request.gpu_ids, rank * gpus_each,
                                            (rank + 1) * gpus_each);
      json env_list = json::array();
      for (const auto& [k, v] : env) env_list.push_back(k + "=" + v);
      std::string log = (fs::path(request.run_dir) / ("rank-" + std::to_string(rank) + ".log"));
      ranks.push_back(
          {{"rank", rank}, {"argv", spec.Argv()}, {"env", env_list}, {"cwd", cwd}, {"log", log}});
      launched.logs.push_back({rank, log});
    }
    json launch = {{"ranks", ranks}, {"failure_grace_ms", spec.termination_grace.count()}};
    // 0600: the environment holds the job's report token.
    HEADWAY_RETURN_IF_ERROR(WriteFileAtomically(fs::path(request.run_dir) / "launch.json",
                                                launch.dump(), 0600));

    std::string shim_log = fs::path(request.run_dir) / "supervisor.log";
    std::vector<std::string> args = {self_, "shim", request.run_dir};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    pid_t pid = ::fork();
    if (pid < 0) return Unavailable(std::string("fork failed: ") + std::strerror(errno));
    if (pid == 0) {
      // Child: only async-signal-safe calls until exec.
      // The server blocks SIGINT/SIGTERM in its threads (to take them with
      // sigwait) and ignores SIGPIPE; a signal mask and ignored signals
      // survive exec, so without this no job could be asked to stop.
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::signal(SIGPIPE, SIG_DFL);
      ::setsid();
      int null_fd = ::open("/dev/null", O_RDONLY);
      int log_fd = ::open(shim_log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (null_fd >= 0) ::dup2(null_fd, 0);
      if (log_fd >= 0) {
        ::dup2(log_fd, 1);
        ::dup2(log_fd, 2);
      }
      ::closefrom(3);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    Handle handle{pid, 0, request.run_dir};
    auto start = internal::ProcessStartTime(pid);
    if (!start) {
      // It already exited (exec failed?). Reap it and say why.
      int status = 0;
      ::waitpid(pid, &status, 0);
      return Unavailable("the job supervisor exited at once; see " + shim_log);
    }
    handle.start_time = *start;
    {
      std::lock_guard lock(mu_);
      children_.insert(pid);
    }
    launched.handle = handle.Encode();
    launched.description = "supervisor pid " + std::to_string(pid);
    return launched;
  }

  ExecStatus Poll(const std::string& handle_text) override {
    auto handle = Handle::Decode(handle_text);
    if (!handle) return {ExecStatus::Phase::kLost, 0, "unreadable executor handle", ""};
    bool is_child;
    {
      std::lock_guard lock(mu_);
      is_child = children_.count(handle->pid) > 0;
    }
    if (is_child) {
      int status = 0;
      pid_t r = ::waitpid(handle->pid, &status, WNOHANG);
      if (r == 0) return {ExecStatus::Phase::kRunning, 0, "", ""};
      std::lock_guard lock(mu_);
      children_.erase(handle->pid);
    } else if (handle->Alive()) {
      // Started by an earlier server process; not our child to wait for.
      return {ExecStatus::Phase::kRunning, 0, "", ""};
    }
    return ReadResult(handle->run_dir);
  }

  Status Signal(const std::string& handle_text, int signal) override {
    auto handle = Handle::Decode(handle_text);
    if (!handle) return Internal("unreadable executor handle");
    // Check identity first so a reused pid is never signalled.
    if (!handle->Alive()) return Status::Ok();
    if (::kill(-handle->pid, signal) != 0 && errno != ESRCH) {
      return Unavailable(std::string("kill failed: ") + std::strerror(errno));
    }
    return Status::Ok();
  }

 private:
  static ExecStatus ReadResult(const std::string& run_dir) {
    std::ifstream in(fs::path(run_dir) / "result.json");
    if (!in) {
      return {ExecStatus::Phase::kLost, 0,
              "the job's supervisor ended without recording an exit status (it was killed)", ""};
    }
    auto result = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!result.is_object() || !result.contains("exit_code")) {
      return {ExecStatus::Phase::kLost, 0, "the job's result file is unreadable", ""};
    }
    ExecStatus status{ExecStatus::Phase::kExited, result["exit_code"].get<int>(),
                      result.value("message", ""), ""};
    return status;
  }

  const std::string self_;
  std::mutex mu_;
  std::set<pid_t> children_;  // guarded by mu_: supervisors this process forked and must reap
};

}  // namespace

std::unique_ptr<Executor> MakeLocalExecutor(std::string self_executable) {
  return std::make_unique<LocalExecutor>(std::move(self_executable));
}

}  // namespace headway
