// The GPU-idle rule of batch jobs (policies.on_gpu_idle) on a fake clock.
#include "core/gpu_idle.h"

#include <gtest/gtest.h>

namespace headway {
namespace {

using namespace std::chrono_literals;
using Action = GpuIdleVerdict::Action;

HealthPolicies Policy(HealthAction action) {
  HealthPolicies p;
  p.on_gpu_idle = action;
  p.gpu_idle_after = 10min;
  p.gpu_idle_below_percent = 5;
  return p;
}

TEST(GpuIdle, ActsOnceWhenEveryGpuHasBeenIdleForTheWholeWindow) {
  const Time start{};
  GpuIdleWatch watch{start, false};
  const HealthPolicies stop = Policy(HealthAction::kStop);
  const std::vector<int> gpus = {0, 1};
  // One GPU busy keeps the job busy.
  EXPECT_EQ(DecideGpuIdle(stop, gpus, {{0, 1}, {1, 60}}, watch, start + 5min).action,
            Action::kNone);
  EXPECT_EQ(watch.busy_at, start + 5min);
  // Both idle: not yet 10 minutes since the last busy reading.
  auto early = DecideGpuIdle(stop, gpus, {{0, 0}, {1, 4.9}}, watch, start + 14min);
  EXPECT_EQ(early.action, Action::kNone);
  EXPECT_EQ(early.idle_for, 9min);
  EXPECT_EQ(early.highest_percent, 4.9);
  auto due = DecideGpuIdle(stop, gpus, {{0, 0}, {1, 0}}, watch, start + 15min);
  EXPECT_EQ(due.action, Action::kStop);
  EXPECT_EQ(due.idle_for, 10min);
  // Once per idle spell.
  EXPECT_EQ(DecideGpuIdle(stop, gpus, {{0, 0}, {1, 0}}, watch, start + 40min).action,
            Action::kNone);
}

TEST(GpuIdle, ABusyReadingStartsANewSpellThatNotifiesAgain) {
  const Time start{};
  GpuIdleWatch watch{start, false};
  const HealthPolicies notify = Policy(HealthAction::kNotify);
  EXPECT_EQ(DecideGpuIdle(notify, {3}, {{3, 0}}, watch, start + 10min).action, Action::kNotify);
  EXPECT_EQ(DecideGpuIdle(notify, {3}, {{3, 0}}, watch, start + 11min).action, Action::kNone);
  EXPECT_EQ(DecideGpuIdle(notify, {3}, {{3, 5}}, watch, start + 12min).action, Action::kNone)
      << "the threshold itself is busy";
  EXPECT_EQ(DecideGpuIdle(notify, {3}, {{3, 0}}, watch, start + 21min).action, Action::kNone);
  EXPECT_EQ(DecideGpuIdle(notify, {3}, {{3, 0}}, watch, start + 22min).action, Action::kNotify);
}

TEST(GpuIdle, NoReadingOrNoPolicyDecidesNothing) {
  const Time start{};
  GpuIdleWatch watch{start, false};
  // Readings of other GPUs only: no signal about this job's.
  EXPECT_EQ(DecideGpuIdle(Policy(HealthAction::kStop), {0}, {{1, 0}}, watch, start + 1h).action,
            Action::kNone);
  EXPECT_EQ(DecideGpuIdle(Policy(HealthAction::kStop), {0}, {}, watch, start + 1h).action,
            Action::kNone);
  EXPECT_EQ(DecideGpuIdle(HealthPolicies{}, {0}, {{0, 0}}, watch, start + 1h).action,
            Action::kNone);
  EXPECT_FALSE(watch.acted);
}

}  // namespace
}  // namespace headway
