// Tenancy against the real server started with --auth: the bounds admins set
// on members' priority and grace, the admin's force stop, experiments that
// never take over another team's job, parameters that stay data in shell
// trial commands, and CLI output that never prints a raw control character.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "api/http_client.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

json Idle(const std::string& name, const std::string& team, json extra = json::object()) {
  json spec = {{"name", name},
               {"team", team},
               {"command", "while true; do sleep 0.2; done"},
               {"termination_grace", "1s"}};
  spec.update(extra);
  return spec;
}

TEST(Policy, MembersStayWithinTheBoundsAdminsSetForTheirTeam) {
  TestServer server(2, {"--auth", "--max-priority", "research=10", "--max-grace", "research=20m"});
  std::string admin = server.admin_token();
  server.UseToken(admin);
  std::string alice = CreateTokenAs(server, admin, "alice", "vision", "member");
  std::string carol = CreateTokenAs(server, admin, "carol", "research", "member");

  Answer a = Call(server, alice, "POST", "/api/v1/jobs",
                  Idle("greedy", "vision", {{"priority", 1000000}}).dump());
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.body["error"]["field"], "priority");
  EXPECT_EQ(a.body["error"]["message"],
            "priority 1000000 is above team vision's limit of 0 for members; an admin can raise "
            "it with --max-priority vision=N");
  a = Call(server, alice, "POST", "/api/v1/jobs",
           Idle("sticky", "vision", {{"termination_grace", "100000h"}}).dump());
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.body["error"]["field"], "termination_grace");
  EXPECT_THAT(a.body["error"]["message"].get<std::string>(), HasSubstr("limit of 10m"));
  a = Call(server, alice, "POST", "/api/v1/jobs",
           Idle("warned", "vision", {{"checkpoint_warning", "100000h"}}).dump());
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.body["error"]["field"], "checkpoint_warning");
  // Lowering priority is always allowed; nothing refused was created.
  EXPECT_EQ(Call(server, alice, "POST", "/api/v1/jobs",
                 Idle("humble", "vision", {{"priority", -5}}).dump())
                .status,
            201);
  EXPECT_TRUE(server.Job("greedy").is_null());
  EXPECT_TRUE(server.Job("sticky").is_null());

  // The CLI shows the refusal as it is.
  CommandResult cli = server.Cli({"--token", alice, "submit", "-f", "-"},
                                 "name: greedy2\ncommand: \"true\"\npriority: 5\n");
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_THAT(cli.err, HasSubstr("priority: priority 5 is above team vision's limit of 0"));

  // Per-team bounds set by the admin.
  EXPECT_EQ(Call(server, carol, "POST", "/api/v1/jobs",
                 Idle("r1", "research", {{"priority", 10}, {"termination_grace", "20m"}}).dump())
                .status,
            201);
  a = Call(server, carol, "POST", "/api/v1/jobs",
           Idle("r2", "research", {{"priority", 11}}).dump());
  EXPECT_EQ(a.status, 400);
  EXPECT_THAT(a.body["error"]["message"].get<std::string>(), HasSubstr("research's limit of 10"));

  // Admins are not bounded.
  EXPECT_EQ(Call(server, admin, "POST", "/api/v1/jobs",
                 Idle("urgent", "vision", {{"priority", 1000000}, {"termination_grace", "100000h"}})
                     .dump())
                .status,
            201);

  // Experiments submit trials for the member: their template is bounded too.
  std::string exp = R"({"name": "sweep", "objective": {"metric": "loss", "direction": "minimize"},
    "algorithm": {"name": "random"}, "parameters": [{"name": "x", "type": "double", "min": 0, "max": 1}],
    "trial_template": {"command": "true", "priority": 1000000}})";
  a = Call(server, alice, "POST", "/api/v1/experiments", exp);
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.body["error"]["field"], "priority");
  EXPECT_EQ(Call(server, alice, "GET", "/api/v1/experiments/sweep").status, 404);

  // So are workflows: the workflow's priority, a template's, a
  // WorkflowTemplate's (created or updated), and a submit's labels.
  auto workflow = [](const std::string& metadata, const std::string& template_metadata) {
    return R"({"workflow": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
        "metadata": {"name": "wf")" +
           metadata + R"(}, "spec": {"entrypoint": "s",
        "templates": [{"name": "s", "metadata": {)" +
           template_metadata + R"(}, "container": {"image": "busybox", "command": ["true"]}}]}}})";
  };
  const std::string high = R"("headway.dev/priority": "1000000")";
  for (const auto& [what, body] :
       {std::pair{"the workflow's annotation", workflow(", \"annotations\": {" + high + "}", "")},
        std::pair{"a template's label", workflow("", "\"labels\": {" + high + "}")}}) {
    a = Call(server, alice, "POST", "/api/v1/workflows/default", body);
    EXPECT_EQ(a.status, 400) << what << ": " << a.raw;
    EXPECT_THAT(a.raw, HasSubstr("priority 1000000 is above team vision's limit of 0")) << what;
  }
  EXPECT_EQ(Call(server, alice, "GET", "/api/v1/workflows/default/wf").status, 404);
  const std::string low_template = R"({"template": {"apiVersion": "argoproj.io/v1alpha1",
      "kind": "WorkflowTemplate", "metadata": {"name": "tpl"}, "spec": {"entrypoint": "s",
      "templates": [{"name": "s", "container": {"image": "busybox", "command": ["true"]}}]}}})";
  std::string high_template = low_template;
  high_template.replace(high_template.find(R"("name": "s", )"), 13,
                        R"("name": "s", "metadata": {"annotations": {)" + high + "}}, ");
  a = Call(server, alice, "POST", "/api/v1/workflow-templates/default", high_template);
  EXPECT_EQ(a.status, 400) << a.raw;
  ASSERT_EQ(Call(server, alice, "POST", "/api/v1/workflow-templates/default", low_template).status,
            200);
  a = Call(server, alice, "PUT", "/api/v1/workflow-templates/default/tpl", high_template);
  EXPECT_EQ(a.status, 400) << "an update is bounded as a creation is: " << a.raw;
  a = Call(server, alice, "POST", "/api/v1/workflows/default/submit",
           R"({"resourceKind": "WorkflowTemplate", "resourceName": "tpl",
               "submitOptions": {"labels": "headway.dev/priority=1000000"}})");
  EXPECT_EQ(a.status, 400) << a.raw;
  EXPECT_THAT(a.raw, HasSubstr("the template's to set"));
  // An admin's workflow is not bounded.
  a = Call(server, admin, "POST", "/api/v1/workflows/default",
           workflow(", \"annotations\": {" + high + ", \"headway.dev/team\": \"vision\"}", ""));
  EXPECT_EQ(a.status, 200) << a.raw;
  Call(server, admin, "PUT", "/api/v1/workflows/default/wf/terminate", "{}");

  // Queues show what members may ask for.
  ASSERT_TRUE(WaitFor([&] {
    Answer queues = Call(server, admin, "GET", "/api/v1/queues");
    for (const json& q : queues.body["queues"]) {
      if (q["name"] == "research")
        return q["member_max_priority"] == 10 && q["member_max_grace"] == "20m";
    }
    return false;
  })) << Call(server, admin, "GET", "/api/v1/queues").body.dump();
  CommandResult queues = server.Cli({"--token", admin, "get", "queues", "-o", "wide"});
  EXPECT_THAT(queues.out, HasSubstr("MAX-PRIORITY"));
  EXPECT_THAT(queues.out, HasSubstr("20m"));
  for (const char* job : {"humble", "r1", "urgent"})
    Call(server, admin, "POST", std::string("/api/v1/jobs/") + job + "/stop", R"({"force": true})");
}

