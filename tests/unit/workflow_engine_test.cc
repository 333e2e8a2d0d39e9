// The workflow engine on a fake pool: jobs are entries in a map whose state
// the test moves, and time is a number the test advances. Nothing sleeps.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "workflow/engine.h"
#include "workflow/manifest.h"
#include "workflow/progress.h"
#include "workflow_fake_pool.h"

namespace headway::workflow {
namespace {

using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr char kDiamond[] = R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: diamond}
spec:
  entrypoint: main
  arguments:
    parameters: [{name: seed, value: "7"}]
  templates:
  - name: main
    dag:
      tasks:
      - {name: A, template: gen, arguments: {parameters: [{name: n, value: "{{workflow.parameters.seed}}"}]}}
      - {name: B, template: echo, dependencies: [A], arguments: {parameters: [{name: msg, value: "b{{tasks.A.outputs.parameters.out}}"}]}}
      - {name: C, template: echo, dependencies: [A], arguments: {parameters: [{name: msg, value: "c{{tasks.A.outputs.result}}"}]}}
      - {name: D, template: echo, dependencies: [B, C], arguments: {parameters: [{name: msg, value: "{{tasks.B.outputs.result}}+{{tasks.C.outputs.result}}"}]}}
  - name: gen
    inputs: {parameters: [{name: n}]}
    outputs: {parameters: [{name: out, valueFrom: {path: /tmp/out}}]}
    script:
      image: python:3.12
      command: [python3]
      source: print({{inputs.parameters.n}} * 2)
  - name: echo
    inputs: {parameters: [{name: msg}]}
    container:
      image: alpine
      command: [echo, "{{inputs.parameters.msg}}"]
      resources: {limits: {nvidia.com/gpu: 1}}
)y";

TEST(WorkflowEngine, ADiamondPassesParametersAndResultsAndEndsWhenItsLastTaskDoes) {
  FakePool pool(kDiamond);
  pool.Step();
  EXPECT_EQ(pool.state.phase, NodePhase::kRunning);
  EXPECT_THAT(pool.Active(), ElementsAre("diamond.A"));
  const JobToCreate& gen = pool.created.at(pool.JobOf("diamond.A"));
  EXPECT_THAT(gen.spec.command, ElementsAre("python3"));
  EXPECT_EQ(gen.script_source, "print(7 * 2)");
  EXPECT_EQ(gen.output_paths.at("out"), "/tmp/out");
  EXPECT_EQ(gen.spec.team, "vision");
  EXPECT_EQ(gen.image, "python:3.12");

  pool.Succeed("diamond.A", {{"out", "x1\n"}}, "14\n");
  pool.Step();
  EXPECT_THAT(pool.Active(), ElementsAre("diamond.B", "diamond.C"));
  EXPECT_THAT(pool.SpecOf("diamond.B").command, ElementsAre("echo", "bx1"));
  EXPECT_THAT(pool.SpecOf("diamond.C").command, ElementsAre("echo", "c14"));
  EXPECT_EQ(pool.SpecOf("diamond.B").resources.gpus(), 1);

  pool.Succeed("diamond.B", {}, "bx1");
  pool.Step();
  EXPECT_THAT(pool.Active(), ElementsAre("diamond.C"));  // D waits for both
  pool.Succeed("diamond.C", {}, "c14");
  pool.Step();
  EXPECT_THAT(pool.SpecOf("diamond.D").command, ElementsAre("echo", "bx1+c14"));
  EXPECT_FALSE(pool.state.Finished());
  pool.Succeed("diamond.D", {}, "bx1+c14");
  pool.Settle();
  EXPECT_EQ(pool.state.phase, NodePhase::kSucceeded);
  EXPECT_TRUE(pool.state.Finished());
  const Node& root = pool.NodeNamed("diamond");
  EXPECT_EQ(root.id, "diamond");
  EXPECT_EQ(root.type, NodeType::kDag);
  EXPECT_EQ(root.progress, "4/4");
  EXPECT_EQ(root.children.size(), 4u);
  EXPECT_EQ(pool.NodeNamed("diamond.A").outputs.at(0).value, "x1");
  EXPECT_EQ(pool.NodeNamed("diamond.A").result, "14");
  EXPECT_EQ(pool.NodeNamed("diamond.A").boundary_id, "diamond");
  // Argo's node ids: the workflow name and the FNV-32a hash of the node name.
  EXPECT_EQ(pool.NodeNamed("diamond.A").id, NodeIdFor("diamond", "diamond.A"));
  for (const auto& [job, n] : pool.creations) EXPECT_EQ(n, 1) << job;
}

