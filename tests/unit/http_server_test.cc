// The HTTP server's own life cycle, over a real loopback socket.
#include "api/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
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
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
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
  std::string first =
      Exchange(fd,
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

// Sends `request` without waiting for an answer.
bool SendOnly(int fd, const std::string& request) {
  return ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
         static_cast<ssize_t>(request.size());
}

// Deferred answers (a progress report waiting for its group commit): one
// I/O thread keeps serving while 48 answers are pending, each connection
// gets its own answer whatever the order they complete in, and an answer
// completed after its client went, or after the server stopped, goes
// nowhere.
TEST(HttpServer, DeferredAnswersHoldNoThreadAndReachTheirOwnConnection) {
  std::mutex mu;
  std::vector<std::pair<std::string, std::shared_ptr<DeferredResponse>>> waiting;
  HttpServerOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  options.threads = 1;
  auto server = HttpServer::Start(options, [&](const HttpRequest& req) {
    if (req.path == "/now") return HttpResponse{200, "text/plain", "now", {}, nullptr};
    HttpResponse later;
    later.deferred = std::make_shared<DeferredResponse>();
    std::lock_guard lock(mu);
    waiting.push_back({req.path, later.deferred});
    return later;
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();

  std::vector<int> fds;
  for (int i = 0; i < 48; ++i) {  // within one client's 64 connections
    int fd = Connect(port);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendOnly(fd, "POST /wait/" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    fds.push_back(fd);
  }
  for (int tries = 0; tries < 500; ++tries) {
    {
      std::lock_guard lock(mu);
      if (waiting.size() == fds.size()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(waiting.size(), fds.size());

  // The one I/O thread is free while all of them wait.
  int other = Connect(port);
  ASSERT_GE(other, 0);
  EXPECT_NE(Exchange(other, "GET /now HTTP/1.1\r\nHost: x\r\n\r\n").find("now"), std::string::npos);

  // Completed from another thread, newest first.
  std::thread completer([&] {
    for (auto it = waiting.rbegin(); it != waiting.rend(); ++it) {
      it->second->Complete(HttpResponse{202, "text/plain", "for " + it->first, {}, nullptr});
    }
  });
  completer.join();
  for (std::size_t i = 0; i < fds.size(); ++i) {
    std::string answer = Exchange(fds[i], "");
    EXPECT_NE(answer.find("202 Accepted"), std::string::npos) << answer;
    EXPECT_NE(answer.find("for /wait/" + std::to_string(i)), std::string::npos) << answer;
    // The connection serves the next request.
    EXPECT_NE(Exchange(fds[i], "GET /now HTTP/1.1\r\nHost: x\r\n\r\n").find("now"),
              std::string::npos);
    ::close(fds[i]);
  }

  // A client that went before its answer; then a server that stopped.
  waiting.clear();
  int gone = Connect(port);
  ASSERT_TRUE(SendOnly(gone, "POST /wait/gone HTTP/1.1\r\nHost: x\r\n\r\n"));
  int stays = Connect(port);
  ASSERT_TRUE(SendOnly(stays, "POST /wait/stays HTTP/1.1\r\nHost: x\r\n\r\n"));
  for (int tries = 0; tries < 500 && waiting.size() < 2; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(waiting.size(), 2u);
  ::close(gone);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  waiting[0].second->Complete(HttpResponse{202, "text/plain", "late", {}, nullptr});
  server->reset();
  waiting[1].second->Complete(HttpResponse{202, "text/plain", "after the end", {}, nullptr});
  ::close(stays);
  ::close(other);
}

// Handlers that block run on the handler threads: a request `inline_for`
// accepts is answered on the I/O thread while both handler threads are
// held, and the held ones answer once released.
TEST(HttpServer, BlockingHandlersHoldNoIoThread) {
  std::mutex mu;
  std::condition_variable released_cv;
  bool released = false;
  std::atomic<int> blocked{0};
  HttpServerOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  options.threads = 1;
  options.handler_threads = 2;
  options.inline_for = [](std::string_view, std::string_view path) { return path == "/inline"; };
  auto server = HttpServer::Start(options, [&](const HttpRequest& req) {
    if (req.path == "/inline") return HttpResponse{200, "text/plain", "inline", {}, nullptr};
    ++blocked;
    std::unique_lock lock(mu);
    released_cv.wait(lock, [&] { return released; });
    return HttpResponse{200, "text/plain", "slow " + req.path, {}, nullptr};
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();
  int slow1 = Connect(port), slow2 = Connect(port);
  ASSERT_TRUE(SendOnly(slow1, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(SendOnly(slow2, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n"));
  for (int tries = 0; tries < 500 && blocked < 2; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(blocked, 2);
  int fast = Connect(port);
  EXPECT_NE(Exchange(fast, "GET /inline HTTP/1.1\r\nHost: x\r\n\r\n").find("inline"),
            std::string::npos);
  {
    std::lock_guard lock(mu);
    released = true;
  }
  released_cv.notify_all();
  EXPECT_NE(Exchange(slow1, "").find("slow /a"), std::string::npos);
  EXPECT_NE(Exchange(slow2, "").find("slow /b"), std::string::npos);
  ::close(slow1);
  ::close(slow2);
  ::close(fast);
}

}  // namespace
}  // namespace headway::api
