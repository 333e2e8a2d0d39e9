// The job lifecycle: queues submitted jobs, asks the scheduler what to start,
// launches through the executor, watches attempts to their end, applies
// restart policy, stop requests, grace periods and time limits.
//
// The decisions are the attempt lifecycle's (lifecycle/attempt.h); this class
// feeds it what it observes, stores each decision with its events, and only
// then acts on it (launches, signals), outside its lock. So after a crash
// Reconcile() finds each job where it left it: running attempts are
// re-adopted through their executor handle, attempts that ended meanwhile
// are finalised, an attempt whose launch was under way is adopted if it
// started and launched again only if it did not.
//
// Thread safety: all public methods are thread-safe. Tick() is called by one
// background loop; Submit/Stop wake it. No executor call is made holding
// the lock that API calls take.
//
// Its definitions are split by concern: job_controller.cc (submission,
// stop, reconcile, the tick), job_controller_launch.cc (scheduling, the
// pool's view, launches), job_controller_progress.cc (report intake, report
// tokens, stdout markers, pulled progress), job_controller_exec.cc (exec
// sessions) and job_controller_retention.cc (deletion, collection of ended
// jobs).
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "api/job_service.h"
#include "core/pulled_progress.h"
#include "core/run_as.h"
#include "core/time.h"
#include "exec/executor.h"
#include "lifecycle/attempt.h"
#include "progress/health.h"
#include "sched/elastic.h"
#include "sched/run_time_history.h"
#include "sched/scheduler.h"
#include "server/control_loop.h"
#include "server/ingest_writer.h"
#include "server/marker_scanner.h"
#include "server/progress_tracker.h"
#include "store/store.h"

namespace headway {

// Which executor runs a queue's jobs, and with what backend options
// (partition, account, qos for Slurm).
struct QueueConfig {
  std::string executor = "local";
  std::map<std::string, std::string> options;
};

struct ControllerOptions {
  int total_gpus = 0;         // size of the GPU pool; GPU ids are 0..total_gpus-1
  std::string data_dir;       // run directories live under data_dir/jobs/NAME/attempt-N
  std::string advertise_url;  // HEADWAY_URL given to jobs
  std::string ca_file;        // HEADWAY_CA_FILE given to jobs when the API is HTTPS
  std::map<std::string, QueueConfig> queues;  // by queue name; other queues run locally
  // Quotas of the local pool by team; a team not listed is bounded by the pool.
  std::map<std::string, sched::QueueQuota> team_quotas;
  sched::SchedulerOptions scheduling;
  // How elastic jobs (JobSpec::elastic) are resized (sched/elastic.h).
  sched::ElasticOptions elastic;
  // Between the checkpoint warning (SIGUSR1) of a preempted job and its
  // SIGTERM, unless the job's spec sets checkpoint_warning.
  Duration preemption_grace = std::chrono::seconds(30);
  progress::HealthOptions health;
  double plateau_window = 0.25;                // fraction of total_steps; see ProgressTracker
  progress::ConfirmationOptions confirmation;  // before a verdict is announced and acted on
  // Distinct metric names one job may report; more are refused (400).
  std::size_t max_series_per_job = 1000;
  // Progress points (ProgressTracker's IngestLimits) one job may store; more
  // are refused (413) or, from stdout markers, dropped.
  std::uint64_t max_points_per_job = 1000000;
  // The local supervisor's bound on each rank's log, named in the event that
  // says a rank's output was rotated (0: not bounded).
  std::uint64_t max_log_bytes = 0;
  // Which Unix account each team's jobs run as.
  RunAsPolicy run_as;
  // How long a job is kept after it ended when its spec sets no
  // ttl_after_finished (--finished-job-ttl); nullopt: until deleted.
  std::optional<Duration> finished_job_ttl;
  // How often the control loop looks for ended jobs due to be deleted.
  Duration retention_interval = std::chrono::seconds(30);
  // Called (on the control loop's thread, holding no store lock) for every
  // persisted StateChanged, HealthChanged or NoReports event; must not block.
  std::function<void(const Job&, const JobEvent&)> on_change;
  // Called at the end of every Tick (on the control loop's thread, holding
  // the controller's lock) with the jobs that were active at its start, as
  // the pass left them (some may have ended in it); must not block.
  std::function<void(const std::vector<Job>& active)> on_tick;
  // Called (holding the controller's lock) for every job deleted from the
  // store, by a user or its TTL; must not block.
  std::function<void(const Job&)> on_removed;
};

class JobController final : public api::JobService {
 public:
  // `store`, the executors and `clock` must outlive the controller.
  // `executors` by registry name; "local" must be among them.
  JobController(Store& store, std::map<std::string, Executor*> executors, const Clock& clock,
                ControllerOptions options);

