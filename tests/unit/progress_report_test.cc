#include "core/progress_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace headway {
namespace {

using ::testing::HasSubstr;

TEST(ProgressReportDecoder, SingleReportWithEveryField) {
  auto r = DecodeProgressReports(R"({"step": 1200, "total_steps": 10000, "epoch": 1.5,
      "total_epochs": 8, "metrics": {"loss": 0.41, "eval/loss": 0.52, "lr": 3e-4},
      "time": "2026-12-02T10:00:00Z"})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  const ProgressReport& p = (*r)[0];
  EXPECT_EQ(p.step, 1200);
  EXPECT_EQ(p.total_steps, 10000);
  EXPECT_EQ(p.epoch, 1.5);
  EXPECT_EQ(p.total_epochs, 8.0);
  EXPECT_EQ(p.metrics.at("eval/loss"), 0.52);
  EXPECT_EQ(p.time, ParseRfc3339("2026-12-02T10:00:00Z"));
}

TEST(ProgressReportDecoder, BatchesAndNonFiniteValues) {
  auto r = DecodeProgressReports(R"({"reports": [{"step": 1, "metrics": {"loss": "NaN"}},
      {"step": 2, "metrics": {"loss": "Infinity", "g": "-Infinity"}}]})");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_TRUE(std::isnan((*r)[0].metrics.at("loss")));
  EXPECT_EQ((*r)[1].metrics.at("loss"), INFINITY);
  EXPECT_EQ((*r)[1].metrics.at("g"), -INFINITY);
}

TEST(ProgressReportDecoder, RejectsWithTheFieldNamed) {
  struct Case {
    const char* body;
    const char* field;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"step": -1})", "step"},
           {R"({"step": "1"})", "step"},
           {R"({"step": 1, "total_steps": 0})", "total_steps"},
           {R"({"step": 1, "epoch": -2})", "epoch"},
           {R"({"step": 1, "metrics": {"loss": true}})", "metrics.loss"},
           {R"({"step": 1, "metrics": {"": 1}})", "metrics."},
           {R"({"step": 1, "extra": 1})", "extra"},
           {R"({"reports": [{"step": 1}, {"step": -3}]})", "reports[1].step"},
           {R"({"reports": [], "step": 1})", ""},
       }) {
    auto r = DecodeProgressReports(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().field(), c.field) << c.body;
  }
}

// Well-formed reports are read as the parser goes, anything else by the
// document; both read a body the same way, a key given twice included.
TEST(ProgressReportDecoder, ReadsEveryValidFormAsTheDocumentDoes) {
  auto r = DecodeProgressReports(
      R"({"step": 3, "total_steps": 5, "total_steps": null, "epoch": 2, "metrics": {"a": 1},
          "metrics": {"b": 2, "b": 3, "c": -0.0}, "step": 4})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].step, 4);
  EXPECT_FALSE((*r)[0].total_steps);
  EXPECT_EQ((*r)[0].epoch, 2.0);
  EXPECT_EQ((*r)[0].metrics, (std::map<std::string, double>{{"b", 3.0}, {"c", -0.0}}));
  EXPECT_TRUE(std::signbit((*r)[0].metrics.at("c")));

  // A value past int64 as a metric, a time, null fields: read all the same.
  r = DecodeProgressReports(R"({"reports": [
      {"step": 9223372036854775807, "metrics": {"n": 18446744073709551615}},
      {"step": 0, "epoch": null, "metrics": null, "time": "2026-12-02T10:00:00Z"},
      {"step": 2, "total_epochs": 3, "metrics": {"x": "nan", "y": "-inf"}}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].step, 9223372036854775807);
  EXPECT_EQ((*r)[0].metrics.at("n"), 18446744073709551615.0);
  EXPECT_EQ((*r)[1].time, ParseRfc3339("2026-12-02T10:00:00Z"));
  EXPECT_TRUE((*r)[1].metrics.empty());
  EXPECT_TRUE(std::isnan((*r)[2].metrics.at("x")));
  EXPECT_EQ((*r)[2].total_epochs, 3.0);

  // What neither takes, each refuses with the same words.
  for (const char* body :
       {R"({"step": 9223372036854775808})", R"({"step": 1.0})", R"({"step": 1} x)",
        R"({"reports": [{"step": 1}], "x": 1})", R"({"step": 1, "reports": []})", R"({})",
        R"([{"step": 1}])", R"({"reports": [{"step": 1, "metrics": {"a": [1]}}]})",
        R"({"step": 1, "metrics": {"a b": 1}})", R"({"step": 1, "metrics": {"d": 1e400}})"}) {
    auto refused = DecodeProgressReports(body);
    EXPECT_FALSE(refused.ok()) << body;
  }
}

