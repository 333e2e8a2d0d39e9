// The server-sent event streams the dashboard follows, read off the wire from
// the real server.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <thread>

#include "api/http_client.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

struct SseEvent {
  std::string type;
  json data;
};

struct StopReading {};

// Reads `path` as an event stream, handing each event to `on_event` until it
// returns false. Returns the HTTP status.
int ReadEvents(const TestServer& server, const std::string& path,
               const std::function<bool(const SseEvent&)>& on_event,
               std::optional<std::string> token = std::nullopt) {
  api::HttpClient http(server.url(), token.value_or(server.token()));
  std::string pending, error;
  try {
    auto status = http.Stream(
        path,
        [&](std::string_view chunk) {
          pending.append(chunk);
          for (auto end = pending.find("\n\n"); end != std::string::npos;
               end = pending.find("\n\n")) {
            std::string block = pending.substr(0, end);
            pending.erase(0, end + 2);
            SseEvent event;
            std::istringstream lines(block);
            for (std::string line; std::getline(lines, line);) {
              if (line.rfind("event: ", 0) == 0) event.type = line.substr(7);
              if (line.rfind("data: ", 0) == 0) event.data = json::parse(line.substr(6));
            }
            if (event.type.empty()) continue;  // a keep-alive comment
            if (!on_event(event)) throw StopReading{};
          }
        },
        error);
    return status.ok() ? *status : -1;
  } catch (const StopReading&) {
    return 200;
  }
}

// Prints a progress marker every 0.1 s for `steps` steps.
std::string ReportingJob(const std::string& name, int steps) {
  return "name: " + name + "\ncommand: [\"/bin/sh\", \"-c\", \"i=0; while [ $i -lt " +
         std::to_string(steps) +
         " ]; do echo HEADWAY '{\\\"step\\\": '$i', \\\"total_steps\\\": " + std::to_string(steps) +
         ", \\\"metrics\\\": {\\\"loss\\\": 1.5}}'; i=$((i+1)); sleep 0.1; done\"]\n";
}

// "done-before", ended, and "runner", reporting 40 steps and running.
void SubmitEndedAndRunning(TestServer& server) {
  server.Submit("name: done-before\nteam: vision\ncommand: \"true\"\n");
  ASSERT_TRUE(server.WaitForState("done-before", "Succeeded"));
  server.Submit(ReportingJob("runner", 40));
  ASSERT_TRUE(server.WaitForState("runner", "Running"));
}

TEST(Watch, TheJobsStreamSendsASnapshotThenOnlyWhatChanged) {
  TestServer server;
  ASSERT_NO_FATAL_FAILURE(SubmitEndedAndRunning(server));

  std::vector<SseEvent> seen;
  std::map<std::string, std::string> states;
  std::vector<std::int64_t> runner_steps;
  bool submitted_late = false;
  int status = ReadEvents(server, "/api/v1/watch/jobs", [&](const SseEvent& e) {
    seen.push_back(e);
    for (const json& job : e.data["jobs"]) {
      states[job["name"]] = job["state"];
      EXPECT_FALSE(job.contains("spec")) << "the list stream leaves the spec out";
      if (job["name"] == "runner" && job["progress"]["step"].is_number()) {
        runner_steps.push_back(job["progress"]["step"].get<std::int64_t>());
      }
    }
    if (seen.size() == 2 && !submitted_late) {
      // A job that starts and ends between two looks still shows up, ended.
      server.Submit("name: quick\ncommand: \"true\"\n");
      submitted_late = true;
    }
    return !(states["quick"] == "Succeeded" && states["runner"] == "Succeeded");
  });
  EXPECT_EQ(status, 200);
  ASSERT_GE(seen.size(), 3u);
  EXPECT_EQ(seen[0].type, "snapshot");
  EXPECT_EQ(seen[0].data["jobs"].size(), 2u);
  for (std::size_t i = 1; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].type, "update");
    for (const json& job : seen[i].data["jobs"]) {
      EXPECT_NE(job["name"], "done-before") << "an ended job that did not change is not re-sent";
    }
  }
  ASSERT_GE(runner_steps.size(), 3u);
  EXPECT_TRUE(std::is_sorted(runner_steps.begin(), runner_steps.end()));
  EXPECT_LT(runner_steps.front(), runner_steps.back()) << "progress moves in the stream";
}

