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
#include "server/job_controller.h"
#include "server/job_controller_support.h"

namespace headway {

using internal::CrashPointForTests;

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
  const bool by_work = options_.scheduling.ordering != sched::Ordering::kFairShare;
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
      w.submitted_at = job.created_at;
      w.nodes = 1;  // the local executor runs on this one machine
      w.gpus_per_node = job.spec.resources.gpus();
      w.time_limit = job.spec.time_limit;
      if (by_work) w.expected_run = run_times_.Expect(RunTimeKeys(job));
      state.waiting.push_back(std::move(w));
    }
  }
  // Elastic jobs: sized around the decision (shrink before preempting,
  // idle GPUs to the best measured gain).
  std::vector<sched::ElasticJob> elastic = ElasticJobs(active, kNode, used, work, now);
  std::vector<sched::Resize> resizes;
  sched::Decision decision;
  if (elastic.empty()) {
    decision = sched::Schedule(state, options_.scheduling);
  } else {
    sched::ElasticPlan plan =
        sched::PlanWithElastic(state, elastic, options_.scheduling, options_.elastic);
    decision = std::move(plan.decision);
    resizes = std::move(plan.resizes);
  }
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
  ApplyResizes(resizes, by_name, used, work, now);
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

}  // namespace headway
