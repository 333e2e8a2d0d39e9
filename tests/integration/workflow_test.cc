// Argo-compatible workflows through a real server: every step a real job,
// outputs read back from the processes, the CLI and Argo's REST shapes as
// Hera reads them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/time.h"
#include "test_server.h"
#include "workflow_test_support.h"

namespace headway::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

TEST(Workflows, ADiamondPassesParametersResultsAndAnArtifactBetweenRealJobs) {
  TestServer server;
  CommandResult r = server.Cli({"workflow", "submit", "-", "--wait"}, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: diamond, labels: {project: vision}}
spec:
  entrypoint: main
  arguments: {parameters: [{name: seed, value: "7"}]}
  templates:
  - name: main
    dag:
      tasks:
      - {name: A, template: gen, arguments: {parameters: [{name: n, value: "{{workflow.parameters.seed}}"}]}}
      - {name: B, template: echo, depends: A, arguments: {parameters: [{name: msg, value: "b-{{tasks.A.outputs.parameters.word}}"}]}}
      - {name: C, template: echo, depends: A, arguments: {parameters: [{name: msg, value: "c-{{tasks.A.outputs.result}}"}]}}
      - name: D
        template: join
        depends: "B && C"
        arguments:
          parameters: [{name: msg, value: "{{tasks.B.outputs.result}}+{{tasks.C.outputs.result}}"}]
          artifacts: [{name: vocab, from: "{{tasks.A.outputs.artifacts.vocab}}"}]
  - name: gen
    inputs: {parameters: [{name: n}]}
    outputs:
      parameters: [{name: word, valueFrom: {path: /tmp/word.txt}}]
      artifacts: [{name: vocab, path: /tmp/vocab.txt}]
    script:
      image: python:3.12
      command: [/usr/bin/python3]
      source: |
        open("/tmp/word.txt", "w").write("bird")
        open("/tmp/vocab.txt", "w").write("words")
        print({{inputs.parameters.n}} * 2)
  - name: join
    inputs:
      parameters: [{name: msg}]
      artifacts: [{name: vocab, path: /tmp/in/vocab.txt}]
    container: {image: alpine, command: [sh, -c, "echo {{inputs.parameters.msg}} $(cat /tmp/in/vocab.txt)"]}
  - name: echo
    inputs: {parameters: [{name: msg}]}
    container: {image: alpine, command: [echo, "{{inputs.parameters.msg}}"]}
)y");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("Succeeded"));
  json wf = Workflow(server, "diamond");
  EXPECT_EQ(wf["status"]["progress"], "4/4") << wf.dump(2);
  EXPECT_EQ(NodeOf(wf, "A")["outputs"]["result"], "14");
  EXPECT_EQ(NodeOf(wf, "A")["outputs"]["parameters"][0]["value"], "bird");
  EXPECT_EQ(NodeOf(wf, "D")["outputs"]["result"], "b-bird+c-14 words");
  EXPECT_EQ(NodeOf(wf, "D")["inputs"]["parameters"][0]["value"], "b-bird+c-14");
  // The image is recorded, and the step's job says it ran as a process.
  const std::string job_a = NodeOf(wf, "A")["headway"]["job"];
  EXPECT_EQ(server.Job(job_a)["spec"]["labels"]["headway.dev/image"], "python:3.12");
  Answer events = Call(server, server.admin_token(), "GET", "/api/v1/jobs/" + job_a + "/events");
  EXPECT_THAT(events.raw, HasSubstr("image python:3.12 recorded: the step runs as a process"));
  // Every step is an ordinary job of the workflow's team, created by it.
  const std::string job = NodeOf(wf, "D")["headway"]["job"];
  json j = server.Job(job);
  EXPECT_EQ(j["state"], "Succeeded");
  EXPECT_EQ(j["created_by"], "workflow/diamond");
  EXPECT_EQ(j["spec"]["labels"]["headway.dev/workflow"], "diamond");
  CommandResult logs = server.Cli({"wf", "logs", "diamond"});
  EXPECT_THAT(logs.out, HasSubstr("D: b-bird+c-14 words"));
  // Listed with its start and end, selectable by team.
  Answer listed =
      Call(server, server.admin_token(), "GET",
           "/api/v1/workflows/default?listOptions.labelSelector=headway.dev/team=default");
  ASSERT_EQ(listed.body["items"].size(), 1u);
  EXPECT_TRUE(listed.body["items"][0]["status"]["startedAt"].is_string());
  EXPECT_TRUE(listed.body["items"][0]["status"]["finishedAt"].is_string());
  CommandResult list = server.Cli({"get", "workflows"});
  EXPECT_THAT(list.out, HasSubstr("diamond"));
  EXPECT_THAT(list.out, HasSubstr("4/4"));
}

TEST(Workflows, ConcurrentStepsEachHaveTheirOwnTmp) {
  TestServer server;
  CommandResult r = server.Cli({"workflow", "submit", "-", "--wait"}, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: tmps}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - {name: w, template: work, withItems: [a, b, c, d], arguments: {parameters: [{name: v, value: "{{item}}"}]}}
  - name: work
    inputs: {parameters: [{name: v}]}
    outputs: {parameters: [{name: out, valueFrom: {path: /tmp/out.txt}}]}
    container:
      image: alpine
      command: [sh, -c, "test ! -e /tmp/out.txt && echo {{inputs.parameters.v}} > /tmp/out.txt && sleep 0.5 && cat /tmp/out.txt"]
)y");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json wf = Workflow(server, "tmps");
  for (const std::string v : {"a", "b", "c", "d"}) {
    json node = NodeOf(wf, "w(" + std::to_string(v[0] - 'a') + ":" + v + ")");
    EXPECT_EQ(node["outputs"]["parameters"][0]["value"], v) << wf.dump(2);
    EXPECT_EQ(node["outputs"]["result"], v);  // still its own after the others wrote theirs
  }
}