TEST(Watch, TheCompactJobsStreamSendsRowsOfWhatTheListShows) {
  TestServer server;
  ASSERT_NO_FATAL_FAILURE(SubmitEndedAndRunning(server));

  // The full views, to compare the rows with.
  json views;
  ReadEvents(server, "/api/v1/watch/jobs", [&](const SseEvent& e) {
    views = e.data["jobs"];
    return false;
  });
  ASSERT_EQ(views.size(), 2u);
  const json expected_columns = {
      "name",        "team",        "state", "health", "health_reason", "percent",       "step",
      "total_steps", "eta_seconds", "loss",  "gpus",   "created_at",    "pending_reason"};
  std::vector<SseEvent> seen;
  std::map<std::string, json> latest;  // job -> its latest row as {column: value}
  int status = ReadEvents(server, "/api/v1/watch/jobs?compact=true", [&](const SseEvent& e) {
    seen.push_back(e);
    EXPECT_FALSE(e.data.contains("jobs"));
    EXPECT_EQ(e.data["columns"], expected_columns);
    for (const json& row : e.data["rows"]) {
      EXPECT_TRUE(row.is_array());
      EXPECT_EQ(row.size(), expected_columns.size());
      json named;
      for (std::size_t i = 0; i < expected_columns.size() && i < row.size(); ++i) {
        named[expected_columns[i].get<std::string>()] = row[i];
      }
      latest[named["name"]] = named;
    }
    const json& runner = latest["runner"];
    return !(runner.is_object() && runner["step"].is_number() && runner["step"].get<int>() >= 3);
  });
  EXPECT_EQ(status, 200);
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen[0].type, "snapshot");
  EXPECT_EQ(seen[0].data["rows"].size(), 2u);
  EXPECT_EQ(seen.back().type, "update");

  // An ended job's row holds its view's values.
  for (const json& view : views) {
    if (view["name"] != "done-before") continue;
    const json& row = latest["done-before"];
    for (const char* column : {"name", "team", "state", "health", "health_reason", "gpus",
                               "created_at", "pending_reason"}) {
      EXPECT_EQ(row[column], view[column]) << column;
    }
    for (const char* column : {"percent", "step", "total_steps", "eta_seconds"}) {
      EXPECT_EQ(row[column], view["progress"][column]) << column;
    }
    EXPECT_EQ(row["team"], "vision");
    EXPECT_EQ(row["state"], "Succeeded");
  }
  const json& runner = latest["runner"];
  EXPECT_EQ(runner["state"], "Running");
  EXPECT_EQ(runner["total_steps"], 40);
  EXPECT_EQ(runner["loss"], 1.5);
  EXPECT_TRUE(runner["created_at"].is_string());
}

TEST(Watch, ATeamsTokenSeesOnlyItsTeamsJobsInEitherForm) {
  TestServer server;
  server.Submit("name: ours\nteam: vision\ncommand: \"true\"\n");
  server.Submit("name: theirs\nteam: nlp\ncommand: \"true\"\n");
  ASSERT_TRUE(server.WaitForState("ours", "Succeeded"));
  ASSERT_TRUE(server.WaitForState("theirs", "Succeeded"));
  const std::string member = CreateToken(server, "vision-dev", "vision", "member");
  for (const char* path : {"/api/v1/watch/jobs", "/api/v1/watch/jobs?compact=true"}) {
    std::vector<std::string> names;
    int status = ReadEvents(
        server, path,
        [&](const SseEvent& e) {
          for (const json& job : e.data.value("jobs", json::array())) names.push_back(job["name"]);
          for (const json& row : e.data.value("rows", json::array())) names.push_back(row[0]);
          return false;  // the snapshot is enough
        },
        member);
    EXPECT_EQ(status, 200) << path;
    EXPECT_EQ(names, std::vector<std::string>{"ours"}) << path;
  }
}

