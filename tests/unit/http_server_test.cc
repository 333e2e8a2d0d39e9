// The HTTP server's own life cycle, over a real loopback socket.
#include "api/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace headway::api {
namespace {

// A connection the server is still reading from when it goes: its session
// is destroyed with the server and gives its connection slot back to state
// that must still exist (under AddressSanitizer this was a use after free;
// without it, now and then, "double free or corruption").
TEST(HttpServer, GoesAwayCleanlyWithConnectionsStillOpen) {
  for (int round = 0; round < 3; ++round) {
    auto server = HttpServer::Start({"127.0.0.1", 0, 1}, [](const HttpRequest&) {
      return HttpResponse{204, "text/plain", "", {}, nullptr};
    });
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    std::vector<int> sockets;
    for (int i = 0; i < 4; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<std::uint16_t>((*server)->port()));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
      sockets.push_back(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // sessions are waiting
    server->reset();
    for (int fd : sockets) ::close(fd);
  }
}

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  return fd;
}

// Sends `request` and reads one whole answer with a Content-Length body.
std::string Exchange(int fd, const std::string& request) {
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    return {};
  }
  std::string in;
  char buf[65536];
  for (;;) {
    auto head_end = in.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      std::string head = in.substr(0, head_end);
      for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      auto at = head.find("content-length: ");
      std::size_t length = at == std::string::npos ? 0 : std::stoul(head.substr(at + 16));
      if (in.size() >= head_end + 4 + length) return in;
    }
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return in;
    in.append(buf, static_cast<std::size_t>(n));
  }
}

// A proxied request goes on with its headers rewritten, its (large) answer
// comes back whole, and the connection then serves the front server's own
// routes again: a proxied request never turns it into a tunnel.
TEST(HttpServer, ProxiesARequestAndKeepsTheConnectionItsOwn) {
  const std::string big(3 << 20, 'x');
  auto upstream = HttpServer::Start({"127.0.0.1", 0, 2}, [&](const HttpRequest& req) {
    HttpResponse r{200, "text/plain", "", {}, nullptr};
    r.body = req.method + " " + req.target + " auth=" + req.Header("authorization") +
             " cookie=" + req.Header("cookie") + " secret=" + req.Header("x-secret") +
             " body=" + req.body + "\n";
    if (req.path == "/up/big") r.body = big;
    r.headers.emplace_back("X-Upstream", "yes");
    return r;
  });
  ASSERT_TRUE(upstream.ok());
  const int upstream_port = (*upstream)->port();
  int answered = -1;
  auto front = HttpServer::Start({"127.0.0.1", 0, 2}, [&](const HttpRequest& req) {
    if (req.path.starts_with("/up/")) {
      auto target = std::make_shared<ProxyTarget>();
      target->host = "127.0.0.1";
      target->port = upstream_port;
      target->remove_headers = {"x-secret", "cookie"};
      target->set_headers = {{"Authorization", "token upstream"}};
      target->on_answer = [&](int status) { answered = status; };
      HttpResponse r;
      r.proxy = target;
      return r;
    }
    return HttpResponse{200, "text/plain", "front " + req.path, {}, nullptr};
  });
  ASSERT_TRUE(front.ok());
  int fd = Connect((*front)->port());
  ASSERT_GE(fd, 0);
  std::string first = Exchange(fd,
                               "POST /up/echo?q=1%202 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                               "mine\r\nCookie: a=b\r\nX-Secret: s\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_NE(first.find("200 OK"), std::string::npos) << first;
  EXPECT_NE(first.find("X-Upstream: yes"), std::string::npos) << first;
  EXPECT_NE(first.find("POST /up/echo?q=1%202 auth=token upstream cookie= secret= body=hello"),
            std::string::npos)
      << first;
  EXPECT_EQ(answered, 200);
  std::string second = Exchange(fd, "GET /up/big HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_GE(second.size(), big.size());
  EXPECT_EQ(second.substr(second.size() - big.size()), big);
  std::string third = Exchange(fd, "GET /own HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(third.find("front /own"), std::string::npos) << third;
  ::close(fd);

  // An upstream that is gone: 502, and the connection still serves.
  upstream->reset();  // its port closes
  fd = Connect((*front)->port());
  std::string gone = Exchange(fd, "GET /up/echo HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(gone.find("502 Bad Gateway"), std::string::npos) << gone;
  EXPECT_EQ(answered, 0);
  std::string after = Exchange(fd, "GET /own HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(after.find("front /own"), std::string::npos) << after;
  ::close(fd);
}

}  // namespace
}  // namespace headway::api
