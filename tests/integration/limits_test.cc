// Limits of the real server. Connection-level: a cap on open connections and
// a deadline for each request, so that idle or slow clients (slowloris)
// cannot starve everyone else. Per job: progress points, the same for HTTP,
// Kubeflow and stdout markers, and bytes of output per rank, so one job
// cannot fill the database or the disk; and logs read in explicit amounts.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "api/http_client.h"
#include "core/time.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using nlohmann::json;
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
  server.Submit(
      "name: healthy\ncommand: \"echo $HEADWAY_TOKEN; while true; do sleep 0.2; done\"\n"
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
  auto report =
      job.Request("POST", "/api/v1/jobs/healthy/progress", R"({"step": 1, "total_steps": 100})");
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

// A kept-alive connection idle between requests gives its slot back on the
// same deadline as a new one that sends nothing.
TEST(Limits, AnIdleKeptAliveConnectionIsClosedAfterTheHeaderDeadline) {
  TestServer server(1, {"--header-timeout", "1"});
  RawConnection client(server);
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(client.ReceiveUntil("HTTP/1.1 200", std::chrono::seconds(5)));
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(WaitFor([&] { return client.ClosedByServer(); }, std::chrono::seconds(8)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
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
  ASSERT_TRUE(
      report.Send("POST /api/v1/jobs/nope/progress HTTP/1.1\r\nHost: x\r\n"
                  "Authorization: Bearer hwj_x\r\nContent-Type: application/json\r\n"
                  "Content-Length: " +
                  std::to_string(body.size()) + "\r\n\r\n" + body));
  std::string answer = report.Receive(std::chrono::seconds(5));
  EXPECT_THAT(answer, HasSubstr("HTTP/1.1 403")) << "served (and refused for its token), not 503";
}

// ---- Per-job limits ----

// A job that prints its report token and then idles until stopped.
std::string IdleJobToken(const TestServer& server, const std::string& name) {
  server.Submit("name: " + name +
                "\ncommand: \"echo $HEADWAY_TOKEN; while true; do sleep 0.2; done\"\n"
                "termination_grace: 1s\n");
  std::string token;
  EXPECT_TRUE(WaitFor([&] {
    token = server.Cli({"logs", name}).out;
    return token.size() > 10;
  }));
  while (!token.empty() && token.back() == '\n') token.pop_back();
  return token;
}

// `count` reports of steps first.., each with one metric: 2 points each.
std::string Batch(int first, int count) {
  std::string body = R"({"reports": [)";
  for (int i = 0; i < count; ++i) {
    body += (i ? "," : "") + std::string(R"({"step": )") + std::to_string(first + i) +
            R"(, "metrics": {"loss": 1.5}})";
  }
  return body + "]}";
}

int CountEvents(const TestServer& server, const std::string& name, const std::string& text) {
  int n = 0;
  for (const auto& e : server.Events(name)) {
    if (e["message"].get<std::string>().find(text) != std::string::npos) ++n;
  }
  return n;
}

TEST(Limits, HttpAndKubeflowReportsPastThePointsLimitAreRefusedWholeAndSaidOnce) {
  TestServer server(1, {"--max-points-per-job", "100", "--max-series-per-job", "2"});
  std::string token = IdleJobToken(server, "capped");
  const std::string path = "/api/v1/jobs/capped/progress";
  std::string response;
  ASSERT_EQ(Post(server, path, token, Batch(1, 40), &response), 202) << response;  // 80 points
  // 40 more reports (80 points) would pass 100: refused whole, naming the limit.
  EXPECT_EQ(Post(server, path, token, Batch(41, 40), &response), 413);
  EXPECT_THAT(response, HasSubstr("PayloadTooLarge"));
  EXPECT_THAT(response, HasSubstr("the limit is 100 per job"));
  EXPECT_EQ(server.Job("capped")["progress"]["step"], 40) << "a refused batch stores nothing";
  // A retried batch replaces its steps and costs nothing.
  EXPECT_EQ(Post(server, path, token, Batch(31, 10), &response), 202) << response;
  // The Kubeflow endpoint counts against the same limit.
  const std::string kubeflow =
      "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/capped/status";
  // (Each a new step with a new loss: a value re-sent unchanged is not
  // stored again, and a percent alone is no step.)
  auto update = [](int percent) {
    return R"({"trainerStatus": {"progressPercentage": )" + std::to_string(percent) +
           R"(, "metrics": [{"name": "loss", "value": "0.)" + std::to_string(percent) +
           R"("}, {"name": "step", "value": ")" + std::to_string(percent) +
           R"("}], "lastUpdatedTime": "2026-12-02T10:00:00Z"}})";
  };
  std::string report = update(50);
  int accepted = 0;
  int status = 0;
  for (int i = 0; i < 20 && (status = Post(server, kubeflow, token, report, &response)) == 200;
       ++i) {
    report = update(51 + i);
    ++accepted;
  }
  EXPECT_EQ(accepted, 10) << "(100 - 80) / 2 points";
  EXPECT_EQ(status, 413) << response;
  EXPECT_THAT(response, HasSubstr("points"));
  // One event says what was refused and the limit, however many refusals.
  EXPECT_EQ(Post(server, path, token, Batch(100, 1)), 413);
  ASSERT_TRUE(
      WaitFor([&] { return server.HasEvent("capped", "Warning", "limit of 100 points per job"); }));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(CountEvents(server, "capped", "points per job"), 1);
  // The series limit is said too.
  EXPECT_EQ(Post(server, path, token, R"({"step": 300, "metrics": {"a": 1, "b": 1}})", &response),
            400);
  EXPECT_THAT(response, HasSubstr("the limit is 2"));
  ASSERT_TRUE(WaitFor(
      [&] { return server.HasEvent("capped", "Warning", "metric series beyond the limit of 2"); }));
  server.Cli({"stop", "capped"});
}

