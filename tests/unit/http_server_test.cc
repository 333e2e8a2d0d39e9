// The HTTP server's own life cycle, over a real loopback socket.
#include "api/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
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

}  // namespace
}  // namespace headway::api
