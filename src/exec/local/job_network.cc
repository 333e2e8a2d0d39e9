#include "exec/local/job_network.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <list>
#include <string>
#include <vector>

#include "exec/local/egress_proxy.h"

namespace headway::internal {
namespace {

std::string NetError(const std::string& what) { return what + ": " + std::strerror(errno); }

bool ParseIpv4(const std::string& text, in_addr& out) {
  return ::inet_pton(AF_INET, text.c_str(), &out) == 1;
}

bool IsLoopback(const in_addr& a) { return (ntohl(a.s_addr) >> 24) == 127; }

// Sends `fd` (or none) with one byte of status over a Unix socket.
bool SendFd(int channel, int fd, char status) {
  msghdr msg{};
  iovec iov{&status, 1};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  ssize_t n;
  while ((n = ::sendmsg(channel, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  return n == 1;
}

// The status byte and the descriptor, if one came; -1 on failure.
int ReceiveFd(int channel, char& status) {
  msghdr msg{};
  iovec iov{&status, 1};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  while ((n = ::recvmsg(channel, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n != 1) return -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
      return fd;
    }
  }
  return -1;
}

// Ends the calling child when its parent (the supervisor) dies, and closes
// every descriptor but `keep` (what a forked child inherited is not its own).
void BecomeHelper(const std::vector<int>& keep) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP && sig != SIGCHLD) ::signal(sig, SIG_IGN);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  const int max_fd = static_cast<int>(::sysconf(_SC_OPEN_MAX));
  for (int fd = 0; fd < max_fd && fd < 65536; ++fd) {
    bool kept = false;
    for (int k : keep) kept = kept || k == fd;
    if (!kept) ::close(fd);
  }
}

// After a change of account, which clears the parent-death signal: set it
// again, and end at once if the parent died in between.
void DieWith(pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(0);
}

// One relayed connection: the job's side and the server's side, each
// direction buffered once.
struct Pair {
  int job = -1, server = -1;
  bool connecting = true;
  std::string to_server, to_job;
  bool job_done = false, server_done = false;  // each side sent its end
  bool job_shut = false, server_shut = false;  // its end was passed on
};

constexpr std::size_t kBuffer = 256 * 1024;
constexpr std::size_t kMaxConnections = 256;

void SetNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Reads what `from` has into `buffer` (up to kBuffer); false on its end or an error.
bool Pull(int from, std::string& buffer) {
  char chunk[65536];
  while (buffer.size() < kBuffer) {
    ssize_t n = ::read(from, chunk, std::min(sizeof chunk, kBuffer - buffer.size()));
    if (n > 0) {
      buffer.append(chunk, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    return false;
  }
  return true;
}

// Writes what it can of `buffer` to `to`; false on an error.
bool Push(int to, std::string& buffer) {
  while (!buffer.empty()) {
    ssize_t n = ::send(to, buffer.data(), buffer.size(), MSG_NOSIGNAL);
    if (n > 0) {
      buffer.erase(0, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    return false;
  }
  return true;
}

// A Unix socket address for `path`; a path too long for sun_path is reached
// through a descriptor of its directory (/proc/self/fd/N/NAME), which
// `dir_fd` then holds until the caller closes it.
bool UnixAddress(const std::string& path, sockaddr_un& at, int& dir_fd) {
  at = {};
  at.sun_family = AF_UNIX;
  dir_fd = -1;
  std::string usable = path;
  if (path.size() >= sizeof at.sun_path) {
    const std::size_t slash = path.rfind('/');
    if (slash == std::string::npos) return false;
    dir_fd =
        ::open(path.substr(0, slash == 0 ? 1 : slash).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) return false;
    usable = "/proc/self/fd/" + std::to_string(dir_fd) + path.substr(slash);
    if (usable.size() >= sizeof at.sun_path) {
      ::close(dir_fd);
      dir_fd = -1;
      errno = ENAMETOOLONG;
      return false;
    }
  }
  std::memcpy(at.sun_path, usable.c_str(), usable.size() + 1);
  return true;
}

[[noreturn]] void RunRelay(int channel, const NetworkPlan& plan) {
  char status = 0;
  const int listener = ReceiveFd(channel, status);
  if (listener < 0) ::_exit(0);  // the supervisor ended first
  ::close(channel);
  SetNonBlocking(listener);
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(static_cast<std::uint16_t>(plan.control_port));
  ParseIpv4(plan.control_host, server.sin_addr);
  sockaddr_in source{};
  source.sin_family = AF_INET;
  // A loopback source only toward a loopback server: a server on another
  // address of the host is reached from the host's own.
  const bool bind_source =
      ParseIpv4(plan.source_address, source.sin_addr) && IsLoopback(server.sin_addr);
  std::list<Pair> pairs;
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({-1, 0, 0});  // (unused: the relay ends with its supervisor, by signal)
    fds.push_back({listener, static_cast<short>(pairs.size() < kMaxConnections ? POLLIN : 0), 0});
    for (Pair& p : pairs) {
      short job_events = 0, server_events = 0;
      if (!p.job_done && p.to_server.size() < kBuffer) job_events |= POLLIN;
      if (!p.to_job.empty()) job_events |= POLLOUT;
      if (p.connecting) {
        server_events = POLLOUT;
      } else {
        if (!p.server_done && p.to_job.size() < kBuffer) server_events |= POLLIN;
        if (!p.to_server.empty()) server_events |= POLLOUT;
      }
      fds.push_back({p.job, job_events, 0});
      fds.push_back({p.server, server_events, 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      ::_exit(1);
    }
    std::size_t i = 2;
    for (auto it = pairs.begin(); it != pairs.end(); i += 2) {
      Pair& p = *it;
      const short job_ev = fds[i].revents, server_ev = fds[i + 1].revents;
      bool broken = false;
      if (p.connecting && server_ev != 0) {
        int error = 0;
        socklen_t len = sizeof error;
        ::getsockopt(p.server, SOL_SOCKET, SO_ERROR, &error, &len);
        if (error != 0) {
          broken = true;
        } else {
          p.connecting = false;
        }
      }
      // A side that hung up altogether after its end was read can take no more.
      if ((p.job_done && (job_ev & (POLLHUP | POLLERR))) ||
          (p.server_done && (server_ev & (POLLHUP | POLLERR)))) {
        broken = true;
      }
      if (!broken && (job_ev & (POLLIN | POLLHUP | POLLERR)) && !p.job_done) {
        if (!Pull(p.job, p.to_server)) p.job_done = true;
      }
      if (!broken && !p.connecting && (server_ev & (POLLIN | POLLHUP | POLLERR)) &&
          !p.server_done) {
        if (!Pull(p.server, p.to_job)) p.server_done = true;
      }
      if (!broken && !p.connecting && !Push(p.server, p.to_server)) broken = true;
      if (!broken && !Push(p.job, p.to_job)) broken = true;
      // An end is passed on once what came before it is delivered.
      if (!broken && !p.connecting && p.job_done && p.to_server.empty() && !p.server_shut) {
        ::shutdown(p.server, SHUT_WR);
        p.server_shut = true;
      }
      if (!broken && p.server_done && p.to_job.empty() && !p.job_shut) {
        ::shutdown(p.job, SHUT_WR);
        p.job_shut = true;
      }
      if (broken || (p.server_shut && p.job_shut)) {
        ::close(p.job);
        ::close(p.server);
        it = pairs.erase(it);
      } else {
        ++it;
      }
    }
    if (fds[1].revents & POLLIN) {
      for (int accepted;
           pairs.size() < kMaxConnections &&
           (accepted = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) {
        int up = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (up < 0) {
          ::close(accepted);
          continue;
        }
        if (bind_source) {
          (void)::bind(up, reinterpret_cast<const sockaddr*>(&source), sizeof source);
        }
        int r = ::connect(up, reinterpret_cast<const sockaddr*>(&server), sizeof server);
        if (r != 0 && errno != EINPROGRESS) {
          ::close(up);
          ::close(accepted);
          continue;
        }
        Pair p;
        p.job = accepted;
        p.server = up;
        p.connecting = r != 0;
        pairs.push_back(std::move(p));
      }
    }
  }
}

[[noreturn]] void RunConnector(int listener) {
  for (;;) {
    int client = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      ::_exit(1);
    }
    timeval tv{2, 0};
    ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char line[16] = {};
    ssize_t n = ::recv(client, line, sizeof line - 1, 0);
    long port = n > 0 ? std::strtol(line, nullptr, 10) : 0;
    if (port < 1 || port > 65535) {
      SendFd(client, -1, static_cast<char>(EINVAL));
      ::close(client);
      continue;
    }
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(port));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
      SendFd(client, -1, static_cast<char>(errno == 0 ? ECONNREFUSED : errno));
    } else {
      SendFd(client, fd, 0);
    }
    if (fd >= 0) ::close(fd);
    ::close(client);
  }
}

// Forks a helper that stays in the host's network; `serve` gets the channel
// on which the listening socket will come, and never returns.
Result<NetworkHelper> StartHelper(const std::string& what, const std::function<void()>& in_child,
                                  const std::function<void(int)>& serve) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return Unavailable(NetError("socketpair"));
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pair[0]);
    ::close(pair[1]);
    return Unavailable(NetError("cannot start " + what));
  }
  if (pid == 0) {
    const pid_t parent = ::getppid();
    BecomeHelper({pair[1]});
    if (in_child) in_child();
    DieWith(parent);
    serve(pair[1]);
    ::_exit(0);
  }
  ::close(pair[1]);
  return NetworkHelper{pid, pair[0]};
}

// Inside the namespace: listens at `at` and hands the socket to `helper`.
Status HandListener(NetworkHelper& helper, const sockaddr_in& at, const std::string& what) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd < 0 || ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      ::bind(fd, reinterpret_cast<const sockaddr*>(&at), sizeof at) != 0 ||
      ::listen(fd, 128) != 0) {
    Status s = Unavailable(NetError("cannot listen for " + what + " in the job"));
    if (fd >= 0) ::close(fd);
    return s;
  }
  bool sent = SendFd(helper.channel, fd, 0);
  ::close(fd);
  if (!sent) return Unavailable(NetError("cannot hand " + what + " to its helper"));
  return Status::Ok();
}

}  // namespace

