#include "server/job_controller.h"

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
#include "server/job_controller_support.h"

namespace headway {

namespace internal {

std::string RandomJobSuffix() {
  static constexpr char kChars[] = "bcdfghjklmnpqrstvwxz2456789";  // as Kubernetes: no vowels
  static thread_local std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<std::size_t> pick(0, sizeof kChars - 2);
  std::string out;
  for (int i = 0; i < 5; ++i) out += kChars[pick(rng)];
  return out;
}

std::int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Fault injection for the crash-recovery tests: with HEADWAY_TEST_CRASH_AT
// naming this point, the server dies here as if killed (-9).
void CrashPointForTests(const std::string& point) {
  static const char* const wanted = std::getenv("HEADWAY_TEST_CRASH_AT");
  if (wanted != nullptr && point == wanted) {
    std::fprintf(stderr, "headway: crash point %s reached\n", point.c_str());
    std::fflush(stderr);
    ::raise(SIGKILL);
  }
}

}  // namespace internal

using internal::CrashPointForTests;
using internal::RandomJobSuffix;
using internal::SteadyNanos;

JobController::JobController(Store& store, std::map<std::string, Executor*> executors,
                             const Clock& clock, ControllerOptions options)
    : store_(store),
      executors_(std::move(executors)),
      clock_(clock),
      options_(std::move(options)),
      tracker_(store, options_.health, options_.plateau_window, options_.confirmation),
      writer_(store, tracker_) {}

const QueueConfig& JobController::QueueOf(const JobSpec& spec) const {
  static const QueueConfig kLocal;
  auto it = options_.queues.find(spec.queue);
  return it == options_.queues.end() ? kLocal : it->second;
}

Executor& JobController::ExecutorFor(const Job& job) {
  auto it = executors_.find(job.executor.empty() ? "local" : job.executor);
  if (it == executors_.end()) it = executors_.find("local");
  return *it->second;
}

JobEvent JobController::Event(const Job& job, std::string type, std::string message) const {
  return {0, job.name(), clock_.Now(), std::move(type), std::move(message)};
}

Status JobController::Save(const Job& job, const std::vector<JobEvent>& events) {
  Status s = store_.SaveJob(job, events);
  if (!s.ok()) {
    // Nothing is acted on: the next tick re-reads the store and decides
    // again from the stored state.
    spdlog::error("cannot save job {}: {}", job.name(), s.ToString());
    return s;
  }
  if (options_.on_change) {
    for (const JobEvent& e : events) {
      if (e.type == "StateChanged" || e.type == "HealthChanged" || e.type == "NoReports" ||
          e.type == "NotebookIdle") {
        options_.on_change(job, e);
      }
    }
  }
  return s;
}

namespace {

const char* SignalName(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "signal";
  }
}

}  // namespace

Status JobController::Apply(Job& job, lifecycle::Step step, Work& work, const std::string& token) {
  if (step.empty()) return Status::Ok();
  if (step.changed || !step.events.empty()) {
    HEADWAY_RETURN_IF_ERROR(Save(job, step.events));
  }
  if (step.changed && job.state == JobState::kSucceeded && run_times_loaded_) RecordRunTime(job);
  for (const lifecycle::Action& action : step.actions) {
    if (action.kind == lifecycle::Action::Kind::kLaunch) {
      {
        std::lock_guard lock(tokens_mu_);
        token_hashes_[job.name()] = job.token_hash;
      }
      work.launches.push_back({job.name(), token});
    } else if (action.kind == lifecycle::Action::Kind::kResize) {
      QueueResize(job, work);
    } else {
      work.signals.push_back({job.name(), job.executor_handle, &ExecutorFor(job), action.signal});
    }
  }
  if (IsTerminal(job.state) || job.state == JobState::kQueued ||
      job.state == JobState::kPreempted) {
    memos_.erase(job.name());
    last_polled_.erase(job.name());
  }
  return Status::Ok();
}

