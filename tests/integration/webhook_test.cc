// Webhook delivery across restarts: the outbox keeps each URL's cursor in the
// store, so an event is delivered once even when the receiver or the server
// goes away in between.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/auth.h"
#include "api/http_server.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using nlohmann::json;

// A webhook receiver on a loopback port that records every body, counted
// by delivery id. Stop() takes it down; Start() brings it back on the same
// port.
class Receiver {
 public:
  // `refuse`: bodies answered 500 (counted in Refused) instead of recorded.
  explicit Receiver(std::function<bool(const json&)> refuse = nullptr)
      : refuse_(std::move(refuse)) {
    Start();
  }
  ~Receiver() { Stop(); }

  void Start() {
    auto server =
        api::HttpServer::Start({"127.0.0.1", port_, 1}, [this](const api::HttpRequest& req) {
          std::lock_guard lock(mu_);
          json body = json::parse(req.body, nullptr, false);
          if (refuse_ && refuse_(body)) {
            ++refused_;
            return api::HttpResponse{500, "text/plain", "not today", {}, nullptr};
          }
          bodies_.push_back(body);
          raw_.push_back(req.body);
          signatures_.push_back(req.Header("x-headway-signature"));
          deliveries_.push_back(req.Header("x-headway-delivery"));
          return api::HttpResponse{204, "text/plain", "", {}, nullptr};
        });
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server.value());
    port_ = server_->port();
  }
  void Stop() {
    if (server_) server_->Stop();
    server_.reset();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hooks"; }

  // Whether a StateChanged of `job` whose message contains `text` came.
  bool Saw(const std::string& job, const std::string& text) {
    std::lock_guard lock(mu_);
    for (const json& b : bodies_) {
      if (b.is_object() && b["type"] == "StateChanged" && b["job"] == job &&
          b["message"].get<std::string>().find(text) != std::string::npos) {
        return true;
      }
    }
    return false;
  }
  // Whether an event of `type` about `job` came.
  bool SawType(const std::string& job, const std::string& type) {
    std::lock_guard lock(mu_);
    for (const json& b : bodies_) {
      if (b.is_object() && b["type"] == type && b["job"] == job) return true;
    }
    return false;
  }
  int Refused() {
    std::lock_guard lock(mu_);
    return refused_;
  }
  // Posts per event id (from the body).
  std::map<std::int64_t, int> CountById() {
    std::lock_guard lock(mu_);
    std::map<std::int64_t, int> counts;
    for (const json& b : bodies_) ++counts[b.value("id", std::int64_t{-1})];
    return counts;
  }
  // Every post names its event in X-Headway-Delivery and is signed.
  void ExpectHeadersMatch(const std::string& secret) {
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < bodies_.size(); ++i) {
      EXPECT_EQ(deliveries_[i], std::to_string(bodies_[i].value("id", std::int64_t{-1})));
      EXPECT_EQ(signatures_[i], "sha256=" + api::HmacSha256(secret, raw_[i]));
    }
  }

 private:
  std::function<bool(const json&)> refuse_;
  int port_ = 0;
  std::unique_ptr<api::HttpServer> server_;
  int refused_ = 0;  // guarded by mu_
  std::mutex mu_;
  std::vector<json> bodies_;
  std::vector<std::string> raw_, signatures_, deliveries_;
};

std::string Secret(const TestServer& server) {
  std::string secret = ReadFile(server.data_dir() + "/webhook-secret");
  secret.erase(secret.find_last_not_of('\n') + 1);
  return secret;
}

void SubmitQuickJob(const TestServer& server, const std::string& name) {
  server.Submit("name: " + name + "\ncommand: \"true\"\n");
  ASSERT_TRUE(server.WaitForState(name, "Succeeded"));
}

void ExpectEachOnce(Receiver& receiver) {
  auto counts = receiver.CountById();
  EXPECT_FALSE(counts.empty());
  for (const auto& [id, count] : counts) {
    EXPECT_GT(id, 0);
    EXPECT_EQ(count, 1) << "event " << id << " delivered " << count << " times";
  }
}

// The receiver is down when the job changes and while the server stops:
// nothing is lost, the next start delivers each event exactly once.
TEST(WebhookOutbox, AnEventUndeliveredAtShutdownIsDeliveredOnceAfterRestart) {
  Receiver receiver;
  receiver.Stop();
  TestServer server(4, {"--webhook", receiver.url()});
  SubmitQuickJob(server, "while-down");
  // Stop well inside the retries (the first event gives up after ~7 s).
  server.Terminate();
  receiver.Start();
  server.Restart();
  EXPECT_TRUE(WaitFor([&] { return receiver.Saw("while-down", "Queued -> Starting"); }));
  EXPECT_TRUE(WaitFor([&] { return receiver.Saw("while-down", "Starting -> Running"); }));
  EXPECT_TRUE(WaitFor([&] { return receiver.Saw("while-down", "Running -> Succeeded"); }));
  // A later change still arrives, after the backlog, and nothing twice.
  SubmitQuickJob(server, "after");
  EXPECT_TRUE(WaitFor([&] { return receiver.Saw("after", "Running -> Succeeded"); }));
  server.Terminate();
  ExpectEachOnce(receiver);
  receiver.ExpectHeadersMatch(Secret(server));
}

