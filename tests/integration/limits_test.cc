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

// A flood of idle sockets as large as --max-connections, all from one
// address (as a local user or a stuck client makes): it once left every
// request with 503, the jobs' progress reports too, so a healthy job with
// `on_stall: stop` turned Stalled and was stopped.
TEST(Limits, IdleSocketsLeaveRoomForReportsAndOtherClients) {
  TestServer server(1, {"--max-connections", "20", "--max-connections-per-client", "8",
                        "--report-connections", "16", "--header-timeout", "3"});
  server.Submit("name: healthy\ncommand: \"echo $HEADWAY_TOKEN; while true; do sleep 0.2; done\"\n"
                "termination_grace: 1s\npolicies: {on_stall: stop}\n");
  std::string token;
  ASSERT_TRUE(WaitFor([&] {
    token = server.Cli({"logs", "healthy"}).out;
    return token.size() > 10;
  }));
  while (!token.empty() && token.back() == '\n') token.pop_back();

  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 20; ++i) {
    idle.push_back(std::make_unique<RawConnection>(server));
    ASSERT_TRUE(idle.back()->connected());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the server accept them
  auto start = std::chrono::steady_clock::now();

  // (a) The job's progress report gets through, from the flood's own address.
  api::HttpClient job(server.url(), token);
  auto report = job.Request("POST", "/api/v1/jobs/healthy/progress",
                            R"({"step": 1, "total_steps": 100})");
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->status, 202) << report->body;

  // (b) An authenticated request from another client is served.
  RawConnection other(server, "127.0.0.2");
  ASSERT_TRUE(other.connected());
  std::string host = server.url().substr(server.url().find("//") + 2);
  ASSERT_TRUE(other.Send("GET /api/v1/queues HTTP/1.1\r\nHost: " + host +
                         "\r\nAuthorization: Bearer " + server.admin_token() +
                         "\r\nConnection: close\r\n\r\n"));
  std::string answer = other.Receive(std::chrono::seconds(5));
  EXPECT_THAT(answer, HasSubstr("HTTP/1.1 200")) << answer.substr(0, 200);

  // (c) The idle sockets are closed after the header deadline.
  EXPECT_TRUE(WaitFor(
      [&] {
        for (auto& c : idle) {
          if (!c->ClosedByServer()) return false;
        }
        return true;
      },
      std::chrono::seconds(8)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(8));
  EXPECT_EQ(server.State("healthy"), "Running");
  EXPECT_EQ(Health(server), 200);
  server.Cli({"stop", "healthy"});
}

// Beyond the general slots, reserved ones serve progress reports only.
TEST(Limits, ReservedConnectionsServeOnlyProgressReports) {
  TestServer server(1, {"--max-connections", "2", "--report-connections", "2"});
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 2; ++i) idle.push_back(std::make_unique<RawConnection>(server));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  RawConnection reserved(server);
  ASSERT_TRUE(reserved.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(reserved.Receive(std::chrono::seconds(5)), HasSubstr("too many connections"));
  RawConnection report(server);
  std::string body = R"({"step": 1})";
  ASSERT_TRUE(report.Send("POST /api/v1/jobs/nope/progress HTTP/1.1\r\nHost: x\r\n"
                          "Authorization: Bearer hwj_x\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
  std::string answer = report.Receive(std::chrono::seconds(5));
  EXPECT_THAT(answer, HasSubstr("HTTP/1.1 403")) << "served (and refused for its token), not 503";
}

}  // namespace
}  // namespace headway::testing
