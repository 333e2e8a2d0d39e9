// Progress tracking against the real server: the report API with per-job
// tokens, the Kubeflow-compatible endpoint, stdout markers, health and policies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "api/http_client.h"
#include "core/time.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// A job that prints its report token and then idles until stopped.
void SubmitIdleJob(const TestServer& server, const std::string& name,
                   const std::string& extra = "") {
  server.Submit("name: " + name +
                "\ncommand: \"echo $HEADWAY_TOKEN; while true; do sleep 0.2; done\"\n"
                "termination_grace: 1s\n" +
                extra);
}

std::string TokenOf(const TestServer& server, const std::string& name) {
  std::string token;
  EXPECT_TRUE(WaitFor([&] {
    token = server.Cli({"logs", name}).out;
    return token.size() > 10;
  }));
  while (!token.empty() && token.back() == '\n') token.pop_back();
  return token;
}

std::string ProgressPath(const std::string& job) { return "/api/v1/jobs/" + job + "/progress"; }

TEST(ProgressApi, TokensAreScopedToTheirJob) {
  TestServer server;
  SubmitIdleJob(server, "alpha");
  SubmitIdleJob(server, "beta");
  std::string alpha = TokenOf(server, "alpha");
  std::string beta = TokenOf(server, "beta");
  ASSERT_NE(alpha, beta);
  std::string body = R"({"step": 1, "metrics": {"loss": 1.0}})";
  std::string response;
  EXPECT_EQ(Post(server, ProgressPath("alpha"), alpha, body, &response), 202) << response;
  EXPECT_EQ(Post(server, ProgressPath("alpha"), beta, body, &response), 403);
  EXPECT_EQ(json::parse(response)["error"]["code"], "PermissionDenied");
  EXPECT_EQ(Post(server, ProgressPath("alpha"), "", body), 401);
  EXPECT_EQ(Post(server, ProgressPath("alpha"), "hwj_forged", body), 403);
  // A missing job answers as a refused token does: reports do not reveal which jobs exist.
  EXPECT_EQ(Post(server, ProgressPath("nosuchjob"), alpha, body), 403);
  // Only the authorised report landed.
  EXPECT_EQ(server.Job("alpha")["progress"]["step"], 1);
  EXPECT_TRUE(server.Job("beta")["progress"]["step"].is_null());
  server.Cli({"stop", "alpha", "beta"});
}

TEST(ProgressApi, BadPayloadsAreRejectedClearlyAndStoreNothing) {
  TestServer server;
  SubmitIdleJob(server, "strict");
  std::string token = TokenOf(server, "strict");
  struct Case {
    std::string body;
    int status;
    std::string needle;
  };
  std::vector<Case> cases = {
      {"{not json", 400, "not valid JSON"},
      {R"({"step": -5})", 400, "step"},
      {R"({"step": "12"})", 400, "must be an integer"},
      {R"({"step": 1.5})", 400, "must be an integer"},
      {R"({"step": 1, "metrics": {"loss": "low"}})", 400, "metrics.loss"},
      {R"({"step": 1, "metrics": {"bad name!": 1}})", 400, "metric names"},
      {R"({"step": 1, "lr": 0.1})", 400, "unknown field"},
      {R"({"metrics": {"loss": 1}})", 400, "step"},
      {R"({"reports": []})", 400, "reports"},
      {R"({"step": 1, "time": "yesterday"})", 400, "time"},
      {"[1,2]", 400, "object"},
      {std::string(2 << 20, ' '), 413, "PayloadTooLarge"},
  };
  for (const Case& c : cases) {
    std::string response;
    EXPECT_EQ(Post(server, ProgressPath("strict"), token, c.body, &response), c.status)
        << c.body.substr(0, 80);
    EXPECT_THAT(response, HasSubstr(c.needle)) << c.body.substr(0, 80);
  }
  EXPECT_TRUE(server.Job("strict")["progress"]["step"].is_null());
  server.Cli({"stop", "strict"});
}