TEST(Workflows, AnArtifactPassesBetweenStepsThroughTheStoreWithItsLineage) {
  TestServer server;
  CommandResult r = server.Cli({"workflow", "submit", "-", "--wait"}, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: art}
spec:
  entrypoint: main
  templates:
  - name: main
    dag:
      tasks:
      - {name: train, template: train}
      - name: eval
        template: eval
        depends: train
        arguments:
          artifacts:
          - {name: model, from: "{{tasks.train.outputs.artifacts.model}}"}
          - {name: report, from: "{{tasks.train.outputs.artifacts.report}}"}
  - name: train
    outputs:
      artifacts:
      - {name: model, path: /tmp/model}
      - {name: report, path: /tmp/report.txt}
    container:
      image: alpine
      command: [sh, -c, "mkdir -p /tmp/model/sub && echo w1 > /tmp/model/weights && echo w2 > /tmp/model/sub/more && echo fine > /tmp/report.txt"]
  - name: eval
    inputs:
      artifacts:
      - {name: model, path: /tmp/in/model}
      - {name: report, path: /tmp/in/report.txt}
      - {name: note, path: /tmp/in/note.txt, raw: {data: "from the manifest"}}
    container:
      image: alpine
      command: [sh, -c, "cat /tmp/in/model/weights /tmp/in/model/sub/more /tmp/in/report.txt /tmp/in/note.txt"]
)y");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json wf = Workflow(server, "art");
  EXPECT_EQ(NodeOf(wf, "eval")["outputs"]["result"], "w1\nw2\nfine\nfrom the manifest");
  const std::string train_job = NodeOf(wf, "train")["headway"]["job"];
  const std::string eval_job = NodeOf(wf, "eval")["headway"]["job"];
  const std::string model = NodeOf(wf, "train")["outputs"]["artifacts"][0]["headway"]["artifact"];
  EXPECT_EQ(model, train_job + ".model:1");
  // Lineage: made by the train step's job, read by the eval step's.
  Answer version = Call(server, server.admin_token(), "GET",
                        "/api/v1/artifacts/" + train_job + ".model/versions/1");
  ASSERT_EQ(version.status, 200) << version.raw;
  EXPECT_EQ(version.body["producer"]["job"], train_job);
  EXPECT_EQ(version.body["producer"]["pipeline_node"], "art.train");
  EXPECT_THAT(version.raw, HasSubstr(eval_job));

  // Argo's key-only S3 artifacts: one workflow writes a key, a later one
  // reads the key's latest version.
  const char* publish = R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: publish-}
spec:
  entrypoint: p
  arguments: {parameters: [{name: text}]}
  templates:
  - name: p
    outputs: {artifacts: [{name: m, path: /tmp/m, archive: {none: {}}, s3: {key: shared/model.txt}}]}
    container: {image: alpine, command: [sh, -c, "echo {{workflow.parameters.text}} > /tmp/m"]}
)y";
  for (const char* text : {"first", "second"}) {
    CommandResult p = server.Cli(
        {"workflow", "submit", "-", "--wait", "-p", std::string("text=") + text}, publish);
    ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  }
  CommandResult read = server.Cli({"workflow", "submit", "-", "--wait", "-o", "name"}, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: consume-}
spec:
  entrypoint: c
  templates:
  - name: c
    inputs: {artifacts: [{name: m, path: /tmp/in/m, s3: {key: shared/model.txt}}]}
    container: {image: alpine, command: [cat, /tmp/in/m]}
)y");
  ASSERT_EQ(read.exit_code, 0) << read.out << read.err;
  std::string consumer = read.out.substr(0, read.out.find('\n'));
  json consumed = Workflow(server, consumer);
  EXPECT_EQ(NodeOf(consumed, consumer)["outputs"]["result"], "second");
  Answer latest =
      Call(server, server.admin_token(), "GET", "/api/v1/artifacts/shared.model.txt/versions/2");
  ASSERT_EQ(latest.status, 200) << latest.raw;
  EXPECT_THAT(latest.raw,
              HasSubstr(NodeOf(consumed, consumer)["headway"]["job"].get<std::string>()));
}

// An output over the team's artifact quota ends its step in Error before its
// bytes are copied anywhere of the server's.
TEST(Workflows, AnOutputArtifactOverTheTeamsQuotaIsRefusedBeforeItIsCopied) {
  TestServer server(4, {"--artifact-quota", "default=64Ki"});
  std::string name = SubmitWorkflow(server, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: big-}
spec:
  entrypoint: make
  templates:
  - name: make
    outputs: {artifacts: [{name: blob, path: /tmp/blob, archive: {none: {}}}]}
    container: {image: alpine, command: [sh, -c, "head -c 200000 /dev/zero > /tmp/blob"]}
)y");
  ASSERT_TRUE(WaitFor([&] {
    std::string phase = Phase(server, name);
    return phase == "Error" || phase == "Failed";
  })) << Workflow(server, name).dump(2);
  json node = NodeOf(Workflow(server, name), name);
  EXPECT_EQ(node["phase"], "Error");
  EXPECT_THAT(node.value("message", ""), HasSubstr("outputs.artifacts.blob"));
  EXPECT_THAT(node.value("message", ""), HasSubstr("quota"));
  const std::string uploads = server.data_dir() + "/uploads";
  if (std::filesystem::exists(uploads)) {
    EXPECT_TRUE(std::filesystem::is_empty(uploads));
  }
}

