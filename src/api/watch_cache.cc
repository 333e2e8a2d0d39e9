#include "api/watch_cache.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "api/job_json.h"

namespace headway::api {

// What a job's view is rendered from besides its spec, which does not change
// after submission. A view that starts showing another field of the job must
// have it here too, or the cache would not notice it change.
struct WatchCache::ViewInputs {
  JobState state = JobState::kQueued;
  std::string reason, message;
  std::optional<int> exit_code;
  int restarts = 0, preemptions = 0;
  std::vector<int> gpu_ids;
  std::string executor, created_by;
  Time created_at{};
  std::optional<Time> started_at, finished_at, stop_requested_at;
  std::string pending_reason;
  QueuePlace place;
  ProgressView progress;

  bool operator==(const ViewInputs& o) const {
    auto job = [](const ViewInputs& v) {
      return std::tie(v.state, v.reason, v.message, v.exit_code, v.restarts, v.preemptions,
                      v.gpu_ids, v.executor, v.created_by, v.created_at, v.started_at,
                      v.finished_at, v.stop_requested_at, v.pending_reason, v.place);
    };
    auto seen = [](const ProgressView& p) {
      return std::tie(p.percent, p.step, p.total_steps, p.epoch, p.total_epochs, p.eta_seconds,
                      p.steps_per_second, p.samples_per_second, p.last_report_at, p.metrics,
                      p.health, p.health_reason);
    };
    return job(*this) == job(o) && seen(progress) == seen(o.progress);
  }
};

WatchCache::WatchCache(JobService& service, WatchCacheOptions options)
    : service_(service), options_(options), thread_([this] { Run(); }) {}

WatchCache::~WatchCache() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  done_cv_.notify_all();
  thread_.join();
}

void WatchCache::OnTick(const std::vector<Job>& active) {
  {
    std::lock_guard lock(mu_);
    auto now = SteadyClock::now();
    last_tick_fed_ = now;
    if (now - last_render_ < options_.refresh) return;
    last_render_ = now;
  }
  Work work{Work::Kind::kActive, active};  // copied outside the lock readers take
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(work));
    ++fed_;
  }
  work_cv_.notify_one();
}

void WatchCache::OnChange(const Job& job) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back({Work::Kind::kChanged, {job}});
    ++fed_;
  }
  work_cv_.notify_one();
}

void WatchCache::OnSubmitted(const Job& job) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back({Work::Kind::kSubmitted, {job}});
    ++fed_;
  }
  work_cv_.notify_one();
}

void WatchCache::OnRemoved(const Job& job) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back({Work::Kind::kRemoved, {job}});
    ++fed_;
  }
  work_cv_.notify_one();
}

std::uint64_t WatchCache::version() const {
  std::lock_guard lock(mu_);
  return version_;
}

std::uint64_t WatchCache::ChangesSince(std::uint64_t after, const std::string& team,
                                       std::vector<std::shared_ptr<const Entry>>& out) const {
  std::lock_guard lock(mu_);
  for (auto it = by_version_.upper_bound(after); it != by_version_.end(); ++it) {
    auto entry = entries_.find(it->second);
    if (entry == entries_.end()) continue;
    if (team.empty() || entry->second->team == team) out.push_back(entry->second);
  }
  return version_;
}

std::shared_ptr<const WatchCache::Entry> WatchCache::Find(std::string_view name) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  return it == entries_.end() || it->second->deleted ? nullptr : it->second;
}

std::optional<std::uint64_t> WatchCache::Everything(
    const std::string& team, std::vector<std::shared_ptr<const Entry>>& out) {
  std::unique_lock lock(mu_);
  WaitForRendering(lock);
  if (!had_active_) return std::nullopt;
  for (const auto& [name, entry] : entries_) {
    if (!entry->deleted && (team.empty() || entry->team == team)) out.push_back(entry);
  }
  return version_;
}

void WatchCache::Flush() {
  std::unique_lock lock(mu_);
  WaitForRendering(lock);
}

void WatchCache::WaitForRendering(std::unique_lock<std::mutex>& lock) {
  std::uint64_t target = fed_;
  done_cv_.wait(lock, [&] { return done_ >= target || stop_; });
}

void WatchCache::Run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (queue_.empty()) {
      auto now = SteadyClock::now();
      if (options_.refresh.count() > 0 && now - last_tick_fed_ >= 2 * options_.refresh &&
          now - last_render_ >= options_.refresh) {
        // No control loop feeds us: one look for everyone, off the I/O threads.
        last_render_ = now;
        lock.unlock();
        JobFilter filter;
        filter.active_only = true;
        auto jobs = service_.List(filter);
        lock.lock();
        if (jobs.ok()) {
          queue_.push_back({Work::Kind::kActive, std::move(jobs.value())});
          ++fed_;
        }
        continue;
      }
      work_cv_.wait_for(lock, std::max(options_.refresh, std::chrono::milliseconds(100)));
      continue;
    }
    Work work = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    Process(work);
    lock.lock();
    if (work.kind == Work::Kind::kActive) had_active_ = true;
    ++done_;
    done_cv_.notify_all();
  }
}

