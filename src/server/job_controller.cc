#include "server/job_controller.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <tuple>

#include "api/auth.h"

namespace headway {

JobController::JobController(Store& store, std::map<std::string, Executor*> executors,
                             const Clock& clock, ControllerOptions options)
    : store_(store),
      executors_(std::move(executors)),
      clock_(clock),
      options_(std::move(options)),
      tracker_(store, options_.health, options_.plateau_window),
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

Status JobController::ReportProgress(std::string_view name, std::string_view token,
                                     std::vector<ProgressReport> reports) {
  if (token.empty()) {
    return Unauthenticated("a report needs 'Authorization: Bearer <HEADWAY_TOKEN>'");
  }
  std::string expected;
  {
    std::lock_guard lock(tokens_mu_);
    auto it = token_hashes_.find(std::string(name));
    if (it != token_hashes_.end()) expected = it->second;
  }
  if (expected.empty()) {
    auto job = store_.GetJob(name);
    if (!job.ok()) return job.status();
    expected = job->token_hash;
    std::lock_guard lock(tokens_mu_);
    if (!expected.empty()) token_hashes_[std::string(name)] = expected;
  }
  if (expected.empty() || !api::SameHash(api::HashToken(token), expected)) {
    return PermissionDenied("this token may not report for job '" + std::string(name) + "'");
  }
  HEADWAY_RETURN_IF_ERROR(
      tracker_.AdmitSeries(std::string(name), reports, options_.max_series_per_job));
  return writer_.Write({std::string(name), std::move(reports), clock_.Now()});
}

ProgressView JobController::Progress(const Job& job) { return tracker_.View(job, clock_.Now()); }

Result<std::vector<MetricPoint>> JobController::MetricSeries(std::string_view name,
                                                             std::string_view metric) {
  auto job = store_.GetJob(name);
  if (!job.ok()) return job.status();
  std::vector<MetricPoint> points;
  HEADWAY_RETURN_IF_ERROR(
      store_.ScanMetric(name, metric, [&](const MetricPoint& p) { points.push_back(p); }));
  if (points.empty()) {
    return NotFound("job '" + std::string(name) + "' has no metric '" + std::string(metric) + "'");
  }
  return points;
}

Result<std::vector<MetricPoint>> JobController::MetricSeriesAfter(std::string_view name,
                                                                  std::string_view metric,
                                                                  std::int64_t after_step,
                                                                  std::size_t limit) {
  auto job = store_.GetJob(name);
  if (!job.ok()) return job.status();
  return store_.MetricAfter(name, metric, after_step, limit);
}

Result<std::vector<std::string>> JobController::MetricNames(std::string_view name) {
  auto job = store_.GetJob(name);
  if (!job.ok()) return job.status();
  return store_.MetricNames(name);
}

void JobController::ScanMarkers(const Job& job, std::vector<JobEvent>& events) {
  auto files = store_.ListLogFiles(job.name());
  if (!files.ok()) return;
  std::vector<LogFile> current;
  for (const LogFile& f : *files) {
    if (f.attempt == job.attempt()) current.push_back(f);
  }
  int malformed = 0;
  std::vector<ProgressReport> reports = markers_.Scan(current, malformed);
  if (malformed > 0 && !warned_malformed_[job.name()]) {
    warned_malformed_[job.name()] = true;
    events.push_back(Event(job, "Warning",
                           "ignored a malformed HEADWAY progress line in the job's output"));
  }
  // The same series limit as HTTP reports; a job's output cannot be refused,
  // so what is over it is dropped, and the job's events say so once.
  std::set<std::string> dropped =
      tracker_.DropSeriesOverLimit(job.name(), reports, options_.max_series_per_job);
  if (!dropped.empty() && !warned_series_.count(job.name())) {
    warned_series_.insert(job.name());
    events.push_back(Event(job, "Warning",
                           "dropped HEADWAY output lines' values of " +
                               std::to_string(dropped.size()) + " metric series beyond the limit of " +
                               std::to_string(options_.max_series_per_job) + " per job (first: '" +
                               *dropped.begin() + "')"));
  }
  if (!reports.empty()) writer_.WriteAsync({job.name(), std::move(reports), clock_.Now()});
}

void JobController::WatchHealth(Job& job, std::vector<JobEvent>& events) {
  ProgressView view = tracker_.View(job, clock_.Now());
  std::string& last = health_[job.name()];
  if (view.health == last) return;
  std::string previous = last.empty() ? "Unknown" : last;
  last = view.health;
  if (previous == view.health) return;
  std::string text = previous + " -> " + view.health;
  if (!view.health_reason.empty()) text += ": " + view.health_reason;
  events.push_back(Event(job, "HealthChanged", text));
  HealthAction action = HealthAction::kNotify;
  if (view.health == "Stalled") action = job.spec.policies.on_stall;
  if (view.health == "Diverging") action = job.spec.policies.on_diverge;
  if (view.health == "Plateaued") action = job.spec.policies.on_plateau;
  if (action == HealthAction::kStop && !job.stop_requested_at) {
    RequestStop(job, view.health, "stopped by policy: " + view.health_reason, events);
  }
}

JobEvent JobController::Event(const Job& job, std::string type, std::string message) const {
  return {0, job.name(), clock_.Now(), std::move(type), std::move(message)};
}

void JobController::SetState(Job& job, JobState state, std::string reason, std::string message,
                             std::vector<JobEvent>& events) {
  std::string text = std::string(JobStateName(job.state)) + " -> " +
                     std::string(JobStateName(state));
  if (!message.empty()) text += ": " + message;
  job.state = state;
  job.reason = std::move(reason);
  job.message = std::move(message);
  if (IsTerminal(state)) job.finished_at = clock_.Now();
  events.push_back(Event(job, "StateChanged", text));
}

void JobController::Save(const Job& job, const std::vector<JobEvent>& events) {
  Status s = store_.SaveJob(job, events);
  if (s.ok() && options_.on_change) {
    for (const JobEvent& e : events) {
      if (e.type == "StateChanged" || e.type == "HealthChanged") options_.on_change(job, e);
    }
  }
  if (!s.ok()) {
    // The next tick re-reads the store and retries from the persisted state.
    std::fprintf(stderr, "headway: cannot save job %s: %s\n", job.name().c_str(),
                 s.ToString().c_str());
  }
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
  std::lock_guard lock(mu_);
  HEADWAY_RETURN_IF_ERROR(store_.CreateJob(job, Event(job, "Submitted", "job submitted")));
  woken_ = true;
  wake_.notify_all();
  return job;
}

Result<Job> JobController::Get(std::string_view name) { return store_.GetJob(name); }

Result<std::vector<Job>> JobController::List(const JobFilter& filter) {
  return store_.ListJobs(filter);
}

Result<std::vector<JobEvent>> JobController::Events(std::string_view name,
                                                    std::int64_t after_id) {
  auto job = store_.GetJob(name);
  if (!job.ok()) return job.status();
  return store_.ListEvents(name, after_id);
}

Result<std::vector<LogFile>> JobController::LogFiles(std::string_view name) {
  auto job = store_.GetJob(name);
  if (!job.ok()) return job.status();
  return store_.ListLogFiles(name);
}

std::string JobController::PendingReason(std::string_view name) {
  std::lock_guard lock(pool_mu_);
  auto it = pending_reasons_.find(std::string(name));
  return it == pending_reasons_.end() ? std::string() : it->second;
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

Result<Job> JobController::Stop(std::string_view name, std::string why) {
  std::lock_guard lock(mu_);
  auto job = StoppableJob(name);
  if (!job.ok()) return job.status();
  std::vector<JobEvent> events;
  if (job->stop_requested_at) {
    if (job->stop_reason != "Preempted") return job;  // already stopping; stopping is idempotent
    // SIGTERM went out for a preemption: end the job instead of requeueing it.
    job->stop_reason = "Stopped";
    job->message = why;
    events.push_back(Event(*job, "Stopping", why + " (it was already being preempted)"));
    Save(*job, events);
    return job;
  }
  RequestStop(*job, "Stopped", why, events);
  Save(*job, events);
  woken_ = true;
  wake_.notify_all();
  return job;
}

Result<Job> JobController::ForceStop(std::string_view name, std::string why) {
  std::lock_guard lock(mu_);
  auto job = StoppableJob(name);
  if (!job.ok()) return job.status();
  std::vector<JobEvent> events;
  job->stop_reason = "Stopped";
  if (job->state == JobState::kQueued || job->state == JobState::kPreempted ||
      job->executor_handle.empty()) {
    SetState(*job, JobState::kStopped, "Stopped", why + " (forced)", events);
  } else {
    // Whatever it was waiting for (a stop's or a preemption's grace), the
    // attempt ends as Stopped, not requeued.
    if (!job->stop_requested_at) job->stop_requested_at = clock_.Now();
    job->message = why;
    Status s = ExecutorFor(*job).Signal(job->executor_handle, SIGKILL);
    events.push_back(Event(*job, "Killed",
                           s.ok() ? why + ": force stop, SIGKILL sent without waiting for the grace"
                                  : why + ": force stop, SIGKILL failed: " + s.message()));
    if (s.ok()) killed_.insert(job->name());
  }
  Save(*job, events);
  woken_ = true;
  wake_.notify_all();
  return job;
}

void JobController::RequestStop(Job& job, const std::string& reason, const std::string& why,
                                std::vector<JobEvent>& events) {
  job.stop_reason = reason;
  if (job.state == JobState::kQueued || job.state == JobState::kPreempted ||
      job.executor_handle.empty()) {
    SetState(job, JobState::kStopped, reason, why, events);
    return;
  }
  job.stop_requested_at = clock_.Now();
  events.push_back(Event(job, "Stopping",
                         why + "; SIGTERM sent, SIGKILL after " +
                             FormatDuration(job.spec.termination_grace)));
  Status s = ExecutorFor(job).Signal(job.executor_handle, SIGTERM);
  if (!s.ok()) events.push_back(Event(job, "Warning", "SIGTERM failed: " + s.message()));
  job.message = why;
}

void JobController::FinishAttempt(Job& job, const ExecStatus& status,
                                  std::vector<JobEvent>& events) {
  killed_.erase(job.name());
  warned_.erase(job.name());
  last_polled_.erase(job.name());
  job.exit_code = status.phase == ExecStatus::Phase::kExited
                      ? std::optional<int>(status.exit_code)
                      : std::nullopt;
  job.executor_handle.clear();
  job.gpu_ids.clear();
  if (job.preempt_requested_at && (!job.stop_requested_at || job.stop_reason == "Preempted")) {
    // Whatever way it left after the warning, the work is resumable: requeue
    // it, unless it exited cleanly having reported all its steps.
    ProgressView view = tracker_.View(job, clock_.Now());
    bool finished = status.phase == ExecStatus::Phase::kExited && status.exit_code == 0 &&
                    view.percent && *view.percent >= 100.0;
    if (!finished) {
      Requeue(job, events);
      return;
    }
    job.stop_requested_at.reset();
  }
  job.preempt_requested_at.reset();
  job.preempt_message.clear();
  if (status.reason == "TimeLimitExceeded" && !job.stop_requested_at) {
    SetState(job, JobState::kFailed, "TimeLimitExceeded", status.message, events);
    return;
  }
  if (status.reason == "Cancelled" && !job.stop_requested_at) {
    SetState(job, JobState::kStopped, "Cancelled", "cancelled outside Headway: " + status.message,
             events);
    return;
  }
  if (job.stop_requested_at) {
    // Time limits fail a job (as Slurm's TIMEOUT does); other stops are Stopped.
    bool timed_out = job.stop_reason == "TimeLimitExceeded";
    SetState(job, timed_out ? JobState::kFailed : JobState::kStopped, job.stop_reason,
             job.message, events);
    return;
  }
  if (status.phase == ExecStatus::Phase::kLost) {
    SetState(job, JobState::kFailed, "Lost", status.message, events);
    return;
  }
  if (status.exit_code == 0) {
    SetState(job, JobState::kSucceeded, "Completed", "", events);
    return;
  }
  if (!status.reason.empty()) {
    // The backend ended it (node failure, preemption, out of memory).
    SetState(job, JobState::kFailed, status.reason, status.message, events);
    return;
  }
  std::string what = status.message.empty()
                         ? "exited with code " + std::to_string(status.exit_code)
                         : status.message;
  if (job.restarts < job.spec.max_restarts) {
    job.restarts += 1;
    SetState(job, JobState::kQueued, "Restarting",
             what + "; restart " + std::to_string(job.restarts) + " of " +
                 std::to_string(job.spec.max_restarts),
             events);
    job.started_at.reset();
    return;
  }
  SetState(job, JobState::kFailed, "ExitCode", what, events);
}

void JobController::Requeue(Job& job, std::vector<JobEvent>& events) {
  std::string why = job.preempt_message.empty() ? "preempted" : job.preempt_message;
  job.preemptions += 1;
  job.preempt_requested_at.reset();
  job.preempt_message.clear();
  job.stop_requested_at.reset();
  job.stop_reason.clear();
  job.started_at.reset();
  job.requeued_at = clock_.Now();
  health_.erase(job.name());
  SetState(job, JobState::kPreempted, "Preempted",
           why + "; requeued, attempt " + std::to_string(job.attempt()) +
               " resumes from the job's checkpoint",
           events);
}

Duration JobController::PreemptionGrace(const Job& job) const {
  return job.spec.checkpoint_warning.value_or(options_.preemption_grace);
}

void JobController::Preempt(Job& job, const sched::Preemption& preemption) {
  if (job.preempt_requested_at || job.stop_requested_at || job.executor_handle.empty()) return;
  std::vector<JobEvent> events;
  job.preempt_requested_at = clock_.Now();
  job.preempt_message = preemption.reason;
  Status s = ExecutorFor(job).Signal(job.executor_handle, SIGUSR1);
  events.push_back(Event(job, "Preempting",
                         preemption.reason + " (for " + preemption.for_job + "); " +
                             (s.ok() ? "SIGUSR1 sent to checkpoint, SIGTERM in " +
                                           FormatDuration(PreemptionGrace(job))
                                     : "SIGUSR1 failed: " + s.message())));
  Save(job, events);
}

void JobController::PollAttempt(Job& job, std::vector<JobEvent>& events) {
  Executor& executor = ExecutorFor(job);
  Time now = clock_.Now();
  if (executor.PollInterval().count() > 0) {
    auto last = last_polled_.find(job.name());
    if (last != last_polled_.end() && now - last->second < executor.PollInterval()) return;
    last_polled_[job.name()] = now;
  }
  ExecStatus status = executor.Poll(job.executor_handle);
  if (status.phase == ExecStatus::Phase::kPending) {
    if (job.state == JobState::kStarting && job.message != status.message) {
      job.message = status.message;
      events.push_back(Event(job, "Pending", status.message));
    }
    return;
  }
  if (status.phase == ExecStatus::Phase::kRunning) {
    if (job.state == JobState::kStarting) {
      job.started_at = clock_.Now();
      std::string where = job.gpu_ids.empty() ? "" : " on GPUs ";
      for (std::size_t i = 0; i < job.gpu_ids.size(); ++i) {
        if (i > 0) where += ',';
        where += std::to_string(job.gpu_ids[i]);
      }
      SetState(job, JobState::kRunning, "Started",
               std::to_string(job.spec.resources.processes()) + " process(es)" + where + " (" +
                   job.executor + ")",
               events);
    }
    return;
  }
  FinishAttempt(job, status, events);
}

void JobController::EnforceDeadlines(Job& job, std::vector<JobEvent>& events) {
  Time now = clock_.Now();
  if (job.preempt_requested_at && !job.stop_requested_at &&
      now - *job.preempt_requested_at >= PreemptionGrace(job)) {
    RequestStop(job, "Preempted", job.preempt_message, events);
    return;
  }
  if (ExecutorFor(job).EnforcesTimeLimit() && !job.stop_requested_at) return;
  if (job.spec.time_limit && job.spec.checkpoint_warning && job.started_at &&
      !job.stop_requested_at && !warned_.count(job.name()) &&
      now - *job.started_at >= *job.spec.time_limit - *job.spec.checkpoint_warning) {
    warned_.insert(job.name());
    Status s = ExecutorFor(job).Signal(job.executor_handle, SIGUSR1);
    events.push_back(Event(job, "CheckpointWarning",
                           s.ok() ? "SIGUSR1 sent: the time limit is " +
                                        FormatDuration(*job.spec.checkpoint_warning) + " away"
                                  : "SIGUSR1 failed: " + s.message()));
  }
  if (!job.stop_requested_at && job.spec.time_limit && job.started_at &&
      now - *job.started_at >= *job.spec.time_limit) {
    RequestStop(job, "TimeLimitExceeded",
                "ran past its time limit of " + FormatDuration(*job.spec.time_limit), events);
    return;
  }
  if (job.stop_requested_at && !killed_.count(job.name()) &&
      now - *job.stop_requested_at >= job.spec.termination_grace) {
    Status s = ExecutorFor(job).Signal(job.executor_handle, SIGKILL);
    events.push_back(Event(job, "Killed",
                           s.ok() ? "still running after its termination grace; SIGKILL sent"
                                  : "SIGKILL failed: " + s.message()));
    killed_.insert(job.name());
  }
}

Status JobController::Reconcile() {
  std::lock_guard lock(mu_);
  JobFilter filter;
  filter.active_only = true;
  auto jobs = store_.ListJobs(filter);
  if (!jobs.ok()) return jobs.status();
  for (Job& job : *jobs) {
    std::vector<JobEvent> events;
    // The health last announced survives a restart, so a job already flagged
    // is not announced again ("Unknown -> Stalled") to webhooks and events.
    // Only running jobs have a health (a requeued job starts afresh), so
    // queued ones cost no read at start-up.
    bool running = job.state == JobState::kStarting || job.state == JobState::kRunning;
    if (auto past = running ? store_.ListEvents(job.name(), 0)
                            : Result<std::vector<JobEvent>>(std::vector<JobEvent>{});
        past.ok()) {
      for (const JobEvent& e : *past) {
        auto arrow = e.message.find(" -> ");
        if (e.type != "HealthChanged" || arrow == std::string::npos) continue;
        std::string to = e.message.substr(arrow + 4);
        health_[job.name()] = to.substr(0, to.find(':'));
      }
    }
    if (running && job.executor_handle.empty()) {
      // The server stopped while launching: adopt what the launch started,
      // or launch it again if it started nothing, never both.
      if (auto launched = ExecutorFor(job).FindLaunched(AttemptRequest(job))) {
        job.executor_handle = launched->handle;
        IndexLogs(job, *launched, events);
        events.push_back(Event(job, "Readopted",
                               "the server stopped while launching the attempt, which had "
                               "started: " + launched->description));
        {
          std::lock_guard token_lock(tokens_mu_);
          token_hashes_[job.name()] = job.token_hash;
        }
        PollAttempt(job, events);
      } else {
        job.gpu_ids.clear();
        SetState(job, JobState::kQueued, "Requeued", "the server restarted before launch", events);
      }
    } else if (running) {
      ExecStatus status = ExecutorFor(job).Poll(job.executor_handle);
      if (status.phase == ExecStatus::Phase::kRunning || status.phase == ExecStatus::Phase::kPending) {
        events.push_back(Event(job, "Readopted", "server restarted; the job kept running"));
      } else {
        events.push_back(Event(job, "Reconciled", "the attempt ended while the server was down"));
        FinishAttempt(job, status, events);
      }
    }
    if (!events.empty()) Save(job, events);
  }
  return Status::Ok();
}

void JobController::Tick() {
  std::lock_guard lock(mu_);
  JobFilter filter;
  filter.active_only = true;
  auto jobs = store_.ListJobs(filter);
  if (!jobs.ok()) {
    std::fprintf(stderr, "headway: cannot list jobs: %s\n", jobs.status().ToString().c_str());
    return;
  }
  for (Job& job : *jobs) {
    bool launched = !job.executor_handle.empty() &&
                    (job.state == JobState::kRunning || job.state == JobState::kStarting);
    if (!launched) continue;
    std::vector<JobEvent> events;
    ScanMarkers(job, events);
    PollAttempt(job, events);
    if (job.state == JobState::kRunning) {
      EnforceDeadlines(job, events);
      WatchHealth(job, events);
    } else {
      health_.erase(job.name());
    }
    if (!events.empty()) Save(job, events);
  }
  Schedule(*jobs);
  if (options_.on_tick) options_.on_tick(*jobs);
}

namespace {

// Created 0600 from the start (never readable by others, even briefly), and
// replaced rather than reused, so an old file's owner or mode cannot linger.
Status WritePrivateFile(const std::string& path, const std::string& content) {
  ::unlink(path.c_str());
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Unavailable("cannot create " + path + ": " + std::strerror(errno));
  bool ok = ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  ::close(fd);
  if (!ok) return Unavailable("cannot write " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

bool RunsLocally(const Job& job) { return job.executor.empty() || job.executor == "local"; }

bool HoldsResources(const Job& job) {
  return job.state == JobState::kRunning || job.state == JobState::kStarting;
}

HealthAction PolicyFor(const HealthPolicies& policies, const std::string& health) {
  if (health == "Stalled") return policies.on_stall;
  if (health == "Diverging") return policies.on_diverge;
  if (health == "Plateaued") return policies.on_plateau;
  return HealthAction::kNotify;
}

std::string NodeName() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "local";
  return host;
}

}  // namespace

void JobController::Schedule(std::vector<Job>& active) {
  static const std::string kNode = NodeName();
  const Time now = clock_.Now();
  sched::ClusterState state;
  state.now = now;
  state.nodes = {{kNode, options_.total_gpus}};
  state.queues = options_.team_quotas;
  std::vector<bool> used(static_cast<std::size_t>(options_.total_gpus), false);
  std::map<std::string, Job*> by_name;
  for (Job& job : active) {
    if (!RunsLocally(job)) {
      // A cluster engine schedules its own queue: hand the job over at once.
      if (job.state == JobState::kQueued) StartJob(job, {});
      continue;
    }
    by_name[job.name()] = &job;
    if (HoldsResources(job)) {
      for (int id : job.gpu_ids) {
        if (id >= 0 && id < options_.total_gpus) used[static_cast<std::size_t>(id)] = true;
      }
      sched::RunningJob r;
      r.name = job.name();
      r.queue = job.spec.team;
      r.priority = job.spec.priority;
      if (!job.gpu_ids.empty()) r.placement = {{kNode, static_cast<int>(job.gpu_ids.size())}};
      r.started_at = job.started_at.value_or(now);
      // When its GPUs come back, for backfill: the time limit or, sooner, the
      // progress ETA (what a batch scheduler cannot know).
      if (job.spec.time_limit) r.expected_end = r.started_at + *job.spec.time_limit;
      if (job.state == JobState::kRunning) {
        ProgressView view = tracker_.View(job, now);
        if (view.eta_seconds) {
          Time eta_end = now + std::chrono::milliseconds(
                                   static_cast<std::int64_t>(*view.eta_seconds * 1000.0));
          if (!r.expected_end || eta_end < *r.expected_end) r.expected_end = eta_end;
        }
      }
      auto health = health_.find(job.name());
      r.reclaimable = health != health_.end() &&
                      PolicyFor(job.spec.policies, health->second) == HealthAction::kReclaim;
      if (job.stop_requested_at) {
        r.leaving = true;
        r.expected_end = *job.stop_requested_at + job.spec.termination_grace;
      } else if (job.preempt_requested_at) {
        r.leaving = true;
        r.expected_end =
            *job.preempt_requested_at + PreemptionGrace(job) + job.spec.termination_grace;
      }
      state.running.push_back(std::move(r));
    } else if (job.state == JobState::kQueued || job.state == JobState::kPreempted) {
      sched::WaitingJob w;
      w.name = job.name();
      w.queue = job.spec.team;
      w.priority = job.spec.priority;
      w.submit_seq = job.submit_seq;
      w.queued_at = job.requeued_at.value_or(job.created_at);
      w.nodes = 1;  // the local executor runs on this one machine
      w.gpus_per_node = job.spec.resources.gpus();
      w.time_limit = job.spec.time_limit;
      state.waiting.push_back(std::move(w));
    }
  }
  sched::Decision decision = sched::Schedule(state, options_.scheduling);
  for (const sched::Preemption& p : decision.preemptions) {
    auto victim = by_name.find(p.job);
    if (victim != by_name.end()) Preempt(*victim->second, p);
  }
  for (const sched::Start& start : decision.starts) {
    auto job = by_name.find(start.job);
    if (job == by_name.end()) continue;
    int want = 0;
    for (const sched::NodeGpus& p : start.placement) want += p.gpus;
    std::vector<int> ids;
    for (int id = 0; id < options_.total_gpus && static_cast<int>(ids.size()) < want; ++id) {
      if (!used[static_cast<std::size_t>(id)]) {
        used[static_cast<std::size_t>(id)] = true;
        ids.push_back(id);
      }
    }
    StartJob(*job->second, std::move(ids),
             start.backfilled ? "backfilled: it cannot delay the job first in line" : "");
  }
  PublishPool(state, active, decision);
}

void JobController::PublishPool(const sched::ClusterState& state, const std::vector<Job>& active,
                                const sched::Decision& decision) {
  std::map<std::string, api::QueueStatus> queues;
  for (const auto& [team, quota] : options_.team_quotas) {
    api::QueueStatus& q = queues[team];
    q.nominal_gpus = quota.nominal_gpus;
    q.borrowing_limit = quota.borrowing_limit;
    q.weight = quota.weight;
  }
  for (const auto& [name, config] : options_.queues) {
    if (config.executor == "local") continue;
    api::QueueStatus& q = queues[name];
    q.executor = config.executor;
    for (const auto& [key, value] : config.options) {
      if (key == "partition") q.executor += ":" + value;
    }
  }
  api::NodeStatus node;
  for (const sched::Node& n : state.nodes) {
    node.name = n.name;
    node.gpus = n.gpus;
  }
  for (const Job& job : active) {
    bool local = RunsLocally(job);
    const std::string& key = local ? job.spec.team : job.spec.queue;
    api::QueueStatus& q = queues[key];
    if (!local && q.executor == "local") q.executor = job.executor;
    if (HoldsResources(job)) {
      q.running += 1;
      if (local) {
        q.gpus_in_use += static_cast<int>(job.gpu_ids.size());
        node.gpus_in_use += static_cast<int>(job.gpu_ids.size());
        node.jobs.push_back(job.name());
      } else {
        q.gpus_in_use += job.spec.resources.gpus();
      }
    } else if (job.state == JobState::kQueued || job.state == JobState::kPreempted) {
      q.pending += 1;
    }
  }
  // Each local queue's next job: highest priority, then first submitted.
  std::map<std::string, const sched::WaitingJob*> heads;
  std::set<std::string> started;
  for (const sched::Start& s : decision.starts) started.insert(s.job);
  for (const sched::WaitingJob& w : state.waiting) {
    if (started.count(w.name)) continue;
    const sched::WaitingJob*& head = heads[w.queue];
    if (head == nullptr || w.priority > head->priority ||
        (w.priority == head->priority &&
         std::tie(w.queued_at, w.submit_seq) < std::tie(head->queued_at, head->submit_seq))) {
      head = &w;
    }
  }
  for (const auto& [queue, head] : heads) {
    api::QueueStatus& q = queues[queue];
    q.next_job = head->name;
    auto reason = decision.pending_reasons.find(head->name);
    if (reason != decision.pending_reasons.end()) q.pending_reason = reason->second;
  }
  std::vector<api::QueueStatus> list;
  for (auto& [name, q] : queues) {
    q.name = name;
    list.push_back(std::move(q));
  }
  std::lock_guard lock(pool_mu_);
  pending_reasons_ = decision.pending_reasons;
  queues_ = std::move(list);
  nodes_ = {std::move(node)};
}

namespace {

// Fault injection for the crash-recovery tests: with HEADWAY_TEST_CRASH_AT
// naming this point, the server dies here as if killed (-9).
void CrashPointForTests(const char* point) {
  static const char* const wanted = std::getenv("HEADWAY_TEST_CRASH_AT");
  if (wanted != nullptr && std::strcmp(wanted, point) == 0) {
    std::fprintf(stderr, "headway: crash point %s reached\n", point);
    std::fflush(stderr);
    ::raise(SIGKILL);
  }
}

}  // namespace

LaunchRequest JobController::AttemptRequest(const Job& job) const {
  LaunchRequest request;
  request.spec = job.spec;
  request.attempt = job.attempt();
  request.gpu_ids = job.gpu_ids;
  request.run_dir = (std::filesystem::path(options_.data_dir) / "jobs" / job.name() /
                     ("attempt-" + std::to_string(job.attempt())))
                        .string();
  return request;
}

void JobController::IndexLogs(const Job& job, const Launched& launched,
                              std::vector<JobEvent>& events) {
  for (const RankLog& log : launched.logs) {
    Status s = store_.AddLogFile({job.name(), job.attempt(), log.rank, log.path});
    if (!s.ok()) events.push_back(Event(job, "Warning", "log index: " + s.message()));
  }
}

void JobController::StartJob(Job& job, std::vector<int> gpu_ids, std::string why) {
  std::vector<JobEvent> events;
  job.gpu_ids = std::move(gpu_ids);
  job.stop_requested_at.reset();
  job.stop_reason.clear();
  job.exit_code.reset();
  // The launch intent, token included, is durable before anything starts:
  // an attempt adopted after a crash mid-launch reports with this token.
  std::string token = api::NewJobToken();
  job.token_hash = api::HashToken(token);
  {
    std::lock_guard lock(tokens_mu_);
    token_hashes_[job.name()] = job.token_hash;
  }
  SetState(job, JobState::kStarting, "Scheduled", std::move(why), events);
  Save(job, events);
  events.clear();

  LaunchRequest request = AttemptRequest(job);
  // Kubeflow Trainer v2 compatibility: its SDK reads the token from a file.
  std::string token_file = request.run_dir + "/kubeflow-token";
  std::error_code ec;
  std::filesystem::create_directories(request.run_dir, ec);
  const std::filesystem::path job_dir = std::filesystem::path(options_.data_dir) / "jobs" / job.name();
  std::string checkpoint_dir = (job_dir / "checkpoints").string();
  std::string home_dir = (job_dir / "home").string();
  std::filesystem::create_directories(checkpoint_dir, ec);
  std::filesystem::create_directories(home_dir, ec);
  Status written = WritePrivateFile(token_file, token);
  if (!written.ok()) {
    SetState(job, JobState::kFailed, "LaunchFailed", written.message(), events);
    job.gpu_ids.clear();
    Save(job, events);
    return;
  }
  // The executor makes these the job's (its Unix account's) and, for local
  // jobs, the only part of the data directory their sandbox shows.
  request.run_as = RunAsAccount(options_.run_as, job.spec.team);
  request.job_dirs = {checkpoint_dir, home_dir};
  request.job_files = {token_file};
  request.job_home = home_dir;
  request.private_dirs = {options_.data_dir};
  request.platform_env = {
      {"HEADWAY_URL", options_.advertise_url},
      {"HEADWAY_JOB", job.name()},
      {"HEADWAY_TOKEN", token},
      {"KUBEFLOW_TRAINER_SERVER_URL",
       options_.advertise_url + "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/" +
           job.name() + "/status"},
      {"KUBEFLOW_TRAINER_SERVER_TOKEN", token_file},
      // Kept across attempts, so a restarted or preempted job resumes from it.
      {"HEADWAY_CHECKPOINT_DIR", checkpoint_dir}};
  if (!options_.ca_file.empty()) {
    request.platform_env["HEADWAY_CA_FILE"] = options_.ca_file;
    request.shared_files.push_back(options_.ca_file);
  }
  request.queue_options = QueueOf(job.spec).options;
  Executor& executor = ExecutorFor(job);
  CrashPointForTests("launch:before");
  auto launched = executor.Launch(request);
  if (!launched.ok()) {
    job.gpu_ids.clear();
    SetState(job, JobState::kFailed, "LaunchFailed", launched.status().message(), events);
    Save(job, events);
    return;
  }
  for (const std::string& warning : launched->warnings) {
    events.push_back(Event(job, "Warning", warning));
  }
  IndexLogs(job, *launched, events);
  CrashPointForTests("launch:after");
  job.executor_handle = launched->handle;
  job.message = "launched";
  events.push_back(Event(job, "Launched", "attempt " + std::to_string(job.attempt()) + " handed to " +
                                              job.executor + ": " + launched->description));
  // Local attempts are running at once; a cluster's may wait in its queue.
  PollAttempt(job, events);
  Save(job, events);
}

void JobController::RunLoop(Duration period) {
  std::unique_lock lock(mu_);
  while (!shutdown_) {
    lock.unlock();
    Tick();
    lock.lock();
    wake_.wait_for(lock, period, [this] { return shutdown_ || woken_; });
    woken_ = false;
  }
}

void JobController::Shutdown() {
  std::lock_guard lock(mu_);
  shutdown_ = true;
  wake_.notify_all();
}

}  // namespace headway