TEST(Policy, ForceStopKillsAtOnceAndOnlyAdminsMayForce) {
  TestServer server(2, {"--auth"});
  std::string admin = server.admin_token();
  server.UseToken(admin);
  std::string alice = CreateTokenAs(server, admin, "alice", "vision", "member");
  // Ignores SIGTERM and asks for a long grace (an admin set it; members could not).
  json stubborn = {{"name", "stubborn"},
                   {"team", "vision"},
                   {"command", "trap '' TERM; touch " + server.work_dir() +
                                   "/ready; while true; do sleep 0.2; done"},
                   {"termination_grace", "10m"}};
  ASSERT_EQ(Call(server, admin, "POST", "/api/v1/jobs", stubborn.dump()).status, 201);
  // Its trap is set: a SIGTERM before that would end it by default.
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(server.work_dir() + "/ready"); }));

  Answer refused = Call(server, alice, "POST", "/api/v1/jobs/stubborn/stop", R"({"force": true})");
  EXPECT_EQ(refused.status, 403);
  EXPECT_THAT(refused.body["error"]["message"].get<std::string>(), HasSubstr("admin"));
  CommandResult cli = server.Cli({"--token", alice, "stop", "--force", "stubborn"});
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_EQ(Call(server, alice, "POST", "/api/v1/jobs/stubborn/stop", R"({"force": "yes"})").status,
            400);
  // A member's ordinary stop waits out the grace: the job keeps running.
  EXPECT_EQ(Call(server, alice, "POST", "/api/v1/jobs/stubborn/stop").status, 200);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(server.State("stubborn"), "Running");

  cli = server.Cli({"--token", admin, "stop", "--force", "stubborn"});
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_THAT(cli.out, HasSubstr("job/stubborn killed"));
  EXPECT_TRUE(server.WaitForState("stubborn", "Stopped", std::chrono::seconds(10)));
  EXPECT_TRUE(server.HasEvent("stubborn", "Killed", "force stop"));

  // A queued job just stops; an ended one is a conflict.
  json big = Idle("waiting", "vision", {{"resources", {{"gpus_per_process", 2}}}});
  ASSERT_EQ(Call(server, admin, "POST", "/api/v1/jobs",
                 Idle("hog", "vision", {{"resources", {{"gpus_per_process", 2}}}}).dump())
                .status,
            201);
  ASSERT_EQ(Call(server, admin, "POST", "/api/v1/jobs", big.dump()).status, 201);
  ASSERT_TRUE(server.WaitForState("hog", "Running"));
  EXPECT_EQ(
      Call(server, admin, "POST", "/api/v1/jobs/waiting/stop", R"({"force": true})").body["state"],
      "Stopped");
  EXPECT_EQ(Call(server, admin, "POST", "/api/v1/jobs/waiting/stop", R"({"force": true})").status,
            409);
  Call(server, admin, "POST", "/api/v1/jobs/hog/stop", R"({"force": true})");
}

