// ProgressTracker's health as the server shows it: the classifier's verdict
// confirmed over reports and time (a fake clock: each View is given `now`),
// NaN announced even when it came between two looks, and reports whose clock
// is off the server's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "server/progress_tracker.h"

namespace headway {
namespace {

using ::testing::HasSubstr;

Time At(double seconds) { return FromUnixMillis(static_cast<std::int64_t>(seconds * 1000)); }

class TrackerHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tracker_health_test.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    store_ = std::move(OpenSqliteStore(dir_ + "/db").value());
    tracker_ = std::make_unique<ProgressTracker>(*store_);
    job_.spec.name = "job";
    job_.state = JobState::kRunning;
    job_.started_at = At(0);
  }
  void TearDown() override {
    tracker_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  // Steps [first, last], one a second from `first` seconds, received as one batch.
  void Report(std::int64_t first, std::int64_t last, double (*loss)(std::int64_t)) {
    std::vector<ProgressReport> reports;
    for (std::int64_t step = first; step <= last; ++step) {
      ProgressReport r;
      r.step = step;
      r.total_steps = 1000;
      r.metrics["loss"] = loss(step);
      r.time = At(static_cast<double>(step));
      reports.push_back(r);
    }
    ProgressBatch batch{"job", std::move(reports), At(static_cast<double>(last))};
    ASSERT_TRUE(store_->AppendProgress({batch}).ok());
    tracker_->Apply(batch);
  }
  ProgressView View(double now) { return tracker_->View(job_, At(now)); }

  std::string dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ProgressTracker> tracker_;
  Job job_;
};

double Learning(std::int64_t step) { return 0.5 + 2.0 / static_cast<double>(step); }
double NaNAt25(std::int64_t step) {
  return step == 25 ? std::numeric_limits<double>::quiet_NaN() : Learning(step);
}
double Exploding(std::int64_t step) { return 100.0 * static_cast<double>(step); }

TEST_F(TrackerHealthTest, ANaNBetweenTwoLooksIsStillAnnouncedAtOnce) {
  // A fp16 overflow at step 25 among sound losses, all in one batch: the
  // newest loss is finite by the time anyone looks.
  Report(1, 40, NaNAt25);
  ProgressView v = View(41);
  EXPECT_EQ(v.health, Health::kDiverging);
  EXPECT_THAT(v.health_reason, HasSubstr("NaN at step 25"));
  // Sound losses clear it once they held for 5 reports and 60 s.
  Report(41, 45, Learning);
  EXPECT_EQ(View(46).health, Health::kDiverging) << "5 reports, but only 5 s";
  Report(46, 120, Learning);
  EXPECT_EQ(View(121).health, Health::kProgressing);
}

double NaNThenExploding(std::int64_t step) {
  if (step < 25) return 1.0 / static_cast<double>(step);
  return step < 28 ? std::numeric_limits<double>::quiet_NaN() : Exploding(step);
}

TEST_F(TrackerHealthTest, ANaNFollowedByARiseIsAnnouncedAtOnceToo) {
  // NaN at steps 25-27, then finite losses far above the run's start, all in
  // one batch: by the time anyone looks, the newest losses say a (finite)
  // rise, which alone would wait for confirmation. The NaN needs none.
  Report(1, 40, NaNThenExploding);
  ProgressView v = View(41);
  EXPECT_EQ(v.health, Health::kDiverging) << v.health_reason;
  EXPECT_THAT(v.health_reason, HasSubstr("NaN at step 27"));
}

TEST_F(TrackerHealthTest, ARiseIsAnnouncedOnlyOnceConfirmed) {
  Report(1, 100, Learning);
  EXPECT_EQ(View(101).health, Health::kProgressing);
  EXPECT_FALSE(View(101).health_evidence) << "a run that is learning has nothing to show";
  Report(101, 104, Exploding);
  EXPECT_EQ(View(105).health, Health::kProgressing) << "held by reports, not yet by time";
  EXPECT_EQ(View(120).health, Health::kProgressing);
  ProgressView v = View(136);
  EXPECT_EQ(v.health, Health::kDiverging);
  EXPECT_THAT(v.health_reason, HasSubstr("back at or above its starting level"));
  // The view carries what the verdict rests on, in numbers.
  ASSERT_TRUE(v.health_evidence);
  EXPECT_EQ(v.health_evidence->series, "loss");
  EXPECT_GE(v.health_evidence->level, 100.0 * 101);
  EXPECT_NEAR(v.health_evidence->best, Learning(100), 0.01);
  EXPECT_GT(v.health_evidence->best_step, 90);
  EXPECT_GT(v.health_evidence->level - v.health_evidence->best, v.health_evidence->threshold);
  EXPECT_EQ(v.health_evidence->window_reports, 3);
}

TEST_F(TrackerHealthTest, StalenessCountsFromArrivalAndAClockOffIsToldOnce) {
  // Reports timed ten minutes behind the server's clock.
  std::vector<ProgressReport> reports;
  for (int step = 1; step <= 5; ++step) {
    ProgressReport r;
    r.step = step;
    r.metrics["loss"] = 1.0 / step;
    r.time = At(400.0 + step);
    reports.push_back(r);
  }
  ProgressBatch batch{"job", reports, At(1000)};
  ASSERT_TRUE(store_->AppendProgress({batch}).ok());
  tracker_->Apply(batch);
  ProgressView v = View(1001);
  EXPECT_EQ(v.health, Health::kProgressing) << v.health_reason;
  EXPECT_EQ(v.health_reason, "step 5 reported 1.0s ago");
  const IngestLimits limits;
  auto warnings = tracker_->TakeWarnings("job", limits);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("595 s behind the server's clock"));
  EXPECT_TRUE(tracker_->TakeWarnings("job", limits).empty()) << "told once";
  // Silent for real, by the server's clock: Stalled.
  EXPECT_EQ(View(1400).health, Health::kStalled);
}

}  // namespace
}  // namespace headway
