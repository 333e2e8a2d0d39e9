// Connection-level limits of the real server: a cap on open connections and
// a deadline for each request, so that idle or slow clients (slowloris)
// cannot starve everyone else.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "api/http_client.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using ::testing::HasSubstr;

// A plain TCP connection to the server, for clients that misbehave.
class RawConnection {
 public:
  explicit RawConnection(const TestServer& server) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(server.url().substr(server.url().rfind(':') + 1))));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawConnection() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool connected() const { return connected_; }
  bool Send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  // What the server sent within `timeout`, until it closed the connection.
  std::string Receive(std::chrono::milliseconds timeout, bool* closed = nullptr) {
    std::string out;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        if (closed) *closed = true;
        break;
      }
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

int Health(const TestServer& server) {
  api::HttpClient http(server.url());
  auto r = http.Request("GET", "/healthz");
  return r.ok() ? r->status : -1;
}

TEST(Limits, ConnectionsBeyondTheCapAreRefusedAndTheRestServed) {
  TestServer server(1, {"--max-connections", "3"});
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(std::make_unique<RawConnection>(server));
    ASSERT_TRUE(idle.back()->connected());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the server accept them
  RawConnection extra(server);
  ASSERT_TRUE(extra.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string answer = extra.Receive(std::chrono::seconds(5));
  EXPECT_THAT(answer, HasSubstr("503"));
  EXPECT_THAT(answer, HasSubstr("too many connections"));
  // Once one goes away, a new client is served.
  idle.pop_back();
  EXPECT_TRUE(WaitFor([&] { return Health(server) == 200; }, std::chrono::seconds(10)));
}

TEST(Limits, ASlowClientIsCutOffWithoutHoldingUpOthers) {
  TestServer server(1, {"--request-timeout", "2"});
  RawConnection slow(server);
  ASSERT_TRUE(slow.connected());
  ASSERT_TRUE(slow.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n"));
  bool closed = false;
  int served = 0;
  auto start = std::chrono::steady_clock::now();
  // One header byte every 300 ms: it never finishes its request.
  while (!closed && std::chrono::steady_clock::now() - start < std::chrono::seconds(15)) {
    if (!slow.Send("X")) {
      closed = true;
      break;
    }
    slow.Receive(std::chrono::milliseconds(300), &closed);
    if (Health(server) == 200) ++served;
  }
  EXPECT_TRUE(closed) << "the server closed the slow connection";
  EXPECT_GE(served, 3) << "other clients were served meanwhile";
  EXPECT_EQ(Health(server), 200);
}

}  // namespace
}  // namespace headway::testing