TEST(WorkflowEngine, ACrashBeforeTheJobsAreCreatedCreatesThemOnceAfterwards) {
  FakePool pool(kDiamond);
  pool.lose_creations = true;  // the state was saved, the jobs never made
  pool.Step();
  const std::string job = pool.JobOf("diamond.A");
  pool.lose_creations = false;
  pool.Step();  // after the restart: the same job name again
  EXPECT_EQ(pool.creations.at(job), 2);
  EXPECT_EQ(pool.jobs.count(job), 1u);
  pool.Step();  // now it exists: not asked for again
  EXPECT_EQ(pool.creations.at(job), 2);
}

TEST(WorkflowEngine, WithItemsFansOutAndTheNextStepReadsTheAggregatedResults) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: fan}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - name: sq
        template: square
        arguments: {parameters: [{name: x, value: "{{item}}"}]}
        withItems: [1, 2, 3]
    - - name: sum
        template: add
        arguments: {parameters: [{name: xs, value: "{{steps.sq.outputs.result}}"}]}
  - name: square
    inputs: {parameters: [{name: x}]}
    container: {image: alpine, command: [sh, -c, "echo $(({{inputs.parameters.x}}*{{inputs.parameters.x}}))"]}
  - name: add
    inputs: {parameters: [{name: xs}]}
    container: {image: alpine, command: [echo, "{{inputs.parameters.xs}}"]}
)y");
  pool.Step();
  EXPECT_THAT(pool.Active(), ElementsAre("fan[0].sq(0:1)", "fan[0].sq(1:2)", "fan[0].sq(2:3)"));
  EXPECT_THAT(pool.SpecOf("fan[0].sq(1:2)").command, ElementsAre("sh", "-c", "echo $((2*2))"));
  pool.Succeed("fan[0].sq(0:1)", {}, "1");
  pool.Succeed("fan[0].sq(2:3)", {}, "9");
  pool.Step();
  EXPECT_THAT(pool.Active(), ElementsAre("fan[0].sq(1:2)"));
  pool.Succeed("fan[0].sq(1:2)", {}, "4");
  pool.Step();
  EXPECT_THAT(pool.SpecOf("fan[1].sum").command, ElementsAre("echo", "[1,4,9]"));
  pool.Succeed("fan[1].sum", {}, "14");
  pool.Settle();
  EXPECT_EQ(pool.state.phase, NodePhase::kSucceeded);
  EXPECT_EQ(pool.NodeNamed("fan").type, NodeType::kSteps);
  EXPECT_EQ(pool.NodeNamed("fan[0]").type, NodeType::kStepGroup);
  EXPECT_EQ(pool.NodeNamed("fan").progress, "4/4");
}

constexpr char kRetry[] = R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: flaky}
spec:
  entrypoint: try
  templates:
  - name: try
    retryStrategy:
      limit: 3
      backoff: {duration: 10s, factor: 2, maxDuration: 5m}
    container: {image: alpine, command: [sh, -c, "exit {{retries}}"]}
)y";

TEST(WorkflowEngine, AFailingStepIsRetriedAfterAGrowingBackoffThenSucceeds) {
  FakePool pool(kRetry);
  pool.Step();
  EXPECT_EQ(pool.NodeNamed("flaky").type, NodeType::kRetry);
  EXPECT_THAT(pool.SpecOf("flaky(0)").command, ElementsAre("sh", "-c", "exit 0"));
  pool.Fail("flaky(0)", 3);
  Actions a = pool.Step();
  // No second attempt before its backoff of 10 s.
  EXPECT_THAT(pool.Active(), ElementsAre());
  ASSERT_TRUE(a.wake_at.has_value());
  EXPECT_EQ(*a.wake_at, pool.now + seconds(10));
  pool.now += seconds(10);
  pool.Step();
  EXPECT_THAT(pool.Active(), ElementsAre("flaky(1)"));
  EXPECT_THAT(pool.SpecOf("flaky(1)").command, ElementsAre("sh", "-c", "exit 1"));
  pool.Fail("flaky(1)");
  a = pool.Step();
  EXPECT_EQ(*a.wake_at, pool.now + seconds(20));  // 10 s * 2^1
  pool.now += seconds(20);
  pool.Step();
  pool.Succeed("flaky(2)");
  pool.Settle();
  EXPECT_EQ(pool.state.phase, NodePhase::kSucceeded);
  EXPECT_EQ(pool.NodeNamed("flaky").children.size(), 3u);
  EXPECT_EQ(pool.NodeNamed("flaky(0)").phase, NodePhase::kFailed);
  EXPECT_EQ(pool.NodeNamed("flaky(0)").message, "Error (exit code 3)");
}

