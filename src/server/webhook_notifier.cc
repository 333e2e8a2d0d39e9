#include "server/webhook_notifier.h"

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "api/auth.h"
#include "api/http_client.h"

namespace headway {

struct WebhookNotifier::Endpoint {
  std::string url;
  std::size_t max_queue = 0;
  std::mutex mu;
  std::condition_variable wake;
  std::deque<std::string> queue;  // guarded by mu: bodies to post
  bool stopping = false;          // guarded by mu
  std::chrono::steady_clock::time_point give_up_at =
      std::chrono::steady_clock::time_point::max();  // guarded by mu
  bool done = false;                                  // guarded by mu
  std::condition_variable finished;
};

namespace {

// "http://host:port/path": the client takes the base, the path is the target.
std::pair<std::string, std::string> SplitUrl(const std::string& url) {
  std::size_t scheme = url.find("//");
  std::size_t slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 2);
  if (slash == std::string::npos) return {url, "/"};
  return {url.substr(0, slash), url.substr(slash)};
}

// The worker owns a reference to its endpoint, so it may outlive the
// notifier when a receiver hangs past shutdown.
void Deliver(std::shared_ptr<WebhookNotifier::Endpoint> endpoint, WebhookOptions options) {
  auto [base, target] = SplitUrl(endpoint->url);
  for (;;) {
    std::string body;
    {
      std::unique_lock lock(endpoint->mu);
      endpoint->wake.wait(lock, [&] { return endpoint->stopping || !endpoint->queue.empty(); });
      if (endpoint->queue.empty() || std::chrono::steady_clock::now() > endpoint->give_up_at) {
        endpoint->done = true;
        endpoint->finished.notify_all();
        return;
      }
      body = std::move(endpoint->queue.front());
      endpoint->queue.pop_front();
    }
    std::vector<std::pair<std::string, std::string>> headers;
    if (!options.secret.empty()) {
      headers.emplace_back("X-Headway-Signature", "sha256=" + api::HmacSha256(options.secret, body));
    }
    api::HttpClient client(base);
    client.set_timeout(options.timeout);
    for (int attempt = 1; attempt <= options.attempts; ++attempt) {
      auto resp = client.Request("POST", target, body, "application/json", headers);
      if (resp.ok() && resp->status < 300) break;
      if (attempt == options.attempts) {
        spdlog::warn("webhook {} failed after {} attempts: {}", endpoint->url, options.attempts,
                     resp.ok() ? "HTTP " + std::to_string(resp->status) : resp.status().message());
        break;
      }
      std::unique_lock lock(endpoint->mu);
      // Backoff, cut short by shutdown.
      endpoint->wake.wait_for(lock, std::chrono::milliseconds(200 * attempt),
                              [&] { return endpoint->stopping; });
      if (endpoint->stopping && std::chrono::steady_clock::now() > endpoint->give_up_at) break;
    }
  }
}

}  // namespace

WebhookNotifier::WebhookNotifier(WebhookOptions options) {
  for (const std::string& url : options.urls) {
    auto endpoint = std::make_shared<Endpoint>();
    endpoint->url = url;
    endpoint->max_queue = options.max_queue;
    endpoints_.push_back(endpoint);
    std::thread(Deliver, endpoint, options).detach();
  }
}

WebhookNotifier::~WebhookNotifier() {
  const auto give_up_at = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (const auto& endpoint : endpoints_) {
    std::lock_guard lock(endpoint->mu);
    endpoint->stopping = true;
    endpoint->give_up_at = give_up_at;
    endpoint->wake.notify_all();
  }
  for (const auto& endpoint : endpoints_) {
    std::unique_lock lock(endpoint->mu);
    if (!endpoint->finished.wait_until(lock, give_up_at, [&] { return endpoint->done; })) {
      spdlog::warn("webhook {}: {} undelivered event(s) left at shutdown", endpoint->url,
                   endpoint->queue.size());
    }
  }
}

void WebhookNotifier::Notify(const nlohmann::json& event) {
  if (endpoints_.empty()) return;
  std::string body = event.dump();
  for (const auto& endpoint : endpoints_) {
    std::lock_guard lock(endpoint->mu);
    if (endpoint->queue.size() >= endpoint->max_queue) {
      endpoint->queue.pop_front();
      spdlog::warn("webhook {}: queue full; dropped the oldest event", endpoint->url);
    }
    endpoint->queue.push_back(body);
    endpoint->wake.notify_one();
  }
}

}  // namespace headway
