// The workflow engine's bounds on a fake pool: nodes a manifest plans before
// it is stored, loops bounded as they expand, steps started per call, and a
// workflow stopped past a bound of the server's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "workflow/engine.h"
#include "workflow/manifest.h"
#include "workflow_fake_pool.h"

namespace headway::workflow {
namespace {

// Nested loops multiply: how many nodes a manifest plans is known before it
// is stored, and a loop sized only as it runs is bounded as it expands.
std::string NestedLoops(const std::string& outer, const std::string& inner) {
  return R"(apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: nested}
spec:
  entrypoint: outer
  templates:
  - name: outer
    steps:
    - - name: row
        template: inner
        )" +
         outer + R"(
  - name: inner
    steps:
    - - name: cell
        template: leaf
        )" +
         inner + R"(
  - name: leaf
    container: {image: busybox, command: ["true"]}
)";
}

TEST(WorkflowEngine, NestedLoopsArePlannedBeforeTheWorkflowIsStored) {
  auto planned = [](const std::string& outer, const std::string& inner) {
    auto manifest = ParseManifest(NestedLoops(outer, inner));
    EXPECT_TRUE(manifest.ok()) << manifest.status().ToString();
    return manifest.ok() ? PlannedNodes(std::get<Workflow>(manifest->resource).spec) : 0;
  };
  const std::size_t small =
      planned("withSequence: {count: \"10\"}", "withSequence: {count: \"10\"}");
  EXPECT_GE(small, 100u);
  EXPECT_LE(small, 150u);
  EXPECT_GT(planned("withSequence: {count: \"300\"}", "withSequence: {count: \"300\"}"),
            kMaxWorkflowNodes);
  EXPECT_GT(planned("withSequence: {start: \"1\", end: \"1000\"}",
                    "withItems: [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s, t, u]"),
            kMaxWorkflowNodes);
  // Sized by a parameter: counted once here, bounded when it expands.
  EXPECT_LT(
      planned("withParam: \"{{workflow.parameters.rows}}\"", "withSequence: {count: \"300\"}"),
      kMaxWorkflowNodes);
  // From start to end, counting down as Argo's does too.
  EXPECT_GT(planned("withSequence: {start: \"5000\", end: \"-5000\"}", "withItems: [a, b]"),
            kMaxWorkflowNodes);
}

TEST(WorkflowEngine, PlanningADeepChainOfTemplatesTakesNoLongerThanReadingIt) {
  // t0 calls t1 twice, t1 calls t2 twice, ... t59: 2^60 nodes, counted once
  // per template (walked per call, the count would take ages).
  std::string yaml =
      "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: chain}\n"
      "spec:\n  entrypoint: t0\n  templates:\n";
  for (int i = 0; i < 59; ++i) {
    const std::string next = "t" + std::to_string(i + 1);
    yaml += "  - name: t" + std::to_string(i) +
            "\n    steps:\n    - - {name: a, template: " + next +
            "}\n      - {name: b, template: " + next + "}\n";
  }
  yaml += "  - name: t59\n    container: {image: busybox, command: [\"true\"]}\n";
  auto manifest = ParseManifest(yaml);
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  EXPECT_GT(PlannedNodes(std::get<Workflow>(manifest->resource).spec), kMaxWorkflowNodes);
}

TEST(WorkflowEngine, ALoopSizedAsItRunsStopsAtTheWorkflowsNodeLimit) {
  // 300 rows of a parameter's length (known only now), 300 cells each.
  std::string rows = "[";
  for (int i = 0; i < 300; ++i) rows += (i ? "," : "") + std::to_string(i);
  rows += "]";
  std::string yaml =
      NestedLoops("withParam: \"{{workflow.parameters.rows}}\"", "withSequence: {count: \"300\"}");
  yaml.replace(
      yaml.find("  entrypoint: outer\n"), 19,
      "  entrypoint: outer\n  arguments: {parameters: [{name: rows, value: '" + rows + "'}]}\n");
  FakePool pool(yaml);
  pool.Settle();
  // Checked as each loop expands: past the limit by at most that loop's
  // structure, never by another loop's worth.
  EXPECT_LE(pool.state.nodes.size(), kMaxWorkflowNodes + 1000);
  EXPECT_LE(pool.created.size(), kMaxWorkflowNodes);
  EXPECT_TRUE(pool.state.Finished());
  EXPECT_NE(pool.state.phase, NodePhase::kSucceeded) << pool.state.message;
  bool told = false;
  for (const auto& [id, node] : pool.state.nodes) {
    told =
        told || node.message.find("past the workflow's limit of 20000 nodes") != std::string::npos;
  }
  EXPECT_TRUE(told);
}

TEST(WorkflowEngine, AWideFanOutStartsAFewStepsPerPassAndTheRestLater) {
  FakePool pool(NestedLoops("withSequence: {count: \"1\"}", "withSequence: {count: \"450\"}"));
  pool.max_new_pods = 200;
  EXPECT_EQ(pool.Step().create.size(), 200u);
  EXPECT_EQ(pool.Step().create.size(), 200u);
  EXPECT_EQ(pool.Step().create.size(), 50u);
  EXPECT_EQ(pool.created.size(), 450u);
  // A team at its queued-job bound starts none, and nothing fails meanwhile.
  FakePool held(NestedLoops("withSequence: {count: \"1\"}", "withSequence: {count: \"5\"}"));
  held.max_new_pods = 0;
  held.Settle();
  EXPECT_TRUE(held.created.empty());
  EXPECT_EQ(held.state.phase, NodePhase::kRunning);
  held.max_new_pods = 200;
  EXPECT_EQ(held.Step().create.size(), 5u);
}

// Past a bound of the server's (the bytes of its status), a workflow stops
// as a terminate stops it: its running steps' jobs are stopped, no exit
// handler runs, and the reason is its message.
TEST(WorkflowEngine, AWorkflowPastTheServersBoundStopsAndSaysWhy) {
  FakePool pool(NestedLoops("withSequence: {count: \"1\"}", "withSequence: {count: \"3\"}"));
  pool.Step();
  ASSERT_EQ(pool.created.size(), 3u);
  pool.stop_reason = "its status holds 99 bytes, more than a workflow may (64): stopped";
  pool.Settle();
  EXPECT_EQ(pool.stops.size(), 3u);
  EXPECT_TRUE(pool.state.Finished());
  EXPECT_EQ(pool.state.phase, NodePhase::kFailed);
  EXPECT_EQ(pool.state.message, pool.stop_reason);
  EXPECT_EQ(pool.created.size(), 3u);
}

TEST(WorkflowEngine, ALoopPastWhatItsTeamMayStillHoldIsItsStepsError) {
  FakePool pool(NestedLoops("withSequence: {count: \"1\"}", "withSequence: {count: \"100\"}"));
  pool.max_nodes = 50;
  pool.Settle();
  EXPECT_TRUE(pool.created.empty());
  EXPECT_TRUE(pool.state.Finished());
  bool told = false;
  for (const auto& [id, node] : pool.state.nodes) {
    told = told ||
           node.message.find("past what its team may still hold of 50 nodes") != std::string::npos;
  }
  EXPECT_TRUE(told);
}

}  // namespace
}  // namespace headway::workflow