TEST(WorkflowEngine, RetriesStopAtTheLimit) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: flaky}
spec:
  entrypoint: try
  templates:
  - name: try
    retryStrategy: {limit: "1"}
    container: {image: alpine, command: [false]}
)y");
  pool.Step();
  pool.Fail("flaky(0)");
  pool.Step();
  pool.Fail("flaky(1)");
  pool.Settle();
  EXPECT_EQ(pool.state.phase, NodePhase::kFailed);
  EXPECT_EQ(pool.NodeNamed("flaky").children.size(), 2u);
  EXPECT_THAT(pool.state.message, HasSubstr("no more retries left"));
}

TEST(WorkflowEngine, AFalseWhenSkipsABranchAndWhatDependsOnItStillRuns) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: coin}
spec:
  entrypoint: main
  templates:
  - name: main
    dag:
      tasks:
      - {name: flip, template: flip}
      - {name: heads, template: say, depends: flip, when: "{{tasks.flip.outputs.result}} == heads"}
      - {name: tails, template: say, depends: flip, when: "{{tasks.flip.outputs.result}} == tails"}
      - {name: after, template: say, depends: "heads && tails"}
  - name: flip
    container: {image: alpine, command: [echo, heads]}
  - name: say
    container: {image: alpine, command: [echo, hi]}
)y");
  pool.Step();
  pool.Succeed("coin.flip", {}, "heads");
  pool.Step();
  EXPECT_EQ(pool.NodeNamed("coin.tails").phase, NodePhase::kSkipped);
  EXPECT_THAT(pool.NodeNamed("coin.tails").message, HasSubstr("heads == tails"));
  EXPECT_THAT(pool.Active(), ElementsAre("coin.heads"));
  pool.Succeed("coin.heads");
  pool.Step();
  // A skipped task satisfies a bare dependency.
  EXPECT_THAT(pool.Active(), ElementsAre("coin.after"));
  pool.Succeed("coin.after");
  pool.Settle();
  EXPECT_EQ(pool.state.phase, NodePhase::kSucceeded);
}

constexpr char kExitHandler[] = R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: ex}
spec:
  entrypoint: main
  onExit: notify
  templates:
  - name: main
    container: {image: alpine, command: [sh, -c, "exit 2"]}
  - name: notify
    container: {image: alpine, command: [echo, "{{workflow.status}}", "{{workflow.failures}}"]}
)y";

TEST(WorkflowEngine, TheExitHandlerRunsAfterAFailureAndSeesTheStatus) {
  FakePool pool(kExitHandler);
  pool.Step();
  pool.Fail("ex", 2);
  pool.Step();
  EXPECT_FALSE(pool.state.Finished());  // the exit handler runs first
  const JobSpec& notify = pool.SpecOf("ex.onExit");
  EXPECT_EQ(notify.command.at(1), "Failed");
  EXPECT_THAT(notify.command.at(2), HasSubstr("Error (exit code 2)"));
  pool.Succeed("ex.onExit");
  pool.Settle();
  EXPECT_EQ(pool.state.phase, NodePhase::kFailed);
  EXPECT_TRUE(pool.NodeNamed("ex.onExit").on_exit);
}

TEST(WorkflowEngine, AStopStopsRunningStepsAndRunsTheExitHandlerButTerminateDoesNot) {
  for (Shutdown how : {Shutdown::kStop, Shutdown::kTerminate}) {
    FakePool pool(kExitHandler);
    pool.Step();
    pool.Run("ex");
    pool.Step();
    std::string error;
    ASSERT_TRUE(RequestShutdown(pool.state, how, &error));
    pool.Step();
    EXPECT_THAT(pool.stops, ElementsAre(pool.JobOf("ex")));
    pool.Settle();
    EXPECT_EQ(pool.state.FindByName("ex.onExit") != nullptr, how == Shutdown::kStop);
    if (how == Shutdown::kStop) {
      pool.Succeed("ex.onExit");
      pool.Settle();
    }
    EXPECT_TRUE(pool.state.Finished());
    EXPECT_EQ(pool.state.phase, NodePhase::kFailed);
    EXPECT_THAT(pool.state.message, HasSubstr(how == Shutdown::kStop ? "'Stop'" : "'Terminate'"));
    EXPECT_EQ(pool.stops.size(), 1u);  // asked once
  }
}

