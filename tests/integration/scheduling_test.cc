// The scheduler driving the real server: team quotas, preemption with a
// checkpoint warning and resume, reclaiming stalled jobs, backfill on
// progress ETAs, and the queue and node views of the CLI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "core/time.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string Sleeper(const std::string& name, const std::string& team, int gpus,
                    const std::string& extra = "") {
  return "name: " + name + "\nteam: " + team + "\ncommand: \"sleep 60\"\ntermination_grace: 1s\n" +
         "resources: {gpus_per_process: " + std::to_string(gpus) + "}\n" + extra;
}

json Queue(const TestServer& server, const std::string& name) {
  json all = json::parse(server.Cli({"get", "queues", "-o", "json"}).out);
  for (const json& q : all["queues"]) {
    if (q["name"] == name) return q;
  }
  return nullptr;
}

TEST(Quotas, ATeamAtItsQuotaWaitsWhileAnotherUsesItsShare) {
  TestServer server(4, {"--quota", "vision=2", "--quota", "nlp=2:borrow=0,weight=2"});
  server.Submit(Sleeper("v1", "vision", 2));
  ASSERT_TRUE(server.WaitForState("v1", "Running"));
  server.Submit(Sleeper("v2", "vision", 2));
  server.Submit(Sleeper("n1", "nlp", 2));
  ASSERT_TRUE(server.WaitForState("n1", "Running"));
  EXPECT_EQ(server.State("v2"), "Queued");
  EXPECT_THAT(server.Job("v2")["pending_reason"].get<std::string>(),
              HasSubstr("team quota 2/2 used"));

  json vision = Queue(server, "vision");
  EXPECT_EQ(vision["gpus_in_use"], 2);
  EXPECT_EQ(vision["nominal_gpus"], 2);
  EXPECT_EQ(vision["pending"], 1);
  EXPECT_EQ(vision["next_job"], "v2");
  EXPECT_EQ(Queue(server, "nlp")["weight"], 2.0);
  std::string table = server.Cli({"get", "queues"}).out;
  EXPECT_THAT(table, HasSubstr("GPUS"));
  EXPECT_THAT(table, HasSubstr("v2: waiting for 2 GPUs; team quota 2/2 used"));
  std::string nodes = server.Cli({"get", "nodes"}).out;
  EXPECT_THAT(nodes, HasSubstr("4      4        0"));
  EXPECT_THAT(nodes, HasSubstr("n1"));
  EXPECT_THAT(server.Cli({"describe", "job", "v2"}).out, HasSubstr("team quota 2/2 used"));

  server.Cli({"stop", "v1"});
  ASSERT_TRUE(server.WaitForState("v2", "Running"));
  server.Cli({"stop", "v2", "n1"});
}

TEST(Quotas, BadQuotaFlagsAreRefusedAtStart) {
  for (const char* bad : {"vision", "=4", "vision=-1", "vision=2:borrow", "vision=2:speed=3",
                          "vision=2:weight=0", "vision=1.5"}) {
    std::string dir = MakeTempDir("headway-quota");
    CommandResult r = RunCommand(
        {HEADWAY_BIN, "server", "--listen", "127.0.0.1:0", "--data-dir", dir, "--quota", bad});
    std::filesystem::remove_all(dir);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_THAT(r.err + r.out, HasSubstr("--quota")) << bad;
  }
}

// examples/resumable_train.py: checkpoints on the warning, resumes on requeue.
std::string Resumable(const std::string& name, int priority, int steps) {
  return "name: " + name + "\npriority: " + std::to_string(priority) +
         "\ncommand: [\"/usr/bin/python3\", \"" HEADWAY_SOURCE_DIR
         "/examples/resumable_train.py\"]\n"
         "env: {PYTHONPATH: \"" HEADWAY_SOURCE_DIR "/sdk/python\", STEPS: \"" +
         std::to_string(steps) +
         "\", STEP_SECONDS: \"0.05\"}\n"
         "resources: {gpus_per_process: 2}\ncheckpoint_warning: 5s\ntermination_grace: 2s\n";
}

