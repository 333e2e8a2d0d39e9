// A team's workflows on the real server are bounded, so that one member's
// workflows cannot stall the engine or fill the store for every team: nodes
// per workflow and per team, waiting jobs per team, bytes of status per
// workflow; and a team sees only its own workflows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "test_server.h"
#include "workflow_test_support.h"

namespace headway::testing {
namespace {

using ::testing::HasSubstr;

TEST(Workflows, NestedLoopsTooLargeForAWorkflowAreRefusedBeforeAnythingIsStored) {
  TestServer server;
  const std::string token = server.admin_token();
  auto nested = [](int n) {
    const std::string count = "\"" + std::to_string(n) + "\"";
    return R"({"workflow": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
        "metadata": {"name": "grid"}, "spec": {"entrypoint": "rows", "templates": [
          {"name": "rows", "steps": [[{"name": "row", "template": "cells",
             "withSequence": {"count": )" +
           count + R"(}}]]},
          {"name": "cells", "steps": [[{"name": "cell", "template": "leaf",
             "withSequence": {"count": )" +
           count + R"(}}]]},
          {"name": "leaf", "container": {"image": "busybox", "command": ["true"]}}]}}})";
  };
  Answer refused = Call(server, token, "POST", "/api/v1/workflows/default", nested(300));
  EXPECT_EQ(refused.status, 400) << refused.raw;
  EXPECT_THAT(refused.raw, HasSubstr("nested loops multiply"));
  EXPECT_EQ(Call(server, token, "GET", "/api/v1/workflows/default").body["items"].size(), 0u);
  EXPECT_EQ(Call(server, token, "GET", "/api/v1/jobs").body["jobs"].size(), 0u);
  // A grid that fits runs as it did.
  Answer taken = Call(server, token, "POST", "/api/v1/workflows/default", nested(3));
  ASSERT_EQ(taken.status, 200) << taken.raw;
  ASSERT_TRUE(WaitFor(
      [&] {
        return Call(server, token, "GET", "/api/v1/workflows/default/grid")
                   .body["status"]["phase"] == "Succeeded";
      },
      std::chrono::seconds(60)));
}

// One member's workflows cannot bury the pool: a team's steps wait to start
// while the team has --max-queued-jobs jobs waiting, and its unfinished
// workflows hold at most --max-workflow-nodes nodes in all.
TEST(Workflows, ATeamsWorkflowsAreBoundedInWaitingJobsAndInNodes) {
  TestServer server(/*gpus=*/1, {"--max-queued-jobs", "2", "--max-workflow-nodes", "40"});
  const std::string member = CreateToken(server, "ana", "vision", "member");
  const std::string release = Shared(server) + "/release-fan";
  const std::string fan = R"({"workflow": {"apiVersion": "argoproj.io/v1alpha1",
      "kind": "Workflow", "metadata": {"name": "fan"}, "spec": {"entrypoint": "all",
      "templates": [{"name": "all", "steps": [[{"name": "gpu", "template": "wait",
                     "withSequence": {"count": "6"}}]]},
                    {"name": "wait", "container": {"image": "busybox",
                     "command": ["sh", "-c", "while [ ! -e )" +
                          release + R"( ]; do sleep 0.1; done"],
                     "resources": {"limits": {"nvidia.com/gpu": 1}}}}]}}})";
  Answer created = Call(server, member, "POST", "/api/v1/workflows/default", fan);
  ASSERT_EQ(created.status, 200) << created.raw;
  auto jobs_of_fan = [&] {
    int queued = 0, all = 0;
    const Answer listed = Call(server, member, "GET", "/api/v1/jobs");
    for (const json& job : listed.body["jobs"]) {
      if (job["spec"]["labels"].value("headway.dev/workflow", "") != "fan") continue;
      ++all;
      if (job["state"] == "Queued") ++queued;
    }
    return std::make_pair(all, queued);
  };
  // One step runs on the GPU, two wait: the team's bound.
  ASSERT_TRUE(WaitFor([&] { return jobs_of_fan() == std::make_pair(3, 2); }))
      << Call(server, member, "GET", "/api/v1/jobs").raw;
  // ...and stays so for several passes of the workflow engine.
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_EQ(jobs_of_fan().first, 3);
  }
  EXPECT_EQ(Phase(server, "fan"), "Running");
  // The member's own submits meet the same bound.
  Answer own = Call(server, member, "POST", "/api/v1/jobs",
                    R"({"name": "own", "command": ["true"], "team": "vision"})");
  EXPECT_EQ(own.status, 429) << own.raw;
  // A second workflow that would take the team past its nodes is refused,
  // and nothing of it is stored.
  Answer grid = Call(server, member, "POST", "/api/v1/workflows/default",
                     R"({"workflow": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
                         "metadata": {"name": "grid"}, "spec": {"entrypoint": "all", "templates": [
                         {"name": "all", "steps": [[{"name": "c", "template": "leaf",
                           "withSequence": {"count": "40"}}]]},
                         {"name": "leaf", "container": {"image": "busybox", "command": ["true"]}}]}}})");
  EXPECT_EQ(grid.status, 429) << grid.raw;
  EXPECT_THAT(grid.raw, HasSubstr("--max-workflow-nodes 40"));
  EXPECT_EQ(Call(server, member, "GET", "/api/v1/workflows/default/grid").status, 404);
  // Released, the steps start as the queue drains, and all six run.
  WriteFile(release, "");
  ASSERT_TRUE(WaitForPhase(server, "fan", "Succeeded")) << Workflow(server, "fan").dump(2);
  EXPECT_EQ(jobs_of_fan().first, 6);
}

// Outputs fill a workflow's status; past --max-workflow-status-bytes it is
// stopped (as a terminate stops it) and says why, instead of growing on.
TEST(Workflows, AWorkflowWhoseOutputsOutgrowItsStatusBoundIsStopped) {
  TestServer server(/*gpus=*/0, {"--max-workflow-status-bytes", "8Ki"});
  const std::string release = Shared(server) + "/release-talk";
  SubmitWorkflow(server, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: talkative}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - {name: loud, template: loud}
    - - {name: waits, template: waits}
  - name: loud
    script: {image: python, command: [python3], source: "print('x' * 20000)"}
  - name: waits
    container: {image: busybox, command: [sh, -c, "while [ ! -e )y" +
                             release + R"y( ]; do sleep 0.1; done"]}
)y");
  ASSERT_TRUE(WaitForPhase(server, "talkative", "Failed")) << Workflow(server, "talkative").dump(2);
  EXPECT_THAT(Workflow(server, "talkative")["status"]["message"].get<std::string>(),
              HasSubstr("more than a workflow may (8192): stopped"));
  WriteFile(release, "");
}

