// Argo Server's workflow logs (GET /api/v1/workflows/{ns}/{name}/log) and its
// artifact server's downloads (/artifact-files/…, /artifacts/…) on a real
// server: every step a real job, its lines and its output's bytes read back
// as Hera and Argo's UI read them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/http_client.h"
#include "test_server.h"
#include "workflow_test_support.h"

namespace headway::testing {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// The {"result": {"content", "podName"}} lines of a /log answer, as
// (podName, content), the lines the wrapper of a step may add left out.
std::vector<std::pair<std::string, std::string>> LogEntriesOf(const std::string& body,
                                                              const std::string& keep_prefix) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t from = 0;
  while (from < body.size()) {
    std::size_t nl = body.find('\n', from);
    if (nl == std::string::npos) nl = body.size();
    const std::string line = body.substr(from, nl - from);
    from = nl + 1;
    if (line.empty()) continue;
    json entry = json::parse(line, nullptr, false);
    EXPECT_TRUE(entry.is_object() && entry.contains("result")) << line;
    if (!entry.is_object() || !entry.contains("result")) continue;
    const std::string content = entry["result"].value("content", "");
    if (content.rfind(keep_prefix, 0) != 0) continue;
    out.emplace_back(entry["result"].value("podName", ""), content);
  }
  return out;
}

std::string StepJob(const TestServer& server, const std::string& workflow,
                    const std::string& step) {
  json node = NodeOf(Workflow(server, workflow), step);
  return node.is_object() && node.contains("headway") ? node["headway"].value("job", "") : "";
}

constexpr const char* kTwoSteps = R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: twosteps}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - {name: first, template: first}
    - - {name: second, template: second}
  - name: first
    container: {image: alpine, command: [sh, -c, "echo line-one-a; echo line-one-b"]}
  - name: second
    container: {image: alpine, command: [sh, -c, "echo line-two-a"]}
)y";

TEST(WorkflowLogs, EachStepsLinesComeInStepOrderWithTheStepsPodName) {
  TestServer server;
  CommandResult r = server.Cli({"workflow", "submit", "-", "--wait"}, kTwoSteps);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string first = StepJob(server, "twosteps", "first");
  const std::string second = StepJob(server, "twosteps", "second");
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(second.empty());
  const std::string log = "/api/v1/workflows/default/twosteps/log";
  Answer all = Call(server, server.admin_token(), "GET", log + "?logOptions.container=main");
  ASSERT_EQ(all.status, 200) << all.raw;
  EXPECT_THAT(all.response.Header("content-type"), HasSubstr("application/json"));
  EXPECT_THAT(
      LogEntriesOf(all.raw, "line-"),
      ElementsAre(Pair(first, "line-one-a"), Pair(first, "line-one-b"), Pair(second, "line-two-a")))
      << all.raw;
  // One step, by its pod; or by the deprecated path with the pod in it.
  Answer one = Call(server, server.admin_token(), "GET", log + "?podName=" + second);
  ASSERT_EQ(one.status, 200) << one.raw;
  EXPECT_THAT(LogEntriesOf(one.raw, ""), ElementsAre(Pair(second, "line-two-a"))) << one.raw;
  Answer by_path = Call(server, server.admin_token(), "GET",
                        "/api/v1/workflows/default/twosteps/" + first + "/log");
  EXPECT_THAT(LogEntriesOf(by_path.raw, "line-"),
              ElementsAre(Pair(first, "line-one-a"), Pair(first, "line-one-b")));
  // grep (a regular expression) and tailLines (each pod's last lines).
  Answer grep = Call(server, server.admin_token(), "GET", log + "?grep=one-%5Bb-z%5D");
  EXPECT_THAT(LogEntriesOf(grep.raw, ""), ElementsAre(Pair(first, "line-one-b"))) << grep.raw;
  Answer tail = Call(server, server.admin_token(), "GET", log + "?logOptions.tailLines=1");
  EXPECT_THAT(LogEntriesOf(tail.raw, "line-"),
              ElementsAre(Pair(first, "line-one-b"), Pair(second, "line-two-a")))
      << tail.raw;
  Answer since = Call(server, server.admin_token(), "GET", log + "?logOptions.sinceSeconds=3600");
  EXPECT_EQ(LogEntriesOf(since.raw, "line-").size(), 3u) << since.raw;
  // selector: on the step jobs' labels.
  Answer chosen =
      Call(server, server.admin_token(), "GET", log + "?selector=headway.dev/workflow%3Dtwosteps");
  EXPECT_EQ(LogEntriesOf(chosen.raw, "line-").size(), 3u) << chosen.raw;
  Answer none =
      Call(server, server.admin_token(), "GET", log + "?selector=headway.dev/workflow!%3Dtwosteps");
  EXPECT_EQ(none.raw, "");
  // timestamps: each line starts with when it was written.
  Answer stamped = Call(server, server.admin_token(), "GET",
                        log + "?logOptions.timestamps=true&podName=" + second);
  auto stamped_lines = LogEntriesOf(stamped.raw, "");
  ASSERT_FALSE(stamped_lines.empty()) << stamped.raw;
  EXPECT_THAT(stamped_lines.back().second,
              ::testing::MatchesRegex("20[0-9-]+T[0-9:.]+Z line-two-a"));
  // Another container of the pod (Argo's wait or init) has no lines here.
  Answer wait = Call(server, server.admin_token(), "GET", log + "?logOptions.container=wait");
  EXPECT_EQ(wait.status, 200);
  EXPECT_EQ(wait.raw, "");
  // Errors in Argo's shape.
  Answer missing =
      Call(server, server.admin_token(), "GET", "/api/v1/workflows/default/nosuch/log");
  EXPECT_EQ(missing.status, 404) << missing.raw;
  EXPECT_EQ(missing.body["code"], 5) << missing.raw;
  EXPECT_THAT(missing.body.value("message", ""), HasSubstr("nosuch"));
  Answer bad = Call(server, server.admin_token(), "GET", log + "?grep=%28unclosed");
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_EQ(bad.body["code"], 3) << bad.raw;
}