TEST(Preemption, AHigherPriorityJobPreemptsWithACheckpointWarningAndTheVictimResumes) {
  TestServer server(2);
  server.Submit(Resumable("low", 0, 120));
  ASSERT_TRUE(WaitFor([&] {
    return server.Job("low")["progress"]["step"].is_number() &&
           server.Job("low")["progress"]["step"].get<int>() >= 10;
  }));
  server.Submit(
      "name: urgent\npriority: 10\ncommand: \"echo urgent ran\"\n"
      "resources: {gpus_per_process: 2}\n");
  ASSERT_TRUE(server.WaitForState("urgent", "Succeeded", std::chrono::seconds(30)));
  EXPECT_TRUE(server.HasEvent("low", "Preempting", "preempted by higher-priority urgent"));
  EXPECT_TRUE(server.HasEvent("low", "StateChanged", "Running -> Preempted"));
  // The victim left after checkpointing, well inside its 5 s grace: no SIGTERM was needed.
  EXPECT_FALSE(server.HasEvent("low", "Stopping"));
  EXPECT_THAT(server.Cli({"logs", "low", "--attempt", "0"}).out, HasSubstr("checkpointed at step"));

  ASSERT_TRUE(server.WaitForState("low", "Succeeded", std::chrono::seconds(60)));
  json low = server.Job("low");
  EXPECT_EQ(low["preemptions"], 1);
  EXPECT_EQ(low["restarts"], 0);
  EXPECT_EQ(low["attempt"], 1);
  EXPECT_EQ(low["progress"]["step"], 120);
  std::string resumed = server.Cli({"logs", "low", "--attempt", "1"}).out;
  EXPECT_THAT(resumed, HasSubstr("resumed from step"));
  EXPECT_THAT(resumed, HasSubstr("done: 120 steps"));
  EXPECT_THAT(server.Cli({"describe", "job", "low"}).out, HasSubstr("Preemptions:"));
}

TEST(Preemption, AVictimThatIgnoresTheWarningGetsSigtermAfterTheGraceAndIsRequeued) {
  TestServer server(1, {"--preemption-grace", "1"});
  // It says when its trap is set: a warning sent before that would end it
  // (the default action), which is not what the test is about.
  const std::string ready = server.work_dir() + "/deaf-ready";
  server.Submit("name: deaf\ncommand: \"trap '' USR1; touch " + ready +
                "; sleep 60\"\ntermination_grace: 1s\nresources: {gpus_per_process: 1}\n");
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(ready); }));
  server.Submit("name: vip\npriority: 5\ncommand: \"true\"\nresources: {gpus_per_process: 1}\n");
  ASSERT_TRUE(server.WaitForState("vip", "Succeeded", std::chrono::seconds(30)));
  EXPECT_TRUE(server.HasEvent("deaf", "Stopping", "preempted by higher-priority vip"))
      << nlohmann::json(server.Events("deaf")).dump() << "\n"
      << nlohmann::json(server.Events("vip")).dump();
  // Requeued, not failed: it runs again once the GPU is free.
  ASSERT_TRUE(WaitFor(
      [&] { return server.Job("deaf")["attempt"] == 1 && server.State("deaf") == "Running"; }));
  // A user's stop ends it for good, even if it is preempted again later.
  server.Cli({"stop", "deaf"});
  ASSERT_TRUE(server.WaitForState("deaf", "Stopped"));
}

