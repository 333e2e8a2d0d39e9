// `headway exec-helper RUN_DIR RANK [ARGV...]`: a command inside a running
// local attempt, as `nsenter` plus `setpriv` would run it, but from the
// attempt's own records: launch.json (the rank's environment, working
// directory, account, cgroup, and whether it is sandboxed) and ranks.json
// (the rank's pid and start time, checked so a reused pid is never entered).
//
// The server starts it (LocalExecutor::Exec) as a fresh, single-threaded
// process, which setns(2) into a mount namespace requires. It joins the
// rank's user (for a server that is not root), mount and PID namespaces,
// then forks: only a child enters the PID namespace. The child joins the
// attempt's cgroup (so stopping the job ends it too), becomes the job's
// account and runs the command; the helper waits for it and exits with its
// status, passing on SIGTERM and SIGHUP, and the child dies with it
// (PR_SET_PDEATHSIG).
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exec/local/cgroup.h"
#include "exec/local/local_executor.h"
#include "exec/local/process_identity.h"
#include "exec/local/sandbox.h"
#include "exec/ssh_server.h"

extern char** environ;

namespace headway {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

int Fail(const std::string& message) {
  std::fprintf(stderr, "headway exec: %s\n", message.c_str());
  return 126;
}

json ReadJson(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return json();
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// The parent pid in /proc/PID/stat (after the command's closing parenthesis).
pid_t ParentOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  auto close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  char state = 0;
  int parent = -1;
  if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &parent) != 2) return -1;
  return parent;
}

// A child of `parent` (the first /proc lists), or -1.
pid_t ChildOf(pid_t parent) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (ParentOf(pid) == parent) return pid;
  }
  return -1;
}

pid_t g_child = -1;

void PassOn(int sig) {
  if (g_child > 0) ::kill(g_child, sig);
}

}  // namespace