  // Call once at start-up, before the first Tick.
  Status Reconcile();
  // One pass of the control loop: poll attempts, enforce deadlines, schedule.
  void Tick();
  // Runs Tick until Shutdown(), every `period` or sooner when woken.
  void RunLoop(Duration period);
  void Shutdown();
  // Pull mode (JobSpec::progress_endpoint): GETs the endpoint of each
  // running job that has one when its interval is due, outside every lock
  // the API takes, and ingests what changed. A job whose endpoint does not
  // answer three times in a row gets one Warning event per attempt.
  void PullProgress();
  // Runs PullProgress until Shutdown(), every `period`.
  void RunPullLoop(Duration period);

  Result<Job> Submit(JobSpec spec, std::string created_by) override;
  Result<Job> Get(std::string_view name) override;
  Result<std::vector<Job>> List(const JobFilter& filter) override;
  Result<Job> StopFor(std::string_view name, StopReason reason, std::string why) override;
  Result<Job> Stop(std::string_view name, std::string why) override;
  Result<Job> ForceStop(std::string_view name, std::string why) override;
  Result<Job> Delete(std::string_view name, bool when_ended) override;
  Result<std::vector<JobEvent>> Events(std::string_view name, std::int64_t after_id) override;
  Status AddEvent(std::string_view name, std::string type, std::string message) override;
  Result<std::shared_ptr<api::AttachedProcess>> Exec(std::string_view name,
                                                     const api::ExecOptions& options,
                                                     const std::string& who) override;
  Result<std::vector<LogFile>> LogFiles(std::string_view name) override;
  Result<std::string> PrimaryHost(std::string_view name) override;
  Result<int> ConnectToJob(std::string_view name, int port) override;
  int QueuedJobsOf(std::string_view team) override;
  api::QueuePlace QueuePlaceOf(std::string_view name) override;
  std::string PendingReason(std::string_view name) override;
  api::ElasticStatus ElasticOf(std::string_view name) override;
  std::vector<api::QueueStatus> Queues() override;
  std::vector<api::NodeStatus> Nodes() override;
  Status ReportProgress(std::string_view name, std::string_view token,
                        std::vector<ProgressReport> reports) override;
  Result<MetricChart> MetricChartOf(std::string_view name, std::string_view metric,
                                    std::size_t buckets) override;
  void ReportProgressThen(std::string_view name, std::string_view token,
                          std::vector<ProgressReport> reports,
                          std::function<void(const Status&)> done) override;
  Status MayReport(std::string_view name, std::string_view token) override;
  ProgressView Progress(const Job& job) override;
  Result<std::vector<MetricPoint>> MetricSeries(std::string_view name,
                                                std::string_view metric) override;
  Result<std::vector<MetricPoint>> MetricSeriesAfter(std::string_view name, std::string_view metric,
                                                     std::int64_t after_step,
                                                     std::size_t limit) override;
  Result<std::vector<std::string>> MetricNames(std::string_view name) override;

 private:
  // What the control loop does once a decision is stored, outside mu_:
  // executors are slow (a cluster engine's CLI) and must not hold up the API.
  // What both report paths check before queueing: the token, then the
  // job's series and points limits (tracker_.Admit).
  Status AdmitReports(std::string_view name, std::string_view token,
                      const std::vector<ProgressReport>& reports);
  // The token checks of ReportProgress and MayReport.
  Status CheckReportToken(std::string_view name, std::string_view token);
  struct PendingLaunch {
    std::string job;
    std::string token;  // the new attempt's report token (its hash is stored)
  };
  struct PendingSignal {
    std::string job;
    std::string handle;
    Executor* executor = nullptr;
    int signal = 0;
  };
  struct PendingResize {
    std::string job;
    std::string handle;
    Executor* executor = nullptr;
    std::vector<std::vector<int>> unit_gpus;
  };
  struct Work {
    std::vector<PendingLaunch> launches;
    std::vector<PendingSignal> signals;
    std::vector<PendingResize> resizes;
  };
  // A poll of a launched attempt, made outside mu_.
  struct Polled {
    std::string handle;
    ExecStatus status;
  };