TEST(Limits, StdoutMarkersPastThePointsLimitAreDroppedAndSaidOnce) {
  TestServer server(1, {"--max-points-per-job", "1000"});
  // 20,000 markers of 2 points each: only the first 500 fit.
  WriteFile(server.work_dir() + "/markers.sh",
            "awk 'BEGIN { for (i = 1; i <= 20000; i++) "
            "printf \"HEADWAY {\\\"step\\\": %d, \\\"metrics\\\": {\\\"loss\\\": 1}}\\n\", i }'\n");
  server.Submit("name: markers\ncommand: [/bin/sh, " + server.work_dir() + "/markers.sh]\n");
  ASSERT_TRUE(server.WaitForState("markers", "Succeeded"));
  ASSERT_TRUE(WaitFor([&] {
    return server.HasEvent("markers", "Warning", "limit of 1000 points per job");
  })) << server.Events("markers").size();
  // The event is said when the first report is dropped, while the rest of the
  // output may still be being read: it counts what was dropped by then.
  EXPECT_TRUE(server.HasEvent("markers", "Warning", "HEADWAY output line report(s)"));
  EXPECT_EQ(server.Job("markers")["progress"]["step"], 500);
  EXPECT_EQ(CountEvents(server, "markers", "points per job"), 1);
}

// A server that restarts rescans the job's output from the start: what it
// stored already is not counted again.
TEST(Limits, MarkersRescannedAfterARestartDoNotCountTwice) {
  TestServer server(1, {"--max-points-per-job", "11000"});
  const std::string go = server.work_dir() + "/go";
  WriteFile(
      server.work_dir() + "/phases.sh",
      "awk 'BEGIN { for (i = 1; i <= 5000; i++) "
      "printf \"HEADWAY {\\\"step\\\": %d, \\\"metrics\\\": {\\\"loss\\\": 1}}\\n\", i }'\n"
      "while [ ! -e " +
          go +
          " ]; do sleep 0.1; done\n"
          "awk 'BEGIN { for (i = 5001; i <= 5400; i++) "
          "printf \"HEADWAY {\\\"step\\\": %d, \\\"metrics\\\": {\\\"loss\\\": 1}}\\n\", i }'\n");
  server.Submit("name: phases\ncommand: [/bin/sh, " + server.work_dir() + "/phases.sh]\n");
  ASSERT_TRUE(WaitFor([&] { return server.Job("phases")["progress"]["step"] == 5000; }));
  server.Kill();  // 10,000 points stored; the rescan would add 10,000 more
  server.Restart();
  WriteFile(go, "");
  ASSERT_TRUE(server.WaitForState("phases", "Succeeded"));
  ASSERT_TRUE(WaitFor([&] { return server.Job("phases")["progress"]["step"] == 5400; }))
      << server.Job("phases")["progress"].dump();
  EXPECT_EQ(CountEvents(server, "phases", "points per job"), 0);
}