void JobController::AddWarning(const std::string& name, const std::string& message) {
  std::lock_guard lock(mu_);
  auto job = store_.GetJob(name);
  if (job.ok()) (void)Save(*job, {Event(*job, "Warning", message)});
}

void JobController::Carry(Work& work) {
  for (const PendingSignal& s : work.signals) {
    CrashPointForTests(std::string("signal:") + (SignalName(s.signal) + 3));
    Status sent = s.executor->Signal(s.handle, s.signal);
    if (sent.ok()) continue;
    if (s.signal == SIGKILL) {
      // Sent again at the next tick.
      std::lock_guard lock(mu_);
      auto memo = memos_.find(s.job);
      if (memo != memos_.end()) memo->second.killed = false;
    }
    AddWarning(s.job, std::string(SignalName(s.signal)) + " failed: " + sent.message());
  }
  work.signals.clear();
  for (const PendingResize& r : work.resizes) {
    CrashPointForTests("resize:stored");
    Status resized = r.executor->Resize(r.handle, r.unit_gpus);
    if (!resized.ok()) AddWarning(r.job, "resize failed: " + std::string(resized.message()));
  }
  work.resizes.clear();
  std::vector<PendingLaunch> launches = std::move(work.launches);
  work.launches.clear();
  for (const PendingLaunch& launch : launches) Launch(launch, work);
  // A stop that came while an attempt was being launched.
  if (!work.signals.empty() || !work.launches.empty()) Carry(work);
}

Result<Job> JobController::Submit(JobSpec spec, std::string created_by) {
  const QueueConfig& queue = QueueOf(spec);
  auto executor = executors_.find(queue.executor);
  if (executor == executors_.end()) {
    return Unavailable("queue '" + spec.queue + "' runs on executor '" + queue.executor +
                       "', which this server has not enabled");
  }
  HEADWAY_RETURN_IF_ERROR(executor->second->Admit(spec));
  // The local GPU pool bounds local jobs only; a cluster engine has its own.
  if (queue.executor == "local" && spec.resources.gpus() > options_.total_gpus) {
    return InvalidArgument("the job needs " + std::to_string(spec.resources.gpus()) +
                           " GPUs but the pool has " + std::to_string(options_.total_gpus) +
                           " (start the server with --gpus N to add logical GPUs)")
        .WithField("resources");
  }
  Job job;
  job.spec = std::move(spec);
  job.state = JobState::kQueued;
  job.created_at = clock_.Now();
  job.executor = queue.executor;
  job.created_by = std::move(created_by);
  std::string submitted = "job submitted";
  if (auto image = job.spec.labels.find(std::string(kStepImageLabel));
      image != job.spec.labels.end()) {
    submitted += "; image " + image->second +
                 " recorded: the step runs as a process on the pool, not in a container";
  }
  std::lock_guard lock(mu_);
  if (job.spec.name.empty()) {
    if (job.spec.generate_name.empty()) {
      return InvalidArgument("is required (or generateName)").WithField("name");
    }
    // Like Kubernetes' generateName: the prefix and 5 random characters,
    // drawn again if taken.
    Status created = Conflict("");
    for (int tries = 0; tries < 8 && created.code() == StatusCode::kConflict; ++tries) {
      job.spec.name = job.spec.generate_name + RandomJobSuffix();
      created = store_.CreateJob(job, Event(job, "Submitted", submitted));
    }
    HEADWAY_RETURN_IF_ERROR(created);
  } else if (Status created = store_.CreateJob(job, Event(job, "Submitted", submitted));
             !created.ok()) {
    if (created.code() != StatusCode::kConflict) return created;
    const std::string& name = job.spec.name;
    return Conflict(std::string(created.message()) +
                    ": submit it under another name (headway submit --name " + name +
                    "-2 -f ...), run that job again under the next free name (headway rerun " +
                    name + "), or delete it once it has ended (headway delete job " + name + ")");
  }
  generation_ += 1;
  {
    std::lock_guard pool(pool_mu_);
    queued_by_team_[job.spec.team] += 1;
  }
  loop_.Wake();
  return job;
}

