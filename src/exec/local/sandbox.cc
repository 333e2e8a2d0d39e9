#include "exec/local/sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "exec/local/kernel_files.h"

namespace headway::internal {
namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// The flags a remount must keep: in a user namespace the kernel refuses to
// drop nosuid/nodev/noexec that the original mount has (they are locked).
unsigned long LockedFlags(const std::string& path) {
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0) return 0;
  unsigned long flags = 0;
  if (st.f_flag & ST_NOSUID) flags |= MS_NOSUID;
  if (st.f_flag & ST_NODEV) flags |= MS_NODEV;
  if (st.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  return flags;
}

std::vector<std::string> Strings(const nlohmann::json& j, const char* key) {
  std::vector<std::string> out;
  if (j.is_object() && j.contains(key) && j[key].is_array()) {
    for (const auto& s : j[key]) {
      if (s.is_string()) out.push_back(s);
    }
  }
  return out;
}

// Mounts an overlay on /tmp: the host's /tmp below, `layer`/upper above.
// The upper folder is /tmp's mode (1777), so every account may write there,
// as in /tmp; a root supervisor makes it root's, as /tmp is.
bool MountTmpOverlay(const std::string& layer) {
  const std::string upper = layer + "/upper";
  const std::string work = layer + "/work";
  for (const std::string& dir : {upper, work}) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  if (::chmod(upper.c_str(), 01777) != 0) return false;
  std::string options = "lowerdir=/tmp,upperdir=" + upper + ",workdir=" + work;
  // In a user namespace the overlay's own records are user.* attributes.
  if (::geteuid() != 0 && ::mount("overlay", "/tmp", "overlay", MS_NOSUID | MS_NODEV,
                                  (options + ",userxattr").c_str()) == 0) {
    return true;
  }
  return ::mount("overlay", "/tmp", "overlay", MS_NOSUID | MS_NODEV, options.c_str()) == 0;
}

Status OverlayHostTmp(const std::string& layer) {
  if (MountTmpOverlay(layer)) return Status::Ok();
  // The layer's file system refused to be an upper layer (one inside /tmp
  // overlaps the lower; an overlay cannot be one): a tmpfs of the job's
  // own holds it instead, charged to the job's memory like /dev/shm.
  const int disk_error = errno;
  if (::mount("tmpfs", layer.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0 ||
      !MountTmpOverlay(layer)) {
    const int tmpfs_error = errno;
    return Unavailable("cannot give the job its own /tmp (an overlay on the host's): " +
                       std::string(std::strerror(disk_error)) +
                       "; on a tmpfs: " + std::strerror(tmpfs_error));
  }
  return Status::Ok();
}

}  // namespace

nlohmann::json UnixAccount::ToJson() const {
  return {{"name", name},     {"uid", uid},   {"gid", gid},
          {"groups", groups}, {"home", home}, {"shell", shell}};
}

UnixAccount UnixAccount::FromJson(const nlohmann::json& j) {
  UnixAccount a;
  a.name = j.value("name", "");
  a.uid = j.value("uid", uid_t{0});
  a.gid = j.value("gid", gid_t{0});
  if (j.contains("groups")) a.groups = j["groups"].get<std::vector<gid_t>>();
  a.home = j.value("home", "");
  a.shell = j.value("shell", "");
  return a;
}

Result<UnixAccount> LookUpAccount(const std::string& name) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  int rc = ::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr) {
    return NotFound("no Unix account named '" + name + "' on this machine");
  }
  UnixAccount account{pw.pw_name,
                      pw.pw_uid,
                      pw.pw_gid,
                      {},
                      pw.pw_dir ? pw.pw_dir : "",
                      pw.pw_shell ? pw.pw_shell : ""};
  int count = 64;
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  if (::getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &count) < 0) {
    groups.resize(static_cast<std::size_t>(count));
    ::getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &count);
  }
  groups.resize(static_cast<std::size_t>(count));
  account.groups = groups;
  return account;
}

UnixAccount CurrentAccount() {
  auto account = LookUpAccount([] {
    struct passwd pw {};
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    ::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found);
    return std::string(found ? found->pw_name : "");
  }());
  if (account.ok() && account->uid == ::geteuid()) return *account;
  UnixAccount a;
  a.name = std::to_string(::geteuid());
  a.uid = ::geteuid();
  a.gid = ::getegid();
  return a;
}

nlohmann::json SandboxPlan::ToJson() const {
  nlohmann::json mapped_json = nlohmann::json::array();
  for (const auto& [from, to] : mapped) mapped_json.push_back({from, to});
  return {{"hidden", hidden},
          {"exposed", exposed},
          {"exposed_read_only", exposed_read_only},
          {"mapped", mapped_json},
          {"fresh", fresh},
          {"tmp_layer", tmp_layer},
          {"masked", masked},
          {"network", network.ToJson()}};
}