TEST(WorkflowEngine, AMemoizedStepIsServedFromTheCacheTheSecondTime) {
  constexpr char kMemo[] = R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: memo}
spec:
  entrypoint: main
  arguments: {parameters: [{name: x, value: "5"}]}
  templates:
  - name: main
    inputs: {parameters: [{name: x}]}
    memoize: {key: "square-{{inputs.parameters.x}}", maxAge: 1h}
    outputs: {parameters: [{name: y, valueFrom: {path: /tmp/y}}]}
    container: {image: alpine, command: [sh, -c, "echo 25 > /tmp/y"]}
)y";
  FakePool first(kMemo);
  first.Step();
  first.Succeed("memo", {{"y", "25"}});
  first.Settle();
  ASSERT_EQ(first.memo.size(), 1u);
  EXPECT_EQ(first.memo.begin()->second.key, "square-5");

  FakePool second(kMemo);
  second.memo = first.memo;
  second.now = first.now + std::chrono::minutes(30);
  second.Settle();
  EXPECT_TRUE(second.created.empty());
  EXPECT_EQ(second.state.phase, NodePhase::kSucceeded);
  EXPECT_EQ(second.NodeNamed("memo").memo_hit, true);
  EXPECT_EQ(second.NodeNamed("memo").outputs.at(0).value, "25");

  FakePool stale(kMemo);  // past maxAge: runs again
  stale.memo = first.memo;
  stale.now = first.now + std::chrono::hours(2);
  stale.Step();
  EXPECT_EQ(stale.created.size(), 1u);
}

TEST(WorkflowEngine, RetryRunsOnlyTheFailedNodeAndWhatDependsOnIt) {
  FakePool pool(kDiamond);
  pool.Step();
  pool.Succeed("diamond.A", {{"out", "1"}}, "14");
  pool.Step();
  pool.Succeed("diamond.B", {}, "b");
  pool.Fail("diamond.C");
  pool.Settle();
  ASSERT_EQ(pool.state.phase, NodePhase::kFailed);
  EXPECT_EQ(pool.state.FindByName("diamond.D")->phase, NodePhase::kOmitted);
  const std::string a_job = pool.JobOf("diamond.A"), b_job = pool.JobOf("diamond.B");

  std::string error;
  ASSERT_TRUE(Retry(pool.state, false, "", &error)) << error;
  pool.Step();
  EXPECT_EQ(pool.state.phase, NodePhase::kRunning);
  EXPECT_THAT(pool.Active(), ElementsAre("diamond.C"));
  EXPECT_EQ(pool.creations.at(a_job), 1);
  EXPECT_EQ(pool.creations.at(b_job), 1);
  pool.Succeed("diamond.C", {}, "c");
  pool.Step();
  pool.Succeed("diamond.D");
  pool.Settle();
  EXPECT_EQ(pool.state.phase, NodePhase::kSucceeded);
}

TEST(WorkflowEngine, ASuspendStepWaitsForResumeAndASuspendedWorkflowStartsNothingNew) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: approve}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - {name: build, template: work}
    - - {name: gate, template: wait}
    - - {name: ship, template: work}
  - name: wait
    suspend: {}
  - name: work
    container: {image: alpine, command: ["true"]}
)y");
  pool.Step();
  pool.Succeed("approve[0].build");
  pool.Settle();
  EXPECT_EQ(pool.NodeNamed("approve[1].gate").phase, NodePhase::kRunning);
  EXPECT_THAT(pool.Active(), ElementsAre());
  std::string error;
  ASSERT_TRUE(Resume(pool.state, pool.now, &error)) << error;
  pool.Step();
  EXPECT_THAT(pool.Active(), ElementsAre("approve[2].ship"));

  FakePool held(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: two}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - {name: a, template: work}
    - - {name: b, template: work}
  - name: work
    container: {image: alpine, command: ["true"]}
)y");
  held.Step();
  ASSERT_TRUE(Suspend(held.state, &error));
  held.Succeed("two[0].a");
  held.Settle();
  EXPECT_EQ(held.state.FindByName("two[1].b"), nullptr);
  ASSERT_TRUE(Resume(held.state, held.now, &error));
  held.Step();
  EXPECT_THAT(held.Active(), ElementsAre("two[1].b"));
}

