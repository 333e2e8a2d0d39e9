#include "exec/local/egress_proxy.h"

#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

namespace headway::internal {
namespace {

namespace http = boost::beast::http;

constexpr std::size_t kMaxProxyHead = 16 * 1024;
constexpr int kMaxProxyConnections = 256;
constexpr int kProxyHeadTimeoutSeconds = 30;
constexpr int kProxyConnectTimeoutMs = 10000;

std::atomic<int> g_connections{0};

bool SameIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// host[:port], with IPv6 in brackets; `default_port` when none is named.
bool SplitAuthority(std::string_view authority, int default_port, std::string& host, int& port) {
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return false;
    host = std::string(authority.substr(1, close - 1));
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return false;
      port_text = rest.substr(1);
    }
  } else {
    const std::size_t colon = authority.rfind(':');
    host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  port = default_port;
  if (!port_text.empty() || authority.ends_with(':')) {
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size()) return false;
  }
  if (host.empty() || port < 1 || port > 65535) return false;
  for (char c : host) {
    if (c <= ' ' || c == '/' || c == '@' || c == '\x7f') return false;
  }
  return true;
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// A refusal the job's tool shows: the reason in the status line and body.
void Reply(int fd, int code, const char* phrase, std::string why) {
  for (char& c : why) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  why = "Headway's egress proxy: " + why;
  const std::string body = why + "\n";
  SendAll(fd, "HTTP/1.1 " + std::to_string(code) + " " + phrase + ": " + why +
                  "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
}

std::vector<IpAddress> HostAddresses() {
  std::vector<IpAddress> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (i->ifa_addr->sa_family == AF_INET) {
      out.push_back(
          IpAddress::V4(ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr)));
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      std::array<std::uint8_t, 16> bytes{};
      std::memcpy(bytes.data(), reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr.s6_addr,
                  16);
      out.push_back(IpAddress::V6(bytes));
    }
  }
  ::freeifaddrs(list);
  return out;
}

std::optional<IpAddress> AddressOf(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    return IpAddress::V4(ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr));
  }
  if (sa->sa_family == AF_INET6) {
    std::array<std::uint8_t, 16> bytes{};
    std::memcpy(bytes.data(), reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr.s6_addr, 16);
    return IpAddress::V6(bytes);
  }
  return std::nullopt;
}