TEST(Workflows, AFanOutSkipsAFalseBranchFansInAndRunsTheExitHandler) {
  TestServer server;
  std::string name = SubmitWorkflow(server, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: fan-}
spec:
  entrypoint: main
  onExit: bye
  templates:
  - name: main
    steps:
    - - name: sq
        template: square
        arguments: {parameters: [{name: x, value: "{{item}}"}]}
        withItems: [1, 2, 3]
      - name: never
        template: square
        arguments: {parameters: [{name: x, value: "0"}]}
        when: "2 > 3"
    - - name: sum
        template: add
        arguments: {parameters: [{name: xs, value: "{{steps.sq.outputs.result}}"}]}
  - name: square
    inputs: {parameters: [{name: x}]}
    script: {image: python, command: [/usr/bin/python3], source: "print({{inputs.parameters.x}} ** 2)"}
  - name: add
    inputs: {parameters: [{name: xs}]}
    script:
      image: python
      command: [/usr/bin/python3]
      source: |
        import json
        print(sum(json.loads('{{inputs.parameters.xs}}')))
  - name: bye
    container: {image: alpine, command: [echo, "{{workflow.status}}"]}
)y");
  ASSERT_EQ(name.rfind("fan-", 0), 0u) << name;
  ASSERT_TRUE(WaitForPhase(server, name, "Succeeded")) << Workflow(server, name).dump(2);
  json wf = Workflow(server, name);
  EXPECT_EQ(NodeOf(wf, "sum")["outputs"]["result"], "14");
  EXPECT_EQ(NodeOf(wf, "never")["phase"], "Skipped");
  EXPECT_EQ(NodeOf(wf, "sq(2:3)")["outputs"]["result"], "9");
  EXPECT_EQ(NodeOf(wf, name + ".onExit")["outputs"]["result"], "Succeeded");
}

TEST(Workflows, AFailingStepIsRetriedAfterItsBackoffThenSucceeds) {
  TestServer server;
  const std::string marker = Shared(server) + "/failed-once";
  const std::string starts = Shared(server) + "/starts";
  std::string name =
      SubmitWorkflow(server, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: flaky}
spec:
  entrypoint: try
  templates:
  - name: try
    retryStrategy: {limit: 2, retryPolicy: OnFailure, backoff: {duration: 1s, factor: 2}}
    container:
      image: alpine
      command: [sh, -c, "echo start >> )y" +
                                 starts + R"y(; if [ -e )y" + marker +
                                 R"y( ]; then exit 0; fi; touch )y" + marker + R"y(; exit 3"]
)y");
  ASSERT_TRUE(WaitForPhase(server, name, "Succeeded")) << Workflow(server, name).dump(2);
  json wf = Workflow(server, name);
  EXPECT_EQ(Lines(starts), 2);
  EXPECT_EQ(NodeOf(wf, "flaky")["type"], "Retry");
  EXPECT_EQ(NodeOf(wf, "flaky(0)")["phase"], "Failed");
  EXPECT_EQ(NodeOf(wf, "flaky(0)")["message"], "Error (exit code 3)");
  EXPECT_EQ(NodeOf(wf, "flaky(1)")["phase"], "Succeeded");
  // The second attempt waited out the backoff after the first ended.
  auto first_end = ParseRfc3339(NodeOf(wf, "flaky(0)")["finishedAt"].get<std::string>());
  auto second_start = ParseRfc3339(NodeOf(wf, "flaky(1)")["startedAt"].get<std::string>());
  ASSERT_TRUE(first_end && second_start);
  EXPECT_GE(*second_start - *first_end, std::chrono::milliseconds(1000));
}