TEST(WorkflowEngine, ParallelismBoundsHowManyStepsRunAtOnce) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: par}
spec:
  entrypoint: main
  parallelism: 2
  templates:
  - name: main
    steps:
    - - {name: w, template: work, withSequence: {count: "5"}}
  - name: work
    container: {image: alpine, command: ["true"]}
)y");
  pool.Step();
  EXPECT_THAT(pool.Active(), ElementsAre("par[0].w(0:0)", "par[0].w(1:1)"));
  pool.Succeed("par[0].w(0:0)");
  pool.Step();
  EXPECT_THAT(pool.Active(), ElementsAre("par[0].w(1:1)", "par[0].w(2:2)"));
}

TEST(WorkflowEngine, TheWorkflowDeadlineStopsItsSteps) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: slow}
spec:
  entrypoint: main
  activeDeadlineSeconds: 60
  templates:
  - name: main
    container: {image: alpine, command: [sleep, "600"]}
)y");
  Actions a = pool.Step();
  EXPECT_EQ(*a.wake_at, pool.now + seconds(60));
  pool.Run("slow");
  pool.now += seconds(60);
  pool.Settle();
  EXPECT_THAT(pool.stops, ElementsAre(pool.JobOf("slow")));
  EXPECT_EQ(pool.state.phase, NodePhase::kFailed);
  EXPECT_EQ(pool.state.message, "Max duration limit exceeded");
}

TEST(WorkflowEngine, AFailedTaskStopsNewTasksButAHandledFailureDoesNotFailTheDag) {
  FakePool fast(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: ff}
spec:
  entrypoint: main
  templates:
  - name: main
    dag:
      tasks:
      - {name: bad, template: work}
      - {name: long, template: work}
      - {name: next, template: work, dependencies: [long]}
  - name: work
    container: {image: alpine, command: ["true"]}
)y");
  fast.Step();
  fast.Fail("ff.bad");
  fast.Step();
  fast.Succeed("ff.long");
  fast.Settle();
  EXPECT_EQ(fast.state.FindByName("ff.next"), nullptr);  // failFast: never started
  EXPECT_EQ(fast.state.phase, NodePhase::kFailed);

  FakePool handled(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: h}
spec:
  entrypoint: main
  templates:
  - name: main
    dag:
      tasks:
      - {name: try, template: work}
      - {name: fallback, template: work, depends: "try.Failed"}
  - name: work
    container: {image: alpine, command: ["true"]}
)y");
  handled.Step();
  handled.Fail("h.try");
  handled.Step();
  handled.Succeed("h.fallback");
  handled.Settle();
  EXPECT_EQ(handled.state.phase, NodePhase::kSucceeded);
}

TEST(WorkflowEngine, AMissingOutputFileIsAnErrorNamingIt) {
  FakePool pool(kDiamond);
  pool.Step();
  pool.Succeed("diamond.A", {}, "14");
  pool.Settle();
  EXPECT_EQ(pool.NodeNamed("diamond.A").phase, NodePhase::kError);
  EXPECT_EQ(pool.NodeNamed("diamond.A").message, "outputs.parameters.out: no file at /tmp/out");
  EXPECT_EQ(pool.state.phase, NodePhase::kFailed);
}