// The same when the server dies (SIGKILL) instead of stopping.
TEST(WebhookOutbox, AnEventUndeliveredAtACrashIsDeliveredOnceAfterRestart) {
  Receiver receiver;
  receiver.Stop();
  TestServer server(4, {"--webhook", receiver.url()});
  SubmitQuickJob(server, "crashed");
  server.Kill();
  receiver.Start();
  server.Restart();
  EXPECT_TRUE(WaitFor([&] { return receiver.Saw("crashed", "Queued -> Starting"); }));
  EXPECT_TRUE(WaitFor([&] { return receiver.Saw("crashed", "Running -> Succeeded"); }));
  server.Terminate();
  ExpectEachOnce(receiver);
}

// Delivered events are not sent again by a restart (two of them).
TEST(WebhookOutbox, RestartsDoNotResendDeliveredEvents) {
  Receiver receiver;
  TestServer server(4, {"--webhook", receiver.url()});
  for (const std::string name : {"first", "second", "third"}) {
    if (name != "first") server.Restart();
    SubmitQuickJob(server, name);
    EXPECT_TRUE(WaitFor([&] { return receiver.Saw(name, "Running -> Succeeded"); })) << name;
    server.Terminate();
  }
  EXPECT_TRUE(receiver.Saw("first", "Queued -> Starting"));
  EXPECT_TRUE(receiver.Saw("second", "Starting -> Running"));
  auto counts = receiver.CountById();
  EXPECT_GE(counts.size(), 9u);  // three StateChanged per job at least
  ExpectEachOnce(receiver);
}

// A receiver that refuses one event: it is tried 5 times with backoff, then
// skipped, and the URL's later events still arrive; a restart does not try
// it again.
TEST(WebhookOutbox, AnEventRefusedOnEveryTryIsSkippedAndDoesNotBlockTheUrl) {
  Receiver receiver([](const json& body) {
    return body.value("message", "").find("Queued -> Starting") != std::string::npos;
  });
  TestServer server(4, {"--webhook", receiver.url()});
  SubmitQuickJob(server, "refused");
  // Tries after 0, 0.5, 1.5, 3.5 and 7.5 s.
  EXPECT_TRUE(WaitFor([&] { return receiver.Saw("refused", "Running -> Succeeded"); },
                      std::chrono::seconds(30)));
  EXPECT_EQ(receiver.Refused(), 5);
  server.Terminate();
  server.Restart();
  SubmitQuickJob(server, "next");
  EXPECT_TRUE(WaitFor([&] { return receiver.Saw("next", "Starting -> Running"); },
                      std::chrono::seconds(30)));
  server.Terminate();
  // The next job's own Queued -> Starting, 5 tries; the first job's is not tried again.
  EXPECT_EQ(receiver.Refused(), 10);
  EXPECT_FALSE(receiver.Saw("refused", "Queued -> Starting"));
  ExpectEachOnce(receiver);
  EXPECT_NE(server.ServerLog().find("gave up on event"), std::string::npos);
}

// A URL added to the configuration starts at the end of the log: the first
// server's history is not replayed to it.
TEST(WebhookOutbox, ANewUrlStartsFromTheCurrentEnd) {
  Receiver old_receiver;
  TestServer server(4, {"--webhook", old_receiver.url()});
  SubmitQuickJob(server, "before");
  EXPECT_TRUE(WaitFor([&] { return old_receiver.Saw("before", "Running -> Succeeded"); }));
  server.Terminate();
  // Same data directory, a second URL added.
  Receiver new_receiver;
  server.Restart({"--webhook", old_receiver.url(), "--webhook", new_receiver.url()});
  SubmitQuickJob(server, "later");
  EXPECT_TRUE(WaitFor([&] { return new_receiver.Saw("later", "Running -> Succeeded"); }));
  EXPECT_TRUE(WaitFor([&] { return old_receiver.Saw("later", "Running -> Succeeded"); }));
  server.Terminate();
  EXPECT_FALSE(new_receiver.Saw("before", "Queued -> Starting"));
  ExpectEachOnce(old_receiver);
  ExpectEachOnce(new_receiver);
}

// A job that never reports is called out once the no-report grace is over,
// as an event and a webhook, not only as health Unknown.
TEST(WebhookOutbox, ASilentJobIsReportedAsNoReports) {
  Receiver receiver;
  TestServer server(4, {"--webhook", receiver.url(), "--no-report-grace", "1"});
  server.Submit("name: silent\ncommand: \"sleep 30\"\ntermination_grace: 1s\n");
  ASSERT_TRUE(
      WaitFor([&] { return server.HasEvent("silent", "NoReports", "no progress reported"); }));
  EXPECT_TRUE(WaitFor([&] { return receiver.SawType("silent", "NoReports"); }));
  server.Cli({"stop", "silent"});
}

}  // namespace
}  // namespace headway::testing