TEST(Preemption, StoppingAJobWhileItIsBeingPreemptedStopsIt) {
  TestServer server(1, {"--preemption-grace", "1"});
  // Ignores the warning and SIGTERM, so it is still leaving when the user stops it.
  const std::string ready = server.work_dir() + "/victim-ready";
  server.Submit("name: victim\ncommand: \"trap '' USR1 TERM; touch " + ready +
                "; while true; do sleep 0.2; done\"\ntermination_grace: 5s\n"
                "resources: {gpus_per_process: 1}\n");
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(ready); }));
  server.Submit(
      "name: boss\npriority: 5\ncommand: \"sleep 1\"\nresources: {gpus_per_process: 1}\n");
  ASSERT_TRUE(WaitFor([&] { return server.HasEvent("victim", "Stopping", "preempted"); }))
      << nlohmann::json(server.Events("victim")).dump() << "\n"
      << nlohmann::json(server.Events("boss")).dump() << "\n"
      << server.Job("boss").dump();
  server.Cli({"stop", "victim"});
  ASSERT_TRUE(server.WaitForState("victim", "Stopped", std::chrono::seconds(20)));
  EXPECT_EQ(server.Job("victim")["preemptions"], 0);
  ASSERT_TRUE(server.WaitForState("boss", "Succeeded"));
}

// The victim's team reads why it was preempted, but not the name of the
// other team's job it made room for.
TEST(Preemption, AReclaimTellsTheVictimWhichTeamNotWhichJob) {
  TestServer server(
      2, {"--quota", "alpha=1:borrow=1", "--quota", "beta=1", "--preemption-grace", "1"});
  server.Submit(Sleeper("a1", "alpha", 1));
  server.Submit(Sleeper("a2", "alpha", 1));  // borrows beta's idle GPU
  ASSERT_TRUE(server.WaitForState("a2", "Running"));
  ASSERT_TRUE(server.WaitForState("a1", "Running"));
  server.Submit(Sleeper("beta-secret-plan", "beta", 1));
  ASSERT_TRUE(server.WaitForState("beta-secret-plan", "Running", std::chrono::seconds(30)));
  const std::string victim = server.HasEvent("a2", "Preempting") ? "a2" : "a1";
  EXPECT_TRUE(server.HasEvent(victim, "Preempting", "reclaimed by queue beta"));
  EXPECT_TRUE(server.HasEvent(victim, "Preempting", "(for a job of team beta)"));
  EXPECT_FALSE(server.HasEvent(victim, "Preempting", "beta-secret-plan"));
  server.Cli({"stop", "a1", "a2", "beta-secret-plan"});
}

TEST(Preemption, AStalledJobWhosePolicySaysReclaimGivesWayToAWaitingJob) {
  TestServer server(1, {"--stall-floor", "1", "--preemption-grace", "1"});
  server.Submit(R"(
name: stuck
command: "for i in 1 2 3 4 5; do echo \"HEADWAY {\\\"step\\\": $i, \\\"total_steps\\\": 100}\"; sleep 0.1; done; sleep 600"
resources: {gpus_per_process: 1}
policies: {on_stall: reclaim}
termination_grace: 1s
)");
  ASSERT_TRUE(WaitFor([&] { return server.Job("stuck")["progress"]["step"] == 5; }));
  server.Submit("name: next\ncommand: \"echo next ran\"\nresources: {gpus_per_process: 1}\n");
  ASSERT_TRUE(server.WaitForState("next", "Succeeded", std::chrono::seconds(30)));
  EXPECT_TRUE(server.HasEvent("stuck", "Preempting", "reclaimed: it is stalled"));
  server.Cli({"stop", "stuck"});
  ASSERT_TRUE(server.WaitForState("stuck", "Stopped"));
}

TEST(Preemption, AHealthyJobOfEqualPriorityIsNotPreempted) {
  TestServer server(1);
  server.Submit(Sleeper("first", "a", 1));
  ASSERT_TRUE(server.WaitForState("first", "Running"));
  server.Submit(Sleeper("second", "b", 1));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(server.State("second"), "Queued");
  EXPECT_FALSE(server.HasEvent("first", "Preempting"));
  server.Cli({"stop", "first", "second"});
}