TEST(Watch, ADeletedJobLeavesTheJobsStream) {
  TestServer server;
  server.Submit("name: gone\ncommand: \"true\"\n");
  ASSERT_TRUE(server.WaitForState("gone", "Succeeded"));
  std::vector<std::string> types;
  bool deleted = false;
  int status = ReadEvents(server, "/api/v1/watch/jobs", [&](const SseEvent& e) {
    types.push_back(e.type);
    if (e.type == "snapshot") {
      EXPECT_EQ(e.data["jobs"].size(), 1u);
      EXPECT_EQ(server.Cli({"delete", "job", "gone"}).exit_code, 0);
    }
    if (e.type == "deleted") {
      EXPECT_EQ(e.data["names"], json::array({"gone"}));
      deleted = true;
    }
    return !deleted;
  });
  EXPECT_EQ(status, 200);
  EXPECT_TRUE(deleted) << ::testing::PrintToString(types);
}

TEST(Watch, AJobStreamSendsItsSeriesDownsampledThenNewPoints) {
  TestServer server;
  server.Submit(ReportingJob("curve", 60));
  ASSERT_TRUE(WaitFor([&] {
    json job = server.Job("curve");
    return job["progress"]["step"].is_number() && job["progress"]["step"].get<int>() >= 20;
  }));
  bool got_job = false, got_events = false;
  std::vector<json> series;
  std::int64_t last_step = -1;
  int status = ReadEvents(server, "/api/v1/jobs/curve/watch?buckets=5", [&](const SseEvent& e) {
    if (e.type == "job") {
      got_job = true;
      EXPECT_EQ(e.data["name"], "curve");
      EXPECT_TRUE(e.data.contains("spec"));
    } else if (e.type == "events") {
      got_events = true;
      EXPECT_EQ(e.data["events"][0]["type"], "Submitted");
    } else if (e.type == "series") {
      series.push_back(e.data);
      const json& loss = e.data["metrics"]["loss"];
      if (!loss.is_null() && !loss["steps"].empty()) last_step = loss["steps"].back();
    }
    return last_step < 59;
  });
  EXPECT_EQ(status, 200);
  EXPECT_TRUE(got_job);
  EXPECT_TRUE(got_events);
  ASSERT_GE(series.size(), 2u);
  EXPECT_EQ(series[0]["reset"], true);
  EXPECT_LE(series[0]["metrics"]["loss"]["steps"].size(), 5u) << "the first series is downsampled";
  // Later messages carry only new points: together they cover every step once.
  std::int64_t previous = series[0]["metrics"]["loss"]["steps"].back();
  for (std::size_t i = 1; i < series.size(); ++i) {
    EXPECT_EQ(series[i]["reset"], false);
    for (const json& step : series[i]["metrics"]["loss"]["steps"]) {
      EXPECT_EQ(step.get<std::int64_t>(), previous + 1);
      previous = step;
    }
    EXPECT_EQ(series[i]["metrics"]["loss"]["values"][0], 1.5);
  }
  EXPECT_EQ(previous, 59);
}

TEST(Watch, AStreamOutlivesTheServersWriteDeadline) {
  // The server gives a response header 10 s to go out; a stream must not
  // inherit that deadline (it once cut every watch after 10-15 s).
  TestServer server;
  server.Submit(ReportingJob("long", 400));
  ASSERT_TRUE(server.WaitForState("long", "Running"));
  auto start = std::chrono::steady_clock::now();
  int updates = 0;
  int status = ReadEvents(server, "/api/v1/watch/jobs", [&](const SseEvent& e) {
    if (e.type == "update") ++updates;
    return std::chrono::steady_clock::now() - start < std::chrono::seconds(16);
  });
  EXPECT_EQ(status, 200) << "the stream ended early";
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(16));
  EXPECT_GE(updates, 10);
  server.Cli({"stop", "long"});
}