std::uint64_t FileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

std::string NumberedLines(int first, int last) {
  std::string out;
  for (int i = first; i <= last; ++i) out += std::to_string(i) + "\n";
  return out;
}

// One member's loop of submissions cannot fill the queue: past
// --max-queued-jobs waiting jobs of a team, a member's next submit is 429
// (an admin's is not bounded), and it is taken again once some start.
TEST(Limits, AMembersSubmitsStopAtTheTeamsQueuedJobLimit) {
  TestServer server(1, {"--max-queued-jobs", "3"});
  const std::string alice = CreateToken(server, "alice", "a", "member");
  auto submit = [&](const std::string& token, const std::string& name) {
    return Call(server, token, "POST", "/api/v1/jobs",
                R"({"name": ")" + name + R"(", "team": "a", "command": "sleep 60",
                    "termination_grace": "1s", "resources": {"gpus_per_process": 1}})");
  };
  ASSERT_EQ(submit(alice, "holds-the-gpu").status, 201);
  ASSERT_TRUE(server.WaitForState("holds-the-gpu", "Running"));
  for (const char* name : {"waits-1", "waits-2", "waits-3"}) {
    ASSERT_EQ(submit(alice, name).status, 201) << name;
  }
  Answer refused = submit(alice, "waits-4");
  EXPECT_EQ(refused.status, 429) << refused.raw;
  EXPECT_THAT(refused.raw, HasSubstr("--max-queued-jobs 3"));
  EXPECT_EQ(submit(server.admin_token(), "admins-job").status, 201);
  // Once one of them runs, a member may submit again.
  Call(server, server.admin_token(), "POST", "/api/v1/jobs/admins-job/stop");
  Call(server, server.admin_token(), "POST", "/api/v1/jobs/holds-the-gpu/stop");
  ASSERT_TRUE(server.WaitForState("waits-1", "Running"));
  EXPECT_TRUE(WaitFor([&] { return submit(alice, "waits-4").status == 201; }));
  for (const char* name : {"waits-1", "waits-2", "waits-3", "waits-4"}) {
    Call(server, server.admin_token(), "POST", std::string("/api/v1/jobs/") + name + "/stop");
  }
}

