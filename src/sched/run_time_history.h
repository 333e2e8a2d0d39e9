// What a waiting job will probably run, learned from jobs that finished: the
// scheduler's kShortestWork orders by it (capped by the job's time limit,
// which users set far above what their jobs need). Pure: the caller records
// finished jobs and asks before each decision.
//
// A job is described by keys from the most specific to the least, e.g.
// {"template:resnet-sweep", "user:alice", "team:vision"}. The estimate is the
// median run time of the most specific key with at least `min_samples` recent
// runs (the last `window` of them), so one outlier does not move it and a
// user's habits outweigh the team's. Where no key has enough runs, nothing is
// known and the scheduler falls back to the time limit.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/time.h"

namespace headway::sched {

class RunTimeHistory {
 public:
  explicit RunTimeHistory(std::size_t window = 20, std::size_t min_samples = 3)
      : window_(window == 0 ? 1 : window), min_samples_(min_samples == 0 ? 1 : min_samples) {}

  // A job that ran to completion (or failure) took `ran`; negative is ignored.
  void Record(const std::vector<std::string>& keys, Duration ran);

  std::optional<Duration> Expect(const std::vector<std::string>& keys) const;

  std::size_t keys() const { return runs_.size(); }

 private:
  // A key's recent runs, newest last, and their median, kept as runs come:
  // the server asks for every waiting job at every decision, far more often
  // than jobs finish.
  struct Runs {
    std::deque<Duration> recent;
    Duration median{};
  };
  std::size_t window_, min_samples_;
  std::unordered_map<std::string, Runs> runs_;
};

}  // namespace headway::sched