TEST(Workflows, RetryRunsOnlyTheFailedStepAgain) {
  TestServer server;
  const std::string a_starts = Shared(server) + "/a", b_starts = Shared(server) + "/b";
  const std::string fixed = Shared(server) + "/fixed";
  SubmitWorkflow(server, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: two}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - {name: a, template: a}
    - - {name: b, template: b}
  - name: a
    container: {image: alpine, command: [sh, -c, "echo x >> )y" +
                             a_starts + R"y("]}
  - name: b
    container: {image: alpine, command: [sh, -c, "echo x >> )y" +
                             b_starts + R"y(; test -e )y" + fixed + R"y("]}
)y");
  ASSERT_TRUE(WaitForPhase(server, "two", "Failed"));
  EXPECT_THAT(Workflow(server, "two")["status"].value("message", ""), HasSubstr("failed"));
  WriteFile(fixed, "");
  CommandResult r = server.Cli({"wf", "retry", "two"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(WaitForPhase(server, "two", "Succeeded")) << Workflow(server, "two").dump(2);
  EXPECT_EQ(Lines(a_starts), 1);
  EXPECT_EQ(Lines(b_starts), 2);
  // The failed attempt's node is gone for good: a restart does not bring it back.
  const std::size_t nodes = Workflow(server, "two")["status"]["nodes"].size();
  server.Kill();
  server.Restart();
  EXPECT_EQ(Workflow(server, "two")["status"]["nodes"].size(), nodes);
  // A workflow that succeeded has nothing to retry.
  r = server.Cli({"wf", "retry", "two"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("nothing to retry"));
}

TEST(Workflows, ResubmitMemoizedKeepsTheSucceededStepsAndRunsTheRest) {
  TestServer server;
  const std::string a_starts = Shared(server) + "/a", b_starts = Shared(server) + "/b";
  const std::string fixed = Shared(server) + "/fixed";
  SubmitWorkflow(server, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: pipe}
spec:
  entrypoint: main
  templates:
  - name: main
    dag:
      tasks:
      - {name: a, template: a}
      - {name: b, template: b, depends: a, arguments: {parameters: [{name: v, value: "{{tasks.a.outputs.result}}"}]}}
  - name: a
    container: {image: alpine, command: [sh, -c, "echo x >> )y" +
                             a_starts + R"y(; echo 42"]}
  - name: b
    inputs: {parameters: [{name: v}]}
    container: {image: alpine, command: [sh, -c, "echo x >> )y" +
                             b_starts + R"y(; test -e )y" + fixed +
                             R"y( && echo got {{inputs.parameters.v}}"]}
)y");
  ASSERT_TRUE(WaitForPhase(server, "pipe", "Failed"));
  WriteFile(fixed, "");
  CommandResult r = server.Cli({"wf", "resubmit", "pipe", "--memoized", "-o", "name"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string again = r.out.substr(0, r.out.find('\n'));
  EXPECT_EQ(again.rfind("pipe-", 0), 0u) << again;
  ASSERT_TRUE(WaitForPhase(server, again, "Succeeded")) << Workflow(server, again).dump(2);
  EXPECT_EQ(Lines(a_starts), 1);
  EXPECT_EQ(Lines(b_starts), 2);
  EXPECT_EQ(NodeOf(Workflow(server, again), "b")["outputs"]["result"], "got 42");
  EXPECT_EQ(Phase(server, "pipe"), "Failed");  // the original stays as it was
  // Without --memoized everything runs again.
  r = server.Cli({"wf", "resubmit", again, "-o", "name"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(WaitForPhase(server, r.out.substr(0, r.out.find('\n')), "Succeeded"));
  EXPECT_EQ(Lines(a_starts), 2);
}

// What the server accepts but ignores reaches the person who submitted it:
// `wf submit` prints each of the reply's warnings, as kubectl does.
TEST(Workflows, SubmitPrintsWhatTheServerIgnores) {
  TestServer server;
  CommandResult r = server.Cli({"workflow", "submit", "-"}, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: ignored}
spec:
  entrypoint: main
  serviceAccountName: argo-runner
  templates:
  - name: main
    container: {image: alpine, command: ["true"]}
)y");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("Warning: spec.serviceAccountName (line 7): ignored: jobs run as "
                               "the submitting user\n"));
  EXPECT_THAT(r.out, HasSubstr("ignored"));
}

// `argo retry -p` and `argo resubmit -p`: the parameters given replace the
// workflow's arguments of the same name (the others stay), as Argo's
// overrideParameters does; the steps that run again see them.
TEST(Workflows, RetryAndResubmitTakeParametersThatOverrideTheArguments) {
  TestServer server;
  SubmitWorkflow(server, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: greet}
spec:
  entrypoint: say
  arguments:
    parameters:
    - {name: message, value: bad}
    - {name: who, value: world}
  templates:
  - name: say
    container:
      image: alpine
      command: [sh, -c, "echo {{workflow.parameters.message}} {{workflow.parameters.who}}; test {{workflow.parameters.message}} != bad"]
)y");
  ASSERT_TRUE(WaitForPhase(server, "greet", "Failed"));
  // A parameter without '=' is refused, and nothing changes.
  CommandResult bad = server.Cli({"wf", "retry", "greet", "-p", "message"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("expected parameter of the form: NAME=VALUE"));
  EXPECT_EQ(Phase(server, "greet"), "Failed");

  CommandResult r = server.Cli({"wf", "retry", "greet", "-p", "message=hello"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(WaitForPhase(server, "greet", "Succeeded")) << Workflow(server, "greet").dump(2);
  EXPECT_THAT(server.Cli({"wf", "logs", "greet"}).out, HasSubstr("hello world"));
  const json args = Workflow(server, "greet")["spec"]["arguments"]["parameters"];
  ASSERT_EQ(args.size(), 2u) << args.dump();
  EXPECT_EQ(args[0]["name"], "message");
  EXPECT_EQ(args[0]["value"], "hello");
  EXPECT_EQ(args[1]["value"], "world");

  // Resubmit over the REST API, as Hera and the Argo UI send it.
  Answer again =
      Call(server, server.admin_token(), "PUT", "/api/v1/workflows/default/greet/resubmit",
           R"({"parameters": ["who=there"]})");
  ASSERT_EQ(again.status, 200) << again.raw;
  const std::string name = again.body["metadata"]["name"];
  ASSERT_TRUE(WaitForPhase(server, name, "Succeeded")) << Workflow(server, name).dump(2);
  EXPECT_THAT(server.Cli({"wf", "logs", name}).out, HasSubstr("hello there"));
  EXPECT_EQ(Call(server, server.admin_token(), "PUT", "/api/v1/workflows/default/greet/resubmit",
                 R"({"parameters": "who=there"})")
                .status,
            400);
}

TEST(Workflows, ARunningWorkflowShowsAnEtaFromPastRunsOfItsSteps) {
  TestServer server;
  const std::string release = Shared(server) + "/release";
  auto manifest = [&](const std::string& name, const std::string& wait) {
    return R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: )y" +
           name + R"y(}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - {name: prep, template: prep}
    - - {name: train, template: train}
  - name: prep
    container: {image: alpine, command: [sh, -c, ")y" +
           wait + R"y("]}
  - name: train
    container: {image: alpine, command: [sleep, "2"]}
)y";
  };
  // A first run teaches the server how long `train` takes.
  ASSERT_EQ(server.Cli({"wf", "submit", "-", "--wait"}, manifest("first", "true")).exit_code, 0);
  SubmitWorkflow(server, manifest("second", "while [ ! -e " + release + " ]; do sleep 0.1; done"));
  ASSERT_TRUE(WaitFor(
      [&] { return NodeOf(Workflow(server, "second"), "prep").value("phase", "") == "Running"; }));
  json h = Workflow(server, "second")["status"]["headway"];
  // prep has no history of its own runs that long; train's ~2 s is still to come.
  EXPECT_GE(h.value("eta_seconds", 0.0), 1.5) << h.dump();
  EXPECT_EQ(h["critical_path"].back(), "second[1].train") << h.dump();
  EXPECT_EQ(h["steps_total"], 2);
  CommandResult list = server.Cli({"get", "workflows"});
  EXPECT_THAT(list.out, HasSubstr("ETA"));
  EXPECT_THAT(list.out,
              ::testing::ContainsRegex("second +Running +[A-Za-z]+ +0/1 \\([0-9.]+%\\) +[0-9]+s"));
  WriteFile(release, "");
  ASSERT_TRUE(WaitForPhase(server, "second", "Succeeded"));
  EXPECT_FALSE(Workflow(server, "second")["status"].contains("headway"));
}

TEST(Workflows, ASuspendStepWaitsForResume) {
  TestServer server;
  SubmitWorkflow(server, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: gate}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - {name: approve, template: wait}
    - - {name: ship, template: ship}
  - name: wait
    suspend: {}
  - name: ship
    container: {image: alpine, command: ["true"]}
)y");
  ASSERT_TRUE(WaitFor(
      [&] { return NodeOf(Workflow(server, "gate"), "approve").value("phase", "") == "Running"; }));
  EXPECT_TRUE(NodeOf(Workflow(server, "gate"), "ship").is_null());
  ASSERT_EQ(server.Cli({"wf", "resume", "gate"}).exit_code, 0);
  ASSERT_TRUE(WaitForPhase(server, "gate", "Succeeded"));
  // Resuming again is refused: it has ended.
  CommandResult again = server.Cli({"wf", "resume", "gate"});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_THAT(again.err, HasSubstr("ended"));
}

// Two GPUs, one free, but the team's quota is used: the step waits with the
// quota as its reason, and starts when the team's other job ends.
TEST(Workflows, AGpuStepWaitsInTheQueueBehindItsTeamsQuota) {
  TestServer server(/*gpus=*/2, {"--quota", "vision=1:borrow=0"});
  const std::string release = Shared(server) + "/release";
  server.Submit(
      "name: holder\nteam: vision\nresources: {gpus_per_process: 1}\n"
      "command: \"while [ ! -e " +
      release + " ]; do sleep 0.1; done\"\n");
  ASSERT_TRUE(server.WaitForState("holder", "Running"));
  SubmitWorkflow(server, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: train, labels: {headway.dev/team: vision}}
spec:
  entrypoint: fit
  templates:
  - name: fit
    container:
      image: pytorch
      command: [sh, -c, "echo $CUDA_VISIBLE_DEVICES"]
      resources: {limits: {nvidia.com/gpu: 1}}
)y");
  ASSERT_TRUE(
      WaitFor([&] { return NodeOf(Workflow(server, "train"), "train").contains("headway"); }));
  const std::string job = NodeOf(Workflow(server, "train"), "train")["headway"]["job"];
  ASSERT_TRUE(server.WaitForState(job, "Queued"));
  ASSERT_TRUE(WaitFor([&] {
    return server.Job(job).value("pending_reason", "").find("team quota 1/1 used") !=
           std::string::npos;
  })) << server.Job(job).dump();
  EXPECT_EQ(server.Job(job)["spec"]["team"], "vision");
  EXPECT_EQ(Phase(server, "train"), "Running");  // what Hera's wait() reads while it queues
  EXPECT_EQ(NodeOf(Workflow(server, "train"), "train")["phase"], "Pending");
  WriteFile(release, "");
  ASSERT_TRUE(WaitForPhase(server, "train", "Succeeded"));
  // It got the GPU the holder gave back, or the one beside it.
  EXPECT_THAT(NodeOf(Workflow(server, "train"), "train")["outputs"]["result"].get<std::string>(),
              ::testing::AnyOf("0", "1"));
}