// Stdout markers are held to the same series limit as HTTP reports: what is
// over it is dropped (a job's output cannot be answered "no") and said once.
TEST(ProgressApi, StdoutMarkersCannotPassTheSeriesLimit) {
  TestServer server(4, {"--max-series-per-job", "5"});
  WriteFile(server.work_dir() + "/chatty.sh",
            "for i in $(seq 1 50); do\n"
            "  echo \"HEADWAY {\\\"step\\\": $i, \\\"metrics\\\": {\\\"m$i\\\": 1}}\"\n"
            "done\n");
  server.Submit("name: chatty\ncommand: [/bin/sh, " + server.work_dir() + "/chatty.sh]\n");
  ASSERT_TRUE(server.WaitForState("chatty", "Succeeded"));
  ASSERT_TRUE(WaitFor([&] { return server.Job("chatty")["progress"]["step"] == 50; }))
      << server.Cli({"logs", "chatty"}).out;
  EXPECT_EQ(server.Job("chatty")["progress"]["metrics"].size(), 5u)
      << server.Job("chatty")["progress"].dump();
  EXPECT_TRUE(
      WaitFor([&] { return server.HasEvent("chatty", "Warning", "beyond the limit of 5"); }));
}

TEST(ProgressApi, LimitsOnNamesPointsAndSeriesAreClearAndStoreNothing) {
  TestServer server(4, {"--max-series-per-job", "5"});
  SubmitIdleJob(server, "bounded");
  std::string token = TokenOf(server, "bounded");
  std::string response;
  // A metric name of 129 characters.
  EXPECT_EQ(Post(server, ProgressPath("bounded"), token,
                 R"({"step": 1, "metrics": {")" + std::string(129, 'a') + R"(": 1}})", &response),
            400);
  EXPECT_THAT(response, HasSubstr("metric"));
  // 10,001 points in one request.
  std::string many = R"({"reports": [)";
  for (int i = 0; i <= 10000; ++i)
    many += (i ? "," : "") + std::string(R"({"step": )") + std::to_string(i) + "}";
  many += "]}";
  EXPECT_EQ(Post(server, ProgressPath("bounded"), token, many, &response), 413);
  EXPECT_THAT(response, HasSubstr("10000"));
  // A sixth metric series, in one request or spread over several.
  EXPECT_EQ(Post(server, ProgressPath("bounded"), token,
                 R"({"step": 1, "metrics": {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1}})",
                 &response),
            400);
  EXPECT_THAT(response, HasSubstr("the limit is 5"));
  EXPECT_TRUE(server.Job("bounded")["progress"]["step"].is_null())
      << "a refused request stores nothing";
  ASSERT_EQ(Post(server, ProgressPath("bounded"), token,
                 R"({"step": 1, "metrics": {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}})"),
            202);
  EXPECT_EQ(Post(server, ProgressPath("bounded"), token, R"({"step": 2, "metrics": {"f": 1}})",
                 &response),
            400);
  EXPECT_THAT(response, HasSubstr("\"field\":\"metrics\""));
  // The series it has keep working.
  EXPECT_EQ(Post(server, ProgressPath("bounded"), token, R"({"step": 3, "metrics": {"a": 0.5}})"),
            202);
  EXPECT_EQ(server.Job("bounded")["progress"]["step"], 3);
  server.Cli({"stop", "bounded"});
}

TEST(ProgressApi, OutOfOrderAndRepeatedStepsKeepAnOrderedIdempotentSeries) {
  TestServer server;
  SubmitIdleJob(server, "series");
  std::string token = TokenOf(server, "series");
  ASSERT_EQ(Post(server, ProgressPath("series"), token, R"({"reports": [
      {"step": 30, "total_steps": 100, "metrics": {"loss": 0.3}},
      {"step": 10, "metrics": {"loss": 0.9}},
      {"step": 20, "metrics": {"loss": 0.5}}]})"),
            202);
  ASSERT_EQ(
      Post(server, ProgressPath("series"), token, R"({"step": 20, "metrics": {"loss": 0.6}})"),
      202);  // a retry with new value
  json series = Get(server, "/api/v1/jobs/series/metrics/loss");
  ASSERT_EQ(series["points"].size(), 3u);
  EXPECT_EQ(series["points"][0]["step"], 10);
  EXPECT_EQ(series["points"][1]["step"], 20);
  EXPECT_EQ(series["points"][1]["value"], 0.6);
  EXPECT_EQ(series["points"][2]["step"], 30);
  json progress = server.Job("series")["progress"];
  EXPECT_EQ(progress["step"], 30);
  EXPECT_EQ(progress["percent"], 30.0);
  EXPECT_EQ(progress["metrics"]["loss"], 0.3);  // the latest by step, not by arrival
  server.Cli({"stop", "series"});
}

