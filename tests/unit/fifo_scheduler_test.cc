#include "sched/fifo_scheduler.h"

#include <gtest/gtest.h>

namespace headway::sched {
namespace {

TEST(FifoScheduler, StartsJobsInSubmissionOrderWhileGpusLast) {
  FifoDecision d = ScheduleFifo({{"a", 2, 0, 1}, {"b", 1, 0, 2}, {"c", 1, 0, 3}}, {0, 1, 2}, 4);
  ASSERT_EQ(d.starts.size(), 2u);
  EXPECT_EQ(d.starts[0].job, "a");
  EXPECT_EQ(d.starts[0].gpu_ids, (std::vector<int>{0, 1}));
  EXPECT_EQ(d.starts[1].job, "b");
  EXPECT_EQ(d.starts[1].gpu_ids, (std::vector<int>{2}));
  EXPECT_EQ(d.pending_reasons.at("c"), "waiting for 1 GPUs (0 of 4 free)");
}

TEST(FifoScheduler, HeadThatDoesNotFitBlocksEveryoneBehindIt) {
  FifoDecision d =
      ScheduleFifo({{"big", 4, 0, 1}, {"small", 1, 0, 2}, {"cpu", 0, 0, 3}}, {0, 1}, 4);
  EXPECT_TRUE(d.starts.empty());
  EXPECT_EQ(d.pending_reasons.at("big"), "waiting for 4 GPUs (2 of 4 free)");
  EXPECT_EQ(d.pending_reasons.at("small"), "waiting behind big");
  EXPECT_EQ(d.pending_reasons.at("cpu"), "waiting behind big");
}

TEST(FifoScheduler, PriorityBeatsSubmissionOrder) {
  FifoDecision d = ScheduleFifo({{"early", 1, 0, 1}, {"urgent", 1, 5, 2}}, {3}, 4);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, "urgent");
  EXPECT_EQ(d.starts[0].gpu_ids, (std::vector<int>{3}));
  EXPECT_EQ(d.pending_reasons.at("early"), "waiting for 1 GPUs (0 of 4 free)");
}

TEST(FifoScheduler, CpuJobsRunWithoutGpus) {
  FifoDecision d = ScheduleFifo({{"cpu1", 0, 0, 1}, {"cpu2", 0, 0, 2}}, {}, 0);
  ASSERT_EQ(d.starts.size(), 2u);
  EXPECT_TRUE(d.starts[0].gpu_ids.empty());
}

TEST(FifoScheduler, ExplainsAJobLargerThanThePool) {
  FifoDecision d = ScheduleFifo({{"huge", 16, 0, 1}}, {0, 1, 2, 3}, 4);
  EXPECT_EQ(d.pending_reasons.at("huge"), "needs 16 GPUs but the pool has only 4");
}

TEST(FifoScheduler, FreeGpuOrderDoesNotMatter) {
  FifoDecision d = ScheduleFifo({{"a", 2, 0, 1}}, {3, 1, 2}, 4);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].gpu_ids, (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace headway::sched
