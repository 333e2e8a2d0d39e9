// A metric series summarised for charts, kept as points arrive so that a
// chart of a long series is read without reading the series.
//
// Consecutive points are grouped in cells of 2^k points each (the last cell
// may hold fewer), with each cell's first and last step, min, max, last
// value and whether it holds a non-finite value: the same fields as a
// chart bucket (MetricBucket). When the series outgrows kMaxCells cells,
// neighbouring cells merge and cells hold twice as many points, so memory
// stays bounded (about 200 KiB) however long the series grows.
//
// A chart of B buckets from the cells gives each bucket whole cells, about
// equally many: bucket point counts then differ by at most one cell's worth
// from Downsample's equal counts, and every spike still shows in its
// bucket's min and max. While cells hold single points it is exactly
// Downsample.
//
// Pure: no I/O, no locks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/progress_report.h"

namespace headway {

class SeriesSummary {
 public:
  static constexpr std::size_t kMaxCells = 4096;

  // Appends a point past every point so far. Returns false, changing
  // nothing, when `point.step` is not past the last step (a late or
  // repeated report): the summary then no longer describes the series.
  bool Append(const MetricPoint& point);

  std::size_t points() const { return points_; }
  std::size_t points_per_cell() const { return points_per_cell_; }
  const std::vector<MetricBucket>& cells() const { return cells_; }

  // A chart of `buckets` buckets; nullopt when the series has no more points
  // than that (a chart then shows the points themselves) or too few cells.
  std::optional<std::vector<MetricBucket>> Chart(std::size_t buckets) const;

 private:
  void HalveCells();

  std::vector<MetricBucket> cells_;
  std::size_t points_per_cell_ = 1;
  std::size_t points_ = 0;
};

// One point as a bucket, and one bucket covering `a` then `b` (consecutive):
// the arithmetic of every chart bucket (Downsample's too).
MetricBucket BucketOf(const MetricPoint& point);
MetricBucket MergeBuckets(const MetricBucket& a, const MetricBucket& b);

}  // namespace headway