TEST(ProgressApi, NonFiniteValuesAreKeptAndMeanDivergence) {
  TestServer server;
  SubmitIdleJob(server, "nan");
  std::string token = TokenOf(server, "nan");
  ASSERT_EQ(Post(server, ProgressPath("nan"), token, R"({"reports": [
      {"step": 1, "metrics": {"loss": 2.0}},
      {"step": 2, "metrics": {"loss": "NaN", "grad_norm": "Infinity"}}]})"),
            202);
  json series = Get(server, "/api/v1/jobs/nan/metrics/loss");
  EXPECT_EQ(series["points"][1]["value"], "NaN");
  EXPECT_EQ(Get(server, "/api/v1/jobs/nan/metrics/grad_norm")["points"][0]["value"], "Infinity");
  ASSERT_TRUE(WaitFor([&] { return server.Job("nan")["health"] == "Diverging"; }));
  EXPECT_THAT(server.Job("nan")["health_reason"].get<std::string>(), HasSubstr("NaN at step 2"));
  EXPECT_TRUE(WaitFor([&] { return server.HasEvent("nan", "HealthChanged", "Diverging"); }));
  EXPECT_EQ(server.State("nan"), "Running");  // default policy: notify only
  // A restart does not announce the same health again.
  server.Kill();
  server.Restart();
  ASSERT_TRUE(WaitFor([&] { return server.Job("nan")["health"] == "Diverging"; }));
  std::this_thread::sleep_for(std::chrono::seconds(1));  // several control-loop ticks
  int announced = 0;
  for (const json& e : server.Events("nan")) announced += e["type"] == "HealthChanged" ? 1 : 0;
  EXPECT_EQ(announced, 1);
  server.Cli({"stop", "nan"});
}

TEST(Policies, OnDivergeStopStopsTheProcess) {
  TestServer server(4, {"--health-confirm", "1"});
  SubmitIdleJob(server, "exploder", "policies: {on_diverge: stop}\n");
  std::string token = TokenOf(server, "exploder");
  // It learns, then blows up and stays up: a verdict held by three losses
  // and confirmed for a second acts.
  ASSERT_EQ(Post(server, ProgressPath("exploder"), token, R"({"reports": [
      {"step": 1, "metrics": {"loss": 2.3}}, {"step": 2, "metrics": {"loss": 1.1}},
      {"step": 3, "metrics": {"loss": 0.8}}, {"step": 4, "metrics": {"loss": 0.7}},
      {"step": 5, "metrics": {"loss": 0.65}}]})"),
            202);
  ASSERT_EQ(Post(server, ProgressPath("exploder"), token, R"({"reports": [
      {"step": 6, "metrics": {"loss": 80.0}}, {"step": 7, "metrics": {"loss": 900.0}},
      {"step": 8, "metrics": {"loss": 9000.0}}]})"),
            202);
  ASSERT_TRUE(server.WaitForState("exploder", "Stopped", std::chrono::seconds(15)));
  json job = server.Job("exploder");
  EXPECT_EQ(job["reason"], "Diverging");
  EXPECT_THAT(job["message"].get<std::string>(), HasSubstr("stopped by policy"));
}

TEST(Health, AJobThatHangsWhileAliveIsStalledAndCanBeStopped) {
  TestServer server(4, {"--stall-floor", "1"});
  server.Submit(R"(
name: hang
command: ["/usr/bin/python3", "-c", "import json, os, time, urllib.request\nfor step in range(1, 6):\n    req = urllib.request.Request(os.environ['HEADWAY_URL'] + '/api/v1/jobs/hang/progress', json.dumps({'step': step, 'total_steps': 100, 'metrics': {'loss': 1.0 / step}}).encode(), {'Authorization': 'Bearer ' + os.environ['HEADWAY_TOKEN'], 'Content-Type': 'application/json'})\n    urllib.request.urlopen(req).read()\n    time.sleep(0.05)\ntime.sleep(600)\n"]
policies: {on_stall: stop}
termination_grace: 1s
)");
  ASSERT_TRUE(WaitFor([&] { return server.Job("hang")["progress"]["step"] == 5; }));
  ASSERT_TRUE(server.WaitForState("hang", "Stopped", std::chrono::seconds(15)));
  EXPECT_EQ(server.Job("hang")["reason"], "Stalled");
  EXPECT_TRUE(
      WaitFor([&] { return server.HasEvent("hang", "HealthChanged", "Stalled: no new step"); }));
}

