// The controllers' loop: a pass at once, then one per period or per wake,
// until stopped. Periods here are an hour, so every pass after the first is
// one a Wake asked for.
#include "server/control_loop.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace headway {
namespace {

class Passes {
 public:
  void Count() {
    std::lock_guard lock(mu_);
    ++count_;
    changed_.notify_all();
  }
  // Waits until at least `n` passes ran (a generous bound, only so a broken
  // loop fails instead of hanging).
  bool AtLeast(int n) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, std::chrono::seconds(30), [&] { return count_ >= n; });
  }
  int count() {
    std::lock_guard lock(mu_);
    return count_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  int count_ = 0;
};

TEST(ControlLoop, RunsAPassAtOnceThenOneForEachWakeAndEndsWhenStopped) {
  ControlLoop loop;
  Passes passes;
  std::thread runner([&] { loop.Run(std::chrono::hours(1), [&] { passes.Count(); }); });
  ASSERT_TRUE(passes.AtLeast(1));
  loop.Wake();
  ASSERT_TRUE(passes.AtLeast(2));
  loop.Wake();
  ASSERT_TRUE(passes.AtLeast(3));
  loop.Stop();
  runner.join();  // returns without waiting out the hour
  EXPECT_EQ(passes.count(), 3);
}

TEST(ControlLoop, AWakeDuringAPassBringsTheNextOneAndAPassMayWakeItsOwnLoop) {
  ControlLoop loop;
  Passes passes;
  std::thread runner([&] {
    loop.Run(std::chrono::hours(1), [&] {
      passes.Count();
      if (passes.count() < 3) loop.Wake();  // from inside the pass: no deadlock
    });
  });
  ASSERT_TRUE(passes.AtLeast(3));
  loop.Stop();
  runner.join();
  EXPECT_EQ(passes.count(), 3);
}

TEST(ControlLoop, ALoopStoppedBeforeItRunsReturnsAtOnce) {
  ControlLoop loop;
  loop.Stop();
  int passes = 0;
  loop.Run(std::chrono::hours(1), [&] { ++passes; });
  EXPECT_EQ(passes, 0);
}

}  // namespace
}  // namespace headway