TEST(Backfill, AShortJobRunsAheadWhenTheProgressEtaShowsItCannotDelayTheHeadJob) {
  TestServer server(2);
  // "running" holds 1 GPU with no time limit; only its progress says when it
  // ends: it reports 600 steps at 10 a second, so about a minute. At step 30
  // it waits for the test, so it cannot end before the test has looked,
  // however slow the machine; once let go it ends early, at step 60.
  const std::string go_on = server.work_dir() + "/go-on";
  server.Submit(R"(
name: running
command: "for i in $(seq 1 60); do echo \"HEADWAY {\\\"step\\\": $i, \\\"total_steps\\\": 600}\"; sleep 0.1; if [ $i = 30 ]; then while [ ! -e )" +
                go_on + R"( ]; do sleep 0.05; done; fi; done"
resources: {gpus_per_process: 1}
)");
  ASSERT_TRUE(
      WaitFor([&] { return server.Job("running")["progress"]["eta_seconds"].is_number(); }));
  server.Submit("name: big\ncommand: \"true\"\nresources: {gpus_per_process: 2}\n");
  // 15 s: well inside the ETA, and room for a loaded machine (a sanitizer
  // build, other suites in parallel) to start and end it.
  server.Submit(
      "name: short\ncommand: \"sleep 0.2\"\ntime_limit: 15s\nresources: {gpus_per_process: 1}\n");
  server.Submit("name: endless\ncommand: \"sleep 0.2\"\nresources: {gpus_per_process: 1}\n");
  ASSERT_TRUE(server.WaitForState("short", "Succeeded")) << server.Job("short").dump(2);
  EXPECT_TRUE(server.HasEvent("short", "StateChanged", "backfilled"));
  // Without a time limit it could hold the GPU past the ETA: it waits its turn.
  EXPECT_EQ(server.State("big"), "Queued");
  EXPECT_EQ(server.State("endless"), "Queued");
  std::ofstream(go_on).put('\n');
  ASSERT_TRUE(server.WaitForState("big", "Succeeded", std::chrono::seconds(30)));
  ASSERT_TRUE(server.WaitForState("endless", "Succeeded"));
}

// --scheduling-policy progress-aware: the job expected to take the least
// GPU-time goes first, whatever the order of submission. With nothing
// learned yet about who submits them, the time limits are all it knows.
TEST(ProgressAware, TheJobExpectedToTakeLeastGoesFirst) {
  for (bool aware : {false, true}) {
    SCOPED_TRACE(aware ? "progress-aware" : "fair share");
    TestServer server(1, aware ? std::vector<std::string>{"--scheduling-policy", "progress-aware"}
                               : std::vector<std::string>{});
    const std::string go_on = server.work_dir() + "/go-on";
    server.Submit("name: blocker\ncommand: \"while [ ! -e " + go_on +
                  " ]; do sleep 0.05; done\"\nresources: {gpus_per_process: 1}\n");
    ASSERT_TRUE(server.WaitForState("blocker", "Running"));
    server.Submit(
        "name: long\ncommand: \"sleep 30\"\ntime_limit: 2h\ntermination_grace: 1s\n"
        "resources: {gpus_per_process: 1}\n");
    server.Submit(
        "name: short\ncommand: \"sleep 30\"\ntime_limit: 10m\ntermination_grace: 1s\n"
        "resources: {gpus_per_process: 1}\n");
    ASSERT_TRUE(WaitFor([&] { return server.Job("short")["queue_position"].is_number(); }))
        << server.Job("short").dump(2);
    EXPECT_EQ(server.Job("short")["queue_position"], aware ? 1 : 2);
    std::ofstream(go_on).put('\n');
    const std::string first = aware ? "short" : "long", second = aware ? "long" : "short";
    ASSERT_TRUE(server.WaitForState(first, "Running")) << server.Job(first).dump(2);
    EXPECT_EQ(server.State(second), "Queued");
    server.Cli({"stop", "long", "short"});
  }
}

