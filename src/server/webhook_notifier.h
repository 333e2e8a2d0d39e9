// Webhooks: every job state or health change is POSTed as JSON to each
// configured URL. Nothing waits on a receiver: each URL has its own worker
// thread and bounded queue (a hung or slow receiver delays only its own
// deliveries; when its queue is full the oldest event is dropped), every
// request has a deadline, and shutdown gives the workers two seconds at most.
//
// Each body carries a human `text` line (Slack and Mattermost incoming
// webhooks show it) and is signed: `X-Headway-Signature: sha256=<hex>` is
// the HMAC-SHA-256 of the body under the shared secret, as GitHub signs its
// webhooks, so a receiver can tell Headway's posts from anyone else's.
// Delivery is at least once per attempt cycle: up to `attempts` tries with
// backoff, then the event is dropped and logged.
//
// Thread safety: Notify is thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace headway {

struct WebhookOptions {
  std::vector<std::string> urls;
  std::string secret;  // HMAC key; empty: bodies are not signed
  int attempts = 3;
  std::size_t max_queue = 10000;  // per URL
  std::chrono::milliseconds timeout = std::chrono::seconds(5);  // per request, per I/O step
};

class WebhookNotifier {
 public:
  explicit WebhookNotifier(WebhookOptions options);
  // Lets the workers deliver what is queued for up to 2 s, then leaves any
  // still waiting on a receiver behind (they end at their request deadline).
  ~WebhookNotifier();

  void Notify(const nlohmann::json& event);
  bool enabled() const { return !endpoints_.empty(); }

  struct Endpoint;  // one URL's queue and worker

 private:
  std::vector<std::shared_ptr<Endpoint>> endpoints_;
};

}  // namespace headway
