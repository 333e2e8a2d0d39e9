// Hyperparameter experiments through the real server: trials are real jobs
// that report their loss on stdout; the controller samples, stops bad trials
// early from the live curves, survives a crash, and reports the best trial.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "api/http_client.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// A trial whose loss settles at QUALITY (+ noise-free 1/step decay): lower is better.
std::string Experiment(const std::string& name, const std::string& extra, int steps = 20,
                       const std::string& step_sleep = "0.02") {
  return "name: " + name +
         "\n"
         "objective: {metric: loss, direction: minimize}\n" +
         extra +
         "trial_template:\n"
         "  command: [\"/usr/bin/python3\", \"-c\", \"import json, sys, time\\n"
         "q = float(sys.argv[1])\\n"
         "for s in range(1, " +
         std::to_string(steps) +
         " + 1):\\n"
         "    print('HEADWAY ' + json.dumps({'step': s, 'total_steps': " +
         std::to_string(steps) +
         ", 'metrics': {'loss': q + 1.0 / s}}), flush=True)\\n"
         "    time.sleep(" +
         step_sleep +
         ")\\n\"]\n"
         "  args: [\"${params.quality}\"]\n"
         "  termination_grace: 1s\n";
}

json Exp(const TestServer& server, const std::string& name) {
  return Get(server, "/api/v1/experiments/" + name);
}

bool WaitForExpState(const TestServer& server, const std::string& name, const std::string& state,
                     std::chrono::seconds timeout = std::chrono::seconds(60)) {
  return WaitFor([&] { return Exp(server, name)["state"] == state; }, timeout);
}

void Create(const TestServer& server, const std::string& yaml) {
  CommandResult r = server.Cli({"exp", "create", "-f", "-"}, yaml);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST(Experiments, RandomSearchRunsEveryTrialWithinItsParallelismAndReportsTheBest) {
  TestServer server(2);
  Create(server, Experiment("rs",
                            "algorithm: {name: random, seed: 7}\n"
                            "parameters:\n  - {name: quality, type: double, min: 0, max: 10}\n"
                            "max_trials: 5\nparallel_trials: 2\n"));
  int most_running = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        json e = Exp(server, "rs");
        int running = 0;
        for (const json& t : e["trials"]) running += t["job_state"] == "Running" ? 1 : 0;
        most_running = std::max(most_running, running);
        return e["state"] == "Succeeded";
      },
      std::chrono::seconds(60)));
  EXPECT_LE(most_running, 2);
  json e = Exp(server, "rs");
  ASSERT_EQ(e["trials"].size(), 5u);
  EXPECT_EQ(e["trial_counts"]["Completed"], 5);
  // Each objective is the trial's best loss: quality + 1/20.
  double best = 1e9;
  std::set<double> qualities;
  for (const json& t : e["trials"]) {
    double q = t["params"]["quality"].get<double>();
    qualities.insert(q);
    EXPECT_NEAR(t["objective"].get<double>(), q + 0.05, 1e-9);
    best = std::min(best, t["objective"].get<double>());
    json job = server.Job(t["job"].get<std::string>());
    EXPECT_EQ(job["spec"]["labels"]["experiment"], "rs");
  }
  EXPECT_EQ(qualities.size(), 5u);  // distinct draws
  EXPECT_EQ(e["best_trial"]["objective"].get<double>(), best);
  EXPECT_THAT(e["message"].get<std::string>(),
              HasSubstr("best " + e["best_trial"]["job"].get<std::string>()));
  std::string table = server.Cli({"exp", "describe", "rs"}).out;
  EXPECT_THAT(table, HasSubstr("quality="));
  EXPECT_THAT(table, HasSubstr("Succeeded"));  // a trial that ran to its end, in job words
  EXPECT_THAT(server.Cli({"exp", "get"}).out, HasSubstr("5/5 done"));
}