// Connects within kProxyConnectTimeoutMs; -1 with errno set otherwise.
int ConnectWithin(const addrinfo& to) {
  int fd = ::socket(to.ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (::connect(fd, to.ai_addr, to.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      const int saved = errno;
      ::close(fd);
      errno = saved;
      return -1;
    }
    pollfd p{fd, POLLOUT, 0};
    int ready;
    while ((ready = ::poll(&p, 1, kProxyConnectTimeoutMs)) < 0 && errno == EINTR) {
    }
    int error = ready == 0 ? ETIMEDOUT : 0;
    socklen_t len = sizeof error;
    if (ready > 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
    if (error != 0) {
      ::close(fd);
      errno = error;
      return -1;
    }
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

// Copies `from` to `to` until `from` ends, then passes the end on.
void Pump(int from, int to) {
  char chunk[64 * 1024];
  for (;;) {
    ssize_t n = ::recv(from, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (!SendAll(to, std::string_view(chunk, static_cast<std::size_t>(n)))) {
      ::shutdown(from, SHUT_RDWR);  // the other side is gone: stop reading too
      break;
    }
  }
  ::shutdown(to, SHUT_WR);
}

void Serve(int client, const EgressPolicy& policy) {
  timeval head_timeout{kProxyHeadTimeoutSeconds, 0};
  ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &head_timeout, sizeof head_timeout);
  std::string received;
  std::size_t head_end = std::string::npos;
  char chunk[4096];
  while (head_end == std::string::npos && received.size() < kMaxProxyHead) {
    ssize_t n = ::recv(client, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    received.append(chunk, static_cast<std::size_t>(n));
    head_end = received.find("\r\n\r\n");
  }
  if (head_end == std::string::npos) {
    Reply(client, 431, "Request Header Fields Too Large", "the request head is over 16 KiB");
    return;
  }
  head_end += 4;
  auto request = ParseProxyRequest(std::string_view(received).substr(0, head_end));
  if (!request.ok()) {
    Reply(client, 400, "Bad Request", request.status().message());
    return;
  }
  const std::string target = request->host + ":" + std::to_string(request->port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port_text = std::to_string(request->port);
  const int resolved = ::getaddrinfo(request->host.c_str(), port_text.c_str(), &hints, &found);
  if (resolved != 0) {
    Reply(client, 502, "Bad Gateway",
          "cannot resolve " + request->host + ": " + ::gai_strerror(resolved));
    return;
  }
  const std::vector<IpAddress> own = HostAddresses();
  std::optional<std::string> refusal;
  int upstream = -1;
  int connect_error = 0;
  for (addrinfo* a = found; a != nullptr && upstream < 0; a = a->ai_next) {
    auto address = AddressOf(a->ai_addr);
    if (!address) continue;
    if (auto why = RefuseDestination(*address, policy, own)) {
      if (!refusal) refusal = *why;
      continue;
    }
    upstream = ConnectWithin(*a);
    if (upstream < 0) connect_error = errno;
  }
  ::freeaddrinfo(found);
  if (upstream < 0) {
    if (connect_error != 0) {
      Reply(client, 502, "Bad Gateway",
            "cannot connect to " + target + ": " + std::strerror(connect_error));
    } else {
      Reply(client, 403, "Forbidden",
            "a job may not connect to " + target + ": " + refusal.value_or("no address"));
    }
    return;
  }
  timeval none{0, 0};
  ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
  const std::string_view early = std::string_view(received).substr(head_end);
  bool started = request->tunnel ? SendAll(client, "HTTP/1.1 200 Connection established\r\n\r\n")
                                 : SendAll(upstream, request->upstream_head);
  if (started) started = SendAll(upstream, early);
  if (started) {
    std::thread back([client, upstream] { Pump(upstream, client); });
    Pump(client, upstream);
    back.join();
  }
  ::close(upstream);
}

}  // namespace

Result<ProxyRequest> ParseProxyRequest(std::string_view head) {
  http::request_parser<http::empty_body> parser;
  parser.eager(false);
  parser.header_limit(static_cast<std::uint32_t>(kMaxProxyHead));
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(head.data(), head.size()), ec);
  if ((ec && ec != http::error::need_more) || !parser.is_header_done()) {
    return InvalidArgument("a malformed request" + (ec ? ": " + ec.message() : std::string()));
  }
  const auto& message = parser.get();
  ProxyRequest out;
  const std::string_view target(message.target().data(), message.target().size());
  if (message.method() == http::verb::connect) {
    out.tunnel = true;
    if (!SplitAuthority(target, 0, out.host, out.port)) {
      return InvalidArgument("CONNECT needs host:port, not '" + std::string(target) + "'");
    }
    return out;
  }
  constexpr std::string_view kScheme = "http://";
  if (target.size() < kScheme.size() ||
      !SameIgnoringCase(target.substr(0, kScheme.size()), kScheme)) {
    return InvalidArgument(
        "a proxy request names an http:// URL (https goes through CONNECT), "
        "not '" +
        std::string(target.substr(0, 200)) + "'");
  }
  const std::string_view rest = target.substr(kScheme.size());
  const std::size_t path_at = rest.find_first_of("/?");
  std::string path = path_at == std::string_view::npos ? "/" : std::string(rest.substr(path_at));
  if (!path.empty() && path.front() == '?') path.insert(0, "/");
  if (!SplitAuthority(rest.substr(0, path_at), 80, out.host, out.port)) {
    return InvalidArgument("cannot read the host of '" + std::string(target.substr(0, 200)) + "'");
  }
  std::string upstream = std::string(message.method_string()) + " " + path + " HTTP/" +
                         std::to_string(message.version() / 10) + "." +
                         std::to_string(message.version() % 10) + "\r\n";
  for (const auto& field : message) {
    const std::string_view name(field.name_string().data(), field.name_string().size());
    if (SameIgnoringCase(name, "Proxy-Authorization") ||
        SameIgnoringCase(name, "Proxy-Connection") || SameIgnoringCase(name, "Connection") ||
        SameIgnoringCase(name, "Keep-Alive")) {
      continue;
    }
    upstream.append(name)
        .append(": ")
        .append(field.value().data(), field.value().size())
        .append("\r\n");
  }
  // One request per connection: the client's next one may name another host.
  upstream += "Connection: close\r\n\r\n";
  out.upstream_head = std::move(upstream);
  return out;
}

[[noreturn]] void RunEgressProxy(int listener, const EgressPolicy& policy) {
  for (;;) {
    int client = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) {
        if (errno == EMFILE || errno == ENFILE) ::usleep(100 * 1000);
        continue;
      }
      ::_exit(1);
    }
    if (g_connections.load() >= kMaxProxyConnections) {
      Reply(client, 503, "Service Unavailable",
            "the job has " + std::to_string(kMaxProxyConnections) + " connections open already");
      ::close(client);
      continue;
    }
    ++g_connections;
    try {
      std::thread([client, &policy] {
        Serve(client, policy);
        ::close(client);
        --g_connections;
      }).detach();
    } catch (const std::system_error&) {  // the job's cgroup is at its task limit
      --g_connections;
      Reply(client, 503, "Service Unavailable", "cannot serve another connection now");
      ::close(client);
    }
  }
}

}  // namespace headway::internal
