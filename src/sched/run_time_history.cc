#include "sched/run_time_history.h"

#include <algorithm>

namespace headway::sched {

void RunTimeHistory::Record(const std::vector<std::string>& keys, Duration ran) {
  if (ran < Duration::zero()) return;
  for (const std::string& key : keys) {
    auto& runs = runs_[key];
    runs.push_back(ran);
    while (runs.size() > window_) runs.pop_front();
  }
}

std::optional<Duration> RunTimeHistory::Expect(const std::vector<std::string>& keys) const {
  for (const std::string& key : keys) {
    auto it = runs_.find(key);
    if (it == runs_.end() || it->second.size() < min_samples_) continue;
    std::vector<Duration> sorted(it->second.begin(), it->second.end());
    auto mid = sorted.begin() + static_cast<long>(sorted.size() / 2);
    std::nth_element(sorted.begin(), mid, sorted.end());
    if (sorted.size() % 2 == 1) return *mid;
    Duration upper = *mid;
    Duration lower = *std::max_element(sorted.begin(), mid);
    return lower + (upper - lower) / 2;
  }
  return std::nullopt;
}

}  // namespace headway::sched