TEST(Experiments, TheMedianRuleStopsTrialsThatAreWorseThanTheirPeersSoFar) {
  TestServer server(1);
  Create(server,
         Experiment("median",
                    "algorithm: {name: grid}\n"
                    "parameters:\n  - {name: quality, type: discrete, values: [1, 2, 6, 9]}\n"
                    "max_trials: 4\nparallel_trials: 1\n"
                    "early_stopping: {rule: median, min_trials: 2, start_step: 5}\n",
                    60, "0.05"));
  ASSERT_TRUE(WaitForExpState(server, "median", "Succeeded", std::chrono::seconds(90)));
  json e = Exp(server, "median");
  ASSERT_EQ(e["trials"].size(), 4u);
  EXPECT_EQ(e["trials"][0]["state"], "Completed");
  EXPECT_EQ(e["trials"][1]["state"], "Completed");
  for (int i : {2, 3}) {
    const json& t = e["trials"][i];
    EXPECT_EQ(t["state"], "EarlyStopped") << t.dump();
    EXPECT_THAT(t["message"].get<std::string>(), HasSubstr("median stopping rule"));
    EXPECT_LT(t["step"].get<int>(), 60);  // stopped before its end
    json job = server.Job(t["job"].get<std::string>());
    EXPECT_EQ(job["state"], "Stopped");
    EXPECT_THAT(job["message"].get<std::string>(), HasSubstr("early stopped"));
  }
  EXPECT_EQ(e["best_trial"]["job"], "median-0");
}

// A trial whose loss turns NaN is Diverging at once (a confirmed verdict:
// NaN needs no more reports), and the experiment stops it instead of letting
// it hold its GPU to the end; its objective is the best it reported.
TEST(Experiments, ATrialThatDivergesIsStoppedByItsVerdict) {
  TestServer server(1);
  Create(server,
         "name: nan\n"
         "objective: {metric: loss, direction: minimize}\n"
         "algorithm: {name: grid}\n"
         "parameters:\n  - {name: quality, type: discrete, values: [1]}\n"
         "max_trials: 1\n"
         "trial_template:\n"
         "  command: [\"/usr/bin/python3\", \"-c\", \"import json, time\\n"
         "for s in range(1, 6):\\n"
         "    print('HEADWAY ' + json.dumps({'step': s, 'total_steps': 1000, 'loss': 1.0 / s}), "
         "flush=True)\\n"
         "print('HEADWAY {\\\"step\\\": 6, \\\"total_steps\\\": 1000, \\\"loss\\\": "
         "\\\"NaN\\\"}', flush=True)\\n"
         "time.sleep(300)\\n\"]\n"
         "  termination_grace: 1s\n");
  ASSERT_TRUE(WaitForExpState(server, "nan", "Succeeded", std::chrono::seconds(60)))
      << Exp(server, "nan").dump();
  const json t = Exp(server, "nan")["trials"][0];
  EXPECT_EQ(t["state"], "EarlyStopped") << t.dump();
  EXPECT_THAT(t["message"].get<std::string>(), HasSubstr("Diverging: loss is NaN at step 6"));
  EXPECT_DOUBLE_EQ(t["objective"].get<double>(), 0.2);
  json job = server.Job("nan-0");
  EXPECT_EQ(job["state"], "Stopped");
  EXPECT_THAT(job["message"].get<std::string>(), HasSubstr("early stopped: Diverging"));
}

TEST(Experiments, AReachedGoalEndsTheExperimentEarly) {
  TestServer server(2);
  std::string spec =
      Experiment("goal",
                 "algorithm: {name: grid}\n"
                 "parameters:\n  - {name: quality, type: discrete, values: [0, 5, 7, 8]}\n"
                 "max_trials: 4\nparallel_trials: 1\n");
  spec.replace(spec.find("direction: minimize}"), 20, "direction: minimize, goal: 0.1}");
  Create(server, spec);
  ASSERT_TRUE(WaitForExpState(server, "goal", "Succeeded"));
  json e = Exp(server, "goal");
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("goal reached by goal-0"));
  EXPECT_EQ(e["trials"].size(), 1u);
}

TEST(Experiments, ResumesAfterAServerCrashWithoutDoublingATrial) {
  TestServer server(1);
  Create(server, Experiment("crash",
                            "algorithm: {name: tpe, seed: 3, startup_trials: 2}\n"
                            "parameters:\n  - {name: quality, type: double, min: 0, max: 4}\n"
                            "max_trials: 4\nparallel_trials: 1\n",
                            20, "0.05"));
  ASSERT_TRUE(WaitFor([&] { return Exp(server, "crash")["trials"].size() >= 2; }));
  server.Kill();
  server.Restart();
  ASSERT_TRUE(WaitForExpState(server, "crash", "Succeeded", std::chrono::seconds(90)));
  json e = Exp(server, "crash");
  ASSERT_EQ(e["trials"].size(), 4u);
  std::set<std::string> jobs;
  for (const json& t : e["trials"]) {
    jobs.insert(t["job"].get<std::string>());
    EXPECT_EQ(t["state"], "Completed") << t.dump();
  }
  EXPECT_EQ(jobs.size(), 4u);
  json listed = Get(server, "/api/v1/jobs?label=experiment%3Dcrash");
  EXPECT_EQ(listed["jobs"].size(), 4u);
}

