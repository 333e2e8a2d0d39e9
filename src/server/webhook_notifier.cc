#include "server/webhook_notifier.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "api/auth.h"
#include "api/http_client.h"
#include "core/time.h"

namespace headway {

using SteadyTime = std::chrono::steady_clock::time_point;

struct WebhookNotifier::Endpoint {
  std::string url;
  std::string key;          // the store's name for its cursor: a hash of the URL
  std::string name;         // for logs: the URL without its path
  std::int64_t cursor = 0;  // owned by the worker once it starts

  std::mutex mu;
  std::condition_variable wake;
  bool pending = false;                       // guarded by mu: Notify() since the last look
  bool stopping = false;                      // guarded by mu
  SteadyTime give_up_at = SteadyTime::max();  // guarded by mu
  bool done = false;                          // guarded by mu
  std::condition_variable finished;

  // The worker touches the store only holding store_mu, and not at all once
  // the notifier has gone (store == nullptr): a worker left behind on a hung
  // receiver may outlive the store.
  std::mutex store_mu;
  Store* store = nullptr;  // guarded by store_mu
};

namespace {

const std::vector<std::string> kDeliveredTypes = {"StateChanged", "HealthChanged", "NoReports",
                                                  "NotebookIdle", "GpuIdle"};
constexpr std::size_t kBatch = 100;
constexpr auto kMaxBackoff = std::chrono::seconds(30);

// "http://host:port/path": the client takes the base, the path is the target.
std::pair<std::string, std::string> SplitUrl(const std::string& url) {
  std::size_t scheme = url.find("//");
  std::size_t slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 2);
  if (slash == std::string::npos) return {url, "/"};
  return {url.substr(0, slash), url.substr(slash)};
}

// The target state of a StateChanged message "A -> B" or "A -> B: why".
std::optional<std::string> TargetState(const std::string& message) {
  std::size_t arrow = message.find(" -> ");
  if (arrow == std::string::npos) return std::nullopt;
  std::size_t begin = arrow + 4;
  std::size_t end = message.find(':', begin);
  return message.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

struct Delivery {
  std::int64_t id = 0;
  std::string body;
};

enum class Outcome { kDelivered, kGaveUp, kStopped };

// Whether the notifier is going and its two seconds are over.
bool PastShutdown(WebhookNotifier::Endpoint& endpoint) {
  std::lock_guard lock(endpoint.mu);
  return endpoint.stopping && std::chrono::steady_clock::now() >= endpoint.give_up_at;
}

void Finish(WebhookNotifier::Endpoint& endpoint) {
  std::lock_guard lock(endpoint.mu);
  endpoint.done = true;
  endpoint.finished.notify_all();
}

// Reads the next batch of due events and builds their bodies. Returns false
// when the notifier has gone (the store must not be touched any more).
bool ReadBatch(WebhookNotifier::Endpoint& endpoint, const WebhookOptions& options,
               std::vector<Delivery>& batch) {
  std::lock_guard gate(endpoint.store_mu);
  Store* store = endpoint.store;
  if (store == nullptr) return false;
  auto last = store->LastEventId();
  if (last.ok() && *last - endpoint.cursor > options.max_backlog) {
    std::int64_t skip_to = *last - options.max_backlog;
    spdlog::warn("webhook {}: more than {} events behind; skipped events {} to {}", endpoint.name,
                 options.max_backlog, endpoint.cursor + 1, skip_to);
    Status s = store->SetWebhookCursor(endpoint.key, skip_to, SystemClock().Now());
    if (!s.ok()) {
      spdlog::warn("webhook {}: {}", endpoint.name, s.ToString());
      return true;
    }
    endpoint.cursor = skip_to;
  }
  auto events = store->ListEventsAfter(endpoint.cursor, kDeliveredTypes, kBatch);
  if (!events.ok()) {
    spdlog::warn("webhook {}: {}", endpoint.name, events.status().ToString());
    return true;
  }
  std::map<std::string, std::pair<Job, std::vector<JobEvent>>> jobs;
  for (const JobEvent& event : *events) {
    auto it = jobs.find(event.job);
    if (it == jobs.end()) {
      Job job;
      auto stored = store->GetJob(event.job);
      if (stored.ok()) {
        job = std::move(stored.value());
      } else {
        job.spec.name = event.job;  // still worth telling
      }
      auto history = store->ListEvents(event.job);
      it = jobs.emplace(event.job,
                        std::make_pair(std::move(job), history.ok() ? std::move(history.value())
                                                                    : std::vector<JobEvent>{}))
               .first;
    }
    const auto& [job, history] = it->second;
    batch.push_back({event.id, WebhookBody(job, event, StateAfter(history, event.id)).dump()});
  }
  return true;
}

// Posts one body: up to `attempts` tries with backoff. kStopped when
// shutdown cut it short (the event stays due).
Outcome Post(WebhookNotifier::Endpoint& endpoint, const WebhookOptions& options,
             const std::string& base, const std::string& target, const Delivery& delivery) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (!options.secret.empty()) {
    headers.emplace_back("X-Headway-Signature",
                         "sha256=" + api::HmacSha256(options.secret, delivery.body));
  }
  headers.emplace_back("X-Headway-Delivery", std::to_string(delivery.id));
  auto backoff = options.first_backoff;
  for (int attempt = 1;; ++attempt) {
    std::chrono::milliseconds timeout = options.timeout;
    bool stopping = false;
    {
      std::lock_guard lock(endpoint.mu);
      stopping = endpoint.stopping;
      if (stopping) {
        // During shutdown no request may outlast the notifier's two seconds.
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            endpoint.give_up_at - std::chrono::steady_clock::now());
        if (left <= std::chrono::milliseconds(0)) return Outcome::kStopped;
        timeout = std::min(timeout, left);
      }
    }
    api::HttpClient client(base);
    client.set_timeout(timeout);
    auto resp = client.Request("POST", target, delivery.body, "application/json", headers);
    if (resp.ok() && resp->status >= 200 && resp->status < 300) return Outcome::kDelivered;
    std::string why = resp.ok() ? "HTTP " + std::to_string(resp->status) : resp.status().message();
    if (stopping) return Outcome::kStopped;
    if (attempt >= options.attempts) {
      spdlog::warn("webhook {}: gave up on event {} after {} attempts: {}", endpoint.name,
                   delivery.id, attempt, why);
      return Outcome::kGaveUp;
    }
    std::unique_lock lock(endpoint.mu);
    // Backoff, cut short by shutdown.
    if (endpoint.wake.wait_for(lock, backoff, [&] { return endpoint.stopping; })) {
      return Outcome::kStopped;
    }
    backoff = std::min<std::chrono::milliseconds>(backoff * 2, kMaxBackoff);
  }
}