SandboxPlan SandboxPlan::FromJson(const nlohmann::json& j) {
  SandboxPlan plan;
  plan.hidden = Strings(j, "hidden");
  plan.exposed = Strings(j, "exposed");
  plan.exposed_read_only = Strings(j, "exposed_read_only");
  plan.fresh = Strings(j, "fresh");
  plan.masked = Strings(j, "masked");
  if (j.is_object() && j.contains("tmp_layer") && j["tmp_layer"].is_string()) {
    plan.tmp_layer = j["tmp_layer"].get<std::string>();
  }
  if (j.contains("network")) plan.network = NetworkPlan::FromJson(j["network"]);
  if (j.contains("mapped") && j["mapped"].is_array()) {
    for (const auto& pair : j["mapped"]) {
      if (pair.is_array() && pair.size() == 2 && pair[0].is_string() && pair[1].is_string()) {
        plan.mapped.emplace_back(pair[0].get<std::string>(), pair[1].get<std::string>());
      }
    }
  }
  return plan;
}

Status EnterSandbox(const SandboxPlan& plan) {
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  int flags = CLONE_NEWNS | CLONE_NEWPID;
  if (uid != 0) flags |= CLONE_NEWUSER;
  if (plan.network.isolated) flags |= CLONE_NEWNET;
  if (::unshare(flags) != 0) {
    return Unavailable(Errno(uid != 0 ? "cannot create user, mount, PID and network namespaces "
                                        "(are unprivileged user namespaces disabled?)"
                                      : "cannot create mount, PID and network namespaces"));
  }
  if (uid != 0) {
    // Map only ourselves: inside, the job is the same user it is outside.
    if (!WriteKernelFile("/proc/self/setgroups", "deny") ||
        !WriteKernelFile("/proc/self/uid_map",
                         std::to_string(uid) + " " + std::to_string(uid) + " 1") ||
        !WriteKernelFile("/proc/self/gid_map",
                         std::to_string(gid) + " " + std::to_string(gid) + " 1")) {
      return Unavailable(Errno("cannot map the user namespace"));
    }
  }
  if (plan.network.isolated) HEADWAY_RETURN_IF_ERROR(SetUpLoopback(plan.network));
  // Nothing done here may reach the server's view of the mounts.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return Unavailable(Errno("cannot make the mounts private"));
  }
  struct Source {
    std::string path;
    int fd;
    bool read_only;
  };
  std::vector<Source> sources;
  auto close_all = [&] {
    for (const Source& s : sources) ::close(s.fd);
  };
  // Opened before the tmpfs covers them; bound from /proc/self/fd afterwards.
  for (bool ro : {false, true}) {
    for (const std::string& path : ro ? plan.exposed_read_only : plan.exposed) {
      int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
      if (fd < 0) {
        close_all();
        return Unavailable(Errno("cannot open " + path));
      }
      sources.push_back({path, fd, ro});
    }
  }
  std::vector<std::pair<int, std::string>> mapped;
  for (const auto& [from, to] : plan.mapped) {
    int fd = ::open(from.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      close_all();
      for (const auto& m : mapped) ::close(m.first);
      return Unavailable(Errno("cannot open " + from));
    }
    mapped.emplace_back(fd, to);
  }
  if (!plan.tmp_layer.empty()) {
    Status layered = OverlayHostTmp(plan.tmp_layer);
    if (!layered.ok()) {
      close_all();
      for (const auto& m : mapped) ::close(m.first);
      return layered;
    }
  }
  for (const std::string& path : plan.hidden) {
    if (::mount("tmpfs", path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") != 0) {
      close_all();
      for (const auto& m : mapped) ::close(m.first);
      return Unavailable(Errno("cannot hide " + path));
    }
  }
  for (const std::string& path : plan.fresh) {
    if (::mount("tmpfs", path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) {
      close_all();
      for (const auto& m : mapped) ::close(m.first);
      return Unavailable(Errno("cannot give the job its own " + path));
    }
  }
  for (const std::string& path : plan.masked) {
    // A node gone since the plan was made (a driver reload, a GPU taken out)
    // leaves nothing to reach: no mask is needed, and the job still starts.
    if (::mount("/dev/null", path.c_str(), nullptr, MS_BIND, nullptr) != 0 && errno != ENOENT) {
      close_all();
      for (const auto& m : mapped) ::close(m.first);
      return Unavailable(Errno("cannot mask " + path));
    }
  }
  for (const auto& [fd, to] : mapped) {
    std::string from = "/proc/self/fd/" + std::to_string(fd);
    int bound = ::mount(from.c_str(), to.c_str(), nullptr, MS_BIND | MS_REC, nullptr);
    ::close(fd);
    if (bound != 0) {
      close_all();
      return Unavailable(Errno("cannot bind a folder of the job's over " + to));
    }
  }
  // The directories leading to the exposed ones are made in the tmpfs; the
  // job's account must be able to pass through them (the server's umask is 077).
  const mode_t old_umask = ::umask(022);
  for (const Source& s : sources) {
    struct stat st {};
    ::fstat(s.fd, &st);
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(s.path).parent_path(), ec);
    if (S_ISDIR(st.st_mode)) {
      ::mkdir(s.path.c_str(), 0755);
    } else {
      int fd = ::open(s.path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
      if (fd >= 0) ::close(fd);
    }
    std::string from = "/proc/self/fd/" + std::to_string(s.fd);
    if (::mount(from.c_str(), s.path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      close_all();
      return Unavailable(Errno("cannot bind " + s.path + " into the sandbox"));
    }
    if (s.read_only &&
        ::mount(nullptr, s.path.c_str(), nullptr,
                MS_BIND | MS_REMOUNT | MS_RDONLY | LockedFlags(s.path), nullptr) != 0) {
      close_all();
      return Unavailable(Errno("cannot make " + s.path + " read-only"));
    }
  }
  ::umask(old_umask);
  close_all();
  return Status::Ok();
}

Result<pid_t> StartNamespaceReaper(const std::function<void()>& before_mount) {
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) return Unavailable(Errno("pipe"));
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(ready[0]);
    ::close(ready[1]);
    return Unavailable(Errno("cannot start the namespace's first process"));
  }
  if (pid == 0) {
    ::close(ready[0]);
    // (getppid() is 0 here, the parent being outside the namespace; the
    // parent waits on `ready`, so it cannot die before this is set unseen.)
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // It must outlive every signal the server sends the attempt's process
    // group (SIGTERM, the checkpoint warning SIGUSR1): its death ends them all.
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP && sig != SIGCHLD) ::signal(sig, SIG_IGN);
    }
    if (before_mount) before_mount();
    int error = 0;
    if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
      error = errno;
    }
    (void)!::write(ready[1], &error, sizeof error);
    ::close(ready[1]);
    if (error != 0) ::_exit(1);
    // Orphans of the namespace become its children: reap them as they die.
    // Between deaths it sleeps in sigwait (SIGCHLD blocked stays pending, and
    // a handler keeps the kernel from dropping it for a namespace's first
    // process), rather than waking every second to look.
    struct sigaction reap {};
    reap.sa_handler = [](int) {};
    ::sigaction(SIGCHLD, &reap, nullptr);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &chld, nullptr);
    for (;;) {
      while (::waitpid(-1, nullptr, WNOHANG) > 0) {
      }
      int sig = 0;
      ::sigwait(&chld, &sig);
    }
  }
  ::close(ready[1]);
  int error = -1;
  ssize_t n = ::read(ready[0], &error, sizeof error);
  ::close(ready[0]);
  if (n != sizeof error || error != 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    errno = n == sizeof error ? error : EPIPE;
    return Unavailable(Errno("cannot mount /proc for the job's PID namespace"));
  }
  return pid;
}