// Reports of steps 1..5 timed by a clock `offset` off the server's, 0.1 s apart.
std::string SkewedReports(std::chrono::seconds offset) {
  const headway::Time start =
      std::chrono::time_point_cast<headway::Duration>(std::chrono::system_clock::now()) + offset;
  std::string body = R"({"reports": [)";
  for (int step = 1; step <= 5; ++step) {
    if (step > 1) body += ",";
    body += R"({"step": )" + std::to_string(step) + R"(, "time": ")" +
            headway::FormatRfc3339(start + std::chrono::milliseconds(100 * step)) +
            R"(", "metrics": {"loss": )" + std::to_string(1.0 / step) + "}}";
  }
  return body + "]}";
}

TEST(Health, AClientClockBehindIsNotAStall) {
  // Ten minutes behind: by its own timestamps the job has been silent for
  // ten minutes, more than the stall floor; it reported just now.
  TestServer server(4, {"--stall-floor", "120"});
  SubmitIdleJob(server, "behind");
  ASSERT_EQ(Post(server, ProgressPath("behind"), TokenOf(server, "behind"),
                 SkewedReports(std::chrono::minutes(-10))),
            202);
  ASSERT_TRUE(
      WaitFor([&] { return server.HasEvent("behind", "Warning", "behind the server's clock"); }));
  json job = server.Job("behind");
  EXPECT_EQ(job["health"], "Progressing") << job.dump();
  EXPECT_FALSE(server.HasEvent("behind", "HealthChanged", "Stalled"));
  server.Cli({"stop", "behind"});
}

TEST(Health, AClientClockAheadDoesNotHideAStall) {
  // A year ahead: its timestamps say it reported in the future, but nothing
  // arrives after these reports.
  TestServer server(4, {"--stall-floor", "1"});
  SubmitIdleJob(server, "ahead");
  ASSERT_EQ(Post(server, ProgressPath("ahead"), TokenOf(server, "ahead"),
                 SkewedReports(std::chrono::hours(24 * 365))),
            202);
  ASSERT_TRUE(WaitFor([&] { return server.Job("ahead")["health"] == "Stalled"; }));
  EXPECT_TRUE(server.HasEvent("ahead", "Warning", "ahead of the server's clock"));
  server.Cli({"stop", "ahead"});
}

TEST(Health, FlatObjectiveIsPlateauedButImprovingIsNot) {
  TestServer server(4, {"--plateau-window", "0.25"});
  SubmitIdleJob(server, "flat");
  SubmitIdleJob(server, "learning");
  std::string flat = TokenOf(server, "flat"), learning = TokenOf(server, "learning");
  json flat_reports = json::array(), learning_reports = json::array();
  for (int step = 1; step <= 12; ++step) {
    flat_reports.push_back({{"step", step},
                            {"total_steps", 16},
                            {"metrics", {{"loss", step <= 4 ? 2.0 / step : 0.5}}}});
    learning_reports.push_back(
        {{"step", step}, {"total_steps", 16}, {"metrics", {{"loss", 2.0 / step}}}});
  }
  ASSERT_EQ(Post(server, ProgressPath("flat"), flat, json{{"reports", flat_reports}}.dump()), 202);
  ASSERT_EQ(
      Post(server, ProgressPath("learning"), learning, json{{"reports", learning_reports}}.dump()),
      202);
  ASSERT_TRUE(WaitFor([&] { return server.Job("flat")["health"] == "Plateaued"; }));
  EXPECT_EQ(server.Job("learning")["health"], "Progressing");
  server.Cli({"stop", "flat", "learning"});
}

TEST(Health, AJobThatNeverReportsIsVisibleAsSuch) {
  TestServer server(4, {"--no-report-grace", "1"});
  server.Submit("name: silent\ncommand: \"sleep 30\"\ntermination_grace: 1s\n");
  ASSERT_TRUE(server.WaitForState("silent", "Running"));
  EXPECT_EQ(server.Job("silent")["health_reason"], "waiting for first report");
  ASSERT_TRUE(WaitFor([&] {
    return server.Job("silent")["health_reason"].get<std::string>().find("no progress reported") !=
           std::string::npos;
  }));
  EXPECT_EQ(server.Job("silent")["health"], "Unknown");
  server.Cli({"stop", "silent"});
}

