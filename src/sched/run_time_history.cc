#include "sched/run_time_history.h"

#include <algorithm>

namespace headway::sched {

namespace {

Duration Median(const std::deque<Duration>& runs) {
  std::vector<Duration> sorted(runs.begin(), runs.end());
  auto mid = sorted.begin() + static_cast<long>(sorted.size() / 2);
  std::nth_element(sorted.begin(), mid, sorted.end());
  if (sorted.size() % 2 == 1) return *mid;
  Duration upper = *mid;
  Duration lower = *std::max_element(sorted.begin(), mid);
  return lower + (upper - lower) / 2;
}

}  // namespace

void RunTimeHistory::Record(const std::vector<std::string>& keys, Duration ran) {
  if (ran < Duration::zero()) return;
  for (const std::string& key : keys) {
    Runs& runs = runs_[key];
    runs.recent.push_back(ran);
    while (runs.recent.size() > window_) runs.recent.pop_front();
    runs.median = Median(runs.recent);
  }
}

std::optional<Duration> RunTimeHistory::Expect(const std::vector<std::string>& keys) const {
  for (const std::string& key : keys) {
    auto it = runs_.find(key);
    if (it != runs_.end() && it->second.recent.size() >= min_samples_) return it->second.median;
  }
  return std::nullopt;
}

}  // namespace headway::sched