TEST(Workflows, AServerKilledMidRunResumesTheWorkflowWithNoStepRunTwice) {
  TestServer server;
  const std::string release = Shared(server) + "/release";
  const std::string a_starts = Shared(server) + "/a", b_starts = Shared(server) + "/b";
  SubmitWorkflow(server, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: long}
spec:
  entrypoint: main
  templates:
  - name: main
    dag:
      tasks:
      - {name: a, template: a}
      - {name: b, template: b, depends: a}
  - name: a
    container: {image: alpine, command: [sh, -c, "echo x >> )y" +
                             a_starts + R"y(; while [ ! -e )y" + release +
                             R"y( ]; do sleep 0.1; done; echo done"]}
  - name: b
    container: {image: alpine, command: [sh, -c, "echo x >> )y" +
                             b_starts + R"y("]}
)y");
  ASSERT_TRUE(WaitFor([&] { return Lines(a_starts) == 1; }));
  server.Kill();
  server.Restart();
  WriteFile(release, "");
  ASSERT_TRUE(WaitForPhase(server, "long", "Succeeded")) << Workflow(server, "long").dump(2);
  EXPECT_EQ(Lines(a_starts), 1);
  EXPECT_EQ(Lines(b_starts), 1);
  EXPECT_EQ(NodeOf(Workflow(server, "long"), "a")["outputs"]["result"], "done");
}