TEST(WorkflowLogs, FollowStreamsEveryStepUntilTheWorkflowEnds) {
  TestServer server;
  const std::string release = Shared(server) + "/release";
  const std::string name =
      SubmitWorkflow(server, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: followed}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - {name: first, template: first}
    - - {name: second, template: second}
  - name: first
    container:
      image: alpine
      command: [sh, -c, "echo line-before; while [ ! -e )y" +
                                 release + R"y( ]; do sleep 0.1; done; echo line-after"]
  - name: second
    container: {image: alpine, command: [sh, -c, "echo line-second"]}
)y");
  ASSERT_EQ(name, "followed");
  std::mutex mu;
  std::string body;
  std::atomic<bool> ended{false};
  int status = 0;
  std::thread reader([&] {
    api::HttpClient client(server.url(), server.admin_token(), "");
    std::string error_body;
    auto result = client.Stream(
        "/api/v1/workflows/default/followed/log?logOptions.follow=true",
        [&](std::string_view data) {
          std::lock_guard lock(mu);
          body.append(data);
        },
        error_body);
    status = result.ok() ? *result : -1;
    ended = true;
  });
  auto seen = [&](const std::string& text) {
    std::lock_guard lock(mu);
    return body.find(text) != std::string::npos;
  };
  EXPECT_TRUE(WaitFor([&] { return seen("line-before"); }, std::chrono::seconds(30)));
  // The first step waits: the stream stays open, the second step has not run.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_FALSE(ended.load());
  EXPECT_FALSE(seen("line-second"));
  WriteFile(release, "");
  EXPECT_TRUE(WaitFor([&] { return ended.load(); }, std::chrono::seconds(30)));
  reader.join();
  EXPECT_EQ(status, 200);
  EXPECT_EQ(Phase(server, "followed"), "Succeeded");
  const std::string first = StepJob(server, "followed", "first");
  const std::string second = StepJob(server, "followed", "second");
  std::lock_guard lock(mu);
  EXPECT_THAT(LogEntriesOf(body, "line-"),
              ElementsAre(Pair(first, "line-before"), Pair(first, "line-after"),
                          Pair(second, "line-second")))
      << body;
}

constexpr const char* kReport = R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: reported}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - {name: evaluate, template: evaluate}
  - name: evaluate
    outputs:
      artifacts:
      - {name: report, path: /tmp/report.txt, archive: {none: {}}}
      - {name: bundle, path: /tmp/bundle}
    container:
      image: alpine
      command: [sh, -c, "mkdir /tmp/bundle && echo x > /tmp/bundle/x && printf 'accuracy 0.93\nloss 0.2\n' > /tmp/report.txt && echo line-evaluated"]
)y";

