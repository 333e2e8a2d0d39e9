// Chart summaries (SeriesSummary) of the metric series charts are read
// from, kept in memory and fed as reports are committed, so that a chart of
// a million-point series is read from a few thousand cells instead of the
// store.
//
// A series gets a summary at its first chart read (one scan of the store)
// and keeps it while it is among the `max_series` most recently charted. A
// report that is not past a series' last step (late or repeated) drops its
// summary; the next read builds it again. Reports committed while a summary
// is being built are kept aside and appended to it afterwards. At most
// `max_series` x 4,096 cells of 56 bytes: 29 MiB with the default 128.
//
// Thread safety: all methods are thread-safe; the scan runs without the lock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/progress_report.h"
#include "core/series_summary.h"
#include "core/status.h"
#include "store/store.h"

namespace headway {

class SeriesSummaries {
 public:
  // Calls `each` with every point of the series, ascending by step.
  using Scan = std::function<Status(const std::function<void(const MetricPoint&)>& each)>;

  explicit SeriesSummaries(std::size_t max_series = 128) : max_series_(max_series) {}

  // After `batch` is durable: its points go to the summaries of its job.
  void Apply(const ProgressBatch& batch);
  // The job is gone (deleted): its summaries too.
  void Forget(const std::string& job);

  // A chart of `buckets` buckets from the series' summary, made with `scan`
  // if there is none. nullopt when a summary cannot answer (the series has
  // at most `buckets` points, or another read is building its summary): the
  // caller reads the series itself.
  Result<std::optional<MetricChart>> Chart(const std::string& job, const std::string& metric,
                                           std::size_t buckets, const Scan& scan);

  std::size_t size() const;  // summaries kept

 private:
  struct Entry {
    SeriesSummary summary;
    bool building = false;
    bool spoiled = false;              // while building: a report out of order came
    std::vector<MetricPoint> pending;  // while building: reports committed meanwhile
    std::uint64_t used = 0;            // for eviction: the read clock at its last read
  };
  void EvictOverCapacity();
  std::size_t Entries() const;  // summaries kept (and being built); under mu_

  const std::size_t max_series_;
  mutable std::mutex mu_;
  // job -> metric -> entry; guarded by mu_
  std::unordered_map<std::string, std::map<std::string, Entry, std::less<>>> jobs_;
  std::uint64_t reads_ = 0;  // guarded by mu_
};

}  // namespace headway