nlohmann::json NetworkPlan::ToJson() const {
  return {{"isolated", isolated},
          {"control_host", control_host},
          {"control_port", control_port},
          {"source_address", source_address},
          {"connect_socket", connect_socket},
          {"outbound", outbound},
          {"outbound_allow", outbound_allow}};
}

NetworkPlan NetworkPlan::FromJson(const nlohmann::json& j) {
  NetworkPlan plan;
  if (!j.is_object()) return plan;
  plan.isolated = j.value("isolated", false);
  plan.control_host = j.value("control_host", std::string());
  plan.control_port = j.value("control_port", 0);
  plan.source_address = j.value("source_address", std::string());
  plan.connect_socket = j.value("connect_socket", std::string());
  plan.outbound = j.value("outbound", false);
  plan.outbound_allow = j.value("outbound_allow", std::vector<std::string>{});
  return plan;
}

std::string AttemptSourceAddress(const std::string& run_dir) {
  // FNV-1a of the path: stable for the attempt, spread over 2^22 addresses.
  std::uint32_t h = 2166136261u;
  for (unsigned char c : run_dir) h = (h ^ c) * 16777619u;
  std::uint32_t low = h & 0x3fffff;
  if (low == 0) low = 1;
  if (low == 0x3fffff) low = 0x3ffffe;
  const std::uint32_t address = (127u << 24) | (64u << 16) | low;
  return std::to_string(address >> 24) + "." + std::to_string((address >> 16) & 255) + "." +
         std::to_string((address >> 8) & 255) + "." + std::to_string(address & 255);
}