// The worker owns a reference to its endpoint, so it may outlive the
// notifier when a receiver hangs past shutdown.
void Deliver(std::shared_ptr<WebhookNotifier::Endpoint> endpoint, WebhookOptions options) {
  auto [base, target] = SplitUrl(endpoint->url);
  for (;;) {
    {
      std::lock_guard lock(endpoint->mu);
      endpoint->pending = false;
    }
    std::vector<Delivery> batch;
    if (!ReadBatch(*endpoint, options, batch)) return Finish(*endpoint);
    if (batch.empty()) {
      std::unique_lock lock(endpoint->mu);
      // Caught up: at shutdown that is the end, else wait for a change.
      if (endpoint->stopping) {
        lock.unlock();
        return Finish(*endpoint);
      }
      endpoint->wake.wait_for(lock, options.poll,
                              [&] { return endpoint->stopping || endpoint->pending; });
      continue;
    }
    for (const Delivery& delivery : batch) {
      Outcome outcome = Post(*endpoint, options, base, target, delivery);
      if (outcome == Outcome::kStopped) return Finish(*endpoint);
      std::lock_guard gate(endpoint->store_mu);
      if (endpoint->store == nullptr) return Finish(*endpoint);
      Status s = endpoint->store->SetWebhookCursor(endpoint->key, delivery.id, SystemClock().Now());
      if (!s.ok()) {
        // Sent again after a restart; the receiver deduplicates on the id.
        spdlog::warn("webhook {}: cannot record delivery of event {}: {}", endpoint->name,
                     delivery.id, s.ToString());
      }
      endpoint->cursor = delivery.id;
    }
    if (PastShutdown(*endpoint)) return Finish(*endpoint);
  }
}

}  // namespace

