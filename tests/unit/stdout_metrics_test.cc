// `name=value` metric lines as Katib's StdOut collector reads them.
#include "core/stdout_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace headway {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

TEST(StdoutMetrics, ReadsTheListedNamesAnywhereInALine) {
  const std::set<std::string> names = {"loss", "accuracy", "Validation-accuracy"};
  EXPECT_THAT(ParseStdoutMetrics("epoch 3: loss=0.25 accuracy=0.91", names),
              ElementsAre(Pair("accuracy", 0.91), Pair("loss", 0.25)));
  EXPECT_THAT(ParseStdoutMetrics("INFO Validation-accuracy = 9.8e-01 lr=0.1", names),
              ElementsAre(Pair("Validation-accuracy", 0.98)));
  EXPECT_THAT(ParseStdoutMetrics("loss=-.5", names), ElementsAre(Pair("loss", -0.5)));
}

TEST(StdoutMetrics, IgnoresWhatIsNotAListedNumber) {
  const std::set<std::string> names = {"loss"};
  EXPECT_THAT(ParseStdoutMetrics("lr=0.1 steps=3", names), IsEmpty());
  EXPECT_THAT(ParseStdoutMetrics("loss=nan loss=abc loss= ", names), IsEmpty());
  EXPECT_THAT(ParseStdoutMetrics("myloss=0.3", names), IsEmpty());
  EXPECT_THAT(ParseStdoutMetrics("loss=1e999", names), IsEmpty());  // not finite
  EXPECT_THAT(ParseStdoutMetrics("loss=0.3", {}), IsEmpty());
}

TEST(StdoutMetrics, TheLabelListsTheNames) {
  JobSpec spec;
  EXPECT_THAT(StdoutMetricNames(spec), IsEmpty());
  spec.labels["headway.dev/stdout-metrics"] = "loss, accuracy,,";
  EXPECT_THAT(StdoutMetricNames(spec), ElementsAre("accuracy", "loss"));
}

}  // namespace
}  // namespace headway
