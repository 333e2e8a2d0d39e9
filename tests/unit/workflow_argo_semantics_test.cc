// Argo semantics that real workflows and Hera's scripts rely on, each as
// Argo's controller does it: global outputs, inputs substituted with global
// variables, the workflow's argument artifacts, templateRef scopes, exit
// hooks and memoization caches.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "workflow/engine.h"
#include "workflow/manifest.h"
#include "workflow_fake_pool.h"

namespace headway::workflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(WorkflowArgoSemantics, GlobalOutputsArePublishedWhenTheirStepEndsAndLaterStepsReadThem) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: glob}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - {name: make, template: make}
    - - name: use
        template: use
        arguments:
          parameters: [{name: v, value: "{{workflow.outputs.parameters.version}}"}]
          artifacts: [{name: m, from: "{{workflow.outputs.artifacts.model}}"}]
  - name: make
    outputs:
      parameters: [{name: v, globalName: version, valueFrom: {path: /tmp/v}}]
      artifacts: [{name: out, path: /tmp/model, globalName: model}]
    container: {image: alpine, command: [sh, -c, "echo 3 > /tmp/v"]}
  - name: use
    inputs:
      parameters: [{name: v}]
      artifacts: [{name: m, path: /in/model}]
    container: {image: alpine, command: [echo, "{{inputs.parameters.v}}"]}
)y");
  pool.Step();
  pool.Succeed("glob[0].make", {{"v", "3\n"}});
  pool.jobs.at(pool.JobOf("glob[0].make")).artifacts["out"] = "glob-make-out:1";
  pool.Step();
  // Published at once: the next group reads both in the same pass.
  ASSERT_THAT(pool.state.outputs, ElementsAre(NodeParameter{"version", "3"}));
  ASSERT_EQ(pool.state.output_artifacts.size(), 1u);
  EXPECT_EQ(pool.state.output_artifacts[0].name, "model");
  EXPECT_EQ(pool.state.output_artifacts[0].ref, "glob-make-out:1");
  EXPECT_THAT(pool.SpecOf("glob[1].use").command, ElementsAre("echo", "3"));
  const JobToCreate& use = pool.created.at(pool.JobOf("glob[1].use"));
  ASSERT_EQ(use.input_artifacts.size(), 1u);
  EXPECT_EQ(use.input_artifacts[0].ref, "glob-make-out:1");
  pool.Succeed("glob[1].use");
  pool.Settle();
  EXPECT_EQ(pool.state.phase, NodePhase::kSucceeded);
  EXPECT_EQ(pool.state.outputs.size(), 1u);  // published once, not again per pass
}

TEST(WorkflowArgoSemantics, AGlobalOutputOfADagTaskIsReadByTheTaskAfterItAndOverwritten) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: gdag}
spec:
  entrypoint: main
  templates:
  - name: main
    dag:
      tasks:
      - {name: a, template: make, arguments: {parameters: [{name: x, value: "1"}]}}
      - {name: b, template: use, dependencies: [a]}
      - {name: c, template: make, dependencies: [b], arguments: {parameters: [{name: x, value: "2"}]}}
  - name: make
    inputs: {parameters: [{name: x}]}
    outputs: {parameters: [{name: v, globalName: g, value: "v{{inputs.parameters.x}}"}]}
    container: {image: alpine, command: [echo]}
  - name: use
    container: {image: alpine, command: [echo, "{{workflow.outputs.parameters.g}}"]}
)y");
  pool.Step();
  pool.Succeed("gdag.a");
  pool.Step();
  EXPECT_THAT(pool.SpecOf("gdag.b").command, ElementsAre("echo", "v1"));
  pool.Succeed("gdag.b");
  pool.Step();
  pool.Succeed("gdag.c");
  pool.Settle();
  EXPECT_EQ(pool.state.phase, NodePhase::kSucceeded);
  EXPECT_THAT(pool.state.outputs, ElementsAre(NodeParameter{"g", "v2"}));
}

TEST(WorkflowArgoSemantics, InputDefaultsAreSubstitutedWithGlobalVariablesInAnExitHandler) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: exd}
spec:
  entrypoint: main
  onExit: report
  arguments: {parameters: [{name: who, value: ops}]}
  templates:
  - name: main
    container: {image: alpine, command: [sh, -c, "exit 1"]}
  - name: report
    inputs:
      parameters:
      - {name: status, default: "{{workflow.status}}"}
      - {name: to, value: "{{workflow.parameters.who}}@{{workflow.name}}"}
    container: {image: alpine, command: [echo, "{{inputs.parameters.status}}", "{{inputs.parameters.to}}"]}
)y");
  pool.Step();
  pool.Fail("exd");
  pool.Step();
  EXPECT_THAT(pool.SpecOf("exd.onExit").command, ElementsAre("echo", "Failed", "ops@exd"));
  EXPECT_EQ(pool.NodeNamed("exd.onExit").inputs.at(0).value, "Failed");
}