TEST(Watch, BadRequestsAreRefusedPlainly) {
  TestServer server;
  api::HttpClient http = server.Http();
  auto missing = http.Request("GET", "/api/v1/jobs/nope/watch");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404);
  server.Submit("name: one\ncommand: \"true\"\n");
  auto bad = http.Request("GET", "/api/v1/jobs/one/watch?buckets=1");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  auto unknown = http.Request("GET", "/api/v1/jobs/one/watch?color=red");
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->status, 400);
  for (const char* path : {"/api/v1/watch/jobs?compact=yes", "/api/v1/watch/jobs?format=rows"}) {
    auto refused = http.Request("GET", path);
    ASSERT_TRUE(refused.ok()) << path;
    EXPECT_EQ(refused->status, 400) << path;
  }
}

TEST(Watch, StreamsNeedAUserTokenWhenAuthIsOn) {
  TestServer server(2, {"--auth"});
  std::string admin = ReadFile(server.data_dir() + "/admin-token");
  admin.pop_back();
  api::HttpClient anonymous(server.url());
  auto refused = anonymous.Request("GET", "/api/v1/watch/jobs");
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 401);
  bool snapshot = false;
  EXPECT_EQ(ReadEvents(
                server, "/api/v1/watch/jobs",
                [&](const SseEvent& e) {
                  snapshot = e.type == "snapshot";
                  return false;
                },
                admin),
            200);
  EXPECT_TRUE(snapshot);
}

// The status line of a stream request sent over `conn` with `token`.
std::string OpenStream(RawConnection& conn, const TestServer& server, const std::string& token,
                       const std::string& path = "/api/v1/watch/jobs") {
  std::string host = server.url().substr(server.url().find("//") + 2);
  conn.Send("GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + token +
            "\r\n\r\n");
  conn.ReceiveUntil("\r\n", std::chrono::seconds(10));
  return conn.received().substr(0, conn.received().find("\r\n"));
}

// An open stream once kept delivering after its token was revoked.
TEST(Watch, AStreamEndsSoonAfterItsTokenIsRevoked) {
  TestServer server;
  std::string watcher = CreateToken(server, "watcher", "default", "viewer");
  ASSERT_FALSE(watcher.empty());
  RawConnection stream(server);
  ASSERT_THAT(OpenStream(stream, server, watcher), HasSubstr("200"));
  ASSERT_TRUE(stream.ReceiveUntil("event: snapshot", std::chrono::seconds(10)));
  EXPECT_EQ(Call(server, server.admin_token(), "DELETE", "/api/v1/tokens/watcher").status, 200);
  auto revoked = std::chrono::steady_clock::now();
  bool closed = false;
  stream.Receive(std::chrono::seconds(8), &closed);
  EXPECT_TRUE(closed) << "the server ended the stream";
  EXPECT_LT(std::chrono::steady_clock::now() - revoked, std::chrono::seconds(6));
  // A new stream with it is refused.
  EXPECT_EQ(Call(server, watcher, "GET", "/api/v1/watch/jobs").status, 401);
}

