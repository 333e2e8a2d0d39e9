#include "server/job_controller.h"

#include <fcntl.h>
#include <signal.h>
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

namespace headway {

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

Status JobController::CheckReportToken(std::string_view name, std::string_view token) {
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
  return Status::Ok();
}

Status JobController::MayReport(std::string_view name, std::string_view token) {
  HEADWAY_RETURN_IF_ERROR(CheckReportToken(name, token));
  auto job = store_.GetJob(name);
  if (!job.ok()) return job.status();
  if (IsTerminal(job->state)) {
    return Conflict("job '" + std::string(name) + "' has ended (" +
                    std::string(JobStateName(job->state)) + "): its token no longer reports");
  }
  return Status::Ok();
}

Status JobController::AdmitReports(std::string_view name, std::string_view token,
                                   const std::vector<ProgressReport>& reports) {
  HEADWAY_RETURN_IF_ERROR(CheckReportToken(name, token));
  return tracker_.Admit(std::string(name), reports,
                        {options_.max_series_per_job, options_.max_points_per_job});
}

Status JobController::ReportProgress(std::string_view name, std::string_view token,
                                     std::vector<ProgressReport> reports) {
  HEADWAY_RETURN_IF_ERROR(AdmitReports(name, token, reports));
  return writer_.Write({std::string(name), std::move(reports), clock_.Now()});
}

void JobController::ReportProgressThen(std::string_view name, std::string_view token,
                                       std::vector<ProgressReport> reports,
                                       std::function<void(const Status&)> done) {
  if (Status admitted = AdmitReports(name, token, reports); !admitted.ok()) {
    done(admitted);
    return;
  }
  writer_.WriteThen({std::string(name), std::move(reports), clock_.Now()}, std::move(done));
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

Result<MetricChart> JobController::MetricChartOf(std::string_view name, std::string_view metric,
                                                 std::size_t buckets) {
  if (buckets > 0) {
    auto job = store_.GetJob(name);
    if (!job.ok()) return job.status();
    auto chart = tracker_.charts().Chart(std::string(name), std::string(metric), buckets,
                                         [&](const std::function<void(const MetricPoint&)>& each) {
                                           return store_.ScanMetric(name, metric, each);
                                         });
    if (!chart.ok()) return chart.status();
    if (*chart) return std::move(**chart);
  }
  return JobService::MetricChartOf(name, metric, buckets);
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

lifecycle::Step JobController::ScanMarkers(const Job& job, bool final) {
  lifecycle::Step step;
  EnsureLogsIndexed(job, step.events);
  auto files = store_.ListLogFiles(job.name());
  if (!files.ok()) return step;
  std::vector<LogFile> current;
  for (const LogFile& f : *files) {
    if (f.attempt == job.attempt()) current.push_back(f);
  }
  int malformed = 0;
  std::vector<LogFile> rotated;
  std::string why;
  const std::set<std::string> stdout_metrics = StdoutMetricNames(job.spec);
  std::vector<ProgressReport> reports = markers_.Scan(
      current, malformed, &rotated, stdout_metrics.empty() ? nullptr : &stdout_metrics, &why);
  if (malformed > 0 && !warned_malformed_[job.name()]) {
    warned_malformed_[job.name()] = true;
    step.events.push_back(
        Event(job, "Warning",
              "ignored a malformed HEADWAY progress line in the job's output: " + why +
                  " (the form is HEADWAY {\"step\": 1, \"loss\": 0.5}; later "
                  "malformed lines are ignored without another event)"));
  }
  for (const LogFile& f : rotated) {
    step.events.push_back(
        Event(job, "Warning",
              "rank " + std::to_string(f.rank) + "'s output passed half of its log limit of " +
                  std::to_string(options_.max_log_bytes) +
                  " bytes (--max-log-bytes): older output moved to " +
                  std::filesystem::path(f.path).filename().string() +
                  ".1, and output older than that is dropped; the newest is kept"));
  }
  // The same limits as HTTP reports; a job's output cannot be refused, so
  // what is over them is dropped, and the job's events say so once per limit.
  const IngestLimits limits{options_.max_series_per_job, options_.max_points_per_job};
  tracker_.DropOverLimits(job.name(), reports, limits);
  for (std::string& warning : tracker_.TakeWarnings(job.name(), limits)) {
    step.events.push_back(Event(job, "Warning", std::move(warning)));
  }
  if (!reports.empty()) {
    if (final) {
      // The attempt ended: its last reports must count in its final verdict.
      Status s = writer_.Write({job.name(), std::move(reports), clock_.Now()});
      if (!s.ok()) step.events.push_back(Event(job, "Warning", "progress lines: " + s.message()));
    } else {
      writer_.WriteAsync({job.name(), std::move(reports), clock_.Now()});
    }
  }
  return step;
}

namespace {

std::string RandomJobSuffix() {
  static constexpr char kChars[] = "bcdfghjklmnpqrstvwxz2456789";  // as Kubernetes: no vowels
  static thread_local std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<std::size_t> pick(0, sizeof kChars - 2);
  std::string out;
  for (int i = 0; i < 5; ++i) out += kChars[pick(rng)];
  return out;
}

}  // namespace

JobEvent JobController::Event(const Job& job, std::string type, std::string message) const {
  return {0, job.name(), clock_.Now(), std::move(type), std::move(message)};
}

Status JobController::Save(const Job& job, const std::vector<JobEvent>& events) {
  Status s = store_.SaveJob(job, events);
  if (!s.ok()) {
    // Nothing is acted on: the next tick re-reads the store and decides
    // again from the stored state.
    std::fprintf(stderr, "headway: cannot save job %s: %s\n", job.name().c_str(),
                 s.ToString().c_str());
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
  } else {
    HEADWAY_RETURN_IF_ERROR(store_.CreateJob(job, Event(job, "Submitted", submitted)));
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

Result<std::shared_ptr<api::AttachedProcess>> JobController::Exec(std::string_view name,
                                                                  const api::ExecOptions& options,
                                                                  const std::string& who) {
  auto running = RunningJob(name);
  if (!running.ok()) return running.status();
  const Job job = std::move(*running);
  if (options.rank < 0 || options.rank >= job.spec.resources.processes()) {
    return InvalidArgument("job '" + job.name() + "' has ranks 0 to " +
                           std::to_string(job.spec.resources.processes() - 1) + ", not " +
                           std::to_string(options.rank));
  }
  ExecRequest request;
  request.rank = options.rank;
  request.argv = options.argv;
  request.tty = options.tty;
  request.columns = options.columns;
  request.rows = options.rows;
  if (options.ssh) {
    // One host key for every job this server reaches, so that a client
    // trusts it once; made at the first session.
    request.ssh_host_key_file =
        (std::filesystem::path(options_.data_dir) / "ssh_host_ed25519_key").string();
    if (auto key = LoadOrCreateSshHostKey(request.ssh_host_key_file); !key.ok()) {
      return key.status();
    }
  }
  auto started = ExecutorFor(job).Exec(job.executor_handle, request);
  if (!started.ok()) return started.status();
  // Audited: who ran what, where, and how it ended. The command is shown as
  // typed, cut short; a secret typed into an interactive shell never is.
  std::string what = options.ssh            ? std::string("an SSH session")
                     : options.argv.empty() ? std::string("a login shell")
                                            : std::string();
  for (const std::string& a : options.argv) what += (what.empty() ? "`" : " ") + a;
  if (!options.argv.empty()) what = what.substr(0, 200) + "`";
  const std::string where =
      " in rank " + std::to_string(options.rank) + (options.tty ? " on a terminal" : "");
  const std::string actor = who.empty() ? std::string("someone (authentication is off)") : who;
  (void)AddEvent(job.name(), "Exec", actor + " ran " + what + where);

  // A second descriptor of a terminal's master, for resizes: the HTTP server
  // owns the others and closes them when it is done.
  int resize_fd = started->tty ? ::fcntl(started->input, F_DUPFD_CLOEXEC, 0) : -1;
  struct Reaped {
    Reaped(pid_t p, int fd, Duration grace) : pid(p), resize_fd(fd), stop_grace(grace) {}
    Reaped(const Reaped&) = delete;
    Reaped& operator=(const Reaped&) = delete;
    pid_t pid;
    int resize_fd;
    Duration stop_grace;
    // When it was asked to end (a SIGHUP; steady-clock nanoseconds, 0: not
    // yet), for the SIGKILL after stop_grace. Atomic: the connection's reader
    // and writer may run on different threads.
    std::atomic<std::int64_t> hung_up{0};
    std::optional<int> code;
    ~Reaped() {
      if (resize_fd >= 0) ::close(resize_fd);
      if (!code && pid > 0) {
        ::kill(-pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  };
  auto reaped = std::make_shared<Reaped>(started->pid, resize_fd, started->stop_grace);
  if (!options.tty && !options.stdin) {
    ::close(started->input);  // nothing will come: the command reads the end at once
    started->input = -1;
  }
  auto attached = std::make_shared<api::AttachedProcess>();
  attached->input = started->input;
  attached->output = started->output;
  attached->error = started->error;
  attached->resize = [reaped](int columns, int rows) {
    if (reaped->resize_fd < 0) return;
    struct winsize size {};
    size.ws_col = static_cast<unsigned short>(std::clamp(columns, 1, 1000));
    size.ws_row = static_cast<unsigned short>(std::clamp(rows, 1, 1000));
    ::ioctl(reaped->resize_fd, TIOCSWINSZ, &size);
  };
  attached->exit_code = [reaped]() -> std::optional<int> {
    if (reaped->code) return reaped->code;
    const std::int64_t hung_up = reaped->hung_up.load();
    if (hung_up != 0 &&
        SteadyNanos() - hung_up >= std::chrono::nanoseconds(reaped->stop_grace).count()) {
      ::kill(-reaped->pid, SIGKILL);
    }
    int status = 0;
    pid_t done = ::waitpid(reaped->pid, &status, WNOHANG);
    if (done < 0 && errno == ECHILD) {
      reaped->code = 255;  // reaped elsewhere: how it ended is unknown
      return reaped->code;
    }
    if (done != reaped->pid) return std::nullopt;
    reaped->code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return reaped->code;
  };
  attached->kill = [reaped] {
    // SIGHUP first, as a closed terminal would; the local helper passes it
    // on and the command's PR_SET_PDEATHSIG ends it with the helper. A
    // cluster's client gets its grace (SIGKILL comes from exit_code's polls).
    std::int64_t never = 0;
    if (reaped->code || !reaped->hung_up.compare_exchange_strong(never, SteadyNanos())) return;
    ::kill(-reaped->pid, SIGHUP);
    if (reaped->stop_grace <= Duration(0)) ::kill(-reaped->pid, SIGKILL);
  };
  const std::string job_name = job.name();
  const std::string ended = actor + (options.ssh ? "'s SSH session" : "'s command") + where;
  attached->on_end = [this, job_name, ended, reaped,
                      after_hang_up = started->after_hang_up](std::optional<int> code) {
    if (after_hang_up && reaped->hung_up.load() != 0) after_hang_up();
    (void)AddEvent(
        job_name, "ExecEnded",
        ended + (code ? " exited with " + std::to_string(*code) : std::string(" was ended")));
  };
  return attached;
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
    std::fprintf(stderr, "headway: cannot remove %s: %s\n", dir.c_str(), ec.message().c_str());
    return std::string();
  }
  return trash.string();
}

void JobController::RemoveDir(const std::string& dir) {
  if (Status removed = RemoveTree(dir); !removed.ok()) {
    std::fprintf(stderr, "headway: %s\n", removed.message().c_str());
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
    std::fprintf(stderr, "headway: cannot list jobs: %s\n", jobs.status().ToString().c_str());
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

std::string NodeName() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "local";
  return host;
}

}  // namespace

// What a job's run time is learned under, most specific first: who created
// it (a user's token, or one experiment, whose trials are alike), its team.
static std::vector<std::string> RunTimeKeys(const Job& job) {
  std::vector<std::string> keys;
  if (!job.created_by.empty()) keys.push_back("by:" + job.created_by);
  keys.push_back("team:" + job.spec.team);
  return keys;
}

void JobController::RecordRunTime(const Job& job) {
  if (!job.started_at || !job.finished_at) return;
  run_times_.Record(RunTimeKeys(job), *job.finished_at - *job.started_at);
}

void JobController::Schedule(std::vector<Job>& active, Work& work) {
  static const std::string kNode = NodeName();
  const Time now = clock_.Now();
  const bool by_work = options_.scheduling.ordering == sched::Ordering::kShortestWork;
  if (by_work && !run_times_loaded_) {
    JobFilter succeeded;
    succeeded.state = JobState::kSucceeded;
    if (auto done = store_.ListJobs(succeeded); done.ok()) {
      std::vector<const Job*> by_end;
      for (const Job& job : *done) {
        if (job.finished_at) by_end.push_back(&job);
      }
      std::sort(by_end.begin(), by_end.end(),
                [](const Job* a, const Job* b) { return *a->finished_at < *b->finished_at; });
      for (const Job* job : by_end) RecordRunTime(*job);
      run_times_loaded_ = true;
    }
  }
  sched::ClusterState state;
  state.now = now;
  state.nodes = {{kNode, options_.total_gpus}};
  state.queues = options_.team_quotas;
  std::vector<bool> used(static_cast<std::size_t>(options_.total_gpus), false);
  std::map<std::string, Job*> by_name;
  for (Job& job : active) {
    if (!RunsLocally(job)) {
      // A cluster engine schedules its own queue: hand the job over at once.
      if (job.state == JobState::kQueued) {
        std::string token = api::NewJobToken();
        (void)Apply(job, lifecycle::Schedule(job, {}, api::HashToken(token), "", now), work, token);
      }
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
      bool has_eta = false;
      if (job.state == JobState::kRunning) {
        ProgressView view = tracker_.View(job, now);
        if (view.eta_seconds) {
          has_eta = true;
          Time eta_end = now + std::chrono::milliseconds(
                                   static_cast<std::int64_t>(*view.eta_seconds * 1000.0));
          if (!r.expected_end || eta_end < *r.expected_end) r.expected_end = eta_end;
        }
      }
      // Progress-aware, before the job's first ETA: what its history predicts.
      if (by_work && !has_eta) {
        if (auto learned = run_times_.Expect(RunTimeKeys(job))) {
          Time learned_end = std::max(now, r.started_at + *learned);
          if (!r.expected_end || learned_end < *r.expected_end) r.expected_end = learned_end;
        }
      }
      r.reclaimable = lifecycle::PolicyFor(job.spec.policies, job.health) == HealthAction::kReclaim;
      // A job that takes the checkpoint warning resumes where it stopped.
      r.checkpointable = job.spec.checkpoint_warning.has_value();
      r.preemptions = job.preemptions;
      if (job.stop_requested_at) {
        r.leaving = true;
        r.expected_end = *job.stop_requested_at + job.spec.termination_grace;
      } else if (job.preempt_requested_at) {
        r.leaving = true;
        r.expected_end = *job.preempt_requested_at +
                         lifecycle::PreemptionGrace(job, Deadlines(job)) +
                         job.spec.termination_grace;
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
      if (by_work) w.expected_run = run_times_.Expect(RunTimeKeys(job));
      state.waiting.push_back(std::move(w));
    }
  }
  sched::Decision decision = sched::Schedule(state, options_.scheduling);
  for (const sched::Preemption& p : decision.preemptions) {
    auto victim = by_name.find(p.job);
    if (victim == by_name.end()) continue;
    Job& job = *victim->second;
    // The victim's team reads this in its events: another team's job is
    // named only by its team.
    auto for_job = by_name.find(p.for_job);
    std::string beneficiary = p.for_job;
    if (for_job != by_name.end() && for_job->second->spec.team != job.spec.team) {
      beneficiary = "a job of team " + for_job->second->spec.team;
    }
    (void)Apply(job, lifecycle::Preempt(job, p.reason, beneficiary, Deadlines(job), now), work);
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
    std::string token = api::NewJobToken();
    (void)Apply(
        *job->second,
        lifecycle::Schedule(
            *job->second, std::move(ids), api::HashToken(token),
            start.backfilled ? "backfilled: it cannot delay the job first in line" : "", now),
        work, token);
  }
  PublishPool(std::move(state), active, std::move(decision));
}

void JobController::PublishPool(sched::ClusterState state, const std::vector<Job>& active,
                                sched::Decision decision) {
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
  std::map<std::string, int, std::less<>> queued_by_team;
  for (const Job& job : active) {
    if (job.state == JobState::kQueued || job.state == JobState::kPreempted) {
      queued_by_team[job.spec.team] += 1;
    }
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
  std::unordered_map<std::string_view, const sched::Pending*> head_pending;
  for (const auto& [queue, head] : heads) head_pending.emplace(head->name, nullptr);
  for (const sched::Pending& p : decision.pending) {
    auto it = head_pending.find(state.waiting[p.job].name);
    if (it != head_pending.end()) it->second = &p;
  }
  for (const auto& [queue, head] : heads) {
    api::QueueStatus& q = queues[queue];
    q.next_job = head->name;
    if (const sched::Pending* p = head_pending[head->name])
      q.pending_reason = decision.Reason(state, *p);
  }
  std::vector<api::QueueStatus> list;
  for (auto& [name, q] : queues) {
    q.name = name;
    list.push_back(std::move(q));
  }
  auto published = std::make_shared<PoolDecision>();
  published->state = std::move(state);
  published->decision = std::move(decision);
  std::shared_ptr<PoolDecision> previous;
  std::lock_guard lock(pool_mu_);
  previous = std::move(pool_decision_);  // freed after the lock, by the declaration order
  pool_decision_ = std::move(published);
  queues_ = std::move(list);
  nodes_ = {std::move(node)};
  queued_by_team_ = std::move(queued_by_team);
}

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

void JobController::IndexLogs(const Job& job, const std::vector<RankLog>& logs,
                              std::vector<JobEvent>& events) {
  std::vector<RankLog> failed;
  for (const RankLog& log : logs) {
    Status s = store_.AddLogFile({job.name(), job.attempt(), log.rank, log.path});
    if (s.ok()) continue;
    failed.push_back(log);
    events.push_back(Event(job, "Warning", "log index: " + s.message() + " (retried)"));
  }
  // Until they are indexed no marker of theirs is read: each scan tries
  // again (a database that dropped the connection is back a moment later).
  if (failed.empty()) {
    unindexed_logs_.erase(job.name());
  } else {
    unindexed_logs_[job.name()] = {job.attempt(), std::move(failed)};
  }
}

void JobController::IndexLogsIfMissing(const Job& job, std::vector<JobEvent>& events) {
  auto files = store_.ListLogFiles(job.name());
  if (!files.ok()) return;
  for (const LogFile& f : *files) {
    if (f.attempt == job.attempt()) return;
  }
  auto launched = ExecutorFor(job).FindLaunched(AttemptRequest(job));
  if (launched.ok() && *launched) IndexLogs(job, (*launched)->logs, events);
}

void JobController::EnsureLogsIndexed(const Job& job, std::vector<JobEvent>& events) {
  auto pending = unindexed_logs_.find(job.name());
  if (pending != unindexed_logs_.end()) {
    if (pending->second.first != job.attempt()) {
      unindexed_logs_.erase(pending);
    } else {
      IndexLogs(job, std::vector<RankLog>(pending->second.second), events);
    }
  }
}

void JobController::Launch(const PendingLaunch& pending, Work& work) {
  Job job;
  {
    std::lock_guard lock(mu_);
    auto stored = store_.GetJob(pending.job);
    // Launched once per stored intent: a job no longer waiting for this
    // launch (or with another attempt's token) is left alone.
    if (!stored.ok() || stored->state != JobState::kStarting || !stored->executor_handle.empty() ||
        !api::SameHash(api::HashToken(pending.token), stored->token_hash)) {
      return;
    }
    job = std::move(*stored);
  }
  LaunchRequest request = AttemptRequest(job);
  // Kubeflow Trainer v2 compatibility: its SDK reads the token from a file.
  std::string token_file = request.run_dir + "/kubeflow-token";
  std::error_code ec;
  std::filesystem::create_directories(request.run_dir, ec);
  const std::filesystem::path job_dir =
      std::filesystem::path(options_.data_dir) / "jobs" / job.name();
  std::string checkpoint_dir = (job_dir / "checkpoints").string();
  // A persistent home outlives the job: one per team and user.
  std::string home_dir = job.spec.persistent_home
                             ? (std::filesystem::path(options_.data_dir) / "homes" / job.spec.team /
                                HomeOwner(job.created_by))
                                   .string()
                             : (job_dir / "home").string();
  std::filesystem::create_directories(checkpoint_dir, ec);
  std::filesystem::create_directories(home_dir, ec);
  Status written = WritePrivateFile(token_file, pending.token);
  Result<Launched> launched = written.ok() ? Result<Launched>(Internal("not launched")) : written;
  if (written.ok()) {
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
        {"HEADWAY_TOKEN", pending.token},
        {"KUBEFLOW_TRAINER_SERVER_URL",
         options_.advertise_url + "/apis/trainer.kubeflow.org/v1alpha1/namespaces/" +
             std::string(api::kKubeflowNamespace) + "/trainjobs/" + job.name() + "/status"},
        {"KUBEFLOW_TRAINER_SERVER_TOKEN", token_file},
        // Kept across attempts, so a restarted or preempted job resumes from it.
        {"HEADWAY_CHECKPOINT_DIR", checkpoint_dir}};
    if (!options_.ca_file.empty()) {
      request.platform_env["HEADWAY_CA_FILE"] = options_.ca_file;
      // Kubeflow's clients verify the server with it (the certificate, not a secret).
      request.platform_env["KUBEFLOW_TRAINER_SERVER_CA_CERT"] = options_.ca_file;
      request.shared_files.push_back(options_.ca_file);
    }
    request.queue_options = QueueOf(job.spec).options;
    CrashPointForTests("launch:before");
    launched = ExecutorFor(job).Launch(request);
  }
  // Local attempts run at once; a cluster's may wait in its queue.
  std::optional<ExecStatus> status;
  if (launched.ok()) {
    CrashPointForTests("launch:after");
    status = ExecutorFor(job).Poll(launched->handle);
  }

  std::lock_guard lock(mu_);
  auto stored = store_.GetJob(pending.job);
  if (stored.ok()) job = std::move(*stored);
  generation_ += 1;
  lifecycle::AttemptMemo& memo = memos_[job.name()];
  if (!launched.ok()) {
    (void)Apply(job, lifecycle::LaunchFailed(job, launched.status().message(), clock_.Now()), work);
    return;
  }
  lifecycle::Step step = lifecycle::Launched(job, memo, launched->handle, launched->description,
                                             launched->warnings, clock_.Now());
  if (step.empty()) {
    // Nothing stored waits for this attempt any more: end it, not orphan it.
    work.signals.push_back({job.name(), launched->handle, &ExecutorFor(job), SIGKILL});
    return;
  }
  IndexLogs(job, launched->logs, step.events);
  step.Then(lifecycle::Observe(job, memo, *status, false, clock_.Now()));
  (void)Apply(job, std::move(step), work);
}

void JobController::RunLoop(Duration period) {
  loop_.Run(period, [this] { Tick(); });
}

void JobController::PullProgress() {
  std::vector<Job> jobs;
  {
    std::lock_guard lock(pull_mu_);
    jobs = pull_jobs_;
  }
  const Time now = clock_.Now();
  std::erase_if(pull_memos_, [&](const auto& entry) {
    return std::none_of(jobs.begin(), jobs.end(),
                        [&](const Job& j) { return j.name() == entry.first; });
  });
  for (const Job& job : jobs) {
    const ProgressEndpoint& endpoint = *job.spec.progress_endpoint;
    PullMemo& memo = pull_memos_[job.name()];
    if (memo.handle != job.executor_handle) {
      memo = PullMemo{};
      memo.handle = job.executor_handle;
    }
    if (now < memo.next) continue;
    memo.next = now + endpoint.interval;
    std::string problem;
    if (memo.host.empty()) {
      auto host = ExecutorFor(job).PrimaryHost(job.executor_handle);
      if (host.ok()) {
        memo.host = *host;
      } else {
        problem = host.status().message();
      }
    }
    const std::string url =
        "http://" + (memo.host.find(':') != std::string::npos ? "[" + memo.host + "]" : memo.host) +
        ":" + std::to_string(endpoint.port);
    if (problem.empty()) {
      api::HttpClient http(url);
      http.set_timeout(std::chrono::seconds(2));
      // Inside the job's own network where it has one, not on the host.
      http.set_connector([this, &job, port = endpoint.port] {
        return ExecutorFor(job).ConnectToJob(job.executor_handle, port);
      });
      auto response = http.Request("GET", endpoint.path);
      if (!response.ok()) {
        problem = response.status().message();
      } else if (response->status != 200) {
        problem = "it answered HTTP " + std::to_string(response->status);
      } else if (response->body.size() > (1u << 20)) {
        problem = "its answer is over 1 MiB";
      } else {
        auto report = ParsePulledProgress(response->body, memo.last);
        if (!report.ok()) {
          problem = report.status().message();
        } else if (*report) {
          std::vector<ProgressReport> reports{std::move(**report)};
          tracker_.DropOverLimits(job.name(), reports,
                                  {options_.max_series_per_job, options_.max_points_per_job});
          if (!reports.empty()) writer_.WriteAsync({job.name(), std::move(reports), now});
        }
      }
    }
    if (problem.empty()) {
      memo.failures = 0;
      continue;
    }
    memo.host.clear();  // ask again: a Slurm job may not have its node yet
    if (++memo.failures >= 3 && !memo.warned) {
      memo.warned = true;
      std::lock_guard lock(pull_mu_);
      pull_warnings_[job.name()] = "cannot read the job's progress from " + url + endpoint.path +
                                   " (progress_endpoint): " + problem;
    }
  }
}

void JobController::RunPullLoop(Duration period) {
  pull_loop_.Run(period, [this] { PullProgress(); });
}

void JobController::Shutdown() {
  loop_.Stop();
  pull_loop_.Stop();
}

}  // namespace headway