TEST(ProgressApi, KubeflowTrainerStatusIsAccepted) {
  TestServer server;
  SubmitIdleJob(server, "kf");
  std::string token = TokenOf(server, "kf");
  std::string response;
  EXPECT_EQ(
      Post(server, "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/kf/status",
           token, R"({"trainerStatus": {"progressPercentage": 42, "estimatedRemainingSeconds": 3600,
                   "metrics": [{"name": "loss", "value": "0.41"}, {"name": "accuracy", "value": "0.9"}],
                   "lastUpdatedTime": "2026-12-02T10:00:00Z"}})",
           &response),
      200)
      << response;
  json job = server.Job("kf");
  EXPECT_EQ(job["progress"]["percent"], 42.0);
  EXPECT_EQ(job["progress"]["metrics"]["loss"], 0.41);
  EXPECT_EQ(
      Post(server, "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/kf/status", "",
           R"({"trainerStatus": {"progressPercentage": 50}})"),
      403);
  EXPECT_EQ(
      Post(server, "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/kf/status",
           token, R"({"trainerStatus": {"progressPercentage": 500}})"),
      422);
  // The executor tells jobs where this endpoint is, and where their token file is.
  server.Submit(R"(
name: kfenv
command: "echo $KUBEFLOW_TRAINER_SERVER_URL; cat $KUBEFLOW_TRAINER_SERVER_TOKEN; echo; echo $HEADWAY_TOKEN"
)");
  ASSERT_TRUE(server.WaitForState("kfenv", "Succeeded"));
  std::string out = server.Cli({"logs", "kfenv"}).out;
  EXPECT_THAT(
      out,
      HasSubstr(server.url() +
                "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/kfenv/status"));
  std::istringstream lines(out);
  std::string url, file_token, env_token;
  std::getline(lines, url);
  std::getline(lines, file_token);
  std::getline(lines, env_token);
  EXPECT_EQ(file_token, env_token);
  server.Cli({"stop", "kf"});
}

TEST(ProgressApi, StdoutMarkersAreReports) {
  TestServer server;
  server.Submit(R"(
name: printer
command: "for i in 1 2 3 4; do echo \"HEADWAY {\\\"step\\\": $i, \\\"total_steps\\\": 4, \\\"metrics\\\": {\\\"loss\\\": 0.$i}}\"; sleep 0.2; done; echo 'HEADWAY {broken'"
)");
  ASSERT_TRUE(server.WaitForState("printer", "Succeeded"));
  ASSERT_TRUE(
      WaitFor([&] { return Get(server, "/api/v1/jobs/printer/metrics/loss")["count"] == 4; }));
  json job = server.Job("printer");
  EXPECT_EQ(job["progress"]["step"], 4);
  EXPECT_EQ(job["progress"]["percent"], 100.0);
  EXPECT_TRUE(server.HasEvent("printer", "Warning", "malformed HEADWAY"));
}

TEST(ProgressApi, LongSeriesAreDownsampledKeepingSpikes) {
  TestServer server;
  SubmitIdleJob(server, "long");
  std::string token = TokenOf(server, "long");
  json reports = json::array();
  for (int step = 1; step <= 5000; ++step) {
    reports.push_back({{"step", step}, {"metrics", {{"loss", step == 2500 ? 99.0 : 1.0}}}});
  }
  ASSERT_EQ(Post(server, ProgressPath("long"), token, json{{"reports", reports}}.dump()), 202);
  json chart = Get(server, "/api/v1/jobs/long/metrics/loss?buckets=50");
  EXPECT_EQ(chart["count"], 5000);
  ASSERT_EQ(chart["buckets"].size(), 50u);
  double max = 0;
  for (const auto& b : chart["buckets"]) max = std::max(max, b["max"].get<double>());
  EXPECT_EQ(max, 99.0);
  EXPECT_EQ(chart["buckets"][49]["last_step"], 5000);
  EXPECT_EQ(Get(server, "/api/v1/jobs/long/metrics")["metrics"], json::array({"loss"}));
  EXPECT_EQ(Get(server, "/api/v1/jobs/long/metrics/nope")["error"]["code"], "NotFound");
  server.Cli({"stop", "long"});
}