Result<Job> JobController::Get(std::string_view name) { return store_.GetJob(name); }

Result<std::vector<Job>> JobController::List(const JobFilter& filter) {
  return store_.ListJobs(filter);
}

Result<std::vector<JobEvent>> JobController::Events(std::string_view name, std::int64_t after_id) {
  auto job = store_.GetJob(name);
  if (!job.ok()) return job.status();
  return store_.ListEvents(name, after_id);
}

Result<std::vector<LogFile>> JobController::LogFiles(std::string_view name) {
  auto job = store_.GetJob(name);
  if (!job.ok()) return job.status();
  return store_.ListLogFiles(name);
}

Result<Job> JobController::RunningJob(std::string_view name) {
  Job job;
  {
    std::lock_guard lock(mu_);
    auto stored = store_.GetJob(name);
    if (!stored.ok()) return stored.status();
    job = std::move(*stored);
  }
  if (job.state != JobState::kRunning || job.executor_handle.empty()) {
    return Conflict("job '" + job.name() + "' is not running (" +
                    std::string(JobStateName(job.state)) + ")");
  }
  return job;
}

Result<std::string> JobController::PrimaryHost(std::string_view name) {
  auto job = RunningJob(name);
  if (!job.ok()) return job.status();
  return ExecutorFor(*job).PrimaryHost(job->executor_handle);
}

int JobController::QueuedJobsOf(std::string_view team) {
  std::lock_guard lock(pool_mu_);
  auto it = queued_by_team_.find(team);
  return it == queued_by_team_.end() ? 0 : it->second;
}

Result<int> JobController::ConnectToJob(std::string_view name, int port) {
  auto job = RunningJob(name);
  if (!job.ok()) return job.status();
  return ExecutorFor(*job).ConnectToJob(job->executor_handle, port);
}

const sched::Pending* JobController::PendingOf(std::string_view name, std::size_t* position) {
  if (!pool_decision_) return nullptr;
  PoolDecision& pool = *pool_decision_;
  if (!pool.indexed) {
    pool.pending_by_name.reserve(pool.decision.pending.size());
    for (std::size_t i = 0; i < pool.decision.pending.size(); ++i) {
      pool.pending_by_name.emplace(pool.state.waiting[pool.decision.pending[i].job].name, i);
    }
    pool.indexed = true;
  }
  auto it = pool.pending_by_name.find(name);
  if (it == pool.pending_by_name.end()) return nullptr;
  if (position != nullptr) *position = it->second;
  return &pool.decision.pending[it->second];
}

api::QueuePlace JobController::QueuePlaceOf(std::string_view name) {
  std::lock_guard lock(pool_mu_);
  std::size_t index = 0;
  if (PendingOf(name, &index) == nullptr) return {};
  api::QueuePlace place;
  place.position = static_cast<int>(index) + 1;
  const auto& starts = pool_decision_->decision.expected_starts;
  auto start = starts.find(std::string(name));
  if (start != starts.end()) place.expected_start = start->second;
  return place;
}

std::string JobController::PendingReason(std::string_view name) {
  std::lock_guard lock(pool_mu_);
  const sched::Pending* pending = PendingOf(name, nullptr);
  return pending == nullptr ? std::string()
                            : pool_decision_->decision.Reason(pool_decision_->state, *pending);
}

std::vector<api::QueueStatus> JobController::Queues() {
  std::lock_guard lock(pool_mu_);
  return queues_;
}

std::vector<api::NodeStatus> JobController::Nodes() {
  std::lock_guard lock(pool_mu_);
  return nodes_;
}

Result<Job> JobController::StoppableJob(std::string_view name) {
  auto job = store_.GetJob(name);
  if (!job.ok()) return job.status();
  if (IsTerminal(job->state)) {
    return Conflict("job '" + std::string(name) + "' already ended (" +
                    std::string(JobStateName(job->state)) + ")");
  }
  return job;
}