bool BecomeAccount(const UnixAccount& account) {
  if (::geteuid() != 0 || account.uid == 0) return true;
  if (::setgroups(account.groups.size(), account.groups.data()) != 0) return false;
  if (::setgid(account.gid) != 0 || ::setuid(account.uid) != 0) return false;
  // Defence in depth: the switch must be complete and irreversible.
  if (::getuid() != account.uid || ::geteuid() != account.uid || ::getegid() != account.gid ||
      ::setuid(0) == 0) {
    errno = EPERM;
    return false;
  }
  return true;
}

std::string SearchablePath(const std::string& path) {
  std::string out;
  std::size_t start = 0;
  bool first = true;
  while (start <= path.size()) {
    std::size_t colon = path.find(':', start);
    if (colon == std::string::npos) colon = path.size();
    const std::string dir = path.substr(start, colon - start);
    start = colon + 1;
    if (!dir.empty() && ::access(dir.c_str(), X_OK) != 0 && errno == EACCES) continue;
    if (!first) out += ':';
    out += dir;
    first = false;
  }
  return out;
}

Status ProbeSandbox(bool network) {
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return Unavailable(Errno("pipe"));
  pid_t pid = ::fork();
  if (pid < 0) return Unavailable(Errno("fork"));
  if (pid == 0) {
    ::close(report[0]);
    SandboxPlan plan;
    plan.network.isolated = network;
    Status s = EnterSandbox(plan);
    if (s.ok()) {
      auto reaper = StartNamespaceReaper({});
      if (reaper.ok()) {
        ::kill(*reaper, SIGKILL);
        ::waitpid(*reaper, nullptr, 0);
      } else {
        s = reaper.status();
      }
    }
    std::string message = s.ok() ? "" : s.message();
    (void)!::write(report[1], message.data(), message.size());
    ::_exit(s.ok() ? 0 : 1);
  }
  ::close(report[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = ::read(report[0], buf, sizeof buf)) > 0;) message.append(buf, n);
  ::close(report[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  return Unavailable(message.empty() ? "the sandbox probe failed" : message);
}

}  // namespace headway::internal