TEST(Workflows, ATeamSeesAndChangesOnlyItsOwnWorkflows) {
  TestServer server;
  std::string vision = CreateToken(server, "ana", "vision", "member");
  std::string speech = CreateToken(server, "bo", "speech", "member");
  const std::string manifest = R"({"workflow": {"apiVersion": "argoproj.io/v1alpha1",
      "kind": "Workflow", "metadata": {"name": "mine"}, "spec": {"entrypoint": "s",
      "templates": [{"name": "s", "suspend": {}}]}}})";
  Answer created = Call(server, vision, "POST", "/api/v1/workflows/default", manifest);
  ASSERT_EQ(created.status, 200) << created.raw;
  EXPECT_EQ(created.body["metadata"]["labels"]["headway.dev/team"], "vision");
  EXPECT_EQ(Call(server, speech, "GET", "/api/v1/workflows/default/mine").status, 403);
  EXPECT_EQ(Call(server, speech, "GET", "/api/v1/workflows/default").body["items"].size(), 0u);
  EXPECT_EQ(Call(server, speech, "PUT", "/api/v1/workflows/default/mine/terminate", "{}").status,
            403);
  EXPECT_EQ(Call(server, vision, "GET", "/api/v1/workflows/default").body["items"].size(), 1u);
  // A member cannot run a workflow as another team.
  Answer other = Call(server, vision, "POST", "/api/v1/workflows/default",
                      R"({"workflow": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
                          "metadata": {"name": "theirs", "annotations": {"headway.dev/team": "speech"}},
                          "spec": {"entrypoint": "s", "templates": [{"name": "s", "suspend": {}}]}}})");
  EXPECT_EQ(other.status, 403);
  EXPECT_EQ(Call(server, vision, "PUT", "/api/v1/workflows/default/mine/terminate", "{}").status,
            200);
}

}  // namespace
}  // namespace headway::testing
