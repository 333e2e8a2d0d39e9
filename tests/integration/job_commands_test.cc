// Jobs a user can delete and run again, names chosen at submit, verdicts that
// outlive the run, and what progress and ETA say about a job: against a real
// server, real processes and the real CLI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>

#include "test_server.h"

namespace headway::testing {
namespace {

using nlohmann::json;

bool Gone(const TestServer& server, const std::string& name) { return server.Job(name).is_null(); }

TEST(JobCommands, AnEndedJobIsDeletedAndItsNameCanBeSubmittedAgain) {
  TestServer server;
  const std::string spec = "name: once\ncommand: \"echo hello\"\n";
  server.Submit(spec);
  ASSERT_TRUE(server.WaitForState("once", "Succeeded"));
  CommandResult again = server.Cli({"submit", "-f", "-"}, spec);
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("already exists"), std::string::npos) << again.err;
  // And what to do about it.
  EXPECT_NE(again.err.find("headway submit --name once-2"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("headway rerun once"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("headway delete job once"), std::string::npos) << again.err;
  ASSERT_TRUE(std::filesystem::exists(server.data_dir() + "/jobs/once"));

  CommandResult deleted = server.Cli({"delete", "job", "once"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_EQ(deleted.out, "job/once deleted\n");
  EXPECT_TRUE(Gone(server, "once"));
  EXPECT_FALSE(std::filesystem::exists(server.data_dir() + "/jobs/once"));
  EXPECT_NE(server.Cli({"describe", "job", "once"}).exit_code, 0);

  server.Submit(spec);
  ASSERT_TRUE(server.WaitForState("once", "Succeeded"));
  int submitted = 0;
  for (const json& e : server.Events("once")) submitted += e["type"] == "Submitted";
  EXPECT_EQ(submitted, 1);                                 // the deleted job's events went with it
  EXPECT_EQ(server.Cli({"logs", "once"}).out, "hello\n");  // this run's output only
}

TEST(JobCommands, ARunningJobIsDeletedOnlyWithForceWhichStopsItFirst) {
  TestServer server;
  server.Submit("name: long\ncommand: \"sleep 60\"\ntermination_grace: 1s\n");
  ASSERT_TRUE(server.WaitForState("long", "Running"));
  CommandResult refused = server.Cli({"delete", "job", "long"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("stop it first"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  EXPECT_EQ(server.State("long"), "Running");

  CommandResult forced = server.Cli({"delete", "job", "long", "--force"});
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(forced.out, "job/long stopping; deleted once it has ended\n");
  EXPECT_TRUE(WaitFor([&] { return Gone(server, "long"); }));
  EXPECT_TRUE(ProcessesWith("sleep 60", "HEADWAY_URL=" + server.url()).empty());
}

TEST(JobCommands, DeletingNeedsATokenThatMayChangeTheJobsTeam) {
  TestServer server;
  server.Submit("name: theirs\nteam: vision\ncommand: \"true\"\n");
  ASSERT_TRUE(server.WaitForState("theirs", "Succeeded"));
  std::string other = CreateToken(server, "bob", "nlp", "member");
  std::string viewer = CreateToken(server, "eve", "*", "viewer");
  std::string member = CreateToken(server, "ann", "vision", "member");
  EXPECT_EQ(Call(server, other, "DELETE", "/api/v1/jobs/theirs").status, 403);
  EXPECT_EQ(Call(server, viewer, "DELETE", "/api/v1/jobs/theirs").status, 403);
  EXPECT_EQ(Call(server, "", "DELETE", "/api/v1/jobs/theirs").status, 401);
  EXPECT_EQ(Call(server, other, "POST", "/api/v1/jobs/theirs/rerun").status, 403);
  EXPECT_FALSE(Gone(server, "theirs"));
  EXPECT_EQ(Call(server, member, "DELETE", "/api/v1/jobs/theirs?force=maybe").status, 400);
  Answer ok = Call(server, member, "DELETE", "/api/v1/jobs/theirs");
  EXPECT_EQ(ok.status, 200) << ok.raw;
  EXPECT_EQ(ok.body["deleted"], true);
  EXPECT_EQ(Call(server, member, "DELETE", "/api/v1/jobs/theirs").status, 404);
}

TEST(JobCommands, RerunCopiesTheSpecUnderTheNextFreeName) {
  TestServer server;
  server.Submit("name: train\ncommand: \"echo run $HEADWAY_JOB\"\nlabels: {project: demo}\n");
  ASSERT_TRUE(server.WaitForState("train", "Succeeded"));
  CommandResult first = server.Cli({"rerun", "train"});
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, "job/train-2 submitted (rerun of train)\n");
  ASSERT_TRUE(server.WaitForState("train-2", "Succeeded"));
  EXPECT_EQ(server.Job("train-2")["labels"]["project"], "demo");
  EXPECT_EQ(server.Cli({"logs", "train-2"}).out, "run train-2\n");
  EXPECT_EQ(server.Cli({"rerun", "train", "-o", "name"}).out, "train-3\n");
  EXPECT_NE(server.Cli({"rerun", "nothing"}).exit_code, 0);
}

TEST(JobCommands, NamesComeFromGenerateNameOrSubmitName) {
  TestServer server;
  CommandResult generated =
      server.Cli({"submit", "-f", "-", "-o", "name"}, "generateName: sweep-\ncommand: \"true\"\n");
  ASSERT_EQ(generated.exit_code, 0) << generated.err;
  std::string name = generated.out.substr(0, generated.out.find('\n'));
  EXPECT_EQ(name.rfind("sweep-", 0), 0u) << name;
  EXPECT_EQ(name.size(), 11u) << name;
  EXPECT_TRUE(server.WaitForState(name, "Succeeded"));

  const std::string spec = "name: base\ncommand: \"true\"\n";
  CommandResult named = server.Cli({"submit", "-f", "-", "--name", "base-b"}, spec);
  EXPECT_EQ(named.exit_code, 0) << named.err;
  EXPECT_EQ(named.out, "job/base-b submitted\n");
  EXPECT_TRUE(server.WaitForState("base-b", "Succeeded"));
  EXPECT_TRUE(Gone(server, "base"));
  // A spec without any name may be named on the command line.
  EXPECT_EQ(server.Cli({"submit", "-f", "-", "--name", "c"}, "command: \"true\"\n").exit_code, 0);
  CommandResult bad = server.Cli({"submit", "-f", "-", "--name", "Bad_Name"}, spec);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("name"), std::string::npos) << bad.err;
  CommandResult none = server.Cli({"submit", "-f", "-"}, "command: \"true\"\n");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("generateName"), std::string::npos) << none.err;
}

TEST(JobCommands, GetJobsActiveHidesEndedJobs) {
  TestServer server;
  server.Submit("name: done\ncommand: \"true\"\n");
  ASSERT_TRUE(server.WaitForState("done", "Succeeded"));
  server.Submit("name: busy\ncommand: \"sleep 60\"\ntermination_grace: 1s\n");
  ASSERT_TRUE(server.WaitForState("busy", "Running"));
  EXPECT_EQ(server.Cli({"get", "jobs", "-o", "name"}).out, "done\nbusy\n");
  EXPECT_EQ(server.Cli({"get", "jobs", "--active", "-o", "name"}).out, "busy\n");
  server.Cli({"stop", "busy"});
}

// The CLI and the Python SDK read the same variables: HEADWAY_API_TOKEN, and
// HEADWAY_USER_TOKEN as well.
TEST(JobCommands, TheCliTakesTheTokenFromEitherVariable) {
  TestServer server;
  const std::string empty = MakeTempDir("headway-cli");
  for (std::string variable : {"HEADWAY_API_TOKEN", "HEADWAY_USER_TOKEN"}) {
    CommandResult r =
        RunCommand({"/usr/bin/env", "-u", "HEADWAY_API_TOKEN", "-u", "HEADWAY_USER_TOKEN",
                    "HEADWAY_DATA_DIR=" + empty, variable + "=" + server.admin_token(), HEADWAY_BIN,
                    "--server", server.url(), "get", "jobs"});
    EXPECT_EQ(r.exit_code, 0) << variable << ": " << r.err;
  }
  CommandResult none = RunCommand({"/usr/bin/env", "-u", "HEADWAY_API_TOKEN", "-u",
                                   "HEADWAY_USER_TOKEN", "HEADWAY_DATA_DIR=" + empty, HEADWAY_BIN,
                                   "--server", server.url(), "get", "jobs"});
  EXPECT_NE(none.exit_code, 0);
  std::filesystem::remove_all(empty);
}

// A run that diverged (NaN loss) and still exited 0 keeps its verdict.
TEST(JobVerdicts, ADivergedRunThatExitsZeroStaysDiverging) {
  TestServer server;
  server.Submit(R"(
name: nan-run
command: "for i in $(seq 1 39); do echo \"HEADWAY {\\\"step\\\": $i, \\\"total_steps\\\": 100, \\\"loss\\\": 1.5}\"; done; echo 'HEADWAY {\"step\": 40, \"total_steps\": 100, \"loss\": \"NaN\"}'; exit 0"
)");
  ASSERT_TRUE(server.WaitForState("nan-run", "Succeeded"));
  json job = server.Job("nan-run");
  EXPECT_EQ(job["health"], "Diverging") << job.dump();
  EXPECT_NE(job["health_reason"].get<std::string>().find("step 40"), std::string::npos)
      << job.dump();
  EXPECT_EQ(job["progress"]["step"], 40);
  std::string table = server.Cli({"get", "jobs"}).out;
  EXPECT_NE(table.find("Diverging"), std::string::npos) << table;
  std::string described = server.Cli({"describe", "job", "nan-run"}).out;
  EXPECT_NE(described.find("Succeeded, diverged: loss is NaN at step 40"), std::string::npos)
      << described;
  EXPECT_TRUE(server.HasEvent("nan-run", "HealthChanged", "Diverging"));
  // It survives a restart of the server.
  server.Terminate();
  server.Restart();
  EXPECT_EQ(server.Job("nan-run")["health"], "Diverging");
}

// A healthy run that ended says so, and how long ago its last report came,
// not "reported 0.0s ago" as if it were still running.
TEST(JobVerdicts, AnEndedRunSaysHowLongAgoItLastReported) {
  TestServer server;
  server.Submit(R"(
name: done-run
command: "for i in $(seq 1 20); do echo \"HEADWAY {\\\"step\\\": $i, \\\"total_steps\\\": 20, \\\"loss\\\": $((100 - i))}\"; done; exit 0"
)");
  ASSERT_TRUE(server.WaitForState("done-run", "Succeeded"));
  json job = server.Job("done-run");
  EXPECT_EQ(job["health"], "Progressing") << job.dump();
  EXPECT_THAT(job["health_reason"].get<std::string>(),
              ::testing::StartsWith("ended making headway; last report (step 20) "))
      << job.dump();
  EXPECT_THAT(job["health_reason"].get<std::string>(), ::testing::EndsWith(" ago"));
}

// `HEADWAY {"step": 1, "loss": 1.47}`, the natural form, is a report, and a
// line that is not says why.
TEST(JobVerdicts, TopLevelMetricsAreReadAndMalformedLinesSayWhy) {
  TestServer server;
  server.Submit(R"(
name: natural
command: "echo 'HEADWAY {\"step\": 1, \"loss\": 1.47}'; echo 'HEADWAY {\"loss\": 2}'; echo 'HEADWAY {\"step\": 2, \"loss\": 1.2}'"
)");
  ASSERT_TRUE(server.WaitForState("natural", "Succeeded"));
  EXPECT_TRUE(WaitFor([&] { return server.Job("natural")["progress"]["step"] == 2; }));
  EXPECT_EQ(server.Job("natural")["progress"]["metrics"]["loss"], 1.2);
  EXPECT_TRUE(server.HasEvent("natural", "Warning", "rank 0: step: is required"));
}

TEST(JobProgress, ATimeLimitIsNotProgress) {
  TestServer server;
  server.Submit("name: limited\ncommand: \"sleep 60\"\ntime_limit: 20s\ntermination_grace: 1s\n");
  ASSERT_TRUE(server.WaitForState("limited", "Running"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  json job = server.Job("limited");
  EXPECT_TRUE(job["progress"]["percent"].is_null()) << job.dump();
  std::string table = server.Cli({"get", "jobs"}).out;
  EXPECT_EQ(table.find("\u2591"), std::string::npos) << table;  // no progress bar
  server.Cli({"stop", "limited"});
}

// Once a job is Stalled its last rate no longer holds: no ETA.
TEST(JobProgress, AStalledJobHasNoEta) {
  TestServer server(4, {"--stall-floor", "1"});
  server.Submit(R"(
name: stuck
command: "for i in 1 2 3 4 5; do echo \"HEADWAY {\\\"step\\\": $i, \\\"total_steps\\\": 100}\"; sleep 0.1; done; sleep 60"
termination_grace: 1s
)");
  ASSERT_TRUE(WaitFor([&] { return server.Job("stuck")["health"] == "Stalled"; }));
  json job = server.Job("stuck");
  EXPECT_TRUE(job["progress"]["eta_seconds"].is_null()) << job.dump();
  std::string table = server.Cli({"get", "jobs"}).out;
  EXPECT_NE(table.find("stalled"), std::string::npos) << table;
  server.Cli({"stop", "stuck"});
}

}  // namespace
}  // namespace headway::testing
