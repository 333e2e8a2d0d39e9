// Integration tests: the real server binary, real child processes, real HTTP,
// driven through the CLI and the REST API as a user would.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "api/http_client.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(JobLifecycle, SubmitRunsToSucceededAndKeepsItsOutput) {
  TestServer server;
  server.Submit(R"(
name: hello
command: ["/bin/sh", "-c", "echo hello from $HEADWAY_JOB; sleep 1"]
labels: {project: demo}
)");
  ASSERT_TRUE(server.WaitForState("hello", "Running"));
  CommandResult table = server.Cli({"get", "jobs"});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_THAT(table.out, HasSubstr("NAME"));
  EXPECT_THAT(table.out, HasSubstr("hello"));
  ASSERT_TRUE(server.WaitForState("hello", "Succeeded"));
  auto job = server.Job("hello");
  EXPECT_EQ(job["exit_code"], 0);
  EXPECT_EQ(server.Cli({"logs", "hello"}).out, "hello from hello\n");
  CommandResult described = server.Cli({"describe", "job", "hello"});
  EXPECT_THAT(described.out, HasSubstr("Succeeded"));
  EXPECT_THAT(described.out, HasSubstr("Running -> Succeeded"));
  EXPECT_THAT(described.out, HasSubstr("project=demo"));
}

TEST(JobLifecycle, FailingCommandIsFailedWithItsExitCode) {
  TestServer server;
  server.Submit("name: broken\ncommand: \"echo oops >&2; exit 7\"\n");
  ASSERT_TRUE(server.WaitForState("broken", "Failed"));
  auto job = server.Job("broken");
  EXPECT_EQ(job["exit_code"], 7);
  EXPECT_EQ(job["reason"], "ExitCode");
  EXPECT_THAT(job["message"].get<std::string>(), HasSubstr("code 7"));
  // Why, without a trip to the logs: the failing rank's last line.
  EXPECT_THAT(job["message"].get<std::string>(), HasSubstr("; its last line: oops"));
  EXPECT_EQ(server.Cli({"logs", "broken"}).out, "oops\n");
}

TEST(JobLifecycle, MissingProgramFailsWith127AndSaysWhy) {
  TestServer server;
  server.Submit("name: typo\ncommand: [\"/no/such/program\", \"--flag\"]\n");
  ASSERT_TRUE(server.WaitForState("typo", "Failed"));
  EXPECT_EQ(server.Job("typo")["exit_code"], 127);
  EXPECT_THAT(server.Job("typo")["message"].get<std::string>(),
              HasSubstr("its last line: headway: cannot run '/no/such/program': No such file"));
  EXPECT_THAT(server.Cli({"logs", "typo"}).out, HasSubstr("cannot run '/no/such/program'"));
}

TEST(JobLifecycle, AWorkingDirectoryTheJobsAccountCannotEnterIsNamedInItsMessage) {
  if (::geteuid() != 0) GTEST_SKIP() << "jobs run as nobody only under a root server";
  TestServer server;
  const std::string dir = MakeTempDir("private");
  ::chmod(dir.c_str(), 0700);  // root's, closed to nobody
  server.Submit("name: closed\ncommand: [\"true\"]\nworking_dir: " + dir + "\n");
  ASSERT_TRUE(server.WaitForState("closed", "Failed"));
  EXPECT_EQ(server.Job("closed")["exit_code"], 126);
  EXPECT_THAT(server.Job("closed")["message"].get<std::string>(),
              HasSubstr("its last line: headway: cannot enter working directory " + dir +
                        ": Permission denied"));
}

