#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "hpo/internal/samplers.h"

namespace headway::hpo {
namespace {

// `n` points from lo to hi inclusive, evenly spaced (in log space when `log`);
// the end points are exact so a grid always contains its bounds.
std::vector<double> Spaced(double lo, double hi, int n, bool log) {
  const double a = log ? std::log(lo) : lo;
  const double b = log ? std::log(hi) : hi;
  auto from_axis = [&](double t) { return std::clamp(log ? std::exp(t) : t, lo, hi); };
  if (n <= 1 || lo == hi) return {from_axis(0.5 * (a + b))};  // one point: the middle
  std::vector<double> points(n);
  for (int i = 0; i < n; ++i) points[i] = from_axis(a + (b - a) * i / (n - 1));
  points.front() = lo;
  points.back() = hi;
  return points;
}

// The values the grid visits for `param`, in ascending (or declared) order.
// Empty only for a parameter that has no valid value at all.
std::vector<ParamValue> GridValues(const ParamSpec& param, int grid_points) {
  const bool log = param.log && param.min > 0;  // as DrawUniform: log needs positive bounds
  std::vector<ParamValue> out;
  switch (param.type) {
    case ParamType::kDouble:
      if (param.min > param.max) break;
      for (double v : Spaced(param.min, param.max, grid_points, log)) out.emplace_back(v);
      break;
    case ParamType::kInt: {
      const double lo = std::ceil(param.min);
      const double hi = std::floor(param.max);
      if (lo > hi) break;
      // Rounding a fine grid over a short range repeats integers; the points
      // are ascending, so equal neighbours are the only duplicates.
      double last = std::numeric_limits<double>::quiet_NaN();
      for (double v : Spaced(lo, hi, grid_points, log)) {
        const double rounded = std::clamp(std::round(v), lo, hi);
        if (rounded != last) out.emplace_back(rounded);
        last = rounded;
      }
      break;
    }
    case ParamType::kDiscrete:
      out.assign(param.values.begin(), param.values.end());
      break;
    case ParamType::kCategorical:
      out.assign(param.categories.begin(), param.categories.end());
      break;
  }
  return out;
}

// The product of the sizes, saturated at int64 max rather than overflowing.
std::int64_t ProductOfSizes(const std::vector<std::vector<ParamValue>>& axes) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  std::int64_t size = 1;
  for (const auto& axis : axes) {
    const auto n = static_cast<std::int64_t>(axis.size());
    if (n == 0) return 0;
    size = size > kMax / n ? kMax : size * n;
  }
  return size;
}

std::vector<std::vector<ParamValue>> GridAxes(const SearchSpace& space, int grid_points) {
  std::vector<std::vector<ParamValue>> axes;
  axes.reserve(space.size());
  for (const ParamSpec& param : space) axes.push_back(GridValues(param, grid_points));
  return axes;
}

class GridSampler final : public Sampler {
 public:
  explicit GridSampler(const SamplerOptions& options) : grid_points_(options.grid_points) {}

  Assignment Suggest(const SearchSpace& space, std::span<const Observation> /*history*/,
                     std::int64_t trial_index) const override {
    const auto axes = GridAxes(space, grid_points_);
    const std::int64_t size = ProductOfSizes(axes);
    Assignment a;
    if (size == 0) {
      // Some parameter has no value at all; the others still get one so the
      // caller sees which one is broken rather than an empty assignment.
      for (std::size_t k = 0; k < space.size(); ++k) {
        std::uint64_t unused = 0;
        a[space[k].name] = axes[k].empty() ? internal::DrawUniform(space[k], unused) : axes[k][0];
      }
      return a;
    }
    // A saturated size is below the real one, but also above any trial index,
    // so the wrap never applies to it.
    std::int64_t point = trial_index % size;
    if (point < 0) point += size;
    // Mixed radix with the last parameter as the fastest digit.
    for (std::size_t k = space.size(); k-- > 0;) {
      const auto n = static_cast<std::int64_t>(axes[k].size());
      a[space[k].name] = axes[k][point % n];
      point /= n;
    }
    return a;
  }

 private:
  int grid_points_;
};

}  // namespace

std::int64_t GridSize(const SearchSpace& space, int grid_points) {
  return ProductOfSizes(GridAxes(space, grid_points));
}

namespace internal {

std::unique_ptr<Sampler> MakeGridSampler(const SamplerOptions& options) {
  return std::make_unique<GridSampler>(options);
}

}  // namespace internal
}  // namespace headway::hpo
