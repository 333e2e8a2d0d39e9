// The per-job ingest limits of ProgressTracker (series and points), the same
// for every way of reporting: all-or-nothing admission for HTTP and Kubeflow
// reports, dropping for stdout markers, and one warning per limit. And the
// ingest writer filing what it acknowledged.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "server/ingest_writer.h"
#include "server/progress_tracker.h"

namespace headway {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

std::vector<ProgressReport> Reports(std::int64_t first, int count, int metrics = 1) {
  std::vector<ProgressReport> out;
  for (int i = 0; i < count; ++i) {
    ProgressReport r;
    r.step = first + i;
    for (int m = 0; m < metrics; ++m) r.metrics["m" + std::to_string(m)] = 1.0;
    out.push_back(r);
  }
  return out;
}

class IngestLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ingest_limits_test.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    store_ = std::move(OpenSqliteStore(dir_ + "/db").value());
    tracker_ = std::make_unique<ProgressTracker>(*store_);
  }
  void TearDown() override {
    tracker_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  // What IngestWriter does with an admitted batch.
  void Store(std::vector<ProgressReport> reports) {
    ProgressBatch batch{"job", std::move(reports), FromUnixMillis(1000)};
    ASSERT_TRUE(store_->AppendProgress({batch}).ok());
    tracker_->Apply(batch);
  }

  std::string dir_;
  std::unique_ptr<headway::Store> store_;
  std::unique_ptr<ProgressTracker> tracker_;
};

TEST_F(IngestLimitsTest, ARequestPastThePointsLimitIsRefusedWhole) {
  const IngestLimits limits{1000, 10};
  EXPECT_TRUE(tracker_->Admit("job", Reports(1, 3), limits).ok());  // 6 points
  Status refused = tracker_->Admit("job", Reports(4, 3), limits);   // 12 > 10
  EXPECT_EQ(refused.code(), StatusCode::kPayloadTooLarge);
  EXPECT_THAT(refused.message(), HasSubstr("the limit is 10 per job"));
  EXPECT_TRUE(tracker_->Admit("job", Reports(4, 2), limits).ok());  // exactly 10
  EXPECT_FALSE(tracker_->Admit("job", Reports(6, 1, 0), limits).ok());
  auto warnings = tracker_->TakeWarnings("job", limits);
  ASSERT_THAT(warnings, SizeIs(1));
  EXPECT_THAT(warnings[0], HasSubstr("limit of 10 points per job"));
  EXPECT_THAT(warnings[0], HasSubstr("refused reports of 7 points (413)"));
  EXPECT_FALSE(tracker_->Admit("job", Reports(6, 1), limits).ok());
  EXPECT_THAT(tracker_->TakeWarnings("job", limits), SizeIs(0)) << "said once";
}

TEST_F(IngestLimitsTest, StoredStepsCostNothingWhenReportedAgain) {
  const IngestLimits limits{1000, 10};
  ASSERT_TRUE(tracker_->Admit("job", Reports(1, 5), limits).ok());  // 10 points
  Store(Reports(1, 5));
  EXPECT_TRUE(tracker_->Admit("job", Reports(1, 5), limits).ok()) << "a retry replaces";
  EXPECT_FALSE(tracker_->Admit("job", Reports(6, 1, 0), limits).ok());
}

std::int64_t UnfiledRows(const std::string& path);

// Reporters on several connections overtake one another: a step older than
// the newest but newer than the tracker's tail is new, counted without
// asking the store (a lookup would file the store's report log each time).
TEST_F(IngestLimitsTest, ReportsThatOvertakeOneAnotherAreCountedWithoutALookup) {
  const IngestLimits limits{1000, 20};
  ASSERT_TRUE(tracker_->Admit("job", Reports(1, 2), limits).ok());
  Store(Reports(1, 2));  // steps 1-2, 4 points
  ASSERT_TRUE(tracker_->Admit("job", Reports(10, 1), limits).ok());
  Store(Reports(10, 1));  // step 10, 6 points so far
  ASSERT_EQ(UnfiledRows(dir_ + "/db"), 2);

  EXPECT_TRUE(tracker_->Admit("job", Reports(5, 3), limits).ok());  // steps 5-7: 12 points
  EXPECT_EQ(UnfiledRows(dir_ + "/db"), 2) << "no lookup filed the log";
  EXPECT_TRUE(tracker_->Admit("job", Reports(2, 1), limits).ok()) << "stored: no cost";
  EXPECT_TRUE(
      tracker_->Admit("job", Reports(8, 4), limits).ok());  // steps 8, 9, 10 (stored), 11: 18
  EXPECT_EQ(tracker_->Admit("job", Reports(3, 2), limits).code(), StatusCode::kPayloadTooLarge);
}

