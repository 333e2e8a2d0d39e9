#include "core/series_summary.h"

#include <cmath>
#include <limits>

namespace headway {

namespace {

// NaN stands for "no finite value yet" on either side.
double Lower(double a, double b) { return std::isnan(a) || b < a ? b : a; }
double Higher(double a, double b) { return std::isnan(a) || b > a ? b : a; }

}  // namespace

MetricBucket BucketOf(const MetricPoint& p) {
  MetricBucket cell;
  cell.first_step = p.step;
  cell.last_step = p.step;
  cell.last = p.value;
  cell.count = 1;
  if (std::isfinite(p.value)) {
    cell.min = p.value;
    cell.max = p.value;
  } else {
    cell.min = std::numeric_limits<double>::quiet_NaN();
    cell.max = std::numeric_limits<double>::quiet_NaN();
    cell.non_finite = true;
  }
  return cell;
}

MetricBucket MergeBuckets(const MetricBucket& a, const MetricBucket& b) {
  MetricBucket m;
  m.first_step = a.first_step;
  m.last_step = b.last_step;
  m.min = std::isnan(b.min) ? a.min : Lower(a.min, b.min);
  m.max = std::isnan(b.max) ? a.max : Higher(a.max, b.max);
  m.last = b.last;
  m.count = a.count + b.count;
  m.non_finite = a.non_finite || b.non_finite;
  return m;
}

bool SeriesSummary::Append(const MetricPoint& point) {
  if (!cells_.empty() && point.step <= cells_.back().last_step) return false;
  ++points_;
  const bool last_full = cells_.empty() || cells_.back().count == points_per_cell_;
  if (last_full && cells_.size() == kMaxCells) HalveCells();  // the last cell then has room
  if (!cells_.empty() && cells_.back().count < points_per_cell_) {
    cells_.back() = MergeBuckets(cells_.back(), BucketOf(point));
  } else {
    cells_.push_back(BucketOf(point));
  }
  return true;
}

void SeriesSummary::HalveCells() {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < cells_.size(); i += 2) {
    cells_[kept++] = i + 1 < cells_.size() ? MergeBuckets(cells_[i], cells_[i + 1]) : cells_[i];
  }
  cells_.resize(kept);
  points_per_cell_ *= 2;
}

std::optional<std::vector<MetricBucket>> SeriesSummary::Chart(std::size_t buckets) const {
  if (buckets == 0 || points_ <= buckets || cells_.size() < buckets) return std::nullopt;
  std::vector<MetricBucket> out;
  out.reserve(buckets);
  const std::size_t n = cells_.size();
  for (std::size_t b = 0; b < buckets; ++b) {
    std::size_t begin = b * n / buckets, end = (b + 1) * n / buckets;
    MetricBucket bucket = cells_[begin];
    for (std::size_t i = begin + 1; i < end; ++i) bucket = MergeBuckets(bucket, cells_[i]);
    out.push_back(bucket);
  }
  return out;
}

}  // namespace headway