// D depends on B and C only, but reads A's artifact (Argo allows any
// ancestor's outputs). The DAG once read only direct dependencies' outputs,
// failed to rebuild D's call once B and C were done, and ended Succeeded
// with D still running.
TEST(WorkflowEngine, ATaskReadsAnAncestorsOutputsAndTheDagWaitsForIt) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: diamond}
spec:
  entrypoint: main
  templates:
  - name: main
    dag:
      tasks:
      - {name: A, template: gen}
      - {name: B, template: echo, depends: A}
      - {name: C, template: echo, depends: A}
      - name: D
        template: join
        depends: "B && C"
        arguments:
          parameters: [{name: w, value: "{{tasks.A.outputs.parameters.word}}"}]
          artifacts: [{name: vocab, from: "{{tasks.A.outputs.artifacts.vocab}}"}]
  - name: gen
    outputs:
      parameters: [{name: word, valueFrom: {path: /tmp/word}}]
      artifacts: [{name: vocab, path: /tmp/vocab.txt}]
    container: {image: alpine, command: ["true"]}
  - name: echo
    container: {image: alpine, command: ["true"]}
  - name: join
    inputs:
      parameters: [{name: w}]
      artifacts: [{name: vocab, path: /tmp/in/vocab.txt}]
    container: {image: alpine, command: [echo, "{{inputs.parameters.w}}"]}
)y");
  pool.Step();
  pool.jobs.at(pool.JobOf("diamond.A")).artifacts["vocab"] = "x.vocab:1";
  pool.Succeed("diamond.A", {{"word", "bird"}});
  pool.Settle();
  pool.Succeed("diamond.B");
  pool.Succeed("diamond.C");
  pool.Settle();
  EXPECT_EQ(pool.NodeNamed("diamond.D").phase, NodePhase::kPending);
  EXPECT_EQ(pool.NodeNamed("diamond").phase, NodePhase::kRunning);
  const JobToCreate& d = pool.created.at(pool.JobOf("diamond.D"));
  EXPECT_EQ(d.input_artifacts.at(0).ref, "x.vocab:1");
  EXPECT_THAT(d.spec.command, ElementsAre("echo", "bird"));
  pool.Run("diamond.D");
  pool.Settle();
  EXPECT_EQ(pool.NodeNamed("diamond").phase, NodePhase::kRunning);
  pool.Succeed("diamond.D");
  pool.Settle();
  EXPECT_EQ(pool.NodeNamed("diamond.D").phase, NodePhase::kSucceeded);
  EXPECT_EQ(pool.NodeNamed("diamond").phase, NodePhase::kSucceeded);
}

TEST(WorkflowEngine, KeyOnlyS3ArtifactsAreKeptAndReadUnderTheKeysName) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: keys}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - [{name: write, template: write}]
    - [{name: read, template: read}]
  - name: write
    outputs: {artifacts: [{name: m, path: /tmp/m, s3: {key: "models/{{workflow.name}}/m.tgz"}}]}
    container: {image: alpine, command: ["true"]}
  - name: read
    inputs: {artifacts: [{name: m, path: /in/m, s3: {key: models/keys/m.tgz}}]}
    container: {image: alpine, command: ["true"]}
)y");
  pool.Step();
  const JobToCreate& write = pool.created.at(pool.JobOf("keys[0].write"));
  ASSERT_EQ(write.output_artifacts.size(), 1u);
  EXPECT_EQ(write.output_artifacts[0].store_as, "models.keys.m.tgz");
  // Kept on the node, so the store name is known when the job has ended.
  EXPECT_EQ(pool.NodeNamed("keys[0].write").artifact_names.at("m"), "models.keys.m.tgz");
  auto again = NodeFromJson(ToJson(pool.NodeNamed("keys[0].write")));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->artifact_names, pool.NodeNamed("keys[0].write").artifact_names);
  pool.jobs.at(pool.JobOf("keys[0].write")).artifacts["m"] = "models.keys.m.tgz:3";
  pool.Succeed("keys[0].write");
  pool.Settle();
  const JobToCreate& read = pool.created.at(pool.JobOf("keys[1].read"));
  ASSERT_EQ(read.input_artifacts.size(), 1u);
  EXPECT_EQ(read.input_artifacts[0].ref, "models.keys.m.tgz");  // the latest version

  EXPECT_EQ(ArtifactNameForKey("/a/b/").value(), "a.b");
  EXPECT_FALSE(ArtifactNameForKey("Models/x").ok());
  EXPECT_FALSE(ArtifactNameForKey("a//b").ok());  // ".." never reads as a path
  // Another bucket is not Headway's store: the step ends in Error, saying so.
  FakePool elsewhere(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: away}
spec:
  entrypoint: main
  templates:
  - name: main
    outputs: {artifacts: [{name: m, path: /tmp/m, s3: {key: m, bucket: other}}]}
    container: {image: alpine, command: ["true"]}
)y");
  elsewhere.Step();
  EXPECT_EQ(elsewhere.NodeNamed("away").phase, NodePhase::kError);
  EXPECT_THAT(elsewhere.NodeNamed("away").message, HasSubstr("bucket 'other'"));
}

