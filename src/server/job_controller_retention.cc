#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <tuple>

#include "api/auth.h"
#include "api/http_client.h"
#include "api/kubeflow_status.h"
#include "core/stdout_metrics.h"
#include "exec/local/local_executor.h"
#include "exec/ssh_server.h"
#include "lifecycle/retention.h"
#include "server/job_controller.h"
#include "server/job_controller_support.h"

namespace headway {

using internal::RandomJobSuffix;

Result<Job> JobController::Delete(std::string_view name, bool when_ended) {
  Work work;
  Job job;
  std::string moved;
  {
    std::lock_guard lock(mu_);
    auto stored = store_.GetJob(name);
    if (!stored.ok()) return stored.status();
    job = std::move(stored.value());
    const Time now = clock_.Now();
    if (!IsTerminal(job.state)) {
      if (job.created_by.rfind("experiment/", 0) == 0) {
        // Its experiment would submit the trial again: it is stopped there.
        return Conflict("job '" + job.name() + "' is a running trial of " + job.created_by +
                        ": stop it (headway stop " + job.name() +
                        ") or its experiment first, then delete it");
      }
      if (!when_ended) {
        return Conflict("job '" + job.name() + "' is " + std::string(JobStateName(job.state)) +
                        ": stop it first (headway stop " + job.name() +
                        "), or delete it with force (headway delete job " + job.name() +
                        " --force), which stops it and deletes it once it has ended");
      }
      if (!job.delete_requested_at) {
        lifecycle::Step step;
        job.delete_requested_at = now;
        step.changed = true;
        step.events.push_back(
            Event(job, "Deleting", "delete requested: it is deleted once it has ended"));
        if (!job.stop_requested_at) {
          step.Then(lifecycle::RequestStop(job, StopReason::kUser, "stopped to be deleted", now));
        }
        HEADWAY_RETURN_IF_ERROR(Apply(job, std::move(step), work));
      }
      generation_ += 1;
      loop_.Wake();
    }
    if (IsTerminal(job.state)) {
      // Ended (a queued job stops at once): gone now.
      auto dir = Remove(job);
      if (!dir.ok()) return dir.status();
      moved = std::move(dir.value());
    }
  }
  Carry(work);
  RemoveDir(moved);
  return job;
}

Result<std::string> JobController::Remove(const Job& job) {
  auto logs = store_.ListLogFiles(job.name());
  HEADWAY_RETURN_IF_ERROR(store_.DeleteJob(job.name()));
  if (options_.on_removed) options_.on_removed(job);
  if (logs.ok()) markers_.Forget(*logs);
  memos_.erase(job.name());
  last_polled_.erase(job.name());
  warned_malformed_.erase(job.name());
  tracker_.Forget(job.name());
  {
    std::lock_guard token_lock(tokens_mu_);
    token_hashes_.erase(job.name());
  }
  // Moved aside at once (under mu_, so a new job of the same name never
  // finds it); the caller removes it without holding mu_, as checkpoints
  // may be large.
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(options_.data_dir) / "jobs" / job.name();
  std::error_code ec;
  if (options_.data_dir.empty() || !fs::exists(fs::symlink_status(dir, ec))) return std::string();
  const fs::path trash = fs::path(options_.data_dir) / "jobs" /
                         (".deleted-" + job.name() + "-" + RandomJobSuffix() + RandomJobSuffix());
  fs::rename(dir, trash, ec);
  if (ec) {
    spdlog::error("cannot remove {}: {}", dir.string(), ec.message());
    return std::string();
  }
  return trash.string();
}

void JobController::RemoveDir(const std::string& dir) {
  if (Status removed = RemoveTree(dir); !removed.ok()) {
    spdlog::error("{}", removed.message());
  }
}

void JobController::CollectFinished(Time now) {
  {
    std::lock_guard lock(mu_);
    if (last_collected_ && now - *last_collected_ < options_.retention_interval) return;
    last_collected_ = now;
  }
  auto jobs = store_.ListJobs({});
  if (!jobs.ok()) return;
  for (const Job& listed : *jobs) {
    auto due = lifecycle::DeleteDueAt(listed, options_.finished_job_ttl);
    if (!due || *due > now) continue;
    std::string moved;
    {
      std::lock_guard lock(mu_);
      auto job = store_.GetJob(listed.name());  // as stored now
      if (!job.ok()) continue;
      due = lifecycle::DeleteDueAt(*job, options_.finished_job_ttl);
      if (!due || *due > now) continue;
      auto dir = Remove(*job);
      if (!dir.ok()) continue;
      moved = std::move(dir.value());
    }
    RemoveDir(moved);
  }
}

}  // namespace headway