TEST(WorkflowArtifacts, ArtifactFilesAnswersAStepsOutputArtifactsBytes) {
  TestServer server;
  CommandResult r = server.Cli({"workflow", "submit", "-", "--wait"}, kReport);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json wf = Workflow(server, "reported");
  const std::string node = NodeOf(wf, "evaluate").value("id", "");
  ASSERT_FALSE(node.empty()) << wf.dump(2);
  const std::string uid = wf["metadata"].value("uid", "");
  const std::string token = server.admin_token();
  Answer file = Call(server, token, "GET",
                     "/artifact-files/default/workflows/reported/" + node + "/outputs/report");
  ASSERT_EQ(file.status, 200) << file.raw;
  EXPECT_EQ(file.raw, "accuracy 0.93\nloss 0.2\n");
  EXPECT_EQ(file.response.Header("content-disposition"), "filename=\"report.txt\"");
  EXPECT_THAT(file.response.Header("content-type"), HasSubstr("text/plain"));
  // The older path, and the archive's (by uid), answer the same bytes.
  Answer old = Call(server, token, "GET", "/artifacts/default/reported/" + node + "/report");
  EXPECT_EQ(old.status, 200) << old.raw;
  EXPECT_EQ(old.raw, file.raw);
  if (!uid.empty()) {
    Answer archived =
        Call(server, token, "GET",
             "/artifact-files/default/archived-workflows/" + uid + "/" + node + "/outputs/report");
    EXPECT_EQ(archived.status, 200) << archived.raw;
    EXPECT_EQ(archived.raw, file.raw);
  }
  // A directory is kept as a tar, and named so.
  Answer bundle = Call(server, token, "GET",
                       "/artifact-files/default/workflows/reported/" + node + "/outputs/bundle");
  EXPECT_EQ(bundle.status, 200) << bundle.raw;
  EXPECT_EQ(bundle.response.Header("content-disposition"), "filename=\"bundle.tar\"");
  EXPECT_THAT(bundle.raw, HasSubstr("x\n"));
  // Unknown node, artifact or workflow: 404 in Argo's shape.
  for (const std::string& path : std::vector<std::string>{
           "/artifact-files/default/workflows/reported/" + node + "/outputs/nosuch",
           "/artifact-files/default/workflows/reported/nosuch-node/outputs/report",
           "/artifact-files/default/workflows/nosuch/" + node + "/outputs/report",
           "/artifacts/default/reported/" + node + "/nosuch"}) {
    Answer missing = Call(server, token, "GET", path);
    EXPECT_EQ(missing.status, 404) << path << ": " << missing.raw;
    EXPECT_EQ(missing.body["code"], 5) << path << ": " << missing.raw;
  }
}

TEST(WorkflowLogs, AnotherTeamIsRefusedTheLogsAndArtifactsAsOnOtherArgoRoutes) {
  TestServer server;
  const std::string vision = CreateToken(server, "ana", "vision", "member");
  const std::string speech = CreateToken(server, "bo", "speech", "member");
  Answer created =
      Call(server, vision, "POST", "/api/v1/workflows/default", kReport, {}, "application/yaml");
  ASSERT_EQ(created.status, 200) << created.raw;
  ASSERT_TRUE(WaitForPhase(server, "reported", "Succeeded"));
  const std::string node = NodeOf(Workflow(server, "reported"), "evaluate").value("id", "");
  const std::string log = "/api/v1/workflows/default/reported/log";
  const std::string file = "/artifact-files/default/workflows/reported/" + node + "/outputs/report";
  const std::string old = "/artifacts/default/reported/" + node + "/report";
  // The team's member reads them.
  Answer own = Call(server, vision, "GET", log);
  EXPECT_EQ(own.status, 200);
  EXPECT_THAT(own.raw, HasSubstr("line-evaluated"));
  EXPECT_EQ(Call(server, vision, "GET", file).raw, "accuracy 0.93\nloss 0.2\n");
  // Another team's gets what GET of the workflow gives it.
  const int refused = Call(server, speech, "GET", "/api/v1/workflows/default/reported").status;
  EXPECT_EQ(refused, 403);
  for (const std::string& path :
       std::vector<std::string>{log, log + "?logOptions.follow=true", file, old}) {
    Answer other = Call(server, speech, "GET", path);
    EXPECT_EQ(other.status, refused) << path << ": " << other.raw;
    EXPECT_EQ(other.body["code"], 7) << path << ": " << other.raw;
    EXPECT_THAT(other.raw, ::testing::Not(HasSubstr("accuracy")));
    EXPECT_THAT(other.raw, ::testing::Not(HasSubstr("line-evaluated")));
  }
  // Without a token: 401, in Argo's shape.
  Answer anonymous = Call(server, "", "GET", file);
  EXPECT_EQ(anonymous.status, 401);
  EXPECT_EQ(anonymous.body["code"], 16) << anonymous.raw;
}

}  // namespace
}  // namespace headway::testing