TEST(Watch, ATokenHoldsOnlySoManyStreams) {
  TestServer server(1, {"--max-streams-per-token", "2"});
  std::string member = CreateToken(server, "dash", "default", "member");
  RawConnection a(server), b(server), c(server);
  EXPECT_THAT(OpenStream(a, server, member), HasSubstr("200"));
  // A session counts as the token it was made from.
  Answer session = Call(server, member, "POST", "/api/v1/sessions");
  ASSERT_EQ(session.status, 201);
  EXPECT_THAT(OpenStream(b, server, session.body["token"]), HasSubstr("200"));
  Answer third = Call(server, member, "GET", "/api/v1/jobs/x/logs?follow=true");
  EXPECT_EQ(third.status, 404) << "a refused route does not count";
  EXPECT_THAT(OpenStream(c, server, member), HasSubstr("429"));
  // Other tokens are not held back.
  RawConnection d(server);
  EXPECT_THAT(OpenStream(d, server, server.admin_token()), HasSubstr("200"));
  a.Close();
  EXPECT_TRUE(WaitFor(
      [&] {
        RawConnection e(server);
        return OpenStream(e, server, member).find("200") != std::string::npos;
      },
      std::chrono::seconds(10)));
}

// Every jobs stream once polled the store on the HTTP threads: with 2,000
// active jobs, 60 streams pushed an unrelated /api/v1/queues call to 16 s.
TEST(Watch, ManyStreamsOverManyJobsLeaveOtherRequestsFast) {
  TestServer server(1, {"--max-streams-per-token", "100", "--max-connections-per-client", "200"});
  server.Submit("name: holder\ncommand: \"sleep 600\"\nresources: {gpus_per_process: 1}\n");
  ASSERT_TRUE(server.WaitForState("holder", "Running"));
  constexpr int kJobs = 2000, kStreams = 60;
  std::vector<std::thread> submitters;
  std::atomic<int> refused{0};
  for (int t = 0; t < 8; ++t) {
    submitters.emplace_back([&, t] {
      for (int i = t; i < kJobs; i += 8) {
        std::string spec = R"({"name": "q)" + std::to_string(i) +
                           R"(", "command": "true", "resources": {"gpus_per_process": 1}})";
        if (Call(server, server.admin_token(), "POST", "/api/v1/jobs", spec).status != 201)
          ++refused;
      }
    });
  }
  for (auto& t : submitters) t.join();
  ASSERT_EQ(refused.load(), 0);
  std::vector<std::unique_ptr<RawConnection>> streams;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(std::make_unique<RawConnection>(server));
    ASSERT_THAT(OpenStream(*streams.back(), server, server.admin_token()), HasSubstr("200"));
  }
  for (auto& s : streams) ASSERT_TRUE(s->ReceiveUntil("event: snapshot", std::chrono::seconds(60)));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  std::vector<double> seconds;
  for (int i = 0; i < 5; ++i) {
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(Call(server, server.admin_token(), "GET", "/api/v1/queues").status, 200);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  std::sort(seconds.begin(), seconds.end());
  EXPECT_LT(seconds[2], 1.0) << "median /api/v1/queues latency, s";
  EXPECT_LT(seconds.back(), 3.0) << "slowest /api/v1/queues latency, s";
  server.Cli({"stop", "holder"});
}

TEST(Dashboard, IsServedFromTheBinaryAndKeepsToItsFolder) {
  TestServer server;
  api::HttpClient http = server.Http();
  auto root = http.Request("GET", "/");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->status, 302);
  auto index = http.Request("GET", "/ui/");
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(index->status, 200);
  EXPECT_THAT(index->body, HasSubstr("<html"));
  auto script = http.Request("GET", "/ui/vendor/uPlot.iife.min.js");
  ASSERT_TRUE(script.ok());
  EXPECT_EQ(script->status, 200);
  EXPECT_GT(script->body.size(), 10000u);
  for (const char* evil : {"/ui/../CMakeLists.txt", "/ui/%2e%2e/%2e%2e/etc/passwd",
                           "/ui//etc/passwd", "/ui/vendor/../../README.md"}) {
    auto r = http.Request("GET", evil);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 404) << evil;
  }
  auto post = http.Request("POST", "/ui/index.html", "x");
  ASSERT_TRUE(post.ok());
  EXPECT_EQ(post->status, 405);
}

}  // namespace
}  // namespace headway::testing