Status JobController::AddEvent(std::string_view name, std::string type, std::string message) {
  std::lock_guard lock(mu_);
  auto job = store_.GetJob(name);
  if (!job.ok()) return job.status();
  return Save(*job, {Event(*job, std::move(type), std::move(message))});
}

Result<Job> JobController::Stop(std::string_view name, std::string why) {
  return StopFor(name, StopReason::kUser, std::move(why));
}

Result<Job> JobController::StopFor(std::string_view name, StopReason reason, std::string why) {
  Work work;
  Result<Job> job = NotFound("");
  {
    std::lock_guard lock(mu_);
    job = StoppableJob(name);
    if (!job.ok()) return job.status();
    HEADWAY_RETURN_IF_ERROR(
        Apply(*job, lifecycle::RequestStop(*job, reason, why, clock_.Now()), work));
    generation_ += 1;
    loop_.Wake();
  }
  Carry(work);
  return job;
}

Result<Job> JobController::ForceStop(std::string_view name, std::string why) {
  Work work;
  Result<Job> job = NotFound("");
  {
    std::lock_guard lock(mu_);
    job = StoppableJob(name);
    if (!job.ok()) return job.status();
    HEADWAY_RETURN_IF_ERROR(
        Apply(*job, lifecycle::ForceStop(*job, memos_[job->name()], why, clock_.Now()), work));
    generation_ += 1;
    loop_.Wake();
  }
  Carry(work);
  return job;
}

bool JobController::Completed(const Job& job) {
  ProgressView view = tracker_.View(job, clock_.Now());
  return view.percent && *view.percent >= 100.0;
}

lifecycle::DeadlineOptions JobController::Deadlines(const Job& job) {
  return {options_.preemption_grace, ExecutorFor(job).EnforcesTimeLimit()};
}

lifecycle::Step JobController::RecoverLaunch(Job& job, lifecycle::AttemptMemo& memo,
                                             const Result<std::optional<Launched>>& launched,
                                             Time now) {
  lifecycle::Step step;
  if (!launched.ok()) {
    // Neither adopt nor launch again until the executor can tell: the job
    // keeps its GPUs and its intent, and the control loop asks again.
    if (unresolved_launches_.insert(job.name()).second) {
      step.changed = true;
      step.events.push_back(Event(job, "LaunchUnresolved",
                                  "cannot tell yet whether the attempt started before the server "
                                  "stopped (" +
                                      launched.status().message() +
                                      "); asking again before launching anything"));
    }
    return step;
  }
  unresolved_launches_.erase(job.name());
  std::optional<lifecycle::FoundAttempt> found;
  if (*launched) found = lifecycle::FoundAttempt{(*launched)->handle, (*launched)->description};
  step = lifecycle::RecoverLaunch(job, memo, found, now);
  if (*launched) {
    IndexLogs(job, (*launched)->logs, step.events);
    ExecStatus status = ExecutorFor(job).Poll(job.executor_handle);
    step.Then(lifecycle::Observe(job, memo, status, false, now));
  }
  return step;
}