TEST(JobLifecycle, StopEndsAJobThatHandlesSigterm) {
  TestServer server;
  server.Submit(R"(
name: polite
command: "trap 'echo got TERM; exit 0' TERM; echo trap set; while true; do sleep 0.1; done"
termination_grace: 20s
)");
  ASSERT_TRUE(WaitFor([&] {
    return server.Cli({"logs", "polite"}).out.find("trap set") != std::string::npos;
  }));
  CommandResult r = server.Cli({"stop", "polite"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("job/polite"));
  ASSERT_TRUE(server.WaitForState("polite", "Stopped", std::chrono::seconds(10)));
  EXPECT_FALSE(server.HasEvent("polite", "Killed"));
  EXPECT_THAT(server.Cli({"logs", "polite"}).out, HasSubstr("got TERM"));
  // Stopping a finished job is a conflict, and says so.
  CommandResult again = server.Cli({"stop", "polite"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, HasSubstr("already ended"));
}

TEST(JobLifecycle, AStopSentBeforeTheRanksStartStillReachesThem) {
  // The supervisor waits a second before starting its ranks, as on a loaded
  // machine; a stop that lands in that second once only marked the supervisor
  // and the ranks ran on until the grace ran out and they were killed.
  ::setenv("HEADWAY_TEST_SLOW_SUPERVISOR", "1", 1);
  TestServer server;
  ::unsetenv("HEADWAY_TEST_SLOW_SUPERVISOR");
  server.Submit(
      "name: early\nresources: {processes_per_node: 2}\ncommand: [\"sleep\", "
      "\"60.4711\"]\ntermination_grace: 60s\n");
  ASSERT_TRUE(server.WaitForState("early", "Running"));
  ASSERT_EQ(server.Cli({"stop", "early"}).exit_code, 0);
  ASSERT_TRUE(server.WaitForState("early", "Stopped", std::chrono::seconds(20)));
  EXPECT_FALSE(server.HasEvent("early", "Killed"));
  EXPECT_TRUE(ProcessesWith("sleep 60.4711", "HEADWAY_URL=" + server.url()).empty());
}

TEST(JobLifecycle, StopEndsAJobWithNoSignalHandlerAtOnce) {
  // No trap: SIGTERM's default action ends it. (The server's own blocked
  // SIGTERM once leaked into jobs, so this waited for the grace and SIGKILL.)
  TestServer server;
  server.Submit("name: plain\ncommand: [\"sleep\", \"60\"]\ntermination_grace: 30s\n");
  ASSERT_TRUE(server.WaitForState("plain", "Running"));
  ASSERT_EQ(server.Cli({"stop", "plain"}).exit_code, 0);
  ASSERT_TRUE(server.WaitForState("plain", "Stopped", std::chrono::seconds(15)));
  EXPECT_FALSE(server.HasEvent("plain", "Killed"));
  // The job sees SIGTERM and SIGPIPE as any program started from a shell does.
  server.Submit(
      "name: mask\ncommand: [\"/bin/sh\", \"-c\", \"grep -E '^Sig(Blk|Ign)' "
      "/proc/self/status\"]\n");
  ASSERT_TRUE(server.WaitForState("mask", "Succeeded"));
  std::string status = server.Cli({"logs", "mask"}).out;
  EXPECT_THAT(status, HasSubstr("SigBlk:\t0000000000000000"));
  EXPECT_THAT(status, ::testing::Not(HasSubstr("SigIgn:\t0000000000001000"))) << "SIGPIPE ignored";
}

TEST(JobLifecycle, StopKillsAJobThatIgnoresSigtermAfterTheGrace) {
  TestServer server;
  // It says when its trap is set: a SIGTERM before that would end it by default.
  const std::string ready = server.work_dir() + "/ready";
  server.Submit("name: stubborn\ncommand: \"trap '' TERM; touch " + ready +
                "; while true; do sleep 0.1; done\"\ntermination_grace: 1s\n");
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(ready); }));
  ASSERT_EQ(server.Cli({"stop", "stubborn"}).exit_code, 0);
  ASSERT_TRUE(server.WaitForState("stubborn", "Stopped", std::chrono::seconds(10)));
  EXPECT_TRUE(server.HasEvent("stubborn", "Killed"));
}

TEST(JobLifecycle, StoppingAQueuedJobStopsItAtOnce) {
  TestServer server(/*gpus=*/1);
  server.Submit("name: holder\ncommand: \"sleep 30\"\nresources: {gpus_per_process: 1}\n");
  server.Submit("name: waiter\ncommand: \"true\"\nresources: {gpus_per_process: 1}\n");
  ASSERT_TRUE(server.WaitForState("holder", "Running"));
  EXPECT_EQ(server.State("waiter"), "Queued");
  EXPECT_EQ(server.Cli({"stop", "waiter"}).exit_code, 0);
  EXPECT_EQ(server.State("waiter"), "Stopped");
  ASSERT_EQ(server.Cli({"stop", "holder"}).exit_code, 0);
  EXPECT_TRUE(server.WaitForState("holder", "Stopped"));
}

TEST(JobLifecycle, RestartPolicyRerunsAFailedJob) {
  TestServer server;
  // Fails on the first attempt, succeeds on the second.
  server.Submit("name: flaky\nworking_dir: " + server.work_dir() + R"(
command: "echo attempt $HEADWAY_ATTEMPT; if [ -e marker ]; then exit 0; fi; touch marker; exit 3"
restart_policy: {max_restarts: 2}
)");
  ASSERT_TRUE(server.WaitForState("flaky", "Succeeded"));
  auto job = server.Job("flaky");
  EXPECT_EQ(job["restarts"], 1);
  EXPECT_TRUE(server.HasEvent("flaky", "StateChanged"));
  EXPECT_EQ(server.Cli({"logs", "flaky", "--attempt", "0"}).out, "attempt 0\n");
  EXPECT_EQ(server.Cli({"logs", "flaky"}).out, "attempt 1\n");
}