TEST(WorkflowArgoSemantics, TheWorkflowsArgumentArtifactsReachTheEntrypointsInputs) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: args}
spec:
  entrypoint: main
  arguments:
    artifacts:
    - {name: cfg, raw: {data: "lr: {{workflow.name}}"}}
    - {name: data, s3: {key: datasets/train.csv}}
  templates:
  - name: main
    inputs:
      artifacts: [{name: cfg, path: /in/cfg.yaml}, {name: data, path: /in/train.csv}]
    container: {image: alpine, command: [cat, /in/cfg.yaml]}
)y");
  pool.Step();
  ASSERT_EQ(pool.state.phase, NodePhase::kRunning) << pool.NodeNamed("args").message;
  const JobToCreate& job = pool.created.at(pool.JobOf("args"));
  ASSERT_EQ(job.input_artifacts.size(), 2u);
  EXPECT_EQ(job.input_artifacts[0].path, "/in/cfg.yaml");
  EXPECT_EQ(job.input_artifacts[0].raw, "lr: args");
  EXPECT_EQ(job.input_artifacts[1].ref, "datasets.train.csv");
}

TEST(WorkflowArgoSemantics,
     InsideATemplateReachedByTemplateRefAPlainTemplateIsThatWorkflowTemplates) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: refs}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - name: lib
        templateRef: {name: lib, template: pipeline}
  - name: echo
    container: {image: alpine, command: [echo, from-the-workflow]}
)y");
  pool.AddWorkflowTemplate(R"y(
apiVersion: argoproj.io/v1alpha1
kind: WorkflowTemplate
metadata: {name: lib}
spec:
  templates:
  - name: pipeline
    dag:
      tasks:
      - {name: a, template: echo}
      - {name: b, template: inner, dependencies: [a]}
  - name: inner
    steps:
    - - {name: c, template: echo}
  - name: echo
    container: {image: alpine, command: [echo, from-lib]}
)y");
  pool.Step();
  EXPECT_THAT(pool.SpecOf("refs[0].lib.a").command, ElementsAre("echo", "from-lib"));
  EXPECT_EQ(pool.NodeNamed("refs[0].lib.a").template_ref, "lib/echo");
  pool.Succeed("refs[0].lib.a");
  pool.Step();
  EXPECT_THAT(pool.SpecOf("refs[0].lib.b[0].c").command, ElementsAre("echo", "from-lib"));
  pool.Succeed("refs[0].lib.b[0].c");
  pool.Settle();
  EXPECT_EQ(pool.state.phase, NodePhase::kSucceeded);
}

constexpr char kExitHooks[] = R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: hooks}
spec:
  entrypoint: main
  arguments: {parameters: [{name: team, value: vision}]}
  templates:
  - name: main
    steps:
    - - name: train
        template: train
        hooks:
          exit:
            template: report
            arguments:
              parameters: [{name: loss, value: "{{steps.train.outputs.parameters.loss}}"}]
          running: {template: report, expression: "steps.train.status == 'Running'"}
    - - name: eval
        template: train
        hooks: {exit: {template: notify}}
  - name: train
    outputs: {parameters: [{name: loss, valueFrom: {path: /tmp/loss}}]}
    container: {image: alpine, command: [train]}
  - name: report
    inputs: {parameters: [{name: loss}]}
    container: {image: alpine, command: [echo, "{{inputs.parameters.loss}}"]}
  - name: notify
    inputs: {parameters: [{name: team}]}
    container: {image: alpine, command: [echo, "{{inputs.parameters.team}}", "{{steps.status}}"]}
)y";

TEST(WorkflowArgoSemantics, AStepsExitHookRunsAsItsOnExitWithItsOutputsAndOtherHooksWarn) {
  auto manifest = ParseManifest(kExitHooks);
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  ASSERT_EQ(manifest->warnings.size(), 1u);
  EXPECT_EQ(manifest->warnings[0].field, "spec.templates[0].steps[0][0].hooks.running");
  EXPECT_THAT(manifest->warnings[0].message, HasSubstr("only the exit hook"));
  // Written back as it was.
  const Workflow& wf = std::get<Workflow>(manifest->resource);
  EXPECT_TRUE(ToJson(wf)["spec"]["templates"][0]["steps"][0][0]["hooks"].contains("running"));

  FakePool pool(kExitHooks);
  pool.Step();
  pool.Succeed("hooks[0].train", {{"loss", "0.25"}});
  pool.Step();
  // The hook runs before the next group starts, given the step's outputs.
  EXPECT_THAT(pool.SpecOf("hooks[0].train.onExit").command, ElementsAre("echo", "0.25"));
  EXPECT_TRUE(pool.NodeNamed("hooks[0].train.onExit").on_exit);
  EXPECT_EQ(pool.state.FindByName("hooks[1].eval"), nullptr);
  pool.Succeed("hooks[0].train.onExit");
  pool.Step();
  pool.Fail("hooks[1].eval");
  pool.Step();
  // A hook without arguments is given the workflow's.
  EXPECT_THAT(pool.SpecOf("hooks[1].eval.onExit").command, ElementsAre("echo", "vision", "Failed"));
  pool.Succeed("hooks[1].eval.onExit");
  pool.Settle();
  EXPECT_EQ(pool.state.phase, NodePhase::kFailed);
}

