// Chart summaries of metric series: the cells against Downsample, their
// bound, and spikes that survive merging; then the server's cache of them
// (SeriesSummaries) as reports arrive around a chart read.
#include "core/series_summary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "server/series_summaries.h"

namespace headway {
namespace {

std::vector<MetricPoint> Series(std::int64_t n, std::int64_t first_step = 0) {
  std::vector<MetricPoint> points;
  for (std::int64_t i = 0; i < n; ++i) {
    points.push_back({first_step + i * 3, std::sin(static_cast<double>(i) / 50.0)});
  }
  return points;
}

SeriesSummary Summarise(const std::vector<MetricPoint>& points) {
  SeriesSummary s;
  for (const MetricPoint& p : points) EXPECT_TRUE(s.Append(p));
  return s;
}

void ExpectSameBuckets(const std::vector<MetricBucket>& a, const std::vector<MetricBucket>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first_step, b[i].first_step) << i;
    EXPECT_EQ(a[i].last_step, b[i].last_step) << i;
    EXPECT_EQ(a[i].count, b[i].count) << i;
    EXPECT_DOUBLE_EQ(a[i].min, b[i].min) << i;
    EXPECT_DOUBLE_EQ(a[i].max, b[i].max) << i;
    EXPECT_DOUBLE_EQ(a[i].last, b[i].last) << i;
    EXPECT_EQ(a[i].non_finite, b[i].non_finite) << i;
  }
}

TEST(SeriesSummary, WhileCellsHoldOnePointItIsDownsample) {
  std::vector<MetricPoint> points = Series(3000);
  points[1234].value = std::numeric_limits<double>::quiet_NaN();
  SeriesSummary s = Summarise(points);
  EXPECT_EQ(s.points_per_cell(), 1u);
  auto chart = s.Chart(300);
  ASSERT_TRUE(chart.has_value());
  ExpectSameBuckets(*chart, Downsample(points, 300));
  EXPECT_FALSE(s.Chart(3000).has_value());  // no more points than buckets: show the points
}