Status JobController::Reconcile() {
  // Run directories of deleted jobs that a crash left moved aside (Remove).
  if (!options_.data_dir.empty()) {
    std::error_code ec;
    std::vector<std::string> left;  // job names never start with '.'
    for (const auto& entry : std::filesystem::directory_iterator(
             std::filesystem::path(options_.data_dir) / "jobs", ec)) {
      if (entry.path().filename().string().rfind(".deleted-", 0) == 0) left.push_back(entry.path());
    }
    for (const std::string& dir : left) RemoveDir(dir);
  }
  Work work;
  {
    std::lock_guard lock(mu_);
    JobFilter filter;
    filter.active_only = true;
    auto jobs = store_.ListJobs(filter);
    if (!jobs.ok()) return jobs.status();
    const Time now = clock_.Now();
    for (Job& job : *jobs) {
      if (job.state != JobState::kStarting && job.state != JobState::kRunning) continue;
      lifecycle::AttemptMemo& memo = memos_[job.name()];
      {
        std::lock_guard token_lock(tokens_mu_);
        token_hashes_[job.name()] = job.token_hash;
      }
      lifecycle::Step step;
      if (job.executor_handle.empty()) {
        // The server stopped while launching: adopt what the launch started,
        // or launch it again if it started nothing, never both.
        step = RecoverLaunch(job, memo, ExecutorFor(job).FindLaunched(AttemptRequest(job)), now);
      } else {
        ExecStatus status = ExecutorFor(job).Poll(job.executor_handle);
        // An attempt that ended while no server watched it (a restart, a
        // new leader) has its output filed before it is ended: its last
        // reports count in its progress, its final verdict and whether a
        // preempted job completed.
        const bool ended =
            status.phase == ExecStatus::Phase::kExited || status.phase == ExecStatus::Phase::kLost;
        // The server that launched it may have stopped before its logs were
        // indexed (it lost the database): found again from the executor.
        IndexLogsIfMissing(job, step.events);
        if (ended) step.Then(ScanMarkers(job, /*final=*/true));
        step.Then(
            lifecycle::Readopt(job, memo, status, job.preempt_requested_at && Completed(job), now));
      }
      if (IsTerminal(job.state)) {
        std::optional<std::int64_t> last_step;
        progress::HealthVerdict verdict = tracker_.FinalVerdict(job, now, &last_step);
        step.Then(lifecycle::FinalHealth(job, verdict.health, verdict.reason, now, last_step));
      }
      Status s = Apply(job, std::move(step), work);
      if (!s.ok()) return s;
    }
  }
  Carry(work);
  return Status::Ok();
}

