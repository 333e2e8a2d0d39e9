#include "server/ingest_writer.h"

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
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty() && stopping_) return;
      work.swap(queue_);
      pending_reports_ = 0;
    }
    std::vector<ProgressBatch> batches;
    batches.reserve(work.size());
    for (Pending& p : work) batches.push_back(std::move(p.batch));
    Status s = store_.AppendProgress(batches);
    if (s.ok()) {
      for (const ProgressBatch& b : batches) tracker_.Apply(b);
    }
    for (Pending& p : work) {
      if (p.done) p.done(s);
    }
  }
}

}  // namespace headway