  // Stores the job with the step's events when the step changed anything,
  // then queues the step's actions in `work`. Nothing is queued when the
  // store refused: no action is taken that the record does not show.
  // Callers hold mu_.
  Status Apply(Job& job, lifecycle::Step step, Work& work, const std::string& token = {});
  // Carries out `work` without holding mu_.
  void Carry(Work& work);
  void Launch(const PendingLaunch& pending, Work& work);
  // Stores a Warning event with the job's current record; takes mu_.
  void AddWarning(const std::string& name, const std::string& message);

  // What launching the job's current attempt asks of its executor (the
  // platform's part is added by Launch).
  LaunchRequest AttemptRequest(const Job& job) const;
  void IndexLogs(const Job& job, const std::vector<RankLog>& logs, std::vector<JobEvent>& events);
  // Indexes again what IndexLogs could not store (before a scan reads the index).
  void EnsureLogsIndexed(const Job& job, std::vector<JobEvent>& events);
  // After a restart or takeover: an attempt with no indexed log (its
  // launcher stopped first) gets them from its executor.
  void IndexLogsIfMissing(const Job& job, std::vector<JobEvent>& events);
  // The job, or Conflict when it already ended; callers hold mu_.
  // The job if it is running (launched, with a handle); else Conflict with its state.
  Result<Job> RunningJob(std::string_view name);
  Result<Job> StoppableJob(std::string_view name);
  // Whether the job has reported all its steps (a preempted job that exits
  // having finished is not requeued).
  bool Completed(const Job& job);
  lifecycle::DeadlineOptions Deadlines(const Job& job);
  // Adopts what an interrupted launch started, requeues it if it started
  // nothing, or (the executor cannot tell) waits; callers hold mu_.
  lifecycle::Step RecoverLaunch(Job& job, lifecycle::AttemptMemo& memo,
                                const Result<std::optional<Launched>>& launched, Time now);
  // Callers hold mu_. `final`: the attempt ended, so what it wrote last is
  // stored (and seen by the tracker) before this returns.
  lifecycle::Step ScanMarkers(const Job& job, bool final = false);
  // Deletes an ended job: its record and everything stored with it, and
  // what the controller keeps of it; its run directory is moved aside and
  // returned, for the caller to remove outside mu_. Callers hold mu_.
  Result<std::string> Remove(const Job& job);
  // Removes a directory Remove moved aside; takes no lock.
  static void RemoveDir(const std::string& dir);
  // Deletes the ended jobs that are due (lifecycle::DeleteDueAt), at most
  // once per retention_interval. Takes mu_ per job.
  void CollectFinished(Time now);
  void Schedule(std::vector<Job>& active, Work& work);
  // Elastic jobs (job_controller_elastic.cc), callers hold mu_. What the
  // controller knows of each running one: its throughput at each size,
  // measured from its reports, and the GPUs a shrink is giving back.
  struct ElasticMemo {
    std::string handle;  // the attempt it is about; a new one starts afresh
    int units = 0;       // the size the measurements below are for
    Time last_change{};  // the attempt's start or its last resize
    std::optional<std::pair<std::int64_t, Time>> anchor;  // first report at this size
    std::optional<Duration> restart_cost;
    std::map<int, double> throughput;  // steps/s by size
    std::vector<int> releasing;        // GPUs given back, not free before `released_at`
    Time released_at{};
  };
  // The running elastic jobs as the sizing decision sees them; marks the
  // GPUs shrinks are giving back as `used`; hands a recorded grant over
  // again to an attempt first seen after a restart.
  std::vector<sched::ElasticJob> ElasticJobs(const std::vector<Job>& active,
                                             const std::string& node, std::vector<bool>& used,
                                             Work& work, Time now);
  // Queues handing the job's recorded grant (gpu_ids, one list per rank
  // group) to its attempt.
  void QueueResize(const Job& job, Work& work);
  // Carries out the sizing decision's resizes: new GPU grants, stored with
  // a Resized event, then handed to the executor.
  void ApplyResizes(const std::vector<sched::Resize>& resizes, std::map<std::string, Job*>& by_name,
                    std::vector<bool>& used, Work& work, Time now);
  void PublishPool(sched::ClusterState state, const std::vector<Job>& active,
                   sched::Decision decision);
  JobEvent Event(const Job& job, std::string type, std::string message) const;
  Status Save(const Job& job, const std::vector<JobEvent>& events);