TEST(JobLifecycle, RestartPolicyGivesUpAfterMaxRestarts) {
  TestServer server;
  server.Submit("name: doomed\ncommand: \"exit 5\"\nrestart_policy: {max_restarts: 2}\n");
  ASSERT_TRUE(server.WaitForState("doomed", "Failed"));
  auto job = server.Job("doomed");
  EXPECT_EQ(job["restarts"], 2);
  EXPECT_EQ(job["exit_code"], 5);
}

TEST(JobLifecycle, TwoProcessJobGetsTorchrunEnvironmentAndItsGpus) {
  TestServer server(/*gpus=*/4);
  server.Submit(R"(
name: ddp
command: ["/bin/sh", "-c", "echo $RANK $LOCAL_RANK $WORLD_SIZE $MASTER_ADDR $MASTER_PORT [$CUDA_VISIBLE_DEVICES] $HEADWAY_URL"]
resources: {processes_per_node: 2, gpus_per_process: 2}
)");
  ASSERT_TRUE(server.WaitForState("ddp", "Succeeded"));
  std::string rank0 = server.Cli({"logs", "ddp", "--rank", "0"}).out;
  std::string rank1 = server.Cli({"logs", "ddp", "--rank", "1"}).out;
  std::istringstream r0(rank0), r1(rank1);
  std::string rank, local, world, addr, port0, port1, gpus0, gpus1, url;
  r0 >> rank >> local >> world >> addr >> port0 >> gpus0 >> url;
  EXPECT_EQ(rank, "0");
  EXPECT_EQ(local, "0");
  EXPECT_EQ(world, "2");
  EXPECT_EQ(addr, "127.0.0.1");
  EXPECT_EQ(gpus0, "[0,1]");
  EXPECT_EQ(url, server.url());
  r1 >> rank >> local >> world >> addr >> port1 >> gpus1;
  EXPECT_EQ(rank, "1");
  EXPECT_EQ(local, "1");
  EXPECT_EQ(world, "2");
  EXPECT_EQ(port1, port0);
  EXPECT_EQ(gpus1, "[2,3]");
  // Merged view prefixes each line with its rank.
  std::string merged = server.Cli({"logs", "ddp"}).out;
  EXPECT_THAT(merged, HasSubstr("[rank 0] 0 0 2"));
  EXPECT_THAT(merged, HasSubstr("[rank 1] 1 1 2"));
}

TEST(JobLifecycle, OneFailingRankTearsDownTheOthers) {
  TestServer server;
  server.Submit(R"(
name: halfbroken
command: ["/bin/sh", "-c", "if [ $RANK = 1 ]; then exit 9; fi; sleep 60"]
resources: {processes_per_node: 2}
termination_grace: 2s
)");
  ASSERT_TRUE(server.WaitForState("halfbroken", "Failed", std::chrono::seconds(15)));
  auto job = server.Job("halfbroken");
  EXPECT_EQ(job["exit_code"], 9);
  EXPECT_THAT(job["message"].get<std::string>(), HasSubstr("rank 1"));
}

TEST(JobLifecycle, TimeLimitFailsTheJob) {
  TestServer server;
  server.Submit("name: slow\ncommand: \"sleep 60\"\ntime_limit: 1s\ntermination_grace: 1s\n");
  ASSERT_TRUE(server.WaitForState("slow", "Failed", std::chrono::seconds(10)));
  EXPECT_EQ(server.Job("slow")["reason"], "TimeLimitExceeded");
}

TEST(Scheduling, JobsWaitInOrderForFreeGpus) {
  TestServer server(/*gpus=*/2);
  // "big" holds both GPUs until the test releases it, so the queue is inspected while it runs
  // however slow the machine (a fixed sleep let it end first on a loaded CI host).
  const std::string release = server.work_dir() + "/release-big";
  server.Submit("name: big\ncommand: \"while [ ! -e " + release +
                " ]; do sleep 0.1; done\"\nresources: {gpus_per_process: 2}\n");
  ASSERT_TRUE(server.WaitForState("big", "Running"));
  server.Submit("name: small\ncommand: \"true\"\nresources: {gpus_per_process: 1}\n");
  server.Submit("name: after\ncommand: \"true\"\nresources: {gpus_per_process: 1}\n");
  server.Submit("name: cpu\ncommand: \"true\"\n");
  ASSERT_TRUE(
      WaitFor([&] { return !server.Job("small")["pending_reason"].get<std::string>().empty(); }));
  EXPECT_EQ(server.State("small"), "Queued");
  EXPECT_THAT(server.Job("small")["pending_reason"].get<std::string>(),
              HasSubstr("waiting for 1 GPU (0 of 2 free)"));
  EXPECT_THAT(server.Cli({"get", "jobs", "-o", "wide"}).out, HasSubstr("waiting for 1 GPU"));
  EXPECT_EQ(server.State("after"), "Queued");
  // A CPU-only job needs none of the GPUs the head job waits for: it backfills.
  ASSERT_TRUE(server.WaitForState("cpu", "Succeeded"));
  EXPECT_TRUE(server.HasEvent("cpu", "StateChanged", "backfilled"));
  EXPECT_EQ(server.State("small"), "Queued");
  std::ofstream(release).put('\n');
  ASSERT_TRUE(server.WaitForState("small", "Succeeded"));
  ASSERT_TRUE(server.WaitForState("after", "Succeeded"));
  EXPECT_EQ(server.State("big"), "Succeeded");
}

