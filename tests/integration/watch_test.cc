// The server-sent event streams the dashboard follows, read off the wire from
// the real server.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <optional>

#include "api/http_client.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

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
          for (auto end = pending.find("\n\n"); end != std::string::npos; end = pending.find("\n\n")) {
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

TEST(Watch, TheJobsStreamSendsASnapshotThenOnlyWhatChanged) {
  TestServer server;
  server.Submit("name: done-before\ncommand: \"true\"\n");
  ASSERT_TRUE(server.WaitForState("done-before", "Succeeded"));
  server.Submit(ReportingJob("runner", 40));
  ASSERT_TRUE(server.WaitForState("runner", "Running"));

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
  EXPECT_EQ(ReadEvents(server, "/api/v1/watch/jobs",
                       [&](const SseEvent& e) {
                         snapshot = e.type == "snapshot";
                         return false;
                       },
                       admin),
            200);
  EXPECT_TRUE(snapshot);
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
  for (const char* evil : {"/ui/../CMakeLists.txt", "/ui/%2e%2e/%2e%2e/etc/passwd", "/ui//etc/passwd",
                           "/ui/vendor/../../README.md"}) {
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
