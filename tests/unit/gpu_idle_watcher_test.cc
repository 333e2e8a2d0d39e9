// The GPU-idle loop (policies.on_gpu_idle) driven tick by tick with a
// ManualClock over the real job controller (with the fake executor) and a
// real SQLite store; the GPUs' utilisation is what the test says it is.
#include "server/gpu_idle_watcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "job_controller_fixture.h"

namespace headway {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

class GpuIdleWatcherTest : public JobControllerFixture {
 protected:
  void SetUp() override {
    StartJobs(2);
    GpuIdleWatcherOptions watcher;
    watcher.gpu_utilization = [this] {
      std::lock_guard lock(mu_);
      return readings_;
    };
    watcher_ = std::make_unique<GpuIdleWatcher>(*jobs_, clock_, watcher);
  }
  void TearDown() override {
    watcher_.reset();
    JobControllerFixture::TearDown();
  }

  void Submit(const std::string& name, HealthAction action) {
    JobSpec spec;
    spec.name = name;
    spec.command = {"train"};
    spec.resources.gpus_per_process = 1;
    spec.policies.on_gpu_idle = action;
    spec.policies.gpu_idle_after = minutes(10);
    spec.policies.gpu_idle_below_percent = 5;
    ASSERT_TRUE(jobs_->Submit(spec, "user/test").ok());
    jobs_->Tick();
    ASSERT_EQ(Get(name).state, JobState::kRunning);
  }
  Job Get(const std::string& name) {
    auto job = jobs_->Get(name);
    EXPECT_TRUE(job.ok());
    return job.ok() ? *job : Job{};
  }
  // Every GPU of the pool reads `percent` from now on.
  void Read(std::optional<double> percent) {
    std::lock_guard lock(mu_);
    readings_.clear();
    if (percent) readings_ = {{0, *percent}, {1, *percent}};
  }
  // The watcher's and the controller's passes after `advance`.
  void Tick(Duration advance) {
    clock_.Advance(advance);
    watcher_->Tick();
    jobs_->Tick();
  }
  int GpuIdleEvents(const std::string& name) {
    return static_cast<int>(EventsOf(name, "GpuIdle").size());
  }

  std::unique_ptr<GpuIdleWatcher> watcher_;
  std::mutex mu_;
  std::map<int, double> readings_;
};

TEST_F(GpuIdleWatcherTest, AJobWhoseGpusStayIdleIsStoppedAndItsGpusGoBack) {
  Submit("idle", HealthAction::kStop);
  Read(1.0);
  Tick(minutes(5));
  EXPECT_EQ(GpuIdleEvents("idle"), 0);
  EXPECT_FALSE(Signalled("idle"));
  Tick(minutes(6));  // 11 minutes below 5%
  EXPECT_EQ(GpuIdleEvents("idle"), 1);
  EXPECT_TRUE(Signalled("idle"));
  EXPECT_EQ(Get("idle").stop_reason, StopReason::kGpuIdle);
  executor_.Exit(executor_.AttemptOf("idle").first, 143);
  Tick(seconds(1));
  EXPECT_TRUE(IsTerminal(Get("idle").state)) << JobStateName(Get("idle").state);
  // Its GPU is free again: a job asking for both GPUs starts.
  JobSpec both;
  both.name = "both";
  both.command = {"train"};
  both.resources.gpus_per_process = 2;
  ASSERT_TRUE(jobs_->Submit(both, "user/test").ok());
  Tick(seconds(1));
  EXPECT_EQ(Get("both").state, JobState::kRunning);
}

TEST_F(GpuIdleWatcherTest, ABusyReadingStartsTheIdleSpellAgain) {
  Submit("bursty", HealthAction::kStop);
  Read(1.0);
  Tick(minutes(8));
  Read(60.0);  // a burst of work
  Tick(minutes(1));
  Read(1.0);
  Tick(minutes(8));  // 17 minutes since start, 8 since the burst
  EXPECT_FALSE(Signalled("bursty"));
  Tick(minutes(3));  // 11 since the burst
  EXPECT_TRUE(Signalled("bursty"));
}

TEST_F(GpuIdleWatcherTest, NotifyTellsOncePerIdleSpellAndNeverStops) {
  Submit("notebookish", HealthAction::kNotify);
  Read(0.0);
  Tick(minutes(11));
  EXPECT_EQ(GpuIdleEvents("notebookish"), 1);
  for (int i = 0; i < 6; ++i) Tick(minutes(10));
  EXPECT_EQ(GpuIdleEvents("notebookish"), 1) << "one event per idle spell";
  Read(80.0);
  Tick(minutes(1));
  Read(0.0);
  Tick(minutes(11));
  EXPECT_EQ(GpuIdleEvents("notebookish"), 2);
  EXPECT_FALSE(Signalled("notebookish"));
  EXPECT_EQ(Get("notebookish").state, JobState::kRunning);
}

TEST_F(GpuIdleWatcherTest, WithoutAReadingNothingIsDecided) {
  Submit("unread", HealthAction::kStop);
  Read(std::nullopt);  // no NVML, no nvidia-smi
  for (int i = 0; i < 12; ++i) Tick(minutes(10));
  EXPECT_EQ(GpuIdleEvents("unread"), 0);
  EXPECT_FALSE(Signalled("unread"));
}

}  // namespace
}  // namespace headway