  Store& store_;
  Executor& ExecutorFor(const Job& job);
  const QueueConfig& QueueOf(const JobSpec& spec) const;

  std::map<std::string, Executor*> executors_;
  const Clock& clock_;
  const ControllerOptions options_;

  std::mutex mu_;          // serialises every job mutation
  ControlLoop loop_;       // Tick's
  ControlLoop pull_loop_;  // PullProgress's
  // Bumped by every change to a job outside the control loop, so a tick
  // that listed the jobs before taking mu_ knows to list them again.
  std::uint64_t generation_ = 0;                         // guarded by mu_
  std::map<std::string, lifecycle::AttemptMemo> memos_;  // guarded by mu_
  std::map<std::string, ElasticMemo> elastic_;           // guarded by mu_
  // What ElasticOf answers, copied from elastic_ at each decision, so the
  // API reads it without mu_.
  std::mutex elastic_view_mu_;
  std::map<std::string, api::ElasticStatus, std::less<>>
      elastic_view_;                         // guarded by elastic_view_mu_
  std::map<std::string, Time> last_polled_;  // guarded by mu_
  // Jobs whose launch a restart interrupted and whose executor could not
  // tell yet whether it started: asked again each tick, never relaunched
  // until it answers.
  std::set<std::string> unresolved_launches_;  // guarded by mu_
  // Rank logs whose index entry could not be stored, by job: {attempt, logs}.
  std::map<std::string, std::pair<int, std::vector<RankLog>>> unindexed_logs_;  // guarded by mu_
  // How long finished jobs ran, for the progress-aware ordering: loaded from
  // the store at its first decision, then fed as jobs succeed.
  sched::RunTimeHistory run_times_;    // guarded by mu_
  bool run_times_loaded_ = false;      // guarded by mu_
  void RecordRunTime(const Job& job);  // requires mu_
  // Pull mode: the running jobs with an endpoint as of the last tick, and
  // warnings for the tick to store as events.
  std::mutex pull_mu_;
  std::vector<Job> pull_jobs_;                        // guarded by pull_mu_
  std::map<std::string, std::string> pull_warnings_;  // guarded by pull_mu_
  struct PullMemo {
    std::string handle;  // the attempt it is about; a new one starts afresh
    std::string host;
    Time next{};
    PulledState last;
    int failures = 0;
    bool warned = false;
  };
  std::map<std::string, PullMemo> pull_memos_;  // only PullProgress touches it
  ProgressTracker tracker_;
  IngestWriter writer_;                           // after tracker_: it feeds it
  MarkerScanner markers_;                         // guarded by mu_
  std::map<std::string, bool> warned_malformed_;  // guarded by mu_
  std::optional<Time> last_collected_;            // guarded by mu_
  std::mutex tokens_mu_;
  // Report-token hash per job, so a report costs no job read and parse.
  std::map<std::string, std::string> token_hashes_;  // guarded by tokens_mu_
  std::mutex pool_mu_;
  // The last decision with the state it was made from: a waiting job's reason
  // and place are worded when asked, by name through an index built on the
  // first question after each decision (most decisions are never asked about).
  struct PoolDecision {
    sched::ClusterState state;
    sched::Decision decision;
    std::unordered_map<std::string_view, std::size_t> pending_by_name;  // into decision.pending
    bool indexed = false;
  };
  std::shared_ptr<PoolDecision> pool_decision_;  // guarded by pool_mu_
  // Where `name` is among the last decision's pending jobs; requires pool_mu_.
  const sched::Pending* PendingOf(std::string_view name, std::size_t* position);
  std::vector<api::QueueStatus> queues_;  // guarded by pool_mu_
  std::vector<api::NodeStatus> nodes_;    // guarded by pool_mu_
  // Waiting jobs by team: the last pass's count plus the submissions since.
  std::map<std::string, int, std::less<>> queued_by_team_;  // guarded by pool_mu_
};

}  // namespace headway