void WatchCache::Process(Work& work) {
  switch (work.kind) {
    case Work::Kind::kActive:
      ProcessActive(work.jobs);
      break;
    case Work::Kind::kChanged:
      for (const Job& job : work.jobs) Apply(job);
      break;
    case Work::Kind::kSubmitted:
      for (const Job& job : work.jobs) Apply(job, /*only_if_new=*/true);
      break;
    case Work::Kind::kRemoved:
      for (const Job& job : work.jobs) Remove(job);
      break;
  }
}

void WatchCache::ProcessActive(std::vector<Job>& active) {
  std::set<std::string, std::less<>> seen;
  for (const Job& job : active) {
    Apply(job);
    seen.insert(job.name());
  }
  // Jobs the cache holds as active that are no longer in the list ended
  // without a change reaching us (or were never fed one): read them once.
  std::vector<std::string> missing;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, entry] : entries_) {
      if (!entry->ended && !seen.count(name)) missing.push_back(name);
    }
  }
  for (const std::string& name : missing) {
    auto job = service_.Get(name);
    if (job.ok()) {
      Apply(*job);
    } else if (job.status().code() == StatusCode::kNotFound) {
      std::lock_guard lock(mu_);
      auto it = entries_.find(name);
      if (it != entries_.end()) {
        by_version_.erase(it->second->version);
        entries_.erase(it);
      }
      inputs_.erase(name);
    }
  }
  PruneEnded();
}

void WatchCache::Apply(const Job& job, bool only_if_new) {
  if (only_if_new && Find(job.name())) return;
  // Rendering is the cost of a refresh: only when what the view shows changed.
  auto inputs = std::make_unique<ViewInputs>();
  inputs->state = job.state;
  inputs->reason = job.reason;
  inputs->message = job.message;
  inputs->exit_code = job.exit_code;
  inputs->restarts = job.restarts;
  inputs->preemptions = job.preemptions;
  inputs->gpu_ids = job.gpu_ids;
  inputs->executor = job.executor;
  inputs->created_by = job.created_by;
  inputs->created_at = job.created_at;
  inputs->started_at = job.started_at;
  inputs->finished_at = job.finished_at;
  inputs->stop_requested_at = job.stop_requested_at;
  inputs->pending_reason = service_.PendingReason(job.name());
  inputs->place = service_.QueuePlaceOf(job.name());
  inputs->progress = service_.Progress(job);
  auto known = inputs_.find(job.name());
  if (known != inputs_.end() && *known->second == *inputs) return;
  nlohmann::json rendered =
      JobToJson(job, inputs->pending_reason, inputs->progress, /*with_spec=*/false, inputs->place);
  std::string view = JsonText(rendered);
  std::string row = JsonText(JobRow(rendered));
  inputs_[job.name()] = std::move(inputs);
  std::lock_guard lock(mu_);
  auto it = entries_.find(job.name());
  if (it != entries_.end() && ((only_if_new && !it->second->deleted) || it->second->view == view)) {
    return;
  }
  auto entry = std::make_shared<Entry>();
  entry->name = job.name();
  entry->team = job.spec.team;
  entry->view = std::move(view);
  entry->row = std::move(row);
  entry->version = ++version_;
  entry->ended = IsTerminal(job.state);
  if (it != entries_.end()) by_version_.erase(it->second->version);
  by_version_[entry->version] = entry->name;
  if (entry->ended) {
    ended_at_.emplace(entry->name, SteadyClock::now());
  } else {
    ended_at_.erase(entry->name);
  }
  entries_[entry->name] = std::move(entry);
}

void WatchCache::Remove(const Job& job) {
  inputs_.erase(job.name());
  std::lock_guard lock(mu_);
  auto entry = std::make_shared<Entry>();
  entry->name = job.name();
  entry->team = job.spec.team;
  entry->version = ++version_;
  entry->ended = true;
  entry->deleted = true;
  auto it = entries_.find(job.name());
  if (it != entries_.end()) by_version_.erase(it->second->version);
  by_version_[entry->version] = entry->name;
  ended_at_[entry->name] = SteadyClock::now();
  entries_[entry->name] = std::move(entry);
}

void WatchCache::PruneEnded() {
  std::lock_guard lock(mu_);
  auto now = SteadyClock::now();
  for (auto it = ended_at_.begin(); it != ended_at_.end();) {
    if (now - it->second < options_.keep_ended) {
      ++it;
      continue;
    }
    auto entry = entries_.find(it->first);
    if (entry != entries_.end()) {
      by_version_.erase(entry->second->version);
      entries_.erase(entry);
    }
    inputs_.erase(it->first);
    it = ended_at_.erase(it);
  }
}

}  // namespace headway::api