TEST(Scheduling, HigherPriorityRunsFirst) {
  TestServer server(/*gpus=*/1);
  // Each job holds the GPU until the test releases it: what is observed does
  // not depend on how fast the machine is.
  auto until = [&](const std::string& file) {
    return "command: \"while [ ! -e " + server.work_dir() + "/" + file +
           " ]; do sleep 0.05; done\"\nresources: {gpus_per_process: 1}\n";
  };
  server.Submit("name: blocker\n" + until("blocker"));
  ASSERT_TRUE(server.WaitForState("blocker", "Running"));
  server.Submit("name: low\n" + until("low"));
  server.Submit("name: urgent\npriority: 10\n" + until("urgent"));
  std::ofstream(server.work_dir() + "/blocker").put('\n');
  ASSERT_TRUE(server.WaitForState("urgent", "Running"));
  EXPECT_EQ(server.State("low"), "Queued");
  std::ofstream(server.work_dir() + "/urgent").put('\n');
  ASSERT_TRUE(server.WaitForState("low", "Running"));
  std::ofstream(server.work_dir() + "/low").put('\n');
  ASSERT_TRUE(server.WaitForState("low", "Succeeded"));
}

TEST(Recovery, ServerKilledMidJobReadoptsItAndLosesNothing) {
  TestServer server(/*gpus=*/1);
  // The jobs end when the test says so, not after a fixed sleep, so a slow
  // machine cannot make them finish before they are seen running.
  const std::string end_survivor = server.work_dir() + "/end-survivor";
  const std::string end_quick = server.work_dir() + "/end-quick";
  server.Submit("name: survivor\ncommand: \"echo start; while [ ! -e " + end_survivor +
                " ]; do sleep 0.05; done; echo end\"\nresources: {gpus_per_process: 1}\n");
  server.Submit("name: quick\ncommand: \"while [ ! -e " + end_quick +
                " ]; do sleep 0.05; done; exit 4\"\n");
  server.Submit("name: queued\ncommand: \"echo queued ran\"\nresources: {gpus_per_process: 1}\n");
  ASSERT_TRUE(server.WaitForState("survivor", "Running"));
  ASSERT_TRUE(server.WaitForState("quick", "Running"));
  server.Kill();
  std::ofstream(end_quick).put('\n');  // "quick" ends while the server is down
  // Ended, its supervisor included (which records how it ended).
  ASSERT_TRUE(WaitFor([&] {
    return ProcessesWith(end_quick, "HEADWAY_URL=" + server.url()).empty() &&
           ProcessesWith("shim " + server.data_dir() + "/jobs/quick/").empty();
  }));
  server.Restart();
  EXPECT_EQ(server.State("survivor"), "Running");
  EXPECT_TRUE(server.HasEvent("survivor", "Readopted"));
  ASSERT_TRUE(server.WaitForState("quick", "Failed"));
  EXPECT_EQ(server.Job("quick")["exit_code"], 4);
  EXPECT_TRUE(server.HasEvent("quick", "Reconciled"));
  std::ofstream(end_survivor).put('\n');
  ASSERT_TRUE(server.WaitForState("survivor", "Succeeded"));
  EXPECT_EQ(server.Cli({"logs", "survivor"}).out, "start\nend\n");
  ASSERT_TRUE(server.WaitForState("queued", "Succeeded"));
  // Each job ran once: one attempt, one Running transition.
  int running = 0;
  for (const auto& e : server.Events("survivor")) {
    if (e["message"].get<std::string>().find("Starting -> Running") != std::string::npos) ++running;
  }
  EXPECT_EQ(running, 1);
  CommandResult list = server.Cli({"get", "jobs", "-o", "name"});
  EXPECT_EQ(list.out, "survivor\nquick\nqueued\n");
}

TEST(Recovery, ASecondServerOnTheSameDataDirectoryRefusesToStartAndNamesTheFirst) {
  TestServer server;
  server.Submit("name: mine\ncommand: \"sleep 30\"\ntermination_grace: 1s\n");
  ASSERT_TRUE(server.WaitForState("mine", "Running"));
  CommandResult second = RunCommand({"/usr/bin/timeout", "20", HEADWAY_BIN, "server", "--listen",
                                     "127.0.0.1:0", "--data-dir", server.data_dir()});
  EXPECT_EQ(second.exit_code, 1) << second.out << second.err;
  EXPECT_THAT(second.out + second.err, HasSubstr("another headway server (pid "));
  EXPECT_THAT(second.out + second.err, HasSubstr(server.url()));
  // The first server still drives its job alone.
  EXPECT_FALSE(server.HasEvent("mine", "Readopted"));
  EXPECT_EQ(server.Cli({"stop", "mine"}).exit_code, 0);
  EXPECT_TRUE(server.WaitForState("mine", "Stopped"));
  // A crashed server leaves no lock behind.
  server.Kill();
  server.Restart();
  EXPECT_EQ(server.State("mine"), "Stopped");
}