int RunExecHelper(const std::string& run_dir, int rank, const std::vector<std::string>& command,
                  const std::string& ssh_host_key_file) {
  // Read while this process may still: the job's account cannot.
  std::string ssh_host_key;
  if (!ssh_host_key_file.empty()) {
    std::ifstream key(ssh_host_key_file);
    ssh_host_key.assign(std::istreambuf_iterator<char>(key), {});
    if (ssh_host_key.empty()) return Fail("the server's SSH host key is not readable");
  }
  json launch = ReadJson(fs::path(run_dir) / "launch.json");
  json ranks = ReadJson(fs::path(run_dir) / "ranks.json");
  if (!launch.is_object() || !launch.contains("ranks") || !launch["ranks"].is_array()) {
    return Fail("the attempt's launch record is not readable");
  }
  if (!ranks.is_array()) return Fail("the attempt's ranks have not started yet");
  json rank_launch, rank_record;
  for (const json& r : launch["ranks"]) {
    if (r.value("rank", -1) == rank) rank_launch = r;
  }
  for (const json& r : ranks) {
    if (r.value("rank", -1) == rank) rank_record = r;
  }
  if (!rank_launch.is_object() || !rank_record.is_object()) {
    return Fail("the attempt has no rank " + std::to_string(rank));
  }
  // The rank is the supervisor's child for as long as it runs (the
  // supervisor reaps it and forks nothing more), so a pid reused by another
  // process since has another parent.
  const pid_t pid = rank_record.value("pid", 0);
  json supervisor = ReadJson(fs::path(run_dir) / "supervisor.json");
  const pid_t supervisor_pid = supervisor.is_object() ? supervisor.value("pid", 0) : 0;
  auto supervisor_start = internal::ProcessStartTime(supervisor_pid);
  if (pid <= 0 || supervisor_pid <= 0 || !supervisor_start ||
      *supervisor_start != supervisor.value("start_time", std::uint64_t{0}) ||
      ParentOf(pid) != supervisor_pid || !internal::ProcessStartTime(pid)) {
    return Fail("rank " + std::to_string(rank) + " is no longer running");
  }
  std::vector<std::string> env = rank_launch.value("env", std::vector<std::string>{});
  std::string cwd = rank_launch.value("cwd", std::string("/"));
  // A job in an image: the rank is crun, and its container (crun's child)
  // holds the mount namespace whose root is the image; the command runs
  // there, with the container's environment and working directory.
  pid_t namespace_pid = pid;
  if (launch.contains("container")) {
    namespace_pid = ChildOf(pid);
    json config =
        ReadJson(fs::path(run_dir) / "image" / ("rank-" + std::to_string(rank)) / "config.json");
    if (namespace_pid <= 0 || !config.is_object() || !config.contains("process")) {
      return Fail("rank " + std::to_string(rank) + "'s container is not running");
    }
    env = config["process"].value("env", std::vector<std::string>{});
    cwd = config["process"].value("cwd", std::string("/"));
  }
  std::optional<internal::UnixAccount> account;
  if (launch.contains("account") && launch["account"].is_object()) {
    account = internal::UnixAccount::FromJson(launch["account"]);
  }
  internal::AttemptCgroup cgroup =
      internal::AttemptCgroup::FromJson(launch.value("cgroup", json::object()));

  const std::string shell = SessionShell(account ? account->shell : "", env);
  std::vector<std::string> argv = command;
  if (argv.empty()) argv = {shell, "-l"};  // an interactive shell

  if (launch.contains("sandbox")) {
    // The rank's namespaces, opened before any is joined (joining the mount
    // namespace changes what /proc shows).
    const std::string ns = "/proc/" + std::to_string(namespace_pid) + "/ns/";
    int user_fd = ::geteuid() == 0 ? -1 : ::open((ns + "user").c_str(), O_RDONLY | O_CLOEXEC);
    int mnt_fd = ::open((ns + "mnt").c_str(), O_RDONLY | O_CLOEXEC);
    int pid_fd = ::open((ns + "pid").c_str(), O_RDONLY | O_CLOEXEC);
    // The job's own network, where it has one: `ssh -L` and a command's
    // connections reach what the job reaches, not the host's services.
    const bool own_network =
        launch["sandbox"].value("network", json::object()).value("isolated", false);
    int net_fd = own_network ? ::open((ns + "net").c_str(), O_RDONLY | O_CLOEXEC) : -1;
    if (mnt_fd < 0 || pid_fd < 0 || (::geteuid() != 0 && user_fd < 0) ||
        (own_network && net_fd < 0)) {
      return Fail(std::string("cannot open the rank's namespaces: ") + std::strerror(errno));
    }
    if (user_fd >= 0 && ::setns(user_fd, CLONE_NEWUSER) != 0) {
      return Fail(std::string("cannot enter the job's user namespace: ") + std::strerror(errno));
    }
    if (net_fd >= 0 && ::setns(net_fd, CLONE_NEWNET) != 0) {
      return Fail(std::string("cannot enter the job's network: ") + std::strerror(errno));
    }
    // A container's mount namespace shows no cgroup hierarchy at the host's
    // paths: its cgroup is joined here, before, and the command inherits it.
    if (launch.contains("container") && !cgroup.empty()) {
      if (!cgroup.JoinSelf()) {
        return Fail(std::string("cannot join the job's cgroup: ") + std::strerror(errno));
      }
      cgroup = internal::AttemptCgroup{};
    }
    if (::setns(mnt_fd, CLONE_NEWNS) != 0 || ::setns(pid_fd, CLONE_NEWPID) != 0) {
      return Fail(std::string("cannot enter the job's namespaces: ") + std::strerror(errno));
    }
  }

  const bool terminal = ::isatty(0) == 1;
  g_child = ::fork();
  if (g_child < 0) return Fail(std::string("fork: ") + std::strerror(errno));
  if (g_child == 0) {
    if (terminal) {
      // Its own session with the terminal as its controlling one, as sshd gives a login.
      ::setsid();
      ::ioctl(0, TIOCSCTTY, 0);
    }
    if (!cgroup.empty() && !cgroup.JoinSelf()) {
      std::fprintf(stderr, "headway exec: cannot join the job's cgroup: %s\n",
                   std::strerror(errno));
      ::_exit(126);
    }
    if (account && !internal::BecomeAccount(*account)) {
      std::fprintf(stderr, "headway exec: cannot run as %s: %s\n", account->name.c_str(),
                   std::strerror(errno));
      ::_exit(126);
    }
    // After the switch of account, which clears it: the command dies with the helper.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::umask(022);
    if (::chdir(cwd.c_str()) != 0 && ::chdir("/") != 0) ::_exit(126);
    if (!ssh_host_key.empty()) {
      // `headway ssh --stdio`: an SSH server on the command's streams, whose
      // commands run here, as the account, in the rank's environment. The
      // key is in this process's memory, which the account may read: it
      // proves nothing beyond the server's own connection, which carries it.
      SshServeOptions options;
      options.host_key = std::move(ssh_host_key);
      options.env = env;
      options.cwd = cwd;
      options.shell = shell;
      ::_exit(ServeSshConnection(0, 1, options));
    }
    std::vector<char*> args, envp;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    // As the account: what it may search of the PATH.
    for (auto& e : env) {
      if (e.rfind("PATH=", 0) == 0) e = "PATH=" + internal::SearchablePath(e.substr(5));
    }
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    // execvp looks the command up in the job's PATH.
    environ = envp.data();
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "headway exec: %s: %s\n", args[0], std::strerror(errno));
    ::_exit(errno == ENOENT ? 127 : 126);
  }
  struct sigaction pass {};
  pass.sa_handler = PassOn;
  ::sigaction(SIGTERM, &pass, nullptr);
  ::sigaction(SIGHUP, &pass, nullptr);
  ::signal(SIGINT, SIG_IGN);  // a terminal's ^C is the command's to handle
  ::signal(SIGQUIT, SIG_IGN);
  int status = 0;
  while (::waitpid(g_child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace headway