Status SetUpLoopback(const NetworkPlan& plan) {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable(NetError("socket"));
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) {
    ::close(fd);
    return Unavailable(NetError("cannot read the job's loopback"));
  }
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  if (::ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) {
    ::close(fd);
    return Unavailable(NetError("cannot bring up the job's loopback"));
  }
  in_addr control{};
  if (ParseIpv4(plan.control_host, control) && !IsLoopback(control)) {
    ifreq alias{};
    std::strncpy(alias.ifr_name, "lo:0", IFNAMSIZ - 1);
    auto* address = reinterpret_cast<sockaddr_in*>(&alias.ifr_addr);
    address->sin_family = AF_INET;
    address->sin_addr = control;
    if (::ioctl(fd, SIOCSIFADDR, &alias) != 0) {
      ::close(fd);
      return Unavailable(
          NetError("cannot give the job's loopback the address " + plan.control_host));
    }
  }
  ::close(fd);
  return Status::Ok();
}

Result<NetworkHelper> StartControlPlaneRelay(const NetworkPlan& plan,
                                             const std::function<void()>& in_child) {
  in_addr ignored{};
  if (!ParseIpv4(plan.control_host, ignored) || plan.control_port <= 0) {
    return NetworkHelper{};  // no way out
  }
  return StartHelper("the job's control-plane relay", in_child,
                     [&plan](int channel) { RunRelay(channel, plan); });
}