TEST(Limits, ARankLogIsRotatedSoAFastWriterCannotFillTheDisk) {
  TestServer server(1, {"--max-log-bytes", "65536"});
  // About 6.9 MB of numbered lines, as fast as the machine writes them.
  server.Submit("name: flood\ncommand: [seq, '1', '1000000']\n");
  ASSERT_TRUE(server.WaitForState("flood", "Succeeded"));
  std::string run_dir = server.data_dir() + "/jobs/flood/attempt-0";
  std::uint64_t kept = FileSize(run_dir + "/rank-0.log") + FileSize(run_dir + "/rank-0.log.1");
  const std::uint64_t index =
      FileSize(run_dir + "/rank-0.log.times") + FileSize(run_dir + "/rank-0.log.1.times");
  EXPECT_LE(kept + index, 65536u);
  EXPECT_GE(kept, 32768u - 1024);
  EXPECT_FALSE(std::filesystem::exists(run_dir + "/rank-0.log.2"));
  // The newest output is kept, in whole lines, in order.
  CommandResult all = server.Cli({"logs", "flood"});
  ASSERT_FALSE(all.out.empty());
  std::istringstream lines(all.out);
  std::string line;
  int expected = -1, count = 0;
  while (std::getline(lines, line)) {
    int n = std::stoi(line);
    if (expected >= 0) {
      EXPECT_EQ(n, expected) << "line " << count;
    }
    expected = n + 1;
    ++count;
  }
  EXPECT_EQ(expected, 1000001) << "ends with the last line written";
  EXPECT_EQ(all.out.size(), kept);
  EXPECT_EQ(server.Cli({"logs", "flood", "--tail", "2"}).out, "999999\n1000000\n");
  // The times moved with the rotated log: every line kept still has one.
  std::string stamped = server.Cli({"logs", "flood", "--timestamps"}).out;
  EXPECT_EQ(stamped.size(),
            kept + static_cast<std::uint64_t>(count) * 25);  // "YYYY-MM-DDTHH:MM:SS.mmmZ "
  ASSERT_TRUE(WaitFor([&] { return server.HasEvent("flood", "Warning", "--max-log-bytes"); }));
  EXPECT_TRUE(server.HasEvent("flood", "Warning", "rank-0.log.1"));
}

// A rank that writes a little every millisecond: each write is a line of
// the log's index (when it was written), which then outgrows the log. The
// bound holds for the log and its index together.
TEST(Limits, TheLogsIndexCountsTowardTheBound) {
  TestServer server(1, {"--max-log-bytes", "4096"});
  server.Submit(
      "name: drip\ncommand: [/usr/bin/python3, -c, \"import sys, time\\n"
      "for i in range(3000):\\n    sys.stdout.write('x\\\\n')\\n"
      "    sys.stdout.flush()\\n    time.sleep(0.002)\\n\"]\n");
  ASSERT_TRUE(server.WaitForState("drip", "Succeeded", std::chrono::seconds(60)));
  const std::string run_dir = server.data_dir() + "/jobs/drip/attempt-0";
  std::uint64_t total = 0;
  for (const char* file :
       {"/rank-0.log", "/rank-0.log.1", "/rank-0.log.times", "/rank-0.log.1.times"}) {
    total += FileSize(run_dir + file);
  }
  EXPECT_LE(total, 4096u);
  EXPECT_GT(FileSize(run_dir + "/rank-0.log"), 0u);
  EXPECT_EQ(server.Cli({"logs", "drip", "--tail", "1"}).out, "x\n");
}

TEST(Limits, LogsAreWholeByDefaultAndCutOnlyAtLinesWhenAsked) {
  TestServer server(1);
  // 2.7 MB: more than the 1 MiB the logs API used to return, silently cut.
  server.Submit("name: long\ncommand: [seq, '1', '400000']\n");
  ASSERT_TRUE(server.WaitForState("long", "Succeeded"));
  EXPECT_EQ(server.Cli({"logs", "long"}).out, NumberedLines(1, 400000));
  EXPECT_EQ(server.Cli({"logs", "long", "--tail", "3"}).out, NumberedLines(399998, 400000));
  EXPECT_EQ(server.Cli({"logs", "long", "--tail", "0"}).out, "");
  // From the start, whole lines only, and the cut is said.
  EXPECT_EQ(server.Cli({"logs", "long", "--limit-bytes", "10"}).out,
            NumberedLines(1, 5) + "headway: output cut at limit_bytes=10\n");
  // With a tail: the newest lines that fit.
  EXPECT_EQ(server.Cli({"logs", "long", "--tail", "3", "--limit-bytes", "15"}).out,
            NumberedLines(399999, 400000));
  api::HttpClient http = server.Http();
  auto bad = http.Request("GET", "/api/v1/jobs/long/logs?tail=-1");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  EXPECT_THAT(bad->body, HasSubstr("tail"));
  bad = http.Request("GET", "/api/v1/jobs/long/logs?limit_bytes=0");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  // Several ranks: each rank's tail, prefixed.
  server.Submit("name: pair\ncommand: [seq, '1', '50']\nresources: {processes_per_node: 2}\n");
  ASSERT_TRUE(server.WaitForState("pair", "Succeeded"));
  std::string pair = server.Cli({"logs", "pair", "--tail", "1"}).out;
  EXPECT_THAT(pair, HasSubstr("[rank 0] 50\n"));
  EXPECT_THAT(pair, HasSubstr("[rank 1] 50\n"));
  EXPECT_EQ(pair.size(), std::string("[rank 0] 50\n[rank 1] 50\n").size());
  // Several ranks with more than a chunk each: merged whole lines only.
  server.Submit("name: wide\ncommand: [seq, '1', '300000']\nresources: {processes_per_node: 2}\n");
  ASSERT_TRUE(server.WaitForState("wide", "Succeeded"));
  std::string wide = server.Cli({"logs", "wide"}).out;
  std::istringstream merged(wide);
  std::string line;
  int next[2] = {1, 1};
  while (std::getline(merged, line)) {
    ASSERT_EQ(line.rfind("[rank ", 0), 0u) << line;
    int rank = line[6] - '0';
    ASSERT_TRUE(rank == 0 || rank == 1) << line;
    ASSERT_EQ(line.substr(9), std::to_string(next[rank])) << "a line cut at a chunk boundary";
    ++next[rank];
  }
  EXPECT_EQ(next[0], 300001);
  EXPECT_EQ(next[1], 300001);
  // Following from the tail.
  EXPECT_EQ(server.Cli({"logs", "long", "-f", "--tail", "1"}).out, "400000\n");
}

