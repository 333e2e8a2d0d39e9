// The progress log's row format (store/sql/progress_log.h): what goes in
// comes back bit for bit, and a damaged row is refused, not misread.
#include "store/sql/progress_log.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace headway::sql {
namespace {

std::vector<ProgressReport> Decode(const std::string& text) {
  std::vector<ProgressReport> out;
  Status s = DecodeProgressLog(text, [&](const ProgressReport& r) { out.push_back(r); });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(ProgressLog, EveryFieldAndEveryValueComesBackExactly) {
  const double inf = std::numeric_limits<double>::infinity();
  ProgressReport full;
  full.step = 9'007'199'254'740'993;  // not a double
  full.total_steps = 1LL << 62;
  full.epoch = 0.1 + 0.2;
  full.total_epochs = 3;
  full.time = FromUnixMillis(1'700'000'000'123);
  full.metrics = {{"loss", 1.0 / 3},
                  {"tiny", 4.9406564584124654e-324},
                  {"huge", -1.7976931348623157e308},
                  {"minus_zero", -0.0},
                  {"nan", std::numeric_limits<double>::quiet_NaN()},
                  {"inf", inf},
                  {"minus_inf", -inf},
                  // Names are checked at the API; the log must not depend on it.
                  {"a b:1 -\n2", 7}};
  ProgressReport bare;  // no optional field, no metric, no time
  bare.step = 0;
  auto texts = EncodeProgressLog({full, bare}, /*received_millis=*/42);
  ASSERT_EQ(texts.size(), 1u);
  auto back = Decode(texts[0]);
  ASSERT_EQ(back.size(), 2u);

  EXPECT_EQ(back[0].step, full.step);
  EXPECT_EQ(back[0].total_steps, full.total_steps);
  EXPECT_EQ(back[0].epoch, full.epoch);
  EXPECT_EQ(back[0].total_epochs, 3.0);
  EXPECT_EQ(back[0].time, full.time);
  ASSERT_EQ(back[0].metrics.size(), full.metrics.size());
  for (const auto& [name, value] : full.metrics) {
    ASSERT_TRUE(back[0].metrics.count(name)) << name;
    double got = back[0].metrics.at(name);
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(got)) << name;
    } else {
      EXPECT_EQ(got, value) << name;
      EXPECT_EQ(std::signbit(got), std::signbit(value)) << name;
    }
  }
  EXPECT_EQ(back[1].step, 0);
  EXPECT_FALSE(back[1].total_steps);
  EXPECT_FALSE(back[1].epoch);
  EXPECT_FALSE(back[1].total_epochs);
  EXPECT_TRUE(back[1].metrics.empty());
  EXPECT_EQ(back[1].time, FromUnixMillis(42));  // the arrival, as the keyed tables keep it
}

TEST(ProgressLog, NegativeOptionalValuesAreNotTakenForAbsentOnes) {
  ProgressReport r;
  r.step = 1;
  r.epoch = -1.5;
  r.total_epochs = -2;
  auto back = Decode(EncodeProgressLog({r}, 0).at(0));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].epoch, -1.5);
  EXPECT_EQ(back[0].total_epochs, -2.0);
}

TEST(ProgressLog, ALongRequestIsSplitBetweenReportsAndEachPartStandsAlone) {
  std::vector<ProgressReport> reports(1000);
  for (int i = 0; i < 1000; ++i) {
    reports[i].step = i;
    reports[i].metrics = {{"loss", i * 0.5}, {"learning_rate", 3e-4}};
  }
  auto texts = EncodeProgressLog(reports, 0, /*max_bytes=*/4096);
  ASSERT_GT(texts.size(), 5u);
  std::int64_t next = 0;
  for (const std::string& text : texts) {
    EXPECT_LE(text.size(), 4096u);
    for (const ProgressReport& r : Decode(text)) {
      EXPECT_EQ(r.step, next);
      EXPECT_EQ(r.metrics.at("loss"), next * 0.5);
      ++next;
    }
  }
  EXPECT_EQ(next, 1000);
  EXPECT_TRUE(EncodeProgressLog({}, 0).empty());
}

TEST(ProgressLog, ADamagedRowIsRefusedWithWhereItBroke) {
  ProgressReport r;
  r.step = 12;
  r.metrics = {{"loss", 0.25}};
  const std::string good = EncodeProgressLog({r}, 5).at(0);
  ASSERT_EQ(good, "12 5 - - - 1 4:loss 0.25\n");
  for (const std::string& bad : {
           std::string("12 5 - - - 1 4:loss 0.25"),    // cut short
           std::string("12 5 - - - 2 4:loss 0.25\n"),  // fewer metrics than said
           std::string("12 5 - - - 1 9:loss 0.25\n"),  // a name longer than the row
           std::string("12 5 - - - -1\n"),
           std::string("x 5 - - - 0\n"),
           std::string("12 5 - 1.5.5 - 0\n"),
           std::string("12 5 - - - 1 4:loss zero\n"),
           good + "13",
       }) {
    int seen = 0;
    Status s = DecodeProgressLog(bad, [&](const ProgressReport&) { ++seen; });
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("near byte"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace headway::sql