Status OpenControlPlane(const NetworkPlan& plan, NetworkHelper& relay) {
  if (relay.channel < 0) return Status::Ok();
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(static_cast<std::uint16_t>(plan.control_port));
  ParseIpv4(plan.control_host, at.sin_addr);
  return HandListener(
      relay, at,
      "the control plane at " + plan.control_host + ":" + std::to_string(plan.control_port));
}

Result<NetworkHelper> StartEgressProxy(const NetworkPlan& plan,
                                       const std::function<void()>& in_child) {
  if (!plan.outbound) return NetworkHelper{};
  EgressPolicy policy;
  for (const std::string& range : plan.outbound_allow) {
    auto cidr = Cidr::Parse(range);
    if (!cidr.ok()) return cidr.status();
    policy.allow.push_back(*cidr);
  }
  return StartHelper("the job's egress proxy", in_child, [policy](int channel) {
    char status = 0;
    const int listener = ReceiveFd(channel, status);
    if (listener < 0) ::_exit(0);  // the supervisor ended first
    ::close(channel);
    RunEgressProxy(listener, policy);
  });
}

Status OpenEgressProxy(NetworkHelper& proxy) {
  if (proxy.channel < 0) return Status::Ok();
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(static_cast<std::uint16_t>(kEgressProxyPort));
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return HandListener(proxy, at,
                      "the egress proxy at 127.0.0.1:" + std::to_string(kEgressProxyPort));
}

Result<int> BindConnectSocket(const std::string& path) {
  sockaddr_un at{};
  int dir_fd = -1;
  if (!UnixAddress(path, at, dir_fd)) return Unavailable(NetError("cannot listen on " + path));
  ::unlink(path.c_str());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::bind(fd, reinterpret_cast<const sockaddr*>(&at), sizeof at) != 0 ||
      ::listen(fd, 64) != 0) {
    Status s = Unavailable(NetError("cannot listen on " + path));
    if (fd >= 0) ::close(fd);
    if (dir_fd >= 0) ::close(dir_fd);
    return s;
  }
  if (dir_fd >= 0) ::close(dir_fd);
  return fd;
}

Result<pid_t> StartConnector(int listen_fd, const std::function<void()>& in_child) {
  pid_t pid = ::fork();
  if (pid < 0) return Unavailable(NetError("cannot start the job's connector"));
  if (pid == 0) {
    const pid_t parent = ::getppid();
    BecomeHelper({listen_fd});
    if (in_child) in_child();
    DieWith(parent);
    RunConnector(listen_fd);
  }
  return pid;
}

Result<int> ConnectIntoJob(const std::string& connect_socket, int port) {
  sockaddr_un at{};
  int dir_fd = -1;
  if (!UnixAddress(connect_socket, at, dir_fd)) {
    return Unavailable(NetError("the job's network cannot be reached"));
  }
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    if (dir_fd >= 0) ::close(dir_fd);
    return Unavailable(NetError("socket"));
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  const int connected_unix = ::connect(fd, reinterpret_cast<const sockaddr*>(&at), sizeof at);
  if (dir_fd >= 0) ::close(dir_fd);
  if (connected_unix != 0) {
    Status s = Unavailable(NetError("the job's network cannot be reached"));
    ::close(fd);
    return s;
  }
  const std::string line = std::to_string(port) + "\n";
  if (::send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    Status s = Unavailable(NetError("the job's network cannot be reached"));
    ::close(fd);
    return s;
  }
  char status = 0;
  int connected = ReceiveFd(fd, status);
  ::close(fd);
  if (connected < 0) {
    errno = status != 0 ? static_cast<unsigned char>(status) : ECONNREFUSED;
    return Unavailable(NetError("cannot connect to port " + std::to_string(port) + " in the job"));
  }
  return connected;
}

}  // namespace headway::internal
