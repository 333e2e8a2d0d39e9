// Webhooks: every job state or health change (the StateChanged and
// HealthChanged events of the store), a notebook's warning that it is about
// to be culled (NotebookIdle) and a job's idle GPUs (GpuIdle) is POSTed as JSON to each configured
// URL. Delivery is driven by the persisted event log, an outbox:
//
//  - Each URL keeps a cursor in the store: the id of the last event delivered
//    to it or given up on. Its worker reads the events after the cursor,
//    oldest first, posts each and then moves the cursor past it. A restart
//    resumes from the cursor, so an event queued but not delivered when the
//    server stopped or crashed is delivered by the next start, and an event
//    already delivered is not sent again. The one exception is a crash (or a
//    shutdown that leaves a receiver behind) between the receiver's 2xx and
//    the cursor write: that event is sent again, so delivery is at least once
//    and receivers deduplicate on the event id (`id` in the body, header
//    `X-Headway-Delivery`).
//  - A URL seen for the first time starts at the current end of the log: it
//    gets the changes from then on, not the whole history.
//  - Nothing waits on a receiver: each URL has its own worker thread, every
//    request a deadline (`timeout`), and shutdown gives the workers two
//    seconds at most (what is left is delivered by the next start).
//  - A receiver that keeps failing: each event gets `attempts` tries with
//    backoff (0.5 s, doubling, at most 30 s between tries); then the event is
//    skipped (logged) and the cursor moves on, so one bad event never blocks
//    a URL. A try cut short by shutdown does not count: the event stays due.
//  - Bounded backlog: a URL more than `max_backlog` events (of any type)
//    behind the log skips ahead to the newest `max_backlog` and logs how
//    many it skipped.
//
// Prompt without busy polling: Notify() wakes the workers (the job
// controller calls it after each change it saves); they also look at the
// log every `poll` in case a change came from elsewhere.
//
// Each body carries a human `text` line (Slack and Mattermost incoming
// webhooks show it) and is signed: `X-Headway-Signature: sha256=<hex>` is
// the HMAC-SHA-256 of the body under the shared secret, as GitHub signs its
// webhooks, so a receiver can tell Headway's posts from anyone else's.
// `state` is the job's state once the event happened; `reason` and
// `exit_code` are the job's when it is still in that state, else empty.
//
// URLs may hold secrets (a Slack webhook's path does): the store keys a
// cursor by a hash of its URL, and logs name a URL by scheme and host only.
//
// Thread safety: Notify is thread-safe. The store must outlive the notifier;
// a worker left behind on a hung receiver touches it no more.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/job.h"
#include "store/store.h"

namespace headway {

struct WebhookOptions {
  std::vector<std::string> urls;
  std::string secret;                // HMAC key; empty: bodies are not signed
  int attempts = 5;                  // tries per event before it is skipped
  std::int64_t max_backlog = 10000;  // events per URL; older ones are skipped
  std::chrono::milliseconds timeout = std::chrono::seconds(5);  // per request, per I/O step
  std::chrono::milliseconds poll = std::chrono::seconds(2);     // fallback look at the log
  std::chrono::milliseconds first_backoff = std::chrono::milliseconds(500);
};

// The body posted for `event` of `job`; `state` is the job's state once the
// event happened (see StateAfter). Pure.
nlohmann::json WebhookBody(const Job& job, const JobEvent& event, std::string_view state);

// The job's state once `event` happened, from the job's events in id order:
// the target of the last StateChanged ("A -> B: ...") at or before it;
// "Queued" before any. Pure.
std::string StateAfter(const std::vector<JobEvent>& job_events, std::int64_t event_id);

// "scheme://host[:port]" of a URL, without the path that may hold a secret.
std::string RedactedUrl(const std::string& url);

class WebhookNotifier {
 public:
  // Reads (or, for a new URL, sets at the current end of the log) each URL's
  // cursor and starts its worker. A URL whose cursor cannot be read or set
  // is logged and left out.
  WebhookNotifier(Store& store, WebhookOptions options);
  // Lets the workers deliver what is due for up to 2 s, then leaves any
  // still waiting on a receiver behind (they end at their request deadline
  // and write nothing more).
  ~WebhookNotifier();

  // Wakes the workers: a change was saved.
  void Notify();
  bool enabled() const { return !endpoints_.empty(); }

  struct Endpoint;  // one URL's cursor and worker

 private:
  std::vector<std::shared_ptr<Endpoint>> endpoints_;
};

}  // namespace headway