// What progress-aware learns: each user's finished jobs say how long their
// next one will run, and the server reads them back from the store after a
// restart. Here the user whose jobs ran quickly goes before the one whose
// jobs ran long, though submitted later; fair share takes them in order.
TEST(ProgressAware, RunTimesLearnedFromFinishedJobsOrderTheQueueAcrossARestart) {
  TestServer server(1, {"--scheduling-policy", "progress-aware"});
  const std::string quick = CreateToken(server, "quick-user", "lab", "member");
  const std::string slow = CreateToken(server, "slow-user", "lab", "member");
  auto job = [](const std::string& name, const std::string& command) {
    return "name: " + name + "\nteam: lab\ncommand: \"" + command +
           "\"\ntermination_grace: 1s\nresources: {gpus_per_process: 1}\n";
  };
  for (int i = 0; i < 3; ++i) {
    server.UseToken(quick);
    server.Submit(job("quick-" + std::to_string(i), "true"));
    ASSERT_TRUE(server.WaitForState("quick-" + std::to_string(i), "Succeeded"));
    server.UseToken(slow);
    server.Submit(job("slow-" + std::to_string(i), "sleep 2"));
    ASSERT_TRUE(server.WaitForState("slow-" + std::to_string(i), "Succeeded"));
  }
  // A restart: what was learned comes back from the store.
  server.UseToken(server.admin_token());
  server.Terminate();
  server.Restart();
  const std::string go_on = server.work_dir() + "/go-on";
  server.Submit(job("blocker", "while [ ! -e " + go_on + " ]; do sleep 0.05; done"));
  ASSERT_TRUE(server.WaitForState("blocker", "Running"));
  server.UseToken(slow);
  server.Submit(job("slow-next", "sleep 30"));
  server.UseToken(quick);
  server.Submit(job("quick-next", "sleep 30"));
  server.UseToken(server.admin_token());
  ASSERT_TRUE(WaitFor([&] { return server.Job("quick-next")["queue_position"] == 1; }))
      << server.Job("quick-next").dump(2);
  std::ofstream(go_on).put('\n');
  ASSERT_TRUE(server.WaitForState("quick-next", "Running")) << server.Job("quick-next").dump(2);
  EXPECT_EQ(server.State("slow-next"), "Queued");
  server.Cli({"stop", "slow-next", "quick-next"});
}

// A waiting job's owner sees its place in line and, for the job first in
// line, when it is expected to start: here when the running job's time limit
// frees its GPU.
TEST(Queue, AWaitingJobShowsItsPlaceInLineAndTheFirstItsExpectedStart) {
  TestServer server(1);
  server.Submit(
      "name: holder\ncommand: \"sleep 300\"\ntime_limit: 10m\n"
      "resources: {gpus_per_process: 1}\n");
  ASSERT_TRUE(server.WaitForState("holder", "Running"));
  server.Submit("name: first\ncommand: \"true\"\nresources: {gpus_per_process: 1}\n");
  server.Submit("name: second\ncommand: \"true\"\nresources: {gpus_per_process: 1}\n");
  ASSERT_TRUE(WaitFor([&] { return server.Job("second")["queue_position"] == 2; }))
      << server.Job("second").dump(2);
  json first = server.Job("first");
  EXPECT_EQ(first["queue_position"], 1);
  auto started = ParseRfc3339(server.Job("holder")["started_at"].get<std::string>());
  auto expected = ParseRfc3339(first["expected_start"].get<std::string>());
  ASSERT_TRUE(started && expected) << first.dump(2);
  EXPECT_EQ(*expected, *started + std::chrono::minutes(10));
  EXPECT_TRUE(server.Job("second")["expected_start"].is_null());
  EXPECT_TRUE(server.Job("holder")["queue_position"].is_null());
  EXPECT_THAT(server.Cli({"describe", "job", "first"}).out,
              HasSubstr("Queue:          1 in line, expected to start "));
}

}  // namespace
}  // namespace headway::testing
