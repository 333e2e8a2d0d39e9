// The critical-path ETA and the health of a workflow, on hand-made timings.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "workflow/progress.h"

namespace headway::workflow {
namespace {

using std::chrono::minutes;
using ::testing::ElementsAre;

StepTiming Pending(std::string id, std::vector<std::string> after,
                   std::optional<Duration> expected) {
  StepTiming s;
  s.id = std::move(id);
  s.after = std::move(after);
  s.expected = expected;
  return s;
}

StepTiming Running(std::string id, std::vector<std::string> after, Duration elapsed,
                   std::optional<Duration> eta, std::optional<Duration> expected = std::nullopt) {
  StepTiming s = Pending(std::move(id), std::move(after), expected);
  s.state = StepState::kRunning;
  s.elapsed = elapsed;
  s.eta = eta;
  return s;
}

StepTiming Finished(std::string id, std::vector<std::string> after, Duration took) {
  StepTiming s = Pending(std::move(id), std::move(after), took);
  s.state = StepState::kFinished;
  return s;
}

// The diamond A -> (B, C) -> D: A done, B running with a live ETA, C not
// started; D waits for both.
TEST(WorkflowEta, TheLongerBranchOfADiamondSetsTheEta) {
  auto eta = EstimateWorkflow(
      {Finished("A", {}, minutes(5)), Running("B", {"A"}, minutes(10), minutes(30)),
       Pending("C", {"A"}, minutes(20)), Pending("D", {"B", "C"}, minutes(15))});
  ASSERT_TRUE(eta.ok()) << eta.status().ToString();
  // B ends in 30, C (not started: it starts now, A being done) in 20; D after B.
  EXPECT_EQ(eta->remaining, minutes(45));
  EXPECT_THAT(eta->critical_path, ElementsAre("B", "D"));
  EXPECT_FALSE(eta->lower_bound);
  EXPECT_EQ(eta->steps_finished, 1);
  EXPECT_EQ(eta->steps_total, 4);
  // Done: A's 5 and B's 10; to do: B's 30, C's 20, D's 15.
  EXPECT_DOUBLE_EQ(eta->fraction_done, 15.0 / 80.0);
}

TEST(WorkflowEta, ALiveEtaOutweighsTheTemplatesHistory) {
  // B usually takes 40 minutes but its job says it ends in 5: the other branch leads.
  auto eta = EstimateWorkflow({Running("B", {}, minutes(35), minutes(5), minutes(40)),
                               Running("C", {}, minutes(1), std::nullopt, minutes(20)),
                               Pending("D", {"B", "C"}, minutes(10))});
  ASSERT_TRUE(eta.ok());
  EXPECT_EQ(eta->remaining, minutes(29));
  EXPECT_THAT(eta->critical_path, ElementsAre("C", "D"));
}

TEST(WorkflowEta, AStepPastItsTypicalDurationCountsAsEndingNow) {
  auto eta = EstimateWorkflow({Running("slow", {}, minutes(50), std::nullopt, minutes(30)),
                               Pending("next", {"slow"}, minutes(10))});
  ASSERT_TRUE(eta.ok());
  EXPECT_EQ(eta->remaining, minutes(10));
}

TEST(WorkflowEta, StepsWithoutAnyEstimateMakeItALowerBoundAndAreNamed) {
  auto eta = EstimateWorkflow({Running("train", {}, minutes(3), std::nullopt),
                               Pending("eval", {"train"}, minutes(4)),
                               Pending("new-step", {"eval"}, std::nullopt)});
  ASSERT_TRUE(eta.ok());
  EXPECT_TRUE(eta->lower_bound);
  EXPECT_THAT(eta->unestimated, ElementsAre("train", "new-step"));
  EXPECT_EQ(eta->remaining, minutes(4));
}

TEST(WorkflowEta, AFinishedWorkflowHasNothingLeft) {
  auto eta = EstimateWorkflow({Finished("a", {}, minutes(1)), Finished("b", {"a"}, minutes(2))});
  ASSERT_TRUE(eta.ok());
  EXPECT_EQ(eta->remaining, Duration(0));
  EXPECT_TRUE(eta->critical_path.empty());
  EXPECT_DOUBLE_EQ(eta->fraction_done, 1.0);
  auto empty = EstimateWorkflow({});
  ASSERT_TRUE(empty.ok());
  EXPECT_DOUBLE_EQ(empty->fraction_done, 0.0);
}

TEST(WorkflowEta, WithoutAnyTimesItCountsSteps) {
  auto eta =
      EstimateWorkflow({Finished("a", {}, Duration(0)), Pending("b", {"a"}, std::nullopt),
                        Pending("c", {"a"}, std::nullopt), Pending("d", {"b"}, std::nullopt)});
  ASSERT_TRUE(eta.ok());
  EXPECT_DOUBLE_EQ(eta->fraction_done, 0.25);
  EXPECT_TRUE(eta->lower_bound);
}

TEST(WorkflowEta, AWideFanOutIsAsLongAsItsLongestChild) {
  std::vector<StepTiming> steps = {Finished("split", {}, minutes(1))};
  std::vector<std::string> children;
  for (int i = 0; i < 5000; ++i) {
    children.push_back("work-" + std::to_string(i));
    steps.push_back(Pending(children.back(), {"split"}, minutes(i % 7 + 1)));
  }
  steps.push_back(Pending("join", children, minutes(2)));
  auto eta = EstimateWorkflow(steps);
  ASSERT_TRUE(eta.ok());
  EXPECT_EQ(eta->remaining, minutes(9));
  EXPECT_THAT(eta->critical_path, ElementsAre("work-6", "join"));
}

TEST(WorkflowEta, BadGraphsAreRefusedByName) {
  auto unknown = EstimateWorkflow({Pending("a", {"ghost"}, minutes(1))});
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), ::testing::HasSubstr("'ghost'"));
  auto twice = EstimateWorkflow({Pending("a", {}, minutes(1)), Pending("a", {}, minutes(1))});
  EXPECT_THAT(twice.status().message(), ::testing::HasSubstr("appears twice"));
  auto cycle = EstimateWorkflow({Pending("a", {"b"}, minutes(1)), Pending("b", {"a"}, minutes(1)),
                                 Pending("c", {}, minutes(1))});
  EXPECT_THAT(cycle.status().message(), ::testing::HasSubstr("cycle"));
}

TEST(WorkflowHealthTest, OneStalledStepMakesTheWorkflowStalled) {
  EXPECT_EQ(WorkflowHealth({}), Health::kUnknown);
  EXPECT_EQ(WorkflowHealth({Health::kProgressing, Health::kUnknown}), Health::kProgressing);
  EXPECT_EQ(WorkflowHealth({Health::kProgressing, Health::kStalled, Health::kPlateaued}),
            Health::kStalled);
  EXPECT_EQ(WorkflowHealth({Health::kStalled, Health::kDiverging}), Health::kDiverging);
}

}  // namespace
}  // namespace headway::workflow