TEST(Experiments, BadSpecsAreRefusedNamingTheField) {
  TestServer server(1);
  std::string unknown =
      Experiment("bad", "parameters:\n  - {name: lr, type: double, min: 0, max: 1}\n");
  CommandResult r = server.Cli({"exp", "create", "-f", "-"}, unknown);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("trial_template.args[0]"));
  EXPECT_THAT(r.err, HasSubstr("unknown parameter 'quality'"));
  r = server.Cli(
      {"exp", "create", "-f", "-"},
      Experiment("bad",
                 "parameters:\n  - {name: quality, type: double, min: 0, max: 1, log: true}\n"));
  EXPECT_THAT(r.err, HasSubstr("parameters[0].min"));
  r = server.Cli({"exp", "create", "-f", "-"},
                 Experiment("bad",
                            "algorithm: {name: magic}\nparameters:\n  - {name: quality, type: int, "
                            "min: 0, max: 3}\n"));
  EXPECT_THAT(r.err, HasSubstr("algorithm.name"));
  EXPECT_TRUE(Get(server, "/api/v1/experiments")["experiments"].empty());
  EXPECT_EQ(server.Cli({"exp", "stop", "nope"}).exit_code, 1);
}

TEST(Experiments, StoppingAnExperimentStopsItsRunningTrials) {
  TestServer server(2);
  Create(server, Experiment("halt",
                            "algorithm: {name: random}\n"
                            "parameters:\n  - {name: quality, type: double, min: 0, max: 1}\n"
                            "max_trials: 10\nparallel_trials: 2\n",
                            400, "0.05"));
  ASSERT_TRUE(WaitFor([&] {
    json e = Exp(server, "halt");
    return e["trials"].size() == 2 && e["trials"][1]["job_state"] == "Running";
  }));
  ASSERT_EQ(server.Cli({"exp", "stop", "halt"}).exit_code, 0);
  ASSERT_TRUE(server.WaitForState("halt-0", "Stopped"));
  ASSERT_TRUE(server.WaitForState("halt-1", "Stopped"));
  json e = Exp(server, "halt");
  EXPECT_EQ(e["state"], "Stopped");
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(Exp(server, "halt")["trials"].size(), 2u);  // no new trials after the stop
}