TEST(Workflows, StopEndsRunningStepsAndRunsTheExitHandler) {
  TestServer server;
  SubmitWorkflow(server, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: halt}
spec:
  entrypoint: main
  onExit: bye
  templates:
  - name: main
    container: {image: alpine, command: [sleep, "300"]}
  - name: bye
    container: {image: alpine, command: [echo, "{{workflow.status}}"]}
)y");
  ASSERT_TRUE(WaitFor(
      [&] { return NodeOf(Workflow(server, "halt"), "halt").value("phase", "") == "Running"; }));
  ASSERT_EQ(server.Cli({"wf", "stop", "halt"}).exit_code, 0);
  ASSERT_TRUE(WaitForPhase(server, "halt", "Failed"));
  json wf = Workflow(server, "halt");
  EXPECT_EQ(wf["status"]["message"], "Stopped with strategy 'Stop'");
  EXPECT_EQ(NodeOf(wf, "halt.onExit")["outputs"]["result"], "Failed");
}

TEST(Workflows, AMemoizedStepIsServedFromTheCacheByTheNextWorkflow) {
  TestServer server;
  const std::string runs = Shared(server) + "/runs";
  auto manifest = [&](const std::string& name) {
    return R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: )y" +
           name + R"y(}
spec:
  entrypoint: sq
  arguments: {parameters: [{name: x, value: "12"}]}
  templates:
  - name: sq
    inputs: {parameters: [{name: x}]}
    memoize: {key: "sq-{{inputs.parameters.x}}", maxAge: 1h}
    script: {image: python, command: [/usr/bin/python3], source: "open(')y" +
           runs +
           R"y(', 'a').write('x\\n'); print({{inputs.parameters.x}} ** 2)"}
)y";
  };
  ASSERT_EQ(server.Cli({"wf", "submit", "-", "--wait"}, manifest("first")).exit_code, 0);
  ASSERT_EQ(server.Cli({"wf", "submit", "-", "--wait"}, manifest("second")).exit_code, 0);
  EXPECT_EQ(Lines(runs), 1);
  json second = Workflow(server, "second");
  EXPECT_EQ(NodeOf(second, "second")["memoizationStatus"]["hit"], true);
  EXPECT_EQ(NodeOf(second, "second")["outputs"]["result"], "144");
}

// What check_fixtures.py (Hera's models' constraints) says of a body.
std::string HeraProblems(const std::string& kind, const json& body) {
  CommandResult r = RunCommand(
      {"/usr/bin/python3", "-c",
       "import json, sys; sys.path.insert(0, '" HEADWAY_SOURCE_DIR "/tests/fixtures/argo'); "
       "from check_fixtures import check; print('; '.join(check(sys.argv[1], "
       "json.load(sys.stdin))))",
       kind},
      body.dump());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out == "\n" ? "" : r.out;
}

TEST(Workflows, HeraRequestsAreAnsweredInTheShapesItsModelsAccept) {
  TestServer server;
  const std::string token = server.admin_token();
  std::string create =
      ReadFile(HEADWAY_SOURCE_DIR "/tests/fixtures/argo/requests/create_workflow.json");
  // As Hera sends it: namespace in the path, Bearer token, JSON body.
  Answer created = Call(server, token, "POST", "/api/v1/workflows/argo", create);
  ASSERT_EQ(created.status, 200) << created.raw;
  EXPECT_EQ(HeraProblems("workflow_for_wait", created.body), "");
  const std::string name = created.body["metadata"]["name"];
  EXPECT_EQ(name.rfind("dag-diamond-", 0), 0u);
  EXPECT_EQ(created.body["metadata"]["namespace"], "argo");
  Answer got = Call(server, token, "GET", "/api/v1/workflows/argo/" + name);
  EXPECT_EQ(HeraProblems("workflow_for_wait", got.body), "");
  Answer list = Call(server, token, "GET", "/api/v1/workflows/argo");
  EXPECT_EQ(HeraProblems("workflow_list", list.body), "");
  ASSERT_EQ(list.body["items"].size(), 1u);
  Answer lint =
      Call(server, token, "POST", "/api/v1/workflows/argo/lint",
           ReadFile(HEADWAY_SOURCE_DIR "/tests/fixtures/argo/requests/lint_workflow.json"));
  EXPECT_EQ(lint.status, 200) << lint.raw;
  EXPECT_EQ(Call(server, token, "GET", "/api/v1/workflows/argo").body["items"].size(), 1u);
  // Errors in Argo's shape, which Hera reads `message` from.
  Answer missing = Call(server, token, "GET", "/api/v1/workflows/argo/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body["code"], 5);
  EXPECT_EQ(HeraProblems("error", missing.body), "");
  Answer bad = Call(server, token, "POST", "/api/v1/workflows/argo",
                    R"({"workflow": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
                        "metadata": {"name": "x"}, "spec": {"entrypoint": "nope",
                        "templates": [{"name": "s", "suspend": {}}]}}})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["code"], 3);
  EXPECT_THAT(bad.body.value("message", ""), HasSubstr("entrypoint"));
  Answer anonymous = Call(server, "", "GET", "/api/v1/workflows/argo");
  EXPECT_EQ(anonymous.status, 401);
  EXPECT_EQ(anonymous.body["code"], 16);
  Answer deleted = Call(server, token, "DELETE", "/api/v1/workflows/argo/" + name);
  EXPECT_EQ(deleted.status, 200);
  EXPECT_EQ(Call(server, token, "GET", "/api/v1/workflows/argo/" + name).status, 404);
}