TEST(WorkflowEngine, AnArtifactOneStepWritesIsStagedForTheStepThatReadsIt) {
  FakePool pool(R"y(
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
        arguments: {artifacts: [{name: model, from: "{{tasks.train.outputs.artifacts.model}}"}]}
  - name: train
    outputs: {artifacts: [{name: model, path: /tmp/model}]}
    container: {image: alpine, command: ["true"]}
  - name: eval
    inputs:
      artifacts:
      - {name: model, path: "/work/{{workflow.name}}/model"}
      - {name: config, path: /work/config.txt, raw: {data: "lr=0.1"}}
    container: {image: alpine, command: [cat, "{{inputs.artifacts.model.path}}"]}
)y");
  pool.Step();
  const JobToCreate& train = pool.created.at(pool.JobOf("art.train"));
  ASSERT_EQ(train.output_artifacts.size(), 1u);
  EXPECT_EQ(train.output_artifacts[0].path, "/tmp/model");
  pool.jobs.at(pool.JobOf("art.train")).artifacts["model"] = "art.train.model:1";
  pool.Succeed("art.train");
  pool.jobs.at(pool.JobOf("art.train")).artifacts["model"] = "art.train.model:1";
  pool.Step();
  const JobToCreate& eval = pool.created.at(pool.JobOf("art.eval"));
  ASSERT_EQ(eval.input_artifacts.size(), 2u);
  EXPECT_EQ(eval.input_artifacts[0].ref, "art.train.model:1");
  EXPECT_EQ(eval.input_artifacts[0].path, "/work/art/model");
  EXPECT_EQ(eval.input_artifacts[1].raw, "lr=0.1");
  EXPECT_THAT(eval.spec.command, ElementsAre("cat", "/work/art/model"));
  EXPECT_EQ(pool.NodeNamed("art.train").output_artifacts.at(0).ref, "art.train.model:1");
  EXPECT_EQ(pool.NodeNamed("art.eval").input_artifacts.at(0).ref, "art.train.model:1");

  // A step that left nothing at an output artifact's path ends in Error.
  FakePool missing(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: none}
spec:
  entrypoint: main
  templates:
  - name: main
    outputs: {artifacts: [{name: model, path: /tmp/model}]}
    container: {image: alpine, command: ["true"]}
)y");
  missing.Step();
  missing.Succeed("none");
  missing.Settle();
  EXPECT_EQ(missing.NodeNamed("none").phase, NodePhase::kError);
  EXPECT_EQ(missing.NodeNamed("none").message, "outputs.artifacts.model: nothing at /tmp/model");
}

TEST(WorkflowEngine, NodesSurviveAJsonRoundTrip) {
  FakePool pool(kRetry);
  pool.Step();
  pool.Fail("flaky(0)");
  pool.Step();
  for (const auto& [id, node] : pool.state.nodes) {
    auto back = NodeFromJson(ToJson(node));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->id, node.id);
    EXPECT_EQ(back->phase, node.phase);
    EXPECT_EQ(back->children, node.children);
    EXPECT_EQ(back->job, node.job);
    EXPECT_EQ(back->retry_after, node.retry_after);
    EXPECT_EQ(back->exit_code, node.exit_code);
  }
  EXPECT_FALSE(NodeFromJson(nlohmann::json::array()).ok());
  EXPECT_FALSE(
      NodeFromJson({{"id", "x"}, {"name", "x"}, {"type", "Nope"}, {"phase", "Running"}}).ok());
}

TEST(WorkflowEngine, TheEtaFollowsTheCriticalPathOfStepsRunningAndStillToCome) {
  FakePool pool(kDiamond);
  pool.Step();
  pool.Succeed("diamond.A", {{"out", "1"}}, "2");
  pool.now += seconds(60);
  pool.Step();
  pool.Run("diamond.B");
  pool.Run("diamond.C");
  pool.Step();
  pool.now += seconds(30);
  StepKnowledge know;
  // B's job says it ends in 10 minutes; C says nothing but echo usually takes 5.
  know.live_eta = [&](const Node& pod) -> std::optional<Duration> {
    if (pod.name == "diamond.B") return std::chrono::minutes(10);
    return std::nullopt;
  };
  know.typical = [](const std::string& tmpl) -> std::optional<Duration> {
    if (tmpl == "echo") return std::chrono::minutes(5);
    return std::nullopt;
  };
  auto steps = PlanTimings(pool.spec(), pool.state, pool.now, know);
  ASSERT_EQ(steps.size(), 4u);
  auto eta = EstimateWorkflow(steps);
  ASSERT_TRUE(eta.ok()) << eta.status().ToString();
  // B's 10 minutes, then D's usual 5; C (4.5 minutes left) is not on the path.
  EXPECT_EQ(eta->remaining, std::chrono::minutes(15));
  EXPECT_THAT(eta->critical_path, ElementsAre("diamond.B", "diamond.D"));
  EXPECT_FALSE(eta->lower_bound);
  EXPECT_EQ(eta->steps_finished, 1);
}

