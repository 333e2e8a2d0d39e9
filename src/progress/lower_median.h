// The lower median of a sample, shared by the ETA and health estimators.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace headway::progress::internal {

// Lower median; reorders `v`. `v` must not be empty.
inline double LowerMedian(std::vector<double>& v) {
  auto mid = v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace headway::progress::internal