TEST(Workflows, FinishedWorkflowsAreServedFromTheArchiveByUidLabelAndName) {
  TestServer server;
  const std::string token = server.admin_token();
  auto post = [&](const std::string& name, const std::string& app, const std::string& tmpl) {
    Answer a = Call(server, token, "POST", "/api/v1/workflows/default",
                    R"({"workflow": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
                        "metadata": {"name": ")" +
                        name + R"(", "labels": {"app": ")" + app + R"("}},
                        "spec": {"entrypoint": "s", "templates": [)" +
                        tmpl + "]}}}");
    EXPECT_EQ(a.status, 200) << a.raw;
    return a.body["metadata"].value("uid", "");
  };
  const std::string quick =
      R"({"name": "s", "container": {"image": "x", "command": ["/bin/true"]}})";
  const std::string wait = R"({"name": "s", "suspend": {}})";
  const std::string uid_a = post("arch-a", "etl", quick);
  ASSERT_TRUE(WaitForPhase(server, "arch-a", "Succeeded"));
  post("arch-b", "train", wait);
  ASSERT_EQ(Call(server, token, "PUT", "/api/v1/workflows/default/arch-b/terminate", "{}").status,
            200);
  ASSERT_TRUE(WaitForPhase(server, "arch-b", "Failed"));
  const std::string uid_live = post("live-c", "etl", wait);

  auto names = [&](const std::string& query) {
    Answer a = Call(server, token, "GET", "/api/v1/archived-workflows" + query);
    EXPECT_EQ(a.status, 200) << query << ": " << a.raw;
    EXPECT_EQ(HeraProblems("workflow_list", a.body), "");
    std::vector<std::string> out;
    for (const json& w : a.body["items"]) out.push_back(w["metadata"]["name"]);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names(""), (V{"arch-b", "arch-a"}));  // newest first, no running one
  EXPECT_EQ(names("?listOptions.labelSelector=app%3Detl"), (V{"arch-a"}));
  EXPECT_EQ(names("?listOptions.labelSelector=workflows.argoproj.io/phase%3DFailed"),
            (V{"arch-b"}));
  EXPECT_EQ(names("?namePrefix=arch-a"), (V{"arch-a"}));
  EXPECT_EQ(names("?listOptions.fieldSelector=metadata.name%3Darch-b"), (V{"arch-b"}));
  Answer page = Call(server, token, "GET", "/api/v1/archived-workflows?listOptions.limit=1");
  ASSERT_EQ(page.body["items"].size(), 1u);
  const std::string cont = page.body["metadata"].value("continue", "");
  ASSERT_FALSE(cont.empty());
  EXPECT_EQ(names("?listOptions.limit=1&listOptions.continue=" + cont), (V{"arch-a"}));
  EXPECT_EQ(Call(server, token, "GET",
                 "/api/v1/archived-workflows?listOptions.fieldSelector=spec.startedAt%3E1")
                .status,
            400);

  Answer got = Call(server, token, "GET", "/api/v1/archived-workflows/" + uid_a);
  ASSERT_EQ(got.status, 200) << got.raw;
  EXPECT_EQ(HeraProblems("workflow", got.body), "");
  EXPECT_EQ(got.body["metadata"]["name"], "arch-a");
  EXPECT_FALSE(got.body["status"]["nodes"].empty());
  EXPECT_EQ(Call(server, token, "GET", "/api/v1/archived-workflows/" + uid_live).status, 404);

  Answer keys = Call(server, token, "GET", "/api/v1/archived-workflows-label-keys");
  EXPECT_EQ(HeraProblems("labels", keys.body), "");
  EXPECT_THAT(keys.body["items"].get<V>(), ::testing::Contains("app"));
  Answer values = Call(server, token, "GET",
                       "/api/v1/archived-workflows-label-values?listOptions.labelSelector=app");
  EXPECT_EQ(values.body["items"].get<V>(), (V{"etl", "train"}));

  // Another team's caller finds nothing of it.
  std::string other = CreateToken(server, "bo", "speech", "member");
  EXPECT_TRUE(Call(server, other, "GET", "/api/v1/archived-workflows").body["items"].empty());
  EXPECT_EQ(Call(server, other, "GET", "/api/v1/archived-workflows/" + uid_a).status, 404);
  EXPECT_EQ(Call(server, other, "DELETE", "/api/v1/archived-workflows/" + uid_a).status, 404);
  EXPECT_TRUE(
      Call(server, other, "GET", "/api/v1/archived-workflows-label-keys").body["items"].empty());

  Answer again = Call(server, token, "PUT", "/api/v1/archived-workflows/" + uid_a + "/resubmit",
                      R"({"uid": ")" + uid_a + R"(", "memoized": false})");
  ASSERT_EQ(again.status, 200) << again.raw;
  EXPECT_EQ(again.body["metadata"].value("name", "").rfind("arch-a-", 0), 0u);
  EXPECT_EQ(Call(server, token, "DELETE", "/api/v1/archived-workflows/" + uid_a).status, 200);
  EXPECT_EQ(Call(server, token, "GET", "/api/v1/workflows/default/arch-a").status, 404);
}

TEST(Workflows, WorkflowTemplatesAreStoredReferencedAndSubmittedAsHeraDoes) {
  TestServer server;
  const std::string token = server.admin_token();
  Answer created = Call(
      server, token, "POST", "/api/v1/workflow-templates/argo",
      ReadFile(HEADWAY_SOURCE_DIR "/tests/fixtures/argo/requests/create_workflow_template.json"));
  ASSERT_EQ(created.status, 200) << created.raw;
  EXPECT_EQ(HeraProblems("workflow_template", created.body), "");
  Answer list = Call(server, token, "GET", "/api/v1/workflow-templates/argo");
  EXPECT_EQ(HeraProblems("workflow_template_list", list.body), "");
  EXPECT_EQ(list.body["items"].size(), 1u);
  // Submitted from the template with a parameter, as `argo submit --from`.
  Answer submitted = Call(
      server, token, "POST", "/api/v1/workflows/argo/submit",
      ReadFile(HEADWAY_SOURCE_DIR "/tests/fixtures/argo/requests/submit_workflow_template.json"));
  ASSERT_EQ(submitted.status, 200) << submitted.raw;
  const std::string name = submitted.body["metadata"]["name"];
  EXPECT_EQ(name.rfind("diamond-template-", 0), 0u);
  EXPECT_EQ(submitted.body["metadata"]["labels"]["team"], "ml");
  // The template's steps run with the parameter given at submission.
  ASSERT_TRUE(WaitFor([&] { return Phase(server, name) != "Running"; }, std::chrono::seconds(30)));
  json wf = Workflow(server, name);
  EXPECT_EQ(NodeOf(wf, "A")["inputs"]["parameters"][0]["value"], "hi from A");
  // A workflow calling one of its templates by templateRef.
  std::string caller = SubmitWorkflow(server, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: caller-}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - name: greet
        templateRef: {name: diamond-template, template: echo}
        arguments: {parameters: [{name: message, value: "by ref"}]}
)y");
  ASSERT_TRUE(
      WaitFor([&] { return Phase(server, caller) != "Running"; }, std::chrono::seconds(30)));
  json called = Workflow(server, caller);
  EXPECT_EQ(NodeOf(called, "greet")["templateRef"]["name"], "diamond-template");
  EXPECT_EQ(NodeOf(called, "greet")["inputs"]["parameters"][0]["value"], "by ref");
  // A stale update is refused; a current one is taken.
  json update = json::parse(
      ReadFile(HEADWAY_SOURCE_DIR "/tests/fixtures/argo/requests/create_workflow_template.json"));
  update["template"]["metadata"]["resourceVersion"] = "999";
  EXPECT_EQ(
      Call(server, token, "PUT", "/api/v1/workflow-templates/argo/diamond-template", update.dump())
          .status,
      409);
  update["template"]["metadata"]["resourceVersion"] = created.body["metadata"]["resourceVersion"];
  EXPECT_EQ(
      Call(server, token, "PUT", "/api/v1/workflow-templates/argo/diamond-template", update.dump())
          .status,
      200);
  EXPECT_EQ(
      Call(server, token, "DELETE", "/api/v1/workflow-templates/argo/diamond-template").status,
      200);
  EXPECT_EQ(
      Call(server, token, "GET", "/api/v1/workflow-templates/argo/diamond-template").body["code"],
      5);
}