TEST(WorkflowEngine, PodNameMakesPathsOfConcurrentStepsDistinct) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: pods}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - {name: w, template: work, withItems: [a, b]}
  - name: work
    outputs: {parameters: [{name: out, valueFrom: {path: "/tmp/{{pod.name}}/out"}}]}
    container: {image: alpine, command: [sh, -c, "mkdir -p /tmp/{{pod.name}} && echo {{node.name}} > /tmp/{{pod.name}}/out"]}
)y");
  pool.Step();
  const std::string a = pool.JobOf("pods[0].w(0:a)"), b = pool.JobOf("pods[0].w(1:b)");
  EXPECT_EQ(pool.created.at(a).output_paths.at("out"), "/tmp/" + a + "/out");
  EXPECT_EQ(pool.created.at(b).output_paths.at("out"), "/tmp/" + b + "/out");
  EXPECT_THAT(pool.created.at(a).spec.command.at(2), HasSubstr("echo pods[0].w(0:a) > /tmp/" + a));
}

TEST(WorkflowEngine, ATemplateCallingItselfForEverEndsInAnError) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: loop}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - {name: again, template: main}
)y");
  pool.Settle();
  EXPECT_TRUE(pool.state.Finished());
  EXPECT_EQ(pool.state.phase, NodePhase::kFailed);
  bool found = false;
  for (const auto& [id, node] : pool.state.nodes) {
    found = found || node.message == "maximum recursion depth exceeded";
  }
  EXPECT_TRUE(found);
}

TEST(WorkflowEngine, JobNamesAreValidAndDistinctPerWorkflowRun) {
  std::string a = JobNameFor("a.very.long.workflow-name-that-goes-on-and-on-and-on-forever", "u1",
                             "x.y", "train-the-model");
  EXPECT_LE(a.size(), 63u);
  EXPECT_TRUE(IsValidJobName(a)) << a;
  EXPECT_NE(JobNameFor("wf", "u1", "wf.a", "t"), JobNameFor("wf", "u2", "wf.a", "t"));
  EXPECT_NE(JobNameFor("wf", "u1", "wf.a", "t"), JobNameFor("wf", "u1", "wf.b", "t"));
}

TEST(WorkflowEngine, OverriddenParametersComeFirstAndReplaceTheirNamesakes) {
  Arguments args;
  Parameter a, b;
  a.name = "a";
  a.value = "1";
  b.name = "b";
  b.value = "2";
  args.parameters = {a, b};
  std::string error;
  ASSERT_TRUE(OverrideParameters(args, {"b=x=y", "c="}, &error)) << error;
  ASSERT_EQ(args.parameters.size(), 3u);
  EXPECT_EQ(args.parameters[0].name, "b");
  EXPECT_EQ(args.parameters[0].value, "x=y");  // split at the first '=' only
  EXPECT_EQ(args.parameters[1].name, "c");
  EXPECT_EQ(args.parameters[1].value, "");
  EXPECT_EQ(args.parameters[2].name, "a");
  EXPECT_EQ(args.parameters[2].value, "1");
  EXPECT_FALSE(OverrideParameters(args, {"nope"}, &error));
  EXPECT_EQ(error, "expected parameter of the form: NAME=VALUE. Received: nope");
  EXPECT_EQ(args.parameters.size(), 3u);  // unchanged
}

// As Argo names pods (v2): the workflow, the template, a hash; a template
// name that is no valid job name is made one.
TEST(WorkflowEngine, AStepsJobNameSaysItsTemplateAsArgosPodNamesDo) {
  std::smatch m;
  const std::string train = JobNameFor("diamond-dwxxc", "u1", "diamond-dwxxc.B", "train");
  EXPECT_TRUE(std::regex_match(train, m, std::regex("diamond-dwxxc-train-[0-9a-f]{10}"))) << train;
  const std::string odd = JobNameFor("wf", "u1", "wf.x", "Print_Message.v2");
  EXPECT_TRUE(std::regex_match(odd, m, std::regex("wf-print-message-v2-[0-9a-f]{10}"))) << odd;
  EXPECT_TRUE(IsValidJobName(odd)) << odd;
}

}  // namespace
}  // namespace headway::workflow
