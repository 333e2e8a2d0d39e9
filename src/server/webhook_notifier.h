// Webhooks: every job state or health change is POSTed as JSON to each
// configured URL, from a background thread so the control loop never waits
// on a receiver. Delivery is at least once per attempt cycle: up to
// `attempts` tries with backoff, then the event is dropped and logged.
// The queue is bounded; when full the oldest undelivered event is dropped.
//
// Thread safety: Notify is thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace headway {

class WebhookNotifier {
 public:
  explicit WebhookNotifier(std::vector<std::string> urls, int attempts = 3,
                           std::size_t max_queue = 10000);
  ~WebhookNotifier();  // tries what is queued for up to ~2 s more, then stops

  void Notify(nlohmann::json event);
  bool enabled() const { return !urls_.empty(); }

 private:
  void Run();

  const std::vector<std::string> urls_;
  const int attempts_;
  const std::size_t max_queue_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<nlohmann::json> queue_;  // guarded by mu_
  bool stopping_ = false;             // guarded by mu_
  std::thread thread_;
};

}  // namespace headway
