// Pull mode's format (OpenShift AI's KubeflowProgressCallback): what a poll
// becomes, and why a re-served value is not a new point.
#include "core/pulled_progress.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace headway {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

TEST(PulledProgress, ReadsTheCallbacksFields) {
  PulledState last;
  auto r = ParsePulledProgress(R"j({"progressPercentage": 45, "estimatedRemainingSeconds": 120,
      "currentStep": 90, "totalSteps": 200, "currentEpoch": 1.8, "totalEpochs": 4,
      "trainMetrics": {"loss": 0.41, "learning_rate": 0.0001, "note": "warmup"},
      "evalMetrics": {"eval_loss": 0.52, "eval_f1 (macro)": 0.7}})j",
                               last);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  const ProgressReport& p = **r;
  EXPECT_EQ(p.step, 90);
  EXPECT_EQ(p.total_steps, 200);
  EXPECT_EQ(p.epoch, 1.8);
  EXPECT_EQ(p.total_epochs, 4);
  EXPECT_EQ(p.remaining_seconds, 120);
  // Numbers, under any name the Kubeflow endpoint takes too; text is left out.
  EXPECT_THAT(p.metrics, ElementsAre(Pair("eval_f1 (macro)", 0.7), Pair("eval_loss", 0.52),
                                     Pair("learning_rate", 0.0001), Pair("loss", 0.41)));
}

TEST(PulledProgress, AReServedEvaluationIsNotASecondPoint) {
  PulledState last;
  ASSERT_TRUE(
      ParsePulledProgress(R"({"currentStep": 100, "evalMetrics": {"eval_loss": 0.5}})", last).ok());
  // Nothing new: no report at all (a hung job serving the same page stays stalled).
  auto same =
      ParsePulledProgress(R"({"currentStep": 100, "evalMetrics": {"eval_loss": 0.5}})", last);
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->has_value());
  // Training moved on; the evaluation did not: only the step is new.
  auto moved = ParsePulledProgress(
      R"({"currentStep": 150, "trainMetrics": {"loss": 0.4}, "evalMetrics": {"eval_loss": 0.5}})",
      last);
  ASSERT_TRUE(moved.ok() && moved->has_value());
  EXPECT_EQ((*moved)->step, 150);
  EXPECT_THAT((*moved)->metrics, ElementsAre(Pair("loss", 0.4)));
  auto eval =
      ParsePulledProgress(R"({"currentStep": 200, "evalMetrics": {"eval_loss": 0.45}})", last);
  ASSERT_TRUE(eval.ok() && eval->has_value());
  EXPECT_THAT((*eval)->metrics, ElementsAre(Pair("eval_loss", 0.45)));
}

TEST(PulledProgress, PythonsNanAndInfinityAreRead) {
  PulledState last;
  auto r = ParsePulledProgress(
      R"({"currentStep": 3, "trainMetrics": {"loss": NaN, "grad_norm": Infinity, "x": -Infinity}, "note": "NaN"})",
      last);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  EXPECT_TRUE(std::isnan((*r)->metrics.at("loss")));
  EXPECT_EQ((*r)->metrics.at("grad_norm"), INFINITY);
  EXPECT_EQ((*r)->metrics.at("x"), -INFINITY);
}

TEST(PulledProgress, APercentageAloneIsAStepOfAHundred) {
  PulledState last;
  auto r = ParsePulledProgress(R"({"progressPercentage": 37})", last);
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->step, 37);
  EXPECT_EQ((*r)->total_steps, 100);
}

TEST(PulledProgress, WhatIsNotProgressIsAnError) {
  PulledState last;
  EXPECT_FALSE(ParsePulledProgress("<html>", last).ok());
  EXPECT_FALSE(ParsePulledProgress("[1, 2]", last).ok());
  EXPECT_FALSE(ParsePulledProgress(R"({"trainMetrics": {"loss": 1}})", last).ok());
  EXPECT_FALSE(ParsePulledProgress(R"({"currentStep": -4})", last).ok());
  EXPECT_THAT(last.metrics, IsEmpty());
}

}  // namespace
}  // namespace headway