// Fault injection: the server dies (as with kill -9) just before and just
// after the executor starts an attempt, before the attempt's handle is
// saved. After the restart exactly one copy of the attempt runs, and it
// reports with the token it was started with.
TEST(Recovery, ACrashWhileLaunchingNeverRunsTheAttemptTwice) {
  for (std::string point : {"launch:before", "launch:after"}) {
    SCOPED_TRACE(point);
    ::setenv("HEADWAY_TEST_CRASH_AT", point.c_str(), 1);
    // The supervisor takes a second to record itself: the restarted server
    // meets it still starting, as on a loaded machine.
    ::setenv("HEADWAY_TEST_SLOW_SUPERVISOR", "1", 1);
    TestServer server(/*gpus=*/1);
    ::unsetenv("HEADWAY_TEST_CRASH_AT");
    ::unsetenv("HEADWAY_TEST_SLOW_SUPERVISOR");
    const std::string marker = point == "launch:before" ? "sleep 4848.1" : "sleep 4848.2";
    // Spelled through a variable so that only the sleep's own command line holds the marker.
    const std::string sleep_command = "s=4848; sleep $s." + marker.substr(marker.size() - 1);
    const std::string release = server.work_dir() + "/release";
    // The server may die before it answers: the job is stored before the
    // control loop wakes to launch it, so the reply is not awaited.
    server.Cli({"submit", "-f", "-"},
               "name: once\nresources: {gpus_per_process: 1}\n"
               "env: {PYTHONPATH: \"" HEADWAY_SOURCE_DIR
               "/sdk/python\"}\n"
               "command: \"" +
                   sleep_command + " & m=$!; while [ ! -e " + release +
                   " ]; do sleep 0.1; done; /usr/bin/python3 -c 'import headway; "
                   "headway.report(5, total_steps=5); headway.flush()'; kill $m\"\n");
    ASSERT_TRUE(WaitFor([&] {
      return server.ServerLog().find("crash point " + point + " reached") != std::string::npos;
    })) << server.ServerLog();
    server.Kill();
    server.Restart();
    ASSERT_TRUE(server.WaitForState("once", "Running"));
    ASSERT_TRUE(
        WaitFor([&] { return ProcessesWith(marker, "HEADWAY_URL=" + server.url()).size() >= 1; }));
    std::this_thread::sleep_for(
        std::chrono::milliseconds(500));  // a second copy would be up by now
    EXPECT_EQ(ProcessesWith(marker, "HEADWAY_URL=" + server.url()).size(), 1u);
    EXPECT_TRUE(server.HasEvent("once", point == "launch:before" ? "StateChanged" : "Readopted",
                                point == "launch:before" ? "before launch" : "had started"));
    WriteFile(release, "");
    ASSERT_TRUE(server.WaitForState("once", "Succeeded")) << server.Cli({"logs", "once"}).out;
    EXPECT_EQ(server.Job("once")["progress"]["step"], 5);
    EXPECT_EQ(server.Job("once")["attempt"], 0);
  }
}

// Fault injection at every other step where the server acts on a stored
// decision: it dies (as with kill -9) after storing a stop, a preemption, a
// SIGKILL after the grace, or an attempt's end, and before acting on it.
// After the restart the decision is carried out, every attempt ran once,
// and no process of the job is left behind.
namespace {

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

struct CrashCase {
  std::string point;
  std::string job;       // the job whose step crashes the server
  std::string expected;  // its state at the end
  int attempts;          // how many attempts it must have started, once each
};

}  // namespace

