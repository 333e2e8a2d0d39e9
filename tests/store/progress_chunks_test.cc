// The chunk format and merge of progress series (store/sql/progress_chunks.h),
// without a database.
#include "store/sql/progress_chunks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace headway::sql {
namespace {

// A series' new points for `steps`, metric value = step x scale.
struct Lines {
  NewPoints points;
  std::vector<SeriesLine> lines;
  explicit Lines(const std::vector<std::int64_t>& steps, double scale = 0.1) {
    for (std::int64_t s : steps) points.AddMetric(s, static_cast<double>(s) * scale);
    lines = points.Sorted();
  }
};

// The text of one chunk of `points` (at most 128).
std::string ChunkText(NewPoints& points) {
  auto changes = MergeIntoChunks({}, points.Sorted());
  EXPECT_TRUE(changes.ok());
  EXPECT_EQ(changes->write.size(), 1u);
  return changes->write.at(0).text;
}

std::vector<std::int64_t> Range(std::int64_t first, std::int64_t last) {
  std::vector<std::int64_t> v;
  for (std::int64_t s = first; s <= last; ++s) v.push_back(s);
  return v;
}

Chunk MakeChunk(std::int64_t first, std::int64_t last) {
  Lines l(Range(first, last));
  return {first, last, static_cast<std::size_t>(last - first + 1), ChunkText(l.points)};
}

std::vector<MetricPoint> Points(const std::string& text) {
  std::vector<MetricPoint> points;
  EXPECT_TRUE(DecodeMetricChunk(text, [&](const MetricPoint& p) { points.push_back(p); }).ok());
  return points;
}

TEST(ProgressChunks, EveryValueComesBackBitForBit) {
  NewPoints metric;
  const double values[] = {0.1,
                           1.0 / 3,
                           -0.0,
                           5e-324,
                           1.7976931348623157e308,
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity(),
                           std::nan("")};
  std::int64_t step = 0;
  for (double v : values) metric.AddMetric(1000000000 + 7 * step++, v);
  const std::string text = ChunkText(metric);
  // The first step in full, then the differences.
  EXPECT_EQ(text.substr(0, 13), "1000000000 0.");
  EXPECT_EQ(text.substr(text.find('\n') + 1, 2), "7 ");
  const std::vector<MetricPoint> points = Points(text);
  ASSERT_EQ(points.size(), std::size(values));
  for (std::size_t i = 0; i + 1 < points.size(); ++i) {
    EXPECT_EQ(points[i].step, 1000000000 + 7 * static_cast<std::int64_t>(i));
    EXPECT_EQ(std::signbit(points[i].value), std::signbit(values[i]));
    EXPECT_EQ(points[i].value, values[i]);
  }
  EXPECT_TRUE(std::isnan(points.back().value));

  NewPoints steps;
  steps.AddStep(8, 1700000000124, std::nullopt, std::nullopt, 3.0);
  steps.AddStep(7, 1700000000123, 100, -0.5, std::nullopt);
  std::vector<StepPoint> read;
  ASSERT_TRUE(
      DecodeStepChunk(ChunkText(steps), [&](const StepPoint& p) { read.push_back(p); }).ok());
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0].step, 7);
  EXPECT_EQ(read[1].step, 8);
  EXPECT_EQ(read[0].time, FromUnixMillis(1700000000123));
  EXPECT_EQ(read[0].total_steps, 100);
  EXPECT_EQ(read[0].epoch, -0.5);  // a negative number, not an absent one
  EXPECT_FALSE(read[0].total_epochs);
  EXPECT_FALSE(read[1].total_steps);
  EXPECT_EQ(read[1].total_epochs, 3.0);
}

TEST(ProgressChunks, AppendingFillsALessThanHalfFullChunkThenStartsNewOnes) {
  const std::vector<Chunk> stored = {MakeChunk(1, 40)};
  Lines fresh(Range(41, 300));
  auto changes = MergeIntoChunks(stored, fresh.lines, 128);
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->write.size(), 3u);
  EXPECT_EQ(changes->write[0].first_step, 1);  // the stored chunk, now full
  EXPECT_EQ(changes->write[0].last_step, 128);
  EXPECT_EQ(changes->write[0].points, 128u);
  EXPECT_EQ(Points(changes->write[0].text).at(39).step, 40);
  EXPECT_EQ(changes->write[1].first_step, 129);
  EXPECT_EQ(changes->write[2].first_step, 257);
  EXPECT_EQ(changes->write[2].points, 44u);
  EXPECT_TRUE(changes->remove.empty());
}

