#include "server/gpu_idle_watcher.h"

#include <cstdio>
#include <set>

namespace headway {
namespace {

std::string GpuList(const std::vector<int>& ids) {
  std::string out;
  for (int id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

std::string Percent(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g%%", value);
  return text;
}

}  // namespace

GpuIdleWatcher::GpuIdleWatcher(api::JobService& jobs, const Clock& clock,
                               GpuIdleWatcherOptions options)
    : jobs_(jobs), clock_(clock), options_(std::move(options)) {}

void GpuIdleWatcher::Tick() {
  JobFilter running;
  running.state = JobState::kRunning;
  auto jobs = jobs_.List(running);
  if (!jobs.ok()) return;
  std::vector<const Job*> watched;
  for (const Job& job : *jobs) {
    if (job.spec.policies.on_gpu_idle && !job.gpu_ids.empty() && job.executor == "local") {
      watched.push_back(&job);
    }
  }
  std::set<std::string> seen;
  std::map<int, double> utilization;
  if (!watched.empty() && options_.gpu_utilization) utilization = options_.gpu_utilization();
  const Time now = clock_.Now();
  for (const Job* job : watched) {
    const std::string key = job->name() + "/" + std::to_string(job->attempt());
    seen.insert(key);
    GpuIdleVerdict verdict;
    {
      std::lock_guard lock(mu_);
      auto [it, added] = watches_.try_emplace(key);
      if (added) it->second.busy_at = job->started_at.value_or(now);
      verdict = DecideGpuIdle(job->spec.policies, job->gpu_ids, utilization, it->second, now);
    }
    if (verdict.action == GpuIdleVerdict::Action::kNone) continue;
    const std::string what = "GPUs " + GpuList(job->gpu_ids) + " below " +
                             Percent(job->spec.policies.gpu_idle_below_percent) +
                             " utilisation for " + FormatDuration(verdict.idle_for);
    if (verdict.action == GpuIdleVerdict::Action::kNotify) {
      (void)jobs_.AddEvent(job->name(), "GpuIdle", what + " (policies.on_gpu_idle: notify)");
    } else {
      (void)jobs_.AddEvent(job->name(), "GpuIdle",
                           what + "; stopping it (policies.on_gpu_idle: stop)");
      (void)jobs_.StopFor(job->name(), StopReason::kGpuIdle, "stopped: " + what);
    }
  }
  // Forget attempts that are no longer running.
  std::lock_guard lock(mu_);
  std::erase_if(watches_, [&](const auto& entry) { return !seen.contains(entry.first); });
}

void GpuIdleWatcher::RunLoop() {
  loop_.Run(options_.check_interval, [this] { Tick(); });
}

void GpuIdleWatcher::Shutdown() { loop_.Stop(); }

}  // namespace headway