// A chart read keeps a summary of the series (SeriesSummaries): later
// reads follow new reports through it, and a late report that changes an
// old step shows too (its summary is rebuilt from the store).
TEST(ProgressApi, ChartsFollowNewAndLateReports) {
  TestServer server;
  SubmitIdleJob(server, "charted");
  std::string token = TokenOf(server, "charted");
  auto report = [&](int first, int last, auto value_of) {
    for (int from = first; from <= last; from += 5000) {  // requests under 1 MiB
      json reports = json::array();
      for (int step = from; step <= std::min(last, from + 4999); ++step) {
        reports.push_back({{"step", step}, {"metrics", {{"loss", value_of(step)}}}});
      }
      int status = Post(server, ProgressPath("charted"), token, json{{"reports", reports}}.dump());
      if (status != 202) return status;
    }
    return 202;
  };
  auto extremes = [](const json& chart) {
    double low = 1e300, high = -1e300;
    std::int64_t points = 0;
    for (const auto& b : chart["buckets"]) {
      low = std::min(low, b["min"].get<double>());
      high = std::max(high, b["max"].get<double>());
      points += b["count"].get<std::int64_t>();
    }
    return std::tuple{low, high, points};
  };
  ASSERT_EQ(report(1, 20000, [](int) { return 1.0; }), 202);
  json first = Get(server, "/api/v1/jobs/charted/metrics/loss?buckets=100");
  EXPECT_EQ(first["count"], 20000);
  EXPECT_EQ(extremes(first), std::tuple(1.0, 1.0, std::int64_t{20000}));

  ASSERT_EQ(report(20001, 20100, [](int step) { return step == 20050 ? 7.0 : 1.0; }), 202);
  json newer = Get(server, "/api/v1/jobs/charted/metrics/loss?buckets=100");
  EXPECT_EQ(newer["count"], 20100);
  EXPECT_EQ(newer["buckets"].back()["last_step"], 20100);
  EXPECT_EQ(extremes(newer), std::tuple(1.0, 7.0, std::int64_t{20100}));

  ASSERT_EQ(report(500, 500, [](int) { return -3.0; }), 202);  // an old step again
  json late = Get(server, "/api/v1/jobs/charted/metrics/loss?buckets=100");
  EXPECT_EQ(late["count"], 20100);
  EXPECT_EQ(extremes(late), std::tuple(-3.0, 7.0, std::int64_t{20100}));
  server.Cli({"stop", "charted"});
}

TEST(ProgressCli, TableShowsProgressEtaLossAndHealth) {
  TestServer server;
  SubmitIdleJob(server, "shown");
  std::string token = TokenOf(server, "shown");
  json reports = json::array();
  double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (int i = 0; i <= 10; ++i) {
    auto t = std::chrono::system_clock::time_point(
        std::chrono::milliseconds(static_cast<std::int64_t>((now - 10 + i) * 1000)));
    std::time_t tt = std::chrono::system_clock::to_time_t(t);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&tt));
    reports.push_back({{"step", i * 42},
                       {"total_steps", 1000},
                       {"time", buf},
                       {"metrics", {{"loss", 1.0 / (i + 1)}}}});
  }
  ASSERT_EQ(Post(server, ProgressPath("shown"), token, json{{"reports", reports}}.dump()), 202);
  std::string table = server.Cli({"get", "jobs"}).out;
  EXPECT_THAT(table, HasSubstr("PROGRESS"));
  EXPECT_THAT(table, HasSubstr("ETA"));
  EXPECT_THAT(table, HasSubstr(" 42% "));
  EXPECT_THAT(table, HasSubstr("420/1000"));
  EXPECT_THAT(table, HasSubstr("0.09091"));
  EXPECT_THAT(table, HasSubstr("Progressing"));
  json job = server.Job("shown");
  ASSERT_TRUE(job["progress"]["eta_seconds"].is_number());
  EXPECT_NEAR(job["progress"]["eta_seconds"].get<double>(), 580 / 42.0, 4.0);
  std::string described = server.Cli({"describe", "job", "shown"}).out;
  EXPECT_THAT(described, HasSubstr("Metrics:"));
  EXPECT_THAT(described, HasSubstr("loss:"));
  CommandResult waited = server.Cli({"wait", "shown", "--until", "step>=420", "--timeout", "5s"});
  EXPECT_EQ(waited.exit_code, 0) << waited.err;
  CommandResult timeout = server.Cli({"wait", "shown", "--until", "step>=9999", "--timeout", "1s"});
  EXPECT_EQ(timeout.exit_code, 4);
  CommandResult top = server.Cli({"top", "--iterations", "1"});
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_THAT(top.out, HasSubstr("shown"));
  server.Cli({"stop", "shown"});
  CommandResult ended = server.Cli({"wait", "shown", "--until", "Succeeded", "--timeout", "10s"});
  EXPECT_EQ(ended.exit_code, 1);
  EXPECT_THAT(ended.err, HasSubstr("ended (Stopped)"));
}