// Appending never rewrites more than half a chunk: a full chunk, or a half
// full one the new points would overflow, stays as it is.
TEST(ProgressChunks, AFullOrHalfFullChunkBeforeTheNewPointsIsNotRewritten) {
  Lines two(Range(129, 130));
  auto changes = MergeIntoChunks(std::vector<Chunk>{MakeChunk(1, 128)}, two.lines, 128);
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->write.size(), 1u);
  EXPECT_EQ(changes->write[0].first_step, 129);
  EXPECT_TRUE(changes->remove.empty());

  Lines batch(Range(101, 200));
  changes = MergeIntoChunks(std::vector<Chunk>{MakeChunk(1, 100)}, batch.lines, 128);
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->write.size(), 1u);
  EXPECT_EQ(changes->write[0].first_step, 101);
  EXPECT_EQ(changes->write[0].points, 100u);
  // Half full, and room for what comes: extended.
  changes = MergeIntoChunks(std::vector<Chunk>{MakeChunk(1, 100)}, two.lines, 128);
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->write.size(), 1u);
  EXPECT_EQ(changes->write[0].first_step, 1);
  EXPECT_EQ(changes->write[0].points, 102u);
  EXPECT_TRUE(LeavesChunkAlone(64, 65, 128));
  EXPECT_FALSE(LeavesChunkAlone(63, 100, 128));
  EXPECT_FALSE(LeavesChunkAlone(64, 64, 128));
}

TEST(ProgressChunks, APointInsideAChunkReplacesOrSplitsIt) {
  // Steps 1..128 but 50: step 50 arrives late, the chunk overflows by one.
  std::vector<std::int64_t> steps = Range(1, 129);
  steps.erase(steps.begin() + 49);
  Lines all(steps);
  Chunk full{1, 129, 128, ChunkText(all.points)};
  Lines late({50});
  auto changes = MergeIntoChunks(std::vector<Chunk>{full}, late.lines, 128);
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->write.size(), 2u);
  EXPECT_EQ(changes->write[0].last_step, 128);
  EXPECT_EQ(changes->write[1].first_step, 129);
  EXPECT_EQ(Points(changes->write[0].text).at(49).step, 50);

  // Step 60 again with a new value: replaced in place.
  Lines again({60}, 2.0);
  changes = MergeIntoChunks(std::vector<Chunk>{MakeChunk(1, 128)}, again.lines, 128);
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->write.size(), 1u);
  EXPECT_EQ(changes->write[0].points, 128u);
  EXPECT_EQ(Points(changes->write[0].text).at(59).value, 120.0);
}

TEST(ProgressChunks, NewPointsSpanningChunksMergeThemAndRemoveTheStartsThatGo) {
  const std::vector<Chunk> stored = {MakeChunk(10, 19), MakeChunk(30, 39)};
  Lines fresh({5, 25});
  auto changes = MergeIntoChunks(stored, fresh.lines, 128);
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->write.size(), 1u);
  EXPECT_EQ(changes->write[0].first_step, 5);
  EXPECT_EQ(changes->write[0].last_step, 39);
  EXPECT_EQ(changes->write[0].points, 22u);
  EXPECT_EQ(changes->remove, (std::vector<std::int64_t>{10, 30}));
}

TEST(ProgressChunks, ADamagedChunkIsRefused) {
  std::vector<SeriesLine> lines;
  EXPECT_TRUE(SplitChunk("5 0.5\n1 0.6\n", lines).ok());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].step, 6);
  EXPECT_EQ(lines[1].rest, " 0.6\n");
  lines.clear();
  EXPECT_EQ(SplitChunk("1 0.5\n0 0.6\n", lines).code(), StatusCode::kInternal);  // not increasing
  lines.clear();
  EXPECT_EQ(SplitChunk("1 0.5", lines).code(), StatusCode::kInternal);  // no end of line
  EXPECT_EQ(DecodeMetricChunk("1 x\n", [](const MetricPoint&) {}).code(), StatusCode::kInternal);
  EXPECT_EQ(DecodeMetricChunk("1 0.5\n-1 0.5\n", [](const MetricPoint&) {}).code(),
            StatusCode::kInternal);
  Chunk bad{1, 2, 2, "2 0.5\n-1 0.5\n"};
  Lines fresh({3});
  EXPECT_FALSE(MergeIntoChunks(std::vector<Chunk>{bad}, fresh.lines, 128).ok());
}

}  // namespace
}  // namespace headway::sql