TEST_F(IngestLimitsTest, MarkersPastTheLimitsAreDroppedKeepingTheFirstThatFit) {
  const IngestLimits limits{2, 10};
  std::vector<ProgressReport> reports = Reports(1, 8);  // 2 points each
  reports[0].metrics["extra"] = 1;                      // a second series: fits
  reports[1].metrics["third"] = 1;                      // a third: dropped
  tracker_->DropOverLimits("job", reports, limits);
  ASSERT_THAT(reports, SizeIs(4));  // 3 + 2 + 2 + 2 points; the next would pass 10
  EXPECT_EQ(reports[0].step, 1);
  EXPECT_EQ(reports[3].step, 4);
  EXPECT_EQ(reports[1].metrics.count("third"), 0u);
  auto warnings = tracker_->TakeWarnings("job", limits);
  ASSERT_THAT(warnings, SizeIs(2));
  EXPECT_THAT(warnings[0],
              HasSubstr("1 metric series beyond the limit of 2 per job (first: 'third')"));
  EXPECT_THAT(warnings[1], HasSubstr("dropped 4 HEADWAY output line report(s) (8 points)"));
  std::vector<ProgressReport> more = Reports(9, 1);
  tracker_->DropOverLimits("job", more, limits);
  EXPECT_THAT(more, SizeIs(0));
  EXPECT_THAT(tracker_->TakeWarnings("job", limits), SizeIs(0));
}

TEST_F(IngestLimitsTest, AfterARestartStoredPointsCountAndOldStepsAreNotCountedTwice) {
  // More steps than the tracker keeps in memory.
  std::vector<ProgressReport> history = Reports(1, 6000);
  Store(history);                                         // 12,000 points
  tracker_ = std::make_unique<ProgressTracker>(*store_);  // a restarted server
  const IngestLimits limits{1000, 12010};
  std::vector<ProgressReport> rescanned = Reports(1, 6000);
  tracker_->DropOverLimits("job", rescanned, limits);
  EXPECT_THAT(rescanned, SizeIs(6000)) << "stored already: no cost";
  EXPECT_TRUE(tracker_->Admit("job", Reports(6001, 5), limits).ok());
  EXPECT_EQ(tracker_->Admit("job", Reports(6006, 1), limits).code(), StatusCode::kPayloadTooLarge);
}

// The job's own ETA (Kubeflow's estimatedRemainingSeconds) is shown while
// Headway has too few reports for its own, counted down since it came.
using ProgressTrackerEta = IngestLimitsTest;

TEST_F(ProgressTrackerEta, TheJobsOwnEtaIsShownUntilHeadwayHasEnoughReports) {
  auto report = [&](std::int64_t step, double t_s, std::optional<double> remaining) {
    ProgressReport r;
    r.step = step;
    r.total_steps = 1000;
    r.time = FromUnixMillis(static_cast<std::int64_t>(t_s * 1000));
    r.remaining_seconds = remaining;
    ProgressBatch batch{"job", {r}, *r.time};
    ASSERT_TRUE(store_->AppendProgress({batch}).ok());
    tracker_->Apply(batch);
  };
  Job job;
  job.spec.name = "job";
  job.state = JobState::kRunning;
  job.started_at = FromUnixMillis(0);
  // 3 reports at 1 step/s: Headway alone would say about 970 s.
  report(10, 10, std::nullopt);
  report(20, 20, std::nullopt);
  report(30, 30, 500.0);
  ProgressView v = tracker_->View(job, FromUnixMillis(35000));
  ASSERT_TRUE(v.eta_seconds);
  EXPECT_DOUBLE_EQ(*v.eta_seconds, 495.0) << "the job's 500 s, 5 s later";
  EXPECT_DOUBLE_EQ(*tracker_->View(job, FromUnixMillis(30000 + 600000)).eta_seconds, 0.0)
      << "never below 0";
  // With enough reports Headway's own estimate wins.
  for (int i = 4; i <= 12; ++i) report(10 * i, 10.0 * i, std::nullopt);
  v = tracker_->View(job, FromUnixMillis(120000));
  ASSERT_TRUE(v.eta_seconds);
  EXPECT_NEAR(*v.eta_seconds, 880.0, 20.0);
}

}  // namespace
}  // namespace headway

namespace headway {
namespace {

// Reports not yet filed by key, counted on the side of the store.
std::int64_t UnfiledRows(const std::string& path) {
  sqlite3* db = nullptr;
  std::int64_t n = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* q = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM progress_log", -1, &q, nullptr) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW) {
      n = sqlite3_column_int64(q, 0);
    }
    sqlite3_finalize(q);
  }
  sqlite3_close(db);
  return n;
}

// The writer acknowledges reports once stored as they came, and files them
// by key on its own: in groups while reports keep coming, and the rest once
// they stop, so reads seldom have to.
TEST_F(IngestLimitsTest, TheWriterFilesWhatItAcknowledgedWithoutAnyRead) {
  {
    IngestWriter writer(*store_, *tracker_);
    // Short requests, as from a training loop (long ones are filed at once).
    std::atomic<int> failed = 0;
    for (int request = 0; request < 599; ++request) {
      writer.WriteThen({"job", Reports(request * 10, 10, 2), FromUnixMillis(1000)},
                       [&](const Status& s) { failed += s.ok() ? 0 : 1; });
    }
    ASSERT_TRUE(writer.Write({"job", Reports(5990, 10, 2), FromUnixMillis(1000)}).ok());
    EXPECT_EQ(failed, 0);
    // Quiet now: everything gets filed within moments (polled, not slept on).
    for (int i = 0; i < 500 && UnfiledRows(dir_ + "/db") != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(UnfiledRows(dir_ + "/db"), 0);
  }
  EXPECT_EQ(*store_->CountProgressPoints("job"), 6000u * 3);
  EXPECT_EQ(store_->RecentMetric("job", "m1", 1).value().at(0).step, 5999);
}

}  // namespace
}  // namespace headway