TEST(Logs, SinceAndTimestampsSayWhenEachLineWasWritten) {
  TestServer server(1);
  const std::string release = server.work_dir() + "/release";
  server.Submit(
      "name: timed\nresources: {processes_per_node: 2}\n"
      "command: \"echo early; while [ ! -e " +
      release +
      " ]; do sleep 0.05; done; "
      "echo late\"\n");
  ASSERT_TRUE(WaitFor([&] {
    std::string out = server.Cli({"logs", "timed"}).out;
    return out.find("[rank 0] early") != std::string::npos &&
           out.find("[rank 1] early") != std::string::npos;
  }));
  // Every line so far was written before `cut`; what comes after the
  // release is written after it.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::string cut = FormatRfc3339(SystemClock().Now());
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::ofstream(release).flush();
  ASSERT_TRUE(server.WaitForState("timed", "Succeeded"));
  EXPECT_EQ(server.Cli({"logs", "timed", "--since-time", cut}).out,
            "[rank 0] late\n[rank 1] late\n");
  EXPECT_EQ(server.Cli({"logs", "timed", "--since", "1h", "--rank", "1"}).out, "early\nlate\n");
  // kubectl's format: the rank prefix, then the time, then the line.
  const std::regex stamped(
      R"(\[rank [01]\] (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (early|late))");
  std::istringstream lines(server.Cli({"logs", "timed", "--timestamps"}).out);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, stamped)) << line;
    EXPECT_EQ(m[1].str() < cut, m[2].str() == "early") << line << " vs " << cut;
    ++count;
  }
  EXPECT_EQ(count, 4);
  // The API refuses what it cannot read, naming the parameter.
  api::HttpClient http = server.Http();
  for (auto [query, named] : std::vector<std::pair<std::string, std::string>>{
           {"since=yesterday", "'since'"},
           {"since_time=noon", "'since_time'"},
           {"timestamps=maybe", "'timestamps'"},
           {"since=5m&since_time=2026-01-01T00:00:00Z", "not both"}}) {
    auto bad = http.Request("GET", "/api/v1/jobs/timed/logs?" + query);
    ASSERT_TRUE(bad.ok());
    EXPECT_EQ(bad->status, 400) << query;
    EXPECT_THAT(bad->body, HasSubstr(named)) << query;
  }
  CommandResult typo = server.Cli({"logs", "timed", "--since", "ages"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.err, HasSubstr("--since must be a duration"));
}

}  // namespace
}  // namespace headway::testing
