// Group commit for progress reports. Request threads hand batches to one
// writer thread, which stores everything that queued up meanwhile in a single
// transaction, then feeds the ProgressTracker and wakes the requests. An
// acknowledged report is therefore on disk, and the number of fsyncs grows
// with the write rate of the disk, not with the number of reporters.
//
// Between commits the writer has the store file what it acknowledged
// (Store::FoldProgress): in groups of kFoldReports once that many wait, so
// each series' chunk takes many of its reports per write, and in full when
// no report has come for a while. A report arriving during a group waits
// for it, which sets much of the p99 of a loaded server (bench/README.md,
// "The report log" and "Series in chunks").
//
// Thread safety: Write/WriteAsync are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "server/progress_tracker.h"
#include "store/store.h"

namespace headway {

class IngestWriter {
 public:
  // `max_pending_reports`: beyond this, Write answers ResourceExhausted (429).
  IngestWriter(Store& store, ProgressTracker& tracker, std::size_t max_pending_reports = 200000);
  ~IngestWriter();  // drains what is queued, then stops

  // Blocks until the batch is durable (Ok) or failed.
  Status Write(ProgressBatch batch);
  // Queues without waiting; for reports nobody acknowledges (log markers).
  void WriteAsync(ProgressBatch batch);
  // Queues without waiting; `done` gets the outcome on the writer's thread
  // once the batch is durable or failed, or at once when it is refused.
  void WriteThen(ProgressBatch batch, std::function<void(const Status&)> done);

 private:
  struct Pending {
    ProgressBatch batch;
    std::function<void(const Status&)> done;
  };
  Status Enqueue(ProgressBatch batch, std::function<void(const Status&)> done);
  void Run();
  void Fold();  // one group; on the writer's thread

  static constexpr std::size_t kFoldAt = 4096;       // reports waiting to be filed
  static constexpr std::size_t kFoldReports = 1024;  // filed per transaction
  static constexpr auto kIdleBeforeFold = std::chrono::milliseconds(50);

  Store& store_;
  ProgressTracker& tracker_;
  const std::size_t max_pending_reports_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Pending> queue_;        // guarded by mu_
  std::size_t pending_reports_ = 0;  // guarded by mu_
  bool stopping_ = false;            // guarded by mu_
  // Acknowledged, not yet filed, as far as the writer knows: long requests
  // the store filed at once count too, and a fold that finds nothing waiting
  // resets it (at start: whatever an earlier run left, if anything). The
  // writer's thread only.
  std::size_t unfolded_ = 1;
  std::thread thread_;
};

}  // namespace headway