TEST(Recovery, ACrashAtAnyStepOfStopPreemptionKillOrRestartNeitherRepeatsNorOrphansAnAttempt) {
  const std::vector<CrashCase> cases = {
      {"signal:TERM", "stopped", "Stopped", 1},  {"signal:USR1", "preempted", "Succeeded", 2},
      {"signal:KILL", "stubborn", "Stopped", 1}, {"exit:observed", "flaky", "Failed", 2},
      {"exit:stored", "flaky", "Failed", 2},
  };
  for (const CrashCase& c : cases) {
    SCOPED_TRACE(c.point);
    ::setenv("HEADWAY_TEST_CRASH_AT", c.point.c_str(), 1);
    TestServer server(/*gpus=*/1);
    ::unsetenv("HEADWAY_TEST_CRASH_AT");
    const std::string starts = server.work_dir() + "/" + c.job + ".starts";
    const std::string marker = "sleep 5151." + std::to_string(&c - cases.data());
    // Spelled through a variable so that only the sleep's command line holds the marker.
    const std::string sleep_forever = "s=5151; sleep $s." + std::to_string(&c - cases.data());
    // Jobs that trap signals record their start once the traps are set, and
    // the test signals them only then: a signal before the trap would end the
    // shell at once, and the step under test would never be reached.
    const std::string record = "echo start >> " + starts + "; ";
    if (c.job == "stopped") {
      server.Submit("name: stopped\ntermination_grace: 30s\ncommand: \"" + record + sleep_forever +
                    " & wait\"\n");
      ASSERT_TRUE(server.WaitForState("stopped", "Running"));
      server.Cli({"stop", "stopped"});  // the server may die before it answers
    } else if (c.job == "stubborn") {
      server.Submit("name: stubborn\ntermination_grace: 1s\ncommand: \"trap '' TERM; " + record +
                    sleep_forever + " & while :; do wait; done\"\n");
      ASSERT_TRUE(server.WaitForState("stubborn", "Running"));
      ASSERT_TRUE(WaitFor([&] { return ReadFile(starts).find("start") != std::string::npos; }));
      ASSERT_EQ(server.Cli({"stop", "stubborn"}).exit_code, 0);
    } else if (c.job == "flaky") {
      server.Submit("name: flaky\nrestart_policy: {max_restarts: 1}\ncommand: \"" + record +
                    "sleep 0.5; exit 3\"\n");
    } else {
      // A checkpointing job, preempted by a higher-priority one: it resumes
      // and finishes once that one is done.
      const std::string warned = server.work_dir() + "/warned";
      server.Submit(
          "name: preempted\npriority: 0\ncheckpoint_warning: 1s\n"
          "resources: {gpus_per_process: 1}\ncommand: \"if [ -e " +
          warned + " ]; then " + record + "exit 0; fi; trap 'touch " + warned +
          "' USR1; trap 'exit 143' TERM; " + record + sleep_forever +
          " & while :; do wait; done\"\n");
      ASSERT_TRUE(server.WaitForState("preempted", "Running"));
      ASSERT_TRUE(WaitFor([&] { return ReadFile(starts).find("start") != std::string::npos; }));
      server.Cli({"submit", "-f", "-"},
                 "name: urgent\npriority: 10\n"
                 "resources: {gpus_per_process: 1}\ncommand: \"true\"\n");
    }
    ASSERT_TRUE(WaitFor([&] {
      return server.ServerLog().find("crash point " + c.point + " reached") != std::string::npos;
    })) << server.ServerLog();
    server.Kill();
    server.Restart();
    ASSERT_TRUE(server.WaitForState(c.job, c.expected, std::chrono::seconds(40)))
        << server.State(c.job) << "\n"
        << server.ServerLog();
    EXPECT_EQ(Count(ReadFile(starts), "start"), c.attempts);
    EXPECT_EQ(server.Job(c.job)["attempt"], c.attempts - 1);
    EXPECT_TRUE(
        WaitFor([&] { return ProcessesWith(marker, "HEADWAY_URL=" + server.url()).empty(); }));
    if (c.job == "preempted") {
      EXPECT_EQ(server.State("urgent"), "Succeeded");
      EXPECT_TRUE(server.HasEvent("preempted", "Preempting", "SIGUSR1 sent again"));
    }
    if (c.job == "stopped") {
      EXPECT_TRUE(server.HasEvent("stopped", "Stopping", "SIGTERM sent again"));
    }
  }
}

TEST(Recovery, JobThatDiesWithItsSupervisorIsFailedAsLost) {
  TestServer server;
  server.Submit("name: orphan\ncommand: \"sleep 30\"\n");
  ASSERT_TRUE(server.WaitForState("orphan", "Running"));
  server.Kill();
  // Kill the job's whole process group behind the server's back.
  std::string run_dir = server.data_dir() + "/jobs/orphan/attempt-0";
  ASSERT_EQ(RunCommand({"/bin/sh", "-c", "pkill -KILL -f '[s]him " + run_dir + "'"}).exit_code, 0);
  server.Restart();
  ASSERT_TRUE(server.WaitForState("orphan", "Failed"));
  EXPECT_EQ(server.Job("orphan")["reason"], "Lost");
}