TEST(Workflows, ACronWorkflowWithForbidFiresAgainOnlyOnceItsRunHasEnded) {
  TestServer server;
  const std::string release = Shared(server) + "/release";
  const std::string token = server.admin_token();
  json cron = {
      {"cronWorkflow",
       {{"apiVersion", "argoproj.io/v1alpha1"},
        {"kind", "CronWorkflow"},
        {"metadata", {{"name", "tick"}}},
        {"spec",
         {{"schedule", "@every 1s"},
          {"concurrencyPolicy", "Forbid"},
          {"successfulJobsHistoryLimit", 2},
          {"workflowSpec",
           {{"entrypoint", "wait"},
            {"templates",
             {{{"name", "wait"},
               {"container",
                {{"image", "alpine"},
                 {"command",
                  {"sh", "-c", "while [ ! -e " + release + " ]; do sleep 0.1; done"}}}}}}}}}}}}}};
  Answer created = Call(server, token, "POST", "/api/v1/cron-workflows/argo", cron.dump());
  ASSERT_EQ(created.status, 200) << created.raw;
  EXPECT_EQ(HeraProblems("cron_workflow", created.body), "");
  auto runs = [&] {
    return Call(server, token, "GET",
                "/api/v1/workflows/argo?listOptions.labelSelector=" +
                    std::string("workflows.argoproj.io/cron-workflow=tick"))
        .body["items"];
  };
  ASSERT_TRUE(WaitFor([&] { return runs().size() == 1; }));
  // Several fire times pass while the first run waits: Forbid skips them.
  ASSERT_TRUE(WaitFor([&] {
    json c = Call(server, token, "GET", "/api/v1/cron-workflows/argo/tick").body;
    return c.contains("status") &&
           c["status"].value("lastSkipped", "").find("Forbid") != std::string::npos;
  }));
  EXPECT_EQ(runs().size(), 1u);
  WriteFile(release, "");
  ASSERT_TRUE(WaitFor([&] { return runs().size() >= 2; }));
  ASSERT_EQ(Call(server, token, "PUT", "/api/v1/cron-workflows/argo/tick/suspend", "{}").status,
            200);
  json cron_now = Call(server, token, "GET", "/api/v1/cron-workflows/argo/tick").body;
  EXPECT_EQ(HeraProblems("cron_workflow", cron_now), "");
  EXPECT_EQ(cron_now["spec"]["suspend"], true);
  // Each run was created by the cron and named for its fire time.
  for (const json& w : runs()) {
    EXPECT_EQ(w["metadata"]["name"].get<std::string>().rfind("tick-", 0), 0u);
  }
  // Once all have ended, no more than the history limit of succeeded runs is kept.
  EXPECT_TRUE(WaitFor([&] {
    json all = runs();
    for (const json& w : all) {
      if (w["status"].value("phase", "") == "Running") return false;
    }
    return all.size() <= 2;
  }));
}

}  // namespace
}  // namespace headway::testing