TEST(WorkflowArgoSemantics, ADagTasksExitHookRunsAsItsOnExit) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: dh}
spec:
  entrypoint: main
  templates:
  - name: main
    dag:
      tasks:
      - {name: a, template: work, hooks: {exit: {template: bye}}}
      - {name: b, template: work, dependencies: [a]}
  - name: work
    container: {image: alpine, command: [work]}
  - name: bye
    container: {image: alpine, command: [echo, "{{tasks.status}}"]}
)y");
  pool.Step();
  pool.Succeed("dh.a");
  pool.Step();
  EXPECT_THAT(pool.SpecOf("dh.a.onExit").command, ElementsAre("echo", "Succeeded"));
  EXPECT_EQ(pool.state.FindByName("dh.b"), nullptr);  // after the hook
  pool.Succeed("dh.a.onExit");
  pool.Step();
  pool.Succeed("dh.b");
  pool.Settle();
  EXPECT_EQ(pool.state.phase, NodePhase::kSucceeded);
}

TEST(WorkflowArgoSemantics, TheMemoizationStatusNamesTheCachesConfigMap) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: memo}
spec:
  entrypoint: main
  templates:
  - name: main
    memoize:
      key: "k"
      cache: {configMap: {name: my-cache}}
    container: {image: alpine, command: [echo]}
)y");
  pool.Step();
  pool.Succeed("memo");
  pool.Settle();
  ASSERT_EQ(pool.memo.count("my-cache/k"), 1u);
  const nlohmann::json j = ToJson(pool.NodeNamed("memo"));
  EXPECT_EQ(j["memoizationStatus"]["cacheName"], "my-cache");
  auto back = NodeFromJson(j);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->memo_cache, "my-cache");
}

TEST(WorkflowArgoSemantics, ACronWorkflowsRunReadsItsScheduledTime) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: nightly-1764842400
  annotations: {workflows.argoproj.io/scheduled-time: "2026-12-04T10:00:00Z"}
spec:
  entrypoint: main
  templates:
  - name: main
    container: {image: alpine, command: [echo, "{{workflow.scheduledTime}}"]}
)y");
  pool.Step();
  EXPECT_THAT(pool.SpecOf("nightly-1764842400").command,
              ElementsAre("echo", "2026-12-04T10:00:00Z"));
}

TEST(WorkflowArgoSemantics, TheWorkflowsExitHookRunsAsItsOnExitWithItsArguments) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: wh}
spec:
  entrypoint: main
  arguments: {parameters: [{name: channel, value: ops}]}
  hooks:
    exit:
      template: notify
      arguments:
        parameters: [{name: text, value: "{{workflow.name}} {{workflow.status}}"}]
  templates:
  - name: main
    container: {image: alpine, command: [work]}
  - name: notify
    inputs: {parameters: [{name: text}, {name: channel, default: none}]}
    container: {image: alpine, command: [echo, "{{inputs.parameters.text}}", "{{inputs.parameters.channel}}"]}
)y");
  pool.Step();
  pool.Succeed("wh");
  pool.Step();
  EXPECT_THAT(pool.SpecOf("wh.onExit").command, ElementsAre("echo", "wh Succeeded", "none"));
  pool.Succeed("wh.onExit");
  pool.Settle();
  EXPECT_EQ(pool.state.phase, NodePhase::kSucceeded);
}

TEST(WorkflowArgoSemantics, AnOnExitHandlerIsGivenTheWorkflowsArguments) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: wa}
spec:
  entrypoint: main
  onExit: notify
  arguments: {parameters: [{name: channel, value: ops}]}
  templates:
  - name: main
    container: {image: alpine, command: [work]}
  - name: notify
    inputs: {parameters: [{name: channel, default: none}]}
    container: {image: alpine, command: [echo, "{{inputs.parameters.channel}}"]}
)y");
  pool.Step();
  pool.Succeed("wa");
  pool.Step();
  EXPECT_THAT(pool.SpecOf("wa.onExit").command, ElementsAre("echo", "ops"));
}

TEST(WorkflowArgoSemantics, RetryingASingleContainerEntrypointRunsItAgainAsANewJob) {
  FakePool pool(R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: one}
spec:
  entrypoint: main
  templates:
  - name: main
    container: {image: alpine, command: [work]}
)y");
  pool.Step();
  const std::string first = pool.JobOf("one");
  pool.Fail("one");
  pool.Settle();
  ASSERT_EQ(pool.state.phase, NodePhase::kFailed);
  std::string error;
  ASSERT_TRUE(Retry(pool.state, false, "", &error)) << error;
  pool.Step();
  EXPECT_EQ(pool.state.phase, NodePhase::kRunning);
  const std::string second = pool.JobOf("one");
  EXPECT_NE(second, first);
  EXPECT_THAT(pool.Active(), ElementsAre("one"));
  pool.Succeed("one");
  pool.Settle();
  EXPECT_EQ(pool.state.phase, NodePhase::kSucceeded);
}

}  // namespace
}  // namespace headway::workflow
