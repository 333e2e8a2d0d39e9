// The watch cache: one in-memory copy of the job views that every jobs
// stream (GET /api/v1/watch/jobs, the dashboard's list) reads, so that
// streams cost no database reads and no view rendering of their own.
//
// Each entry is a job's view as the jobs stream sends it (JobView without
// "spec") and its compact row (JobRow), serialised, with the cache version
// at which it last changed. The version counter rises with every change, so
// a reader that remembers the version it has seen asks for exactly what
// changed since.
//
// Fed by the job controller: OnTick() with every active job at the end of
// each pass (rendered at most once per `refresh`: progress and ETA move with
// time), OnChange() for every persisted state or health change (ended jobs
// included, rendered at once), OnSubmitted() for jobs the API created and
// OnRemoved() for deleted jobs (kept as a "deleted" entry for keep_ended, so
// that readers learn the job is gone).
// When no OnTick() has come for two refresh periods (a service without a
// control loop) the cache lists the active jobs itself, once per refresh.
//
// Thread safety: every method is thread-safe. The feeds only copy the jobs
// and wake the cache's own thread, which renders the views (it calls
// JobService::Progress, PendingReason, and Get/List as said above); they
// never block on rendering, so the controller may call them under its lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "api/job_service.h"
#include "core/job.h"

namespace headway::api {

struct WatchCacheOptions {
  // How often the active jobs' views are rendered again (progress, ETA and
  // health move with time); changes fed by OnChange() are rendered at once.
  // 0: on every OnTick(), and the cache never lists the jobs by itself.
  std::chrono::milliseconds refresh{1000};
  // How long an ended job's entry stays after it ended. A reader that looks
  // less often than this may miss that a job ended (streams look every second).
  std::chrono::milliseconds keep_ended{std::chrono::minutes(10)};
};

class WatchCache {
 public:
  struct Entry {
    std::string name;
    std::string team;
    std::string view;           // JsonText of the view without "spec"
    std::string row;            // JsonText of JobRow(view): the compact stream's form
    std::uint64_t version = 0;  // cache version at which it last changed
    bool ended = false;
    bool deleted = false;  // the job was deleted; `view` is empty
  };

  // `service` must outlive the cache. Starts the cache's thread.
  explicit WatchCache(JobService& service, WatchCacheOptions options = {});
  ~WatchCache();  // stops and joins the thread
  WatchCache(const WatchCache&) = delete;
  WatchCache& operator=(const WatchCache&) = delete;

  // Feeds; see above. Cheap: they copy what they need and return.
  void OnTick(const std::vector<Job>& active);
  void OnChange(const Job& job);
  // A new job; ignored if the cache already has it (a later view may be there).
  void OnSubmitted(const Job& job);
  // A job deleted from the store.
  void OnRemoved(const Job& job);

  // The current version: every change so far has a version <= this.
  std::uint64_t version() const;
  // The entries that changed after version `after` (of `team` only, unless
  // empty), oldest change first, deleted jobs included. Returns the version
  // they bring the reader to.
  std::uint64_t ChangesSince(std::uint64_t after, const std::string& team,
                             std::vector<std::shared_ptr<const Entry>>& out) const;
  // For a reader's first look: once everything fed before the call has been
  // rendered, every entry but deleted jobs' (of `team` only, unless empty),
  // by name. Returns the version they bring the reader to; nullopt (and no
  // entries) until the cache has had the active jobs once, when it may lack
  // some of them.
  std::optional<std::uint64_t> Everything(const std::string& team,
                                          std::vector<std::shared_ptr<const Entry>>& out);
  // The entry of one job; null when the cache does not hold it (not seen yet,
  // ended longer than keep_ended ago, or deleted).
  std::shared_ptr<const Entry> Find(std::string_view name) const;

  // Blocks until everything fed before the call has been rendered. For tests.
  void Flush();

 private:
  struct Work {
    enum class Kind { kActive, kChanged, kSubmitted, kRemoved } kind;
    std::vector<Job> jobs;
  };
  void Run();
  // Returns once everything fed before the call was processed; `lock` holds mu_.
  void WaitForRendering(std::unique_lock<std::mutex>& lock);
  void Process(Work& work);
  void ProcessActive(std::vector<Job>& active);
  // Renders `job` and stores it if its view changed (or, with `only_if_new`,
  // if the cache does not hold it yet).
  void Apply(const Job& job, bool only_if_new = false);
  void Remove(const Job& job);
  void PruneEnded();

  JobService& service_;
  const WatchCacheOptions options_;
  using SteadyClock = std::chrono::steady_clock;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<Work> queue_;   // guarded by mu_
  std::uint64_t fed_ = 0;    // guarded by mu_: works queued so far
  std::uint64_t done_ = 0;   // guarded by mu_: works processed so far
  bool had_active_ = false;  // guarded by mu_: a list of the active jobs was processed
  bool stop_ = false;        // guarded by mu_
  SteadyClock::time_point last_tick_fed_{};  // guarded by mu_
  SteadyClock::time_point last_render_{};    // guarded by mu_: last full render of the active jobs
  std::uint64_t version_ = 0;                // guarded by mu_
  std::map<std::string, std::shared_ptr<const Entry>, std::less<>> entries_;  // guarded by mu_
  std::map<std::uint64_t, std::string> by_version_;          // guarded by mu_: version -> name
  std::map<std::string, SteadyClock::time_point> ended_at_;  // guarded by mu_
  struct ViewInputs;
  // What each entry was rendered from; only the cache's thread uses it.
  std::map<std::string, std::unique_ptr<ViewInputs>> inputs_;
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace headway::api