TEST(SeriesSummary, ALongSeriesKeepsBoundedCellsAndEverySpike) {
  std::vector<MetricPoint> points = Series(1'000'000);
  points[777'777].value = 40.0;
  points[123'456].value = -40.0;
  points[999'999].value = std::numeric_limits<double>::infinity();
  SeriesSummary s = Summarise(points);
  EXPECT_EQ(s.points(), 1'000'000u);
  EXPECT_LE(s.cells().size(), SeriesSummary::kMaxCells);
  EXPECT_GT(s.cells().size(), SeriesSummary::kMaxCells / 2);
  auto chart = s.Chart(500);
  ASSERT_TRUE(chart.has_value());
  ASSERT_EQ(chart->size(), 500u);
  std::vector<MetricBucket> exact = Downsample(points, 500);
  std::size_t total = 0;
  double top = -1e9, bottom = 1e9;
  for (std::size_t b = 0; b < 500; ++b) {
    const MetricBucket& got = (*chart)[b];
    total += got.count;
    top = std::max(top, got.max);
    bottom = std::min(bottom, got.min);
    // Whole cells per bucket: within one cell's worth of the equal count.
    EXPECT_LE(std::abs(static_cast<long>(got.count) - static_cast<long>(exact[b].count)),
              static_cast<long>(s.points_per_cell()))
        << b;
    if (b > 0) {
      EXPECT_EQ(got.first_step, (*chart)[b - 1].last_step + 3) << b;
    }
  }
  EXPECT_EQ(total, 1'000'000u);
  EXPECT_EQ(chart->front().first_step, 0);
  EXPECT_EQ(chart->back().last_step, 999'999 * 3);
  EXPECT_DOUBLE_EQ(top, 40.0);
  EXPECT_DOUBLE_EQ(bottom, -40.0);
  EXPECT_TRUE(chart->back().non_finite);
  EXPECT_TRUE(std::isinf(chart->back().last));
}

TEST(SeriesSummary, ALateOrRepeatedStepChangesNothingAndSaysSo) {
  SeriesSummary s = Summarise(Series(10));
  EXPECT_FALSE(s.Append({27, 5.0}));  // the last step again
  EXPECT_FALSE(s.Append({3, 5.0}));   // an earlier one
  EXPECT_EQ(s.points(), 10u);
  EXPECT_TRUE(s.Append({28, 5.0}));
}

ProgressBatch Batch(const std::string& job, std::int64_t step, double loss) {
  ProgressReport r;
  r.step = step;
  r.metrics["loss"] = loss;
  return {job, {r}, Time{}};
}

SeriesSummaries::Scan ScanOf(const std::vector<MetricPoint>& points, int* scans = nullptr) {
  return [&points, scans](const std::function<void(const MetricPoint&)>& each) {
    if (scans) ++*scans;
    for (const MetricPoint& p : points) each(p);
    return Status::Ok();
  };
}

TEST(SeriesSummaries, ReadsScanOnceAndFollowCommittedReports) {
  SeriesSummaries charts;
  std::vector<MetricPoint> stored = Series(3'000);  // cells of one point: exact
  int scans = 0;
  auto first = charts.Chart("a", "loss", 100, ScanOf(stored, &scans));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->has_value());
  ExpectSameBuckets((*first)->buckets, Downsample(stored, 100));
  for (std::int64_t i = 0; i < 500; ++i) {
    MetricPoint p{9'000 + i, 2.0};
    stored.push_back(p);
    charts.Apply(Batch("a", p.step, p.value));
  }
  auto second = charts.Chart("a", "loss", 100, ScanOf(stored, &scans));
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ(scans, 1);
  EXPECT_EQ((*second)->count, 3'500u);
  ExpectSameBuckets((*second)->buckets, Downsample(stored, 100));

  // A repeated step drops the summary; the next read scans again.
  charts.Apply(Batch("a", 9'000, 9.0));
  stored[3'000].value = 9.0;
  auto third = charts.Chart("a", "loss", 100, ScanOf(stored, &scans));
  ASSERT_TRUE(third.ok() && third->has_value());
  EXPECT_EQ(scans, 2);
  ExpectSameBuckets((*third)->buckets, Downsample(stored, 100));

  // A deleted job's summaries go with it.
  charts.Forget("a");
  EXPECT_EQ(charts.size(), 0u);
}

// Reports committed while a read scans the store: those the scan saw are
// not counted twice, those after it are appended, and a second read while
// the first builds reads the series itself.
TEST(SeriesSummaries, ReportsCommittedDuringTheScanAreCountedOnce) {
  SeriesSummaries charts;
  std::vector<MetricPoint> stored = Series(1000);
  auto chart =
      charts.Chart("a", "loss", 10, [&](const std::function<void(const MetricPoint&)>& each) {
        // Committed (and applied) before the scan reads it: in both.
        stored.push_back({3000, 1.0});
        charts.Apply(Batch("a", 3000, 1.0));
        auto meanwhile = charts.Chart("a", "loss", 10, ScanOf(stored));
        EXPECT_TRUE(meanwhile.ok());
        EXPECT_FALSE(meanwhile->has_value());
        for (const MetricPoint& p : stored) each(p);
        // Committed after the scan: in pending only.
        charts.Apply(Batch("a", 3003, 1.5));
        return Status::Ok();
      });
  stored.push_back({3003, 1.5});
  ASSERT_TRUE(chart.ok() && chart->has_value());
  EXPECT_EQ((*chart)->count, 1002u);
  ExpectSameBuckets((*chart)->buckets, Downsample(stored, 10));
  auto again = charts.Chart("a", "loss", 10, ScanOf(stored));
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ((*again)->count, 1002u);
}

TEST(SeriesSummaries, KeepsTheMostRecentlyChartedSeries) {
  SeriesSummaries charts(2);
  std::vector<MetricPoint> stored = Series(100);
  int scans = 0;
  for (const char* job : {"a", "b", "a", "c"}) {
    ASSERT_TRUE(charts.Chart(job, "loss", 10, ScanOf(stored, &scans)).ok());
  }
  EXPECT_EQ(charts.size(), 2u);
  EXPECT_EQ(scans, 3);
  ASSERT_TRUE(charts.Chart("a", "loss", 10, ScanOf(stored, &scans)).ok());
  EXPECT_EQ(scans, 3);  // "a" was kept; "b" went
  ASSERT_TRUE(charts.Chart("b", "loss", 10, ScanOf(stored, &scans)).ok());
  EXPECT_EQ(scans, 4);
}

}  // namespace
}  // namespace headway