TEST(Recovery, AcknowledgedReportsSurviveAServerCrash) {
  TestServer server;
  SubmitIdleJob(server, "durable");
  std::string token = TokenOf(server, "durable");
  for (int step = 1; step <= 50; ++step) {
    ASSERT_EQ(Post(server, ProgressPath("durable"), token,
                   json{{"step", step}, {"metrics", {{"loss", 1.0 / step}}}}.dump()),
              202);
  }
  server.Kill();
  server.Restart();
  json series = Get(server, "/api/v1/jobs/durable/metrics/loss");
  EXPECT_EQ(series["count"], 50);
  EXPECT_EQ(server.Job("durable")["progress"]["step"], 50);
  server.Cli({"stop", "durable"});
}

TEST(Recovery, RepeatedCrashesUnderLoadLoseNoAcknowledgedReportAndNoJob) {
  TestServer server;
  const std::vector<std::string> names = {"load-a", "load-b", "load-c"};
  std::map<std::string, std::string> tokens;
  for (const std::string& name : names) SubmitIdleJob(server, name);
  for (const std::string& name : names) tokens[name] = TokenOf(server, name);
  std::map<std::string, std::set<std::int64_t>> acknowledged;
  std::map<std::string, std::int64_t> next_step;
  for (int round = 0; round < 4; ++round) {
    // Reporters push as fast as they can until the server dies under them.
    std::mutex mu;
    std::vector<std::thread> reporters;
    for (const std::string& name : names) {
      reporters.emplace_back([&, name] {
        api::HttpClient http(server.url(), tokens[name]);
        for (;;) {
          std::int64_t step;
          {
            std::lock_guard lock(mu);
            step = next_step[name]++;
          }
          json body = {{"step", step},
                       {"metrics", {{"loss", 1.0 / (1.0 + static_cast<double>(step))}}}};
          auto resp = http.Request("POST", ProgressPath(name), body.dump());
          if (!resp.ok()) return;  // the server is gone
          if (resp->status == 202) {
            std::lock_guard lock(mu);
            acknowledged[name].insert(step);
          }
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    server.Kill();
    for (auto& t : reporters) t.join();
    server.Restart();
    for (const std::string& name : names) {
      json series = Get(server, "/api/v1/jobs/" + name + "/metrics/loss");
      std::set<std::int64_t> stored;
      for (const json& p : series["points"]) stored.insert(p["step"].get<std::int64_t>());
      std::size_t missing = 0;
      for (std::int64_t step : acknowledged[name]) missing += stored.count(step) ? 0 : 1;
      EXPECT_EQ(missing, 0u) << name << " round " << round << ": acknowledged but lost";
      EXPECT_GT(acknowledged[name].size(), static_cast<std::size_t>(round)) << name;
    }
  }
  std::size_t total = 0;
  for (const auto& [name, steps] : acknowledged) total += steps.size();
  std::printf("acknowledged %zu reports over 4 SIGKILLs, lost 0\n", total);
  // No job lost or doubled, each still on its one and only launch.
  json list = Get(server, "/api/v1/jobs");
  ASSERT_EQ(list["jobs"].size(), names.size());
  for (const std::string& name : names) {
    EXPECT_EQ(server.State(name), "Running") << name;
    int launches = 0;
    for (const json& e : server.Events(name)) launches += e["type"] == "Launched" ? 1 : 0;
    EXPECT_EQ(launches, 1) << name;
    server.Cli({"stop", name});
  }
}

}  // namespace
}  // namespace headway::testing

#include <atomic>

#include "api/auth.h"
#include "api/http_server.h"

namespace headway::testing {
namespace {

TEST(Webhooks, StateAndHealthChangesArePosted) {
  std::mutex mu;
  std::vector<json> received;
  std::vector<std::string> signatures, bodies;
  auto receiver = api::HttpServer::Start({"127.0.0.1", 0, 1}, [&](const api::HttpRequest& req) {
    std::lock_guard lock(mu);
    received.push_back(json::parse(req.body, nullptr, false));
    signatures.push_back(req.Header("x-headway-signature"));
    bodies.push_back(req.body);
    return api::HttpResponse{204, "text/plain", "", {}, nullptr};
  });
  ASSERT_TRUE(receiver.ok());
  std::string url = "http://127.0.0.1:" + std::to_string((*receiver)->port()) + "/hooks/headway";
  TestServer server(4, {"--webhook", url});
  SubmitIdleJob(server, "hooked");
  std::string token = TokenOf(server, "hooked");
  ASSERT_EQ(
      Post(server, ProgressPath("hooked"), token, R"({"step": 1, "metrics": {"loss": "NaN"}})"),
      202);
  auto seen = [&](const std::string& type, const std::string& text) {
    std::lock_guard lock(mu);
    for (const json& e : received) {
      if (e.is_object() && e["type"] == type && e["job"] == "hooked" &&
          e["message"].get<std::string>().find(text) != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(WaitFor([&] { return seen("StateChanged", "Starting -> Running"); }));
  EXPECT_TRUE(WaitFor([&] { return seen("HealthChanged", "Diverging"); })) << [&] {
    std::string all;
    for (const json& e : server.Events("hooked")) all += e.dump() + "\n";
    std::lock_guard lock(mu);
    for (const json& e : received) all += "received: " + e.dump() + "\n";
    return all + server.ServerLog();
  }();
  // Stopped only now: a job stopped at once may end before a tick sees its health.
  ASSERT_EQ(server.Cli({"stop", "hooked"}).exit_code, 0);
  EXPECT_TRUE(WaitFor([&] { return seen("StateChanged", "Running -> Stopped"); }));
  (*receiver)->Stop();
  // Every body is signed with the secret the server keeps in its data
  // directory, and says what happened in words chat tools show.
  std::string secret = ReadFile(server.data_dir() + "/webhook-secret");
  secret.erase(secret.find_last_not_of('\n') + 1);
  ASSERT_FALSE(secret.empty());
  std::lock_guard lock(mu);
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    EXPECT_EQ(signatures[i], "sha256=" + api::HmacSha256(secret, bodies[i]));
    EXPECT_THAT(received[i]["text"].get<std::string>(), HasSubstr("headway: job hooked"));
  }
}

// A receiver that accepts connections and never answers must delay neither
// the other receivers nor the server's shutdown.
TEST(Webhooks, AHungReceiverDelaysNeitherOtherReceiversNorShutdown) {
  int hung_port = 0;
  int hung = SilentListener(hung_port);
  std::atomic<int> healthy_posts{0};
  auto healthy = api::HttpServer::Start({"127.0.0.1", 0, 1}, [&](const api::HttpRequest&) {
    ++healthy_posts;
    return api::HttpResponse{204, "text/plain", "", {}, nullptr};
  });
  ASSERT_TRUE(healthy.ok());
  TestServer server(
      4, {"--webhook", "http://127.0.0.1:" + std::to_string(hung_port) + "/hung", "--webhook",
          "http://127.0.0.1:" + std::to_string((*healthy)->port()) + "/ok"});
  for (int i = 0; i < 3; ++i)
    server.Submit("name: quick-" + std::to_string(i) + "\ncommand: \"true\"\n");
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(server.WaitForState("quick-" + std::to_string(i), "Succeeded"));
  // Each job's Queued -> Starting -> Running -> Succeeded reaches the healthy receiver.
  EXPECT_TRUE(WaitFor([&] { return healthy_posts >= 9; })) << healthy_posts;
  auto started = std::chrono::steady_clock::now();
  server.Terminate();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(15));
  (*healthy)->Stop();
  ::close(hung);
}

}  // namespace
}  // namespace headway::testing