TEST(Validation, MalformedSpecsAreRejectedWithFieldAndLine) {
  TestServer server;
  struct Case {
    std::string spec;
    std::string expected;
  };
  std::vector<Case> cases = {
      {"name: a\ncommand: [x]\ngpus: 2\n", "gpus (line 3): unknown field"},
      {"name: a\ncommand: [x]\nresources:\n  gpus_per_process: two\n",
       "resources.gpus_per_process (line 4): must be an integer"},
      {"name: a\ncommand: [x]\npriority: \"5\"\n", "priority (line 3): must be an integer"},
      {"command: [x]\n", "name: is required"},
      {"name: Bad_Name\ncommand: [x]\n", "name (line 1): must be 1-63 lowercase"},
      {"name: a\ncommand: [x\n", "not valid YAML or JSON"},
      {"{\"name\": \"a\", \"command\": \"x\", \"resources\": {\"nodes\": 2}}",
       "resources.nodes: the local executor runs on one node"},
      {"name: a\ncommand: [x]\nresources: {gpus_per_process: 8}\n", "the pool has 4"},
      {"- just\n- a list\n", "must be a map"},
  };
  for (const Case& c : cases) {
    CommandResult r = server.Cli({"submit", "-f", "-"}, c.spec);
    EXPECT_EQ(r.exit_code, 1) << c.spec;
    EXPECT_THAT(r.err, HasSubstr(c.expected)) << c.spec;
  }
  // Nothing was created by any of them.
  EXPECT_EQ(server.Cli({"get", "jobs", "-o", "name"}).out, "");
}

TEST(Validation, HttpErrorsAreJsonWithTheRightStatus) {
  TestServer server;
  api::HttpClient http = server.Http();
  auto bad = http.Request("POST", "/api/v1/jobs", "name: a\ncommand: [x]\nbogus: 1\n");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  auto body = nlohmann::json::parse(bad->body);
  EXPECT_EQ(body["error"]["code"], "InvalidArgument");
  EXPECT_EQ(body["error"]["field"], "bogus");
  EXPECT_EQ(body["error"]["line"], 3);

  auto huge = http.Request("POST", "/api/v1/jobs", std::string(2 << 20, 'x'));
  ASSERT_TRUE(huge.ok());
  EXPECT_EQ(huge->status, 413);

  auto missing = http.Request("GET", "/api/v1/jobs/nope");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(nlohmann::json::parse(missing->body)["error"]["code"], "NotFound");

  // Bytes that are not UTF-8 (found by fuzzing): a clear 400 for a spec, a
  // JSON 404 (not a 500) for a path, and no job stored.
  auto binary =
      http.Request("POST", "/api/v1/jobs", "name: a\ncommand: [x]\nenv: {K: \"\xff\xfe\"}\n");
  ASSERT_TRUE(binary.ok());
  EXPECT_EQ(binary->status, 400);
  EXPECT_THAT(binary->body, HasSubstr("UTF-8"));
  EXPECT_EQ(nlohmann::json::parse(binary->body)["error"]["line"], 3);
  auto odd_path = http.Request("GET", "/api/v1/jobs/%FF%FE");
  ASSERT_TRUE(odd_path.ok());
  EXPECT_EQ(odd_path->status, 404);
  EXPECT_EQ(nlohmann::json::parse(odd_path->body)["error"]["code"], "NotFound");
  EXPECT_TRUE(server.Job("a").is_null());

  auto wrong_method = http.Request("DELETE", "/api/v1/jobs");
  ASSERT_TRUE(wrong_method.ok());
  EXPECT_EQ(wrong_method->status, 405);

  auto bad_filter = http.Request("GET", "/api/v1/jobs?state=Sleeping");
  ASSERT_TRUE(bad_filter.ok());
  EXPECT_EQ(bad_filter->status, 400);

  server.Submit("name: dup\ncommand: \"true\"\n");
  auto dup = http.Request("POST", "/api/v1/jobs", "name: dup\ncommand: \"true\"\n");
  ASSERT_TRUE(dup.ok());
  EXPECT_EQ(dup->status, 409);
}