TEST(ProgressReportDecoder, EnforcesLimits) {
  ProgressLimits limits;
  limits.max_reports = 2;
  auto r = DecodeProgressReports(R"({"reports": [{"step": 1}, {"step": 2}, {"step": 3}]})", limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPayloadTooLarge);
  EXPECT_FALSE(IsValidMetricName(std::string(129, 'a')));
  EXPECT_TRUE(IsValidMetricName("train/loss_ema-0.9"));
  EXPECT_FALSE(IsValidMetricName("loss value"));
}

TEST(MarkerReportDecoder, TopLevelNumbersAreMetrics) {
  auto r = DecodeMarkerReports(R"({"step": 1, "loss": 1.47, "lr": "NaN", "total_steps": 10,
                                   "metrics": {"acc": 0.5}})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  const ProgressReport& report = r->at(0);
  EXPECT_EQ(report.step, 1);
  EXPECT_EQ(report.total_steps, 10);
  EXPECT_DOUBLE_EQ(report.metrics.at("loss"), 1.47);
  EXPECT_TRUE(std::isnan(report.metrics.at("lr")));
  EXPECT_DOUBLE_EQ(report.metrics.at("acc"), 0.5);
  auto batch = DecodeMarkerReports(R"({"reports": [{"step": 2, "loss": 0.5}]})");
  ASSERT_TRUE(batch.ok());
  EXPECT_DOUBLE_EQ(batch->at(0).metrics.at("loss"), 0.5);
  // The HTTP API stays strict: an unknown field may be a typo.
  EXPECT_FALSE(DecodeProgressReports(R"({"step": 1, "loss": 1.47})").ok());
}

TEST(MarkerReportDecoder, SaysWhatIsWrongWithTheFieldNamed) {
  auto expect_error = [](const char* text, const std::string& field, const std::string& words) {
    auto r = DecodeMarkerReports(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().field(), field) << text;
    EXPECT_THAT(r.status().message(), HasSubstr(words)) << text;
  };
  expect_error(R"({"loss": 1.0})", "step", "is required");
  expect_error(R"({"step": 1, "note": "warmup"})", "note", "must be a number");
  expect_error(R"({"step": 1, "phase": {"a": 1}})", "phase", "must be a number");
  expect_error(R"({"step": 1, "loss": 1, "metrics": {"loss": 2}})", "loss", "both");
  expect_error(R"({"step": 1, "bad name": 1})", "bad name", "not a metric name");
}

TEST(Downsample, KeepsSpikesAndTheLastPoint) {
  std::vector<MetricPoint> points;
  for (int i = 1; i <= 1000; ++i) points.push_back({i, i == 500 ? 100.0 : 1.0});
  points[700].value = NAN;
  auto buckets = Downsample(points, 10);
  ASSERT_EQ(buckets.size(), 10u);
  EXPECT_EQ(buckets[4].max, 100.0);
  EXPECT_EQ(buckets[4].min, 1.0);
  EXPECT_TRUE(buckets[7].non_finite);
  EXPECT_FALSE(buckets[6].non_finite);
  EXPECT_EQ(buckets[9].last_step, 1000);
  EXPECT_EQ(buckets[0].first_step, 1);
  std::size_t total = 0;
  for (const auto& b : buckets) total += b.count;
  EXPECT_EQ(total, 1000u);
  EXPECT_EQ(Downsample(points, 5000).size(), 1000u);
  EXPECT_TRUE(Downsample({}, 10).empty());
}

}  // namespace
}  // namespace headway