nlohmann::json WebhookBody(const Job& job, const JobEvent& event, std::string_view state) {
  bool current = JobStateName(job.state) == state;
  return {
      {"id", event.id},
      {"type", event.type},
      {"job", job.name()},
      {"team", job.spec.team},
      {"state", std::string(state)},
      {"reason", current ? job.reason : std::string()},
      {"exit_code", current && job.exit_code ? nlohmann::json(*job.exit_code) : nlohmann::json()},
      {"time", FormatRfc3339(event.time)},
      {"message", event.message},
      // What chat incoming webhooks (Slack, Mattermost) show.
      {"text", "headway: job " + job.name() + " (team " + job.spec.team + "): " + event.message}};
}

std::string StateAfter(const std::vector<JobEvent>& job_events, std::int64_t event_id) {
  std::string state = "Queued";
  for (const JobEvent& e : job_events) {
    if (e.id > event_id) break;
    if (e.type != "StateChanged") continue;
    if (auto target = TargetState(e.message)) state = *target;
  }
  return state;
}

std::string RedactedUrl(const std::string& url) {
  auto [base, target] = SplitUrl(url);
  return target == "/" ? base : base + "/...";
}

WebhookNotifier::WebhookNotifier(Store& store, WebhookOptions options) {
  for (const std::string& url : options.urls) {
    auto endpoint = std::make_shared<Endpoint>();
    endpoint->url = url;
    endpoint->key = "sha256:" + api::HashToken(url);
    endpoint->name = RedactedUrl(url);
    endpoint->store = &store;
    auto cursor = store.GetWebhookCursor(endpoint->key);
    if (!cursor.ok()) {
      spdlog::error("webhook {}: {}; not delivering to it", endpoint->name,
                    cursor.status().ToString());
      continue;
    }
    if (cursor->has_value()) {
      endpoint->cursor = **cursor;
    } else {
      // New: from the current end of the log, recorded at once so that a
      // change made before its first delivery is not missed by a restart.
      auto last = store.LastEventId();
      Status s = last.ok() ? store.SetWebhookCursor(endpoint->key, *last, SystemClock().Now())
                           : last.status();
      if (!s.ok()) {
        spdlog::error("webhook {}: {}; not delivering to it", endpoint->name, s.ToString());
        continue;
      }
      endpoint->cursor = *last;
      spdlog::info("webhook {}: new; delivers the changes after event {}", endpoint->name, *last);
    }
    endpoints_.push_back(endpoint);
  }
  for (const auto& endpoint : endpoints_) std::thread(Deliver, endpoint, options).detach();
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
      spdlog::warn(
          "webhook {}: receiver still busy at shutdown; the next start delivers what is "
          "left",
          endpoint->name);
    }
  }
  for (const auto& endpoint : endpoints_) {
    std::lock_guard gate(endpoint->store_mu);
    endpoint->store = nullptr;
  }
}

void WebhookNotifier::Notify() {
  for (const auto& endpoint : endpoints_) {
    std::lock_guard lock(endpoint->mu);
    endpoint->pending = true;
    endpoint->wake.notify_one();
  }
}

}  // namespace headway