TEST(Cli, ExitCodesAndMessagesAShellUserExpects) {
  TestServer server;
  CommandResult missing = server.Cli({"describe", "job", "ghost"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("job 'ghost' not found"));

  CommandResult usage = server.Cli({"get", "widgets"});
  EXPECT_EQ(usage.exit_code, 2);

  CommandResult no_file = server.Cli({"submit", "-f", "/no/such/spec.yaml"});
  EXPECT_EQ(no_file.exit_code, 2);
  EXPECT_THAT(no_file.err, HasSubstr("cannot read /no/such/spec.yaml"));

  CommandResult unreachable =
      RunCommand({HEADWAY_BIN, "--server", "http://127.0.0.1:1", "get", "jobs"});
  EXPECT_EQ(unreachable.exit_code, 3);
  EXPECT_THAT(unreachable.err, HasSubstr("cannot reach the Headway server"));
}

TEST(Cli, OutputFormatsAndFilters) {
  TestServer server;
  server.Submit("name: one\nteam: vision\ncommand: \"true\"\nlabels: {exp: a}\n");
  server.Submit("name: two\nteam: speech\ncommand: \"exit 1\"\nlabels: {exp: b}\n");
  ASSERT_TRUE(server.WaitForState("one", "Succeeded"));
  ASSERT_TRUE(server.WaitForState("two", "Failed"));
  EXPECT_EQ(server.Cli({"get", "jobs", "--team", "vision", "-o", "name"}).out, "one\n");
  EXPECT_EQ(server.Cli({"get", "jobs", "-l", "exp=b", "-o", "name"}).out, "two\n");
  EXPECT_EQ(server.Cli({"get", "jobs", "--state", "Failed", "-o", "name"}).out, "two\n");
  auto as_json = nlohmann::json::parse(server.Cli({"get", "jobs", "-o", "json"}).out);
  EXPECT_EQ(as_json["jobs"].size(), 2u);
  EXPECT_THAT(server.Cli({"get", "job", "one", "-o", "yaml"}).out, HasSubstr("state: Succeeded"));
  // The JSON a user gets back is itself a valid spec: resubmit under a new name.
  auto spec = server.Job("one")["spec"];
  spec["name"] = "one-again";
  server.Submit(spec.dump());
  EXPECT_TRUE(server.WaitForState("one-again", "Succeeded"));
}

TEST(Logs, FollowStreamsUntilTheJobEndsAcrossRestarts) {
  TestServer server;
  // The first attempt waits for `go`, given once the follower has had time
  // to attach: a slow (sanitizer, loaded) machine once started the CLI only
  // after the first attempt had ended.
  server.Submit("name: chatty\nworking_dir: " + server.work_dir() + R"(
command: "while [ ! -e go ]; do sleep 0.05; done; for i in 1 2 3; do echo line $i; sleep 0.3; done; if [ ! -e done ]; then touch done; exit 1; fi"
restart_policy: {max_restarts: 1}
)");
  ASSERT_TRUE(server.WaitForState("chatty", "Running"));
  CommandResult r;
  std::thread follower([&] { r = server.Cli({"logs", "chatty", "-f"}); });
  EXPECT_TRUE(WaitFor([&] { return SomeoneConnectedTo(server.url()); }));  // (a thread runs)
  std::ofstream(server.work_dir() + "/go").put('\n');
  follower.join();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "line 1\nline 2\nline 3\nheadway: job restarted, following attempt 1\n"
            "line 1\nline 2\nline 3\n");
  EXPECT_EQ(server.State("chatty"), "Succeeded");
}

}  // namespace
}  // namespace headway::testing

namespace headway::testing {
namespace {

// Keeps docs/api/openapi.yaml honest: every documented operation is served.
TEST(OpenApi, EveryDocumentedOperationExists) {
  TestServer server;
  server.Submit("name: doc\ncommand: \"true\"\n");
  ASSERT_TRUE(server.WaitForState("doc", "Succeeded"));
  std::string doc = ReadFile(std::string(HEADWAY_SOURCE_DIR) + "/docs/api/openapi.yaml");
  std::regex path_line(R"(^  (/[^:]*):$)");
  std::regex method_line(R"(^    (get|post|put|delete|patch):)");
  std::istringstream in(doc);
  std::string line, path;
  int checked = 0;
  api::HttpClient http = server.Http();
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, path_line)) {
      path = std::regex_replace(std::string(m[1]), std::regex(R"(\{name\})"), "doc");
      path = std::regex_replace(path, std::regex(R"(\{[a-z]+\})"), "x");
    } else if (!path.empty() && std::regex_search(line, m, method_line)) {
      // Event streams never end; watch_test.cc reads them.
      if (path.find("/watch") != std::string::npos) continue;
      std::string method = m[1];
      for (auto& c : method) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      auto resp = http.Request(method, path);
      ASSERT_TRUE(resp.ok());
      // Served: whatever the answer, it is not the router's "no such endpoint".
      EXPECT_THAT(resp->body, Not(HasSubstr("no such endpoint"))) << method << " " << path;
      EXPECT_NE(resp->status, 405) << method << " " << path;
      ++checked;
    }
  }
  EXPECT_GE(checked, 11);
}

TEST(JobLifecycle, RelativeWorkingDirIsTakenFromWhereSubmitRan) {
  TestServer server;
  std::string dir = server.work_dir();
  std::filesystem::create_directories(dir + "/sub");
  WriteFile(dir + "/job.yaml", "name: here\ncommand: pwd\n");
  WriteFile(dir + "/job2.yaml", "name: there\ncommand: pwd\nworking_dir: sub\n");
  for (const char* file : {"job.yaml", "job2.yaml"}) {
    CommandResult r = RunCommand({"/bin/sh", "-c",
                                  "cd " + dir + " && " + HEADWAY_BIN + " --server " + server.url() +
                                      " --token " + server.token() + " submit -f " + file});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  ASSERT_TRUE(server.WaitForState("here", "Succeeded"));
  ASSERT_TRUE(server.WaitForState("there", "Succeeded"));
  EXPECT_EQ(server.Cli({"logs", "here"}).out, dir + "\n");
  EXPECT_EQ(server.Cli({"logs", "there"}).out, dir + "/sub\n");
}

}  // namespace
}  // namespace headway::testing
