// Progress series as the store keeps them: each series (a job's steps, or
// one of its metrics) in chunks of up to kChunkPoints points, one row per
// chunk, as time-series databases keep them. A row per point made every
// point a keyed upsert (five per report of four metrics, about 2 us each
// for SQLite on the writer's one thread), which capped batched ingest near
// 100k points/s; a chunk takes a request's points in one write.
//
// A chunk's text is one line per point, in step order, each step once:
//   steps:   "<step> <time ms> <total_steps> <epoch> <total_epochs>\n"
//   metrics: "<step> <value>\n"
// where <step> is the step itself on the first line and the step less the
// line before's on the others (1 for consecutive steps: a third of the text
// otherwise). Numbers as line_codec.h writes them (values come back bit for
// bit, NaN and the infinities included). Chunks of a series never overlap:
// each holds the steps from its first_step to its last_step.
//
// This header is the format and the merge, free of I/O; the table is
// progress_chunks (sql_store_progress.cc reads and writes it). Internal to store/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/progress_report.h"
#include "core/status.h"

namespace headway::sql {

// The series name of a job's steps; a metric's series is its name, which
// is never empty.
inline constexpr std::string_view kStepSeries = "";

// At most this many points per chunk: about 3 KiB of text for a metric and
// 6 KiB for steps, so rewriting a chunk that takes new points stays cheap.
inline constexpr std::size_t kChunkPoints = 128;

// One point of a series: its step, and the rest of its line (from the
// space after the step up to and including the '\n').
struct SeriesLine {
  std::int64_t step;
  std::string_view rest;
};

// New points of one series, in the order they came.
class NewPoints {
 public:
  void AddStep(std::int64_t step, std::int64_t time_millis,
               const std::optional<std::int64_t>& total_steps, const std::optional<double>& epoch,
               const std::optional<double>& total_epochs);
  void AddMetric(std::int64_t step, double value);
  bool empty() const { return points_.empty(); }
  // By step, each step once: the one added last. Views into this object.
  std::vector<SeriesLine> Sorted();

 private:
  struct Point {
    std::int64_t step;
    std::uint32_t begin, end;  // in text_
  };
  std::string text_;
  std::vector<Point> points_;
};

// The lines of a chunk's text, in order. A text these functions did not
// write (a line without a step, or steps not increasing) is Internal.
// The views are into `text`.
Status SplitChunk(std::string_view text, std::vector<SeriesLine>& lines);

// The points of a chunk's text, in step order.
Status DecodeStepChunk(std::string_view text, const std::function<void(const StepPoint&)>& visit);
Status DecodeMetricChunk(std::string_view text,
                         const std::function<void(const MetricPoint&)>& visit);

// A chunk as stored.
struct Chunk {
  std::int64_t first_step = 0;
  std::int64_t last_step = 0;
  std::size_t points = 0;
  std::string text;
};

// What merging new points into a series changes.
struct ChunkChanges {
  std::vector<Chunk> write;          // to insert or replace, by first_step
  std::vector<std::int64_t> remove;  // first steps of chunks no longer there
};

// Whether new points that all come after a chunk of `points` points start
// chunks of their own rather than extend it: when it is full, or at least
// half full and they would overflow it. Appending then rewrites at most
// half a chunk: a batch of 100 points writes each of its points once, and
// reports filed 32 to a series at a time make chunks of 64 to 128 points
// for 1.5 to 2.5 times their bytes.
bool LeavesChunkAlone(std::size_t points, std::size_t new_points,
                      std::size_t max_points = kChunkPoints);

// Merges `fresh` (sorted by step, each step once) into the stored chunks
// that hold or precede its steps: the chunk with the greatest first_step
// at or below fresh's first step, if any, and every chunk whose first_step
// lies within fresh's steps, sorted by first_step. A fresh point replaces
// a stored one of the same step. A chunk that only precedes the new points
// is left alone if LeavesChunkAlone says so (the caller need not read its
// text then, nor pass it). `fresh` must not be empty.
Result<ChunkChanges> MergeIntoChunks(std::span<const Chunk> stored,
                                     std::span<const SeriesLine> fresh,
                                     std::size_t max_points = kChunkPoints);

}  // namespace headway::sql