void JobController::Tick() {
  // Poll the launched attempts first, outside mu_: a cluster engine's
  // squeue can take seconds, and submits and stops must not wait for it.
  std::uint64_t generation;
  {
    std::lock_guard lock(mu_);
    generation = generation_;
  }
  JobFilter filter;
  filter.active_only = true;
  auto jobs = store_.ListJobs(filter);
  if (!jobs.ok()) {
    spdlog::error("cannot list jobs: {}", jobs.status().ToString());
    return;
  }
  const Time now = clock_.Now();
  std::vector<const Job*> due;
  std::vector<const Job*> unresolved;  // launches a restart could not resolve yet
  {
    std::lock_guard lock(mu_);
    for (const Job& job : *jobs) {
      bool launched = !job.executor_handle.empty() &&
                      (job.state == JobState::kRunning || job.state == JobState::kStarting);
      if (!launched) continue;
      Duration interval = ExecutorFor(job).PollInterval();
      if (interval.count() > 0) {
        auto last = last_polled_.find(job.name());
        if (last != last_polled_.end() && now - last->second < interval) continue;
        last_polled_[job.name()] = now;
      }
      due.push_back(&job);
    }
    for (const Job& job : *jobs) {
      if (!unresolved_launches_.count(job.name()) || job.state != JobState::kStarting ||
          !job.executor_handle.empty()) {
        continue;
      }
      Duration interval =
          std::max(ExecutorFor(job).PollInterval(), Duration(std::chrono::seconds(1)));
      auto last = last_polled_.find(job.name());
      if (last != last_polled_.end() && now - last->second < interval) continue;
      last_polled_[job.name()] = now;
      unresolved.push_back(&job);
    }
  }
  std::map<std::string, Polled> polled;
  for (const Job* job : due) {
    polled[job->name()] = {job->executor_handle, ExecutorFor(*job).Poll(job->executor_handle)};
  }
  std::map<std::string, Result<std::optional<Launched>>> found;
  for (const Job* job : unresolved) {
    found.emplace(job->name(), ExecutorFor(*job).FindLaunched(AttemptRequest(*job)));
  }

  Work work;
  std::vector<std::string> removed;  // run directories of deleted jobs
  {
    std::lock_guard lock(mu_);
    if (generation != generation_) {
      // A stop or submit changed some job meanwhile: decide on what is stored now.
      auto again = store_.ListJobs(filter);
      if (!again.ok()) return;
      jobs = std::move(again);
    }
    for (Job& job : *jobs) {
      auto asked = found.find(job.name());
      if (asked != found.end() && unresolved_launches_.count(job.name()) &&
          job.state == JobState::kStarting && job.executor_handle.empty()) {
        (void)Apply(job, RecoverLaunch(job, memos_[job.name()], asked->second, now), work);
        continue;
      }
      bool launched = !job.executor_handle.empty() &&
                      (job.state == JobState::kRunning || job.state == JobState::kStarting);
      if (!launched) continue;
      lifecycle::AttemptMemo& memo = memos_[job.name()];
      auto poll = polled.find(job.name());
      const bool observed = poll != polled.end() && poll->second.handle == job.executor_handle;
      const bool exited = observed && (poll->second.status.phase == ExecStatus::Phase::kExited ||
                                       poll->second.status.phase == ExecStatus::Phase::kLost);
      lifecycle::Step step = ScanMarkers(job, exited);
      if (job.spec.progress_endpoint) {
        std::lock_guard pull_lock(pull_mu_);
        if (auto warning = pull_warnings_.extract(job.name())) {
          step.events.push_back(Event(job, "Warning", std::move(warning.mapped())));
        }
      }
      if (observed) {
        const ExecStatus& status = poll->second.status;
        if (exited) CrashPointForTests("exit:observed");
        step.Then(lifecycle::Observe(job, memo, status,
                                     exited && job.preempt_requested_at && Completed(job), now));
      }
      if (job.state == JobState::kRunning) {
        step.Then(lifecycle::EnforceDeadlines(job, memo, Deadlines(job), now));
        ProgressView view = tracker_.View(job, now);
        step.Then(lifecycle::HealthSeen(job, view.health, view.health_reason, now, view.step));
        const bool overdue =
            !view.last_report_at && job.started_at &&
            ToUnixSeconds(now) - ToUnixSeconds(*job.started_at) >= options_.health.unknown_grace_s;
        step.Then(lifecycle::NoReportsSeen(job, overdue, view.health_reason, now));
      }
      if (IsTerminal(job.state)) {
        std::optional<std::int64_t> last_step;
        progress::HealthVerdict verdict = tracker_.FinalVerdict(job, now, &last_step);
        step.Then(lifecycle::FinalHealth(job, verdict.health, verdict.reason, now, last_step));
      }
      bool ended = IsTerminal(job.state) || job.state == JobState::kQueued ||
                   job.state == JobState::kPreempted;
      if (Apply(job, std::move(step), work).ok() && ended) {
        CrashPointForTests("exit:stored");
        if (IsTerminal(job.state) && job.delete_requested_at) {
          auto dir = Remove(job);
          if (dir.ok() && !dir->empty()) removed.push_back(std::move(dir.value()));
        }
      }
    }
    Schedule(*jobs, work);
    if (options_.on_tick) options_.on_tick(*jobs);
    std::vector<Job> pulled;
    for (const Job& job : *jobs) {
      if (job.spec.progress_endpoint && job.state == JobState::kRunning &&
          !job.executor_handle.empty()) {
        pulled.push_back(job);
      }
    }
    std::lock_guard pull_lock(pull_mu_);
    pull_jobs_ = std::move(pulled);
  }
  Carry(work);
  for (const std::string& dir : removed) RemoveDir(dir);
  CollectFinished(now);
}

void JobController::RunLoop(Duration period) {
  loop_.Run(period, [this] { Tick(); });
}

void JobController::Shutdown() {
  loop_.Stop();
  pull_loop_.Stop();
}

}  // namespace headway