// Trial jobs report loss QUALITY + 1/step for a few steps.
std::string TeamExperiment(const std::string& name, const std::string& step_sleep) {
  return "name: " + name +
         "\n"
         "objective: {metric: loss, direction: minimize}\n"
         "algorithm: {name: random, seed: 3}\n"
         "parameters:\n  - {name: quality, type: double, min: 1, max: 2}\n"
         "max_trials: 2\nparallel_trials: 1\n"
         "trial_template:\n"
         "  command: [\"/usr/bin/python3\", \"-c\", \"import json, sys, time\\n"
         "q = float(sys.argv[1])\\n"
         "for s in range(1, 11):\\n"
         "    print('HEADWAY ' + json.dumps({'step': s, 'total_steps': 10, 'metrics': {'loss': q + "
         "1.0 / s}}), flush=True)\\n"
         "    time.sleep(" +
         step_sleep +
         ")\\n\"]\n"
         "  args: [\"${params.quality}\"]\n"
         "  termination_grace: 1s\n";
}

TEST(Experiments, ATrialNeverBindsAJobItDidNotCreate) {
  TestServer server(2, {"--auth"});
  std::string admin = server.admin_token();
  server.UseToken(admin);
  std::string alice = CreateTokenAs(server, admin, "alice", "a", "member");
  std::string bob = CreateTokenAs(server, admin, "bob", "b", "member");
  // Team b's job happens to have the name team a's trial 0 will want.
  json victim = Idle("btrain-0", "b");
  victim["command"] =
      "echo HEADWAY '{\"step\": 1, \"metrics\": {\"loss\": -100}}'; while true; do sleep 0.2; done";
  ASSERT_EQ(Call(server, bob, "POST", "/api/v1/jobs", victim.dump()).status, 201);
  ASSERT_TRUE(server.WaitForState("btrain-0", "Running"));
  EXPECT_EQ(server.Job("btrain-0")["created_by"], "user/bob");

  CommandResult r =
      server.Cli({"--token", alice, "exp", "create", "-f", "-"}, TeamExperiment("btrain", "0.3"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Crash while trial 1 runs: the restarted server re-binds the experiment's own trial.
  ASSERT_TRUE(
      WaitFor([&] { return server.State("btrain-1") == "Running"; }, std::chrono::seconds(30)));
  server.Kill();
  server.Restart();
  ASSERT_TRUE(WaitFor(
      [&] {
        return Call(server, alice, "GET", "/api/v1/experiments/btrain").body["state"] ==
               "Succeeded";
      },
      std::chrono::seconds(60)));
  json e = Call(server, alice, "GET", "/api/v1/experiments/btrain").body;
  ASSERT_EQ(e["trials"].size(), 2u);
  const json& t0 = e["trials"][0];
  EXPECT_EQ(t0["state"], "Failed");
  EXPECT_EQ(t0["message"], "job name btrain-0 is taken by a job this experiment did not create");
  EXPECT_EQ(t0["job_state"], "") << "the other team's job is not shown as the trial's";
  EXPECT_TRUE(t0["objective"].is_null()) << "its loss was not read";
  EXPECT_TRUE(t0["latest"].is_null());
  EXPECT_EQ(e["trials"][1]["state"], "Completed");
  EXPECT_EQ(e["best_trial"]["job"], "btrain-1");
  EXPECT_GT(e["best_trial"]["objective"].get<double>(), 0);
  EXPECT_EQ(server.Job("btrain-1")["created_by"], "experiment/btrain");

  // Team b's job ran on untouched: never stopped by the experiment's end.
  EXPECT_EQ(server.State("btrain-0"), "Running");
  EXPECT_FALSE(server.HasEvent("btrain-0", "Stopping"));
  Call(server, admin, "POST", "/api/v1/jobs/btrain-0/stop", R"({"force": true})");
}

TEST(Experiments, ParameterValuesInAShellCommandStayData) {
  TestServer server(2, {"--auth"});
  std::string admin = server.admin_token();
  server.UseToken(admin);
  std::string dir = server.work_dir();
  std::filesystem::create_directories(dir);
  std::string yaml =
      "name: inject\n"
      "objective: {metric: loss, direction: minimize}\n"
      "algorithm: {name: grid}\n"
      "parameters:\n"
      "  - {name: opt, type: categorical, values: [\"x; touch " +
      dir + "/pwned1\", \"$(touch " + dir + "/pwned2)\", \"`touch " + dir +
      "/pwned3`\", \"it's; touch " + dir +
      "/pwned4\"]}\n"
      "max_trials: 4\nparallel_trials: 2\n"
      "trial_template:\n"
      "  command: >-\n"
      "    echo opt=${params.opt} \"d=${params.opt}\" 's=${params.opt}';\n"
      "    echo 'HEADWAY {\"step\": 1, \"total_steps\": 1, \"metrics\": {\"loss\": 1}}'\n";
  CommandResult r = server.Cli({"--token", admin, "exp", "create", "-f", "-"}, yaml);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(WaitFor(
      [&] {
        return Call(server, admin, "GET", "/api/v1/experiments/inject").body["state"] ==
               "Succeeded";
      },
      std::chrono::seconds(60)));
  for (int i = 1; i <= 4; ++i) {
    EXPECT_FALSE(std::filesystem::exists(dir + "/pwned" + std::to_string(i))) << i;
  }
  std::string logs;
  for (int i = 0; i < 4; ++i)
    logs += server.Cli({"--token", admin, "logs", "inject-" + std::to_string(i)}).out;
  EXPECT_THAT(
      logs, HasSubstr("opt=x; touch " + dir + "/pwned1 d=x; touch " + dir + "/pwned1 s=x; touch"));
  EXPECT_THAT(logs, HasSubstr("opt=$(touch " + dir + "/pwned2)"));
  EXPECT_THAT(logs, HasSubstr("s=it's; touch"));
}

// No byte that a terminal acts on: C0 other than line breaks, DEL, C1.
void ExpectNoRawControl(const std::string& what, const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    bool raw =
        (c < 0x20 && c != '\n') || c == 0x7F ||
        (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
         static_cast<unsigned char>(text[i + 1]) <= 0x9F);
    ASSERT_FALSE(raw) << what << ": raw byte " << static_cast<int>(c) << " at " << i << " in\n"
                      << text;
  }
}

TEST(Output, TheCliNeverPrintsARawControlCharacter) {
  TestServer server(2, {"--auth"});
  std::string admin = server.admin_token();
  server.UseToken(admin);
  // A YAML escape gets a control character past the spec's check for raw bytes.
  CommandResult r = server.Cli({"--token", admin, "submit", "-f", "-"},
                               "name: esc\n"
                               "team: \"t\\e]0;pwned\\a\"\n"
                               "labels: {x: \"\\e[2J\", \"k\\x7f\": \"\\x9b31m\"}\n"
                               "command: \"while true; do sleep 0.2; done\"\n"
                               "termination_grace: 1s\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(server.WaitForState("esc", "Running"));
  // Messages and events carry text from requests too (here a stop reason).
  ASSERT_EQ(Call(server, admin, "POST", "/api/v1/jobs/esc/stop",
                 R"({"reason": "bye\u001b[31m\u009b\u202e", "force": true})")
                .status,
            200);
  ASSERT_TRUE(server.WaitForState("esc", "Stopped"));
  std::vector<std::vector<std::string>> commands = {
      {"get", "jobs"},
      {"get", "jobs", "-o", "wide"},
      {"get", "job", "esc", "-o", "wide"},
      {"describe", "job", "esc"},
      {"get", "jobs", "-o", "json"},
      {"get", "jobs", "-o", "yaml"},
      {"describe", "job", "esc", "-o", "yaml"},
      {"get", "queues"},
      {"get", "queues", "-o", "wide"},
      {"get", "jobs", "-o", "name"},
      {"get", "jobs", "--team", "t\x1b]0;x\x07", "-l", "x=\x1b[2J"}};
  for (auto args : commands) {
    std::vector<std::string> full = {"--token", admin};
    full.insert(full.end(), args.begin(), args.end());
    CommandResult out = server.Cli(full);
    std::string what = ::testing::PrintToString(args);
    EXPECT_EQ(out.exit_code, 0) << what << out.err;
    ExpectNoRawControl(what + " stdout", out.out);
    ExpectNoRawControl(what + " stderr", out.err);
  }
  CommandResult describe = server.Cli({"--token", admin, "describe", "job", "esc"});
  EXPECT_THAT(describe.out, HasSubstr("x=\\x1b[2J"));
  EXPECT_THAT(describe.out, HasSubstr("t\\x1b]0;pwned\\x07"));
  EXPECT_THAT(describe.out, HasSubstr("bye\\x1b[31m\\u009b\\u202e"));
  EXPECT_THAT(server.Cli({"--token", admin, "get", "jobs", "-o", "wide"}).out,
              HasSubstr("t\\x1b]0;pwned\\x07"));
  // JSON keeps the exact value, escaped the JSON way.
  json parsed = json::parse(server.Cli({"--token", admin, "get", "job", "esc", "-o", "json"}).out);
  EXPECT_EQ(parsed["labels"]["x"], "\x1b[2J");
  EXPECT_EQ(parsed["labels"]["k\x7f"],
            "\xc2\x9b"
            "31m");
  // An error that echoes the request is escaped too.
  CommandResult bad = server.Cli({"--token", admin, "get", "jobs", "--state", "\x1b[2J"});
  EXPECT_EQ(bad.exit_code, 1);
  ExpectNoRawControl("error", bad.err);
  EXPECT_THAT(bad.err, HasSubstr("\\x1b[2J"));
}

}  // namespace
}  // namespace headway::testing
