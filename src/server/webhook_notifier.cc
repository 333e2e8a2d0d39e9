#include "server/webhook_notifier.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "api/http_client.h"

namespace headway {

WebhookNotifier::WebhookNotifier(std::vector<std::string> urls, int attempts, std::size_t max_queue)
    : urls_(std::move(urls)), attempts_(attempts), max_queue_(max_queue) {
  if (!urls_.empty()) thread_ = std::thread([this] { Run(); });
}

WebhookNotifier::~WebhookNotifier() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WebhookNotifier::Notify(nlohmann::json event) {
  if (urls_.empty()) return;
  std::lock_guard lock(mu_);
  if (queue_.size() >= max_queue_) {
    queue_.pop_front();
    spdlog::warn("webhook queue full; dropped the oldest event");
  }
  queue_.push_back(std::move(event));
  wake_.notify_one();
}

void WebhookNotifier::Run() {
  auto stop_deadline = std::chrono::steady_clock::time_point::max();
  for (;;) {
    nlohmann::json event;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_ && stop_deadline == std::chrono::steady_clock::time_point::max()) {
        stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      }
      if (queue_.empty() || std::chrono::steady_clock::now() > stop_deadline) return;
      event = std::move(queue_.front());
      queue_.pop_front();
    }
    std::string body = event.dump();
    for (const std::string& url : urls_) {
      // "http://host:port/path": the client takes the base, the path is the target.
      std::string rest = url.substr(url.find("//") == std::string::npos ? 0 : url.find("//") + 2);
      auto slash = rest.find('/');
      std::string base = url.substr(0, url.size() - (slash == std::string::npos ? 0 : rest.size() - slash));
      std::string target = slash == std::string::npos ? "/" : rest.substr(slash);
      api::HttpClient client(base);
      for (int attempt = 1; attempt <= attempts_; ++attempt) {
        auto resp = client.Request("POST", target, body);
        if (resp.ok() && resp->status < 300) break;
        if (attempt == attempts_) {
          spdlog::warn("webhook {} failed after {} attempts: {}", url, attempts_,
                       resp.ok() ? "HTTP " + std::to_string(resp->status) : resp.status().message());
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
        }
      }
    }
  }
}

}  // namespace headway