// An experiment's name is not taken forever: once it has ended it is deleted
// with its trials' jobs, by its own team and nobody else's, and the same
// name starts a new one. One that still runs is refused with what to do.
TEST(Experiments, AnEndedExperimentIsDeletedWithItsTrialsAndItsNameIsFreeAgain) {
  TestServer server(2);
  Create(server, Experiment("gone",
                            "algorithm: {name: random}\n"
                            "parameters:\n  - {name: quality, type: double, min: 0, max: 1}\n"
                            "max_trials: 4\nparallel_trials: 2\n",
                            400, "0.05"));
  ASSERT_TRUE(WaitFor([&] { return Exp(server, "gone")["trials"].size() == 2; }));
  CommandResult running = server.Cli({"delete", "experiment", "gone"});
  EXPECT_EQ(running.exit_code, 1);
  EXPECT_THAT(running.err, HasSubstr("stop it first (headway exp stop gone)"));
  ASSERT_EQ(server.Cli({"exp", "stop", "gone"}).exit_code, 0);
  ASSERT_TRUE(server.WaitForState("gone-0", "Stopped"));
  ASSERT_TRUE(server.WaitForState("gone-1", "Stopped"));

  // Another team's member may not; it stays.
  const std::string other = CreateToken(server, "vision-member", "vision", "member");
  EXPECT_EQ(Call(server, other, "DELETE", "/api/v1/experiments/gone").status, 403);
  ASSERT_EQ(Exp(server, "gone")["state"], "Stopped");

  CommandResult deleted = server.Cli({"delete", "exp", "gone"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_EQ(deleted.out, "experiment/gone deleted with its 2 trials\n");
  EXPECT_EQ(Call(server, server.admin_token(), "GET", "/api/v1/experiments/gone").status, 404);
  EXPECT_EQ(Call(server, server.admin_token(), "GET", "/api/v1/jobs/gone-0").status, 404);
  EXPECT_EQ(Call(server, server.admin_token(), "GET", "/api/v1/jobs/gone-1").status, 404);
  CommandResult again = server.Cli({"delete", "experiment", "gone"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, HasSubstr("not found"));

  // The name starts a new experiment, whose trials reuse the trial names.
  Create(server, Experiment("gone",
                            "algorithm: {name: random}\n"
                            "parameters:\n  - {name: quality, type: double, min: 0, max: 1}\n"
                            "max_trials: 1\n"));
  ASSERT_TRUE(WaitForExpState(server, "gone", "Succeeded")) << Exp(server, "gone").dump();
  EXPECT_EQ(Exp(server, "gone")["trials"].size(), 1u);
  EXPECT_EQ(server.State("gone-0"), "Succeeded");
}

// Each trial is a two-step workflow; only the `train` step's loss counts
// (the `prep` step reports a worse one), and the median rule stops a bad
// trial's whole workflow.
TEST(Experiments, TrialsMayBeWorkflowsScoredByANamedStep) {
  TestServer server(2);
  Create(server, R"y(
name: wfx
objective: {metric: loss, direction: minimize, step: train}
algorithm: {name: grid}
parameters:
  - {name: quality, type: discrete, values: [1, 2, 8]}
max_trials: 3
parallel_trials: 1
early_stopping: {rule: median, min_trials: 2, start_step: 5}
trial_workflow:
  spec:
    entrypoint: main
    templates:
      - name: main
        dag:
          tasks:
            - {name: prep, template: report, arguments: {parameters: [{name: base, value: "100"}, {name: steps, value: "3"}]}}
            - name: train
              template: report
              dependencies: [prep]
              arguments: {parameters: [{name: base, value: "{{workflow.parameters.quality}}"}, {name: steps, value: "40"}]}
      - name: report
        inputs: {parameters: [{name: base}, {name: steps}]}
        script:
          image: python:3.11
          command: [/usr/bin/python3]
          source: |
            import json, time
            q, n = float("{{inputs.parameters.base}}"), int("{{inputs.parameters.steps}}")
            for s in range(1, n + 1):
                print("HEADWAY " + json.dumps({"step": s, "total_steps": n, "metrics": {"loss": q + 1.0 / s}}), flush=True)
                time.sleep(0.05)
)y");
  ASSERT_TRUE(WaitForExpState(server, "wfx", "Succeeded", std::chrono::seconds(120)))
      << Exp(server, "wfx").dump(2);
  json e = Exp(server, "wfx");
  ASSERT_EQ(e["trials"].size(), 3u);
  for (int i : {0, 1}) {
    const json& t = e["trials"][i];
    EXPECT_EQ(t["state"], "Completed") << t.dump();
    EXPECT_NEAR(t["objective"].get<double>(), t["params"]["quality"].get<double>() + 1.0 / 40,
                1e-9);
    EXPECT_EQ(t["job_state"], "Succeeded");  // the workflow's phase
  }
  const json& bad = e["trials"][2];
  EXPECT_EQ(bad["state"], "EarlyStopped") << bad.dump();
  EXPECT_EQ(e["best_trial"]["job"], "wfx-0");
  // The trials are workflows the experiment created, labelled with their trial.
  json wf = Get(server, "/api/v1/workflows/default/wfx-2");
  EXPECT_EQ(wf["metadata"]["labels"]["experiment"], "wfx");
  EXPECT_EQ(wf["metadata"]["labels"]["trial"], "2");
  EXPECT_EQ(wf["status"]["phase"], "Failed");  // stopped part way
  EXPECT_THAT(wf["status"].value("message", ""), HasSubstr("Stopped"));
  json listed = Get(server, "/api/v1/workflows/default?listOptions.labelSelector=experiment%3Dwfx");
  EXPECT_EQ(listed["items"].size(), 3u);
}

TEST(Experiments, ATrialWorkflowThatWouldNotRunIsRefusedWithTheExperiment) {
  TestServer server(1);
  CommandResult r = server.Cli({"exp", "create", "-f", "-"}, R"y(
name: wfbad
objective: {metric: loss, step: train}
parameters: [{name: q, type: int, min: 1, max: 3}]
trial_workflow:
  spec:
    workflowTemplateRef: {name: no-such-template}
)y");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("trial_workflow: spec.workflowTemplateRef"));
  EXPECT_THAT(r.err, HasSubstr("no-such-template"));
  EXPECT_TRUE(Get(server, "/api/v1/experiments")["experiments"].empty());
  EXPECT_TRUE(Get(server, "/api/v1/workflows/default")["items"].empty());
}

}  // namespace
}  // namespace headway::testing
