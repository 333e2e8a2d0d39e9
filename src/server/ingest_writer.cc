#include "server/ingest_writer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <future>

namespace headway {

IngestWriter::IngestWriter(Store& store, ProgressTracker& tracker, std::size_t max_pending_reports)
    : store_(store), tracker_(tracker), max_pending_reports_(max_pending_reports) {
  thread_ = std::thread([this] { Run(); });
}

IngestWriter::~IngestWriter() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

Status IngestWriter::Enqueue(ProgressBatch batch, std::function<void(const Status&)> done) {
  std::lock_guard lock(mu_);
  if (stopping_) return Unavailable("the server is shutting down");
  if (pending_reports_ + batch.reports.size() > max_pending_reports_) {
    return Status(StatusCode::kResourceExhausted, "too many reports waiting to be stored; retry");
  }
  pending_reports_ += batch.reports.size();
  queue_.push_back({std::move(batch), std::move(done)});
  wake_.notify_one();
  return Status::Ok();
}

Status IngestWriter::Write(ProgressBatch batch) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  WriteThen(std::move(batch), [promise](const Status& s) { promise->set_value(s); });
  return future.get();
}

void IngestWriter::WriteThen(ProgressBatch batch, std::function<void(const Status&)> done) {
  Status s = Enqueue(std::move(batch), done);
  if (!s.ok()) done(s);
}

void IngestWriter::WriteAsync(ProgressBatch batch) {
  (void)Enqueue(std::move(batch), nullptr);  // dropped only under overload; markers are best effort
}

void IngestWriter::Run() {
  for (;;) {
    std::deque<Pending> work;
    {
      std::unique_lock lock(mu_);
      auto ready = [this] { return stopping_ || !queue_.empty(); };
      if (unfolded_ > 0) {
        // Quiet for a while: file what waits, a group at a time, so reads
        // seldom have to.
        if (!wake_.wait_for(lock, kIdleBeforeFold, ready)) {
          lock.unlock();
          Fold();
          continue;
        }
      } else {
        wake_.wait(lock, ready);
      }
      if (queue_.empty() && stopping_) return;
      work.swap(queue_);
      pending_reports_ = 0;
    }
    std::vector<ProgressBatch> batches;
    batches.reserve(work.size());
    std::size_t reports = 0;
    for (Pending& p : work) {
      reports += p.batch.reports.size();
      batches.push_back(std::move(p.batch));
    }
    Status s = store_.AppendProgress(batches);
    if (s.ok()) {
      unfolded_ += reports;
      for (const ProgressBatch& b : batches) tracker_.Apply(b);
    }
    for (Pending& p : work) {
      if (p.done) p.done(s);
    }
    if (unfolded_ >= kFoldAt) Fold();
  }
}

void IngestWriter::Fold() {
  auto folded = store_.FoldProgress(kFoldReports);
  if (!folded.ok()) {
    // Reads fold what is left, or say why they cannot; retrying at once
    // would only spin on the same error.
    spdlog::error("cannot file progress reports: {}", folded.status().ToString());
    unfolded_ = 0;
    return;
  }
  unfolded_ = *folded == 0 ? 0 : unfolded_ - std::min(unfolded_, *folded);
}

}  // namespace headway
