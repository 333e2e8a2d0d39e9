#include "sched/run_time_history.h"

#include <gtest/gtest.h>

namespace headway::sched {
namespace {

using std::chrono::hours;
using std::chrono::minutes;

TEST(RunTimeHistory, NothingIsKnownUntilAKeyHasEnoughRuns) {
  RunTimeHistory history(20, 3);
  EXPECT_FALSE(history.Expect({"user:alice"}).has_value());
  history.Record({"user:alice"}, minutes(10));
  history.Record({"user:alice"}, minutes(20));
  EXPECT_FALSE(history.Expect({"user:alice"}).has_value());
  history.Record({"user:alice"}, minutes(30));
  EXPECT_EQ(history.Expect({"user:alice"}), minutes(20));
}

TEST(RunTimeHistory, TheMedianIgnoresOneOutlier) {
  RunTimeHistory history(20, 3);
  for (Duration d :
       {Duration(minutes(10)), Duration(minutes(12)), Duration(hours(48)), Duration(minutes(11))}) {
    history.Record({"u"}, d);
  }
  // Even count: halfway between the middle two (11 and 12 min).
  EXPECT_EQ(history.Expect({"u"}), minutes(11) + std::chrono::seconds(30));
}

TEST(RunTimeHistory, TheMostSpecificKeyWithEnoughRunsWins) {
  RunTimeHistory history(20, 3);
  for (int i = 0; i < 3; ++i) history.Record({"user:bob", "team:nlp"}, hours(5));
  for (int i = 0; i < 3; ++i) history.Record({"user:carol", "team:nlp"}, minutes(5));
  EXPECT_EQ(history.Expect({"user:bob", "team:nlp"}), hours(5));
  // A newcomer to the team gets the team's median.
  auto team = history.Expect({"user:dave", "team:nlp"});
  ASSERT_TRUE(team.has_value());
  EXPECT_GT(*team, minutes(5));
  EXPECT_LT(*team, hours(5));
}

TEST(RunTimeHistory, OnlyTheLastWindowOfRunsCounts) {
  RunTimeHistory history(3, 3);
  for (int i = 0; i < 3; ++i) history.Record({"u"}, hours(10));
  for (int i = 0; i < 3; ++i) history.Record({"u"}, minutes(7));
  EXPECT_EQ(history.Expect({"u"}), minutes(7));
  history.Record({"u"}, Duration(-5));  // ignored
  EXPECT_EQ(history.Expect({"u"}), minutes(7));
}

}  // namespace
}  // namespace headway::sched
