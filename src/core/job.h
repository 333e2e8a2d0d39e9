// Domain types of a training job: what the user asked for (JobSpec), where it
// stands (Job), and what happened to it (JobEvent). Plain values, no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/health.h"
#include "core/image_ref.h"
#include "core/time.h"

namespace headway {

struct Resources {
  int gpus_per_process = 0;
  int processes_per_node = 1;
  int nodes = 1;
  // Limits for the whole attempt on a node, enforced with cgroups where the
  // controller is available; 0: no limit.
  std::int64_t memory_bytes = 0;
  double cpus = 0;

  int processes() const { return processes_per_node * nodes; }
  int gpus() const { return gpus_per_process * processes(); }
};

// What the platform does when a job's progress health turns bad.
// kReclaim: keep it running, but let the scheduler preempt it (checkpoint
// warning first, then requeue) when another job waits for its GPUs.
enum class HealthAction { kNotify, kStop, kReclaim };

// Which way a metric should go as a model learns; kAuto: as its name says.
enum class MetricGoal { kAuto, kMinimize, kMaximize };

struct HealthPolicies {
  HealthAction on_stall = HealthAction::kNotify;
  HealthAction on_diverge = HealthAction::kNotify;
  HealthAction on_plateau = HealthAction::kNotify;
  HealthAction on_overfit = HealthAction::kNotify;
  // The metric a plateau is judged on and which way it should go; empty:
  // eval_loss once reported, else loss, with the direction its name implies
  // (accuracy, F1, BLEU, reward, ... rise; losses fall).
  std::string objective;
  MetricGoal objective_goal = MetricGoal::kAuto;
  // GPUs held but unused (core/gpu_idle.h): notify or stop once every GPU of
  // a running job has been below `gpu_idle_below_percent` utilisation for
  // `gpu_idle_after`. nullopt: not watched.
  std::optional<HealthAction> on_gpu_idle;
  Duration gpu_idle_after = std::chrono::minutes(30);
  double gpu_idle_below_percent = 5;
};

// Pull mode: the job serves its progress as JSON over HTTP on `port` of the
// host its rank 0 runs on, in the format of OpenShift AI's
// KubeflowProgressCallback (progressPercentage, currentStep, totalSteps,
// currentEpoch, totalEpochs, trainMetrics, evalMetrics,
// estimatedRemainingSeconds), and the server GETs `path` every `interval`.
struct ProgressEndpoint {
  int port = 28080;
  std::string path = "/metrics";
  Duration interval = std::chrono::seconds(30);
};

// An elastic job (sched/elastic.h) runs between a minimum and a maximum of
// units and is resized while it runs: whole nodes (min_nodes..max_nodes), or
// ranks of gpus_per_process GPUs each on one node (min_ranks..max_ranks).
// It is admitted at its minimum, which resources.nodes or
// processes_per_node then hold.
struct ElasticRange {
  int min_nodes = 0;
  int max_nodes = 0;
  int min_ranks = 0;
  int max_ranks = 0;

  bool ByNodes() const { return max_nodes > 0; }
  int MinUnits() const { return ByNodes() ? min_nodes : min_ranks; }
  int MaxUnits() const { return ByNodes() ? max_nodes : max_ranks; }
  friend bool operator==(const ElasticRange&, const ElasticRange&) = default;
};

// Label of a job that runs a workflow step: the step's container image,
// recorded (the step runs as a process on the pool, not in the image); the
// job's Submitted event says so.
inline constexpr std::string_view kStepImageLabel = "headway.dev/image";
// Label of a job that serves a notebook: the notebook's name. Such a job
// reports no training progress, and is not expected to.
inline constexpr std::string_view kNotebookLabel = "headway.dev/notebook";

struct JobSpec {
  std::string name;
  // Like Kubernetes' metadata.generateName: with no name, the server names
  // the job this prefix plus 5 random characters. Not stored with the job.
  std::string generate_name;
  std::string team = "default";
  std::string queue;  // empty: the team's default queue
  int priority = 0;
  std::vector<std::string> command;  // argv[0..]
  std::vector<std::string> args;     // appended to command
  std::string working_dir;           // empty: the job's run directory
  std::map<std::string, std::string> env;
  Resources resources;
  int max_restarts = 0;  // restarts on a non-zero exit, not on stop or time limit
  std::optional<Duration> time_limit;
  Duration termination_grace = std::chrono::seconds(30);  // SIGTERM → SIGKILL
  // SIGUSR1 this long before the time limit, so the job can checkpoint
  // (executors that enforce time limits themselves, e.g. Slurm's --signal).
  std::optional<Duration> checkpoint_warning;
  std::map<std::string, std::string> labels;
  HealthPolicies policies;
  std::optional<ProgressEndpoint> progress_endpoint;
  // Like Kubernetes' ttlSecondsAfterFinished: the job (record, progress,
  // events, logs, run directory) is deleted this long after it ended.
  // Unset: the server's --finished-job-ttl (off by default).
  std::optional<Duration> ttl_after_finished;
  // Local jobs: a /tmp of their own (a folder of the job's, bound over
  // /tmp in its sandbox), as a container has; workflow steps get one, so
  // concurrent steps writing /tmp/out do not collide. Cluster engines give
  // each job its own node-local space already.
  bool private_tmp = false;
  // The host's network instead of the job's own (local executor): what a job
  // that must reach services on the host asks for, and only an admin may
  // grant (checked at submit).
  bool host_network = false;
  // HOME is its owner's persistent home (DATA_DIR/homes/TEAM/USER, see
  // HomeOwner), kept across jobs, instead of a fresh one per job: what a
  // notebook's files live in, and what a user's batch jobs may share.
  bool persistent_home = false;
  // The OCI image the job runs in (local executor: pulled with skopeo,
  // unpacked with umoci, run by crun; exec/oci/). Empty: on the host.
  std::string image;
  ImagePullPolicy image_pull_policy = ImagePullPolicy::kDefault;
  std::optional<ElasticRange> elastic;  // unset: a fixed size

  std::vector<std::string> Argv() const;
};

// Why the platform or a user asked a running attempt to stop. Persisted by
// name; the name of a policy stop is the health that triggered it.
enum class StopReason {
  kNone,
  kUser,       // "Stopped": `headway stop`, an experiment, the API
  kPreempted,  // "Preempted": the scheduler needs its GPUs; the job is requeued
  kTimeLimit,  // "TimeLimitExceeded": it ran past spec.time_limit; the job fails
  kStalled,    // "Stalled", "Diverging", "Plateaued", "Overfitting": a health policy (on_* : stop)
  kDiverging,
  kPlateaued,
  kOverfitting,
  kGpuIdle,  // "GpuIdle": policies.on_gpu_idle: stop
};
std::string_view StopReasonName(StopReason reason);
// The inverse of StopReasonName; nullopt for other text ("" is kNone).
std::optional<StopReason> ParseStopReason(std::string_view name);

enum class JobState { kQueued, kStarting, kRunning, kSucceeded, kFailed, kStopped, kPreempted };
inline constexpr JobState kAllJobStates[] = {
    JobState::kQueued, JobState::kStarting, JobState::kRunning,  JobState::kSucceeded,
    JobState::kFailed, JobState::kStopped,  JobState::kPreempted};

std::string_view JobStateName(JobState state);
std::optional<JobState> ParseJobState(std::string_view name);
// Succeeded, Failed and Stopped never change again.
bool IsTerminal(JobState state);

// The platform's view of one job. Persisted by the Store.
struct Job {
  JobSpec spec;
  JobState state = JobState::kQueued;
  std::string reason;   // CamelCase machine-readable cause, e.g. "ExitCode", "TimeLimitExceeded"
  std::string message;  // human text for the reason
  std::optional<int> exit_code;
  int restarts = 0;     // restarts after a failure (bounded by max_restarts)
  int preemptions = 0;  // requeues after a preemption (not bounded: not the job's fault)
  std::vector<int> gpu_ids;
  std::string executor;         // registry name of the executor running it
  std::string executor_handle;  // the executor's opaque, persisted handle of the running attempt
  std::string token_hash;       // SHA-256 (hex) of the job's report token
  // Who created it, set by the server, never by a spec: "user/<token name>"
  // for a user token, "experiment/<name>" for a trial; empty when the server
  // runs without authentication (or the job predates the record).
  // Controllers bind only jobs they created (see OwnerOf in experiment_controller).
  std::string created_by;
  std::int64_t submit_seq = 0;  // FIFO order, assigned by the store
  Time created_at{};
  std::optional<Time> started_at;
  std::optional<Time> finished_at;
  std::optional<Time> stop_requested_at;       // set by stop; cleared on restart
  StopReason stop_reason = StopReason::kNone;  // why the platform or user asked it to stop
  // The health last announced (HealthChanged) for the running attempt;
  // Unknown while queued. Kept so a restart does not announce it again.
  // Once the job has ended it is the final verdict (FinalHealth), so a run
  // that diverged and still exited 0 says so.
  Health health = Health::kUnknown;
  // Why: the classifier's reason for `health` ("loss is NaN at step 40"), or
  // the NoReports text while a running job has not reported.
  std::string health_reason;
  // Set by a delete of a job that had not ended (force): it is stopped and
  // deleted once it has ended.
  std::optional<Time> delete_requested_at;
  // Set when the scheduler chose to preempt the running attempt: the job got
  // its checkpoint warning then, and SIGTERM follows after the grace.
  std::optional<Time> preempt_requested_at;
  std::string preempt_message;  // why, e.g. "preempted by higher-priority big-run"
  // When a preempted job went back to the queue: it waits behind jobs queued
  // before that, so it does not take back the GPUs it was preempted for.
  std::optional<Time> requeued_at;

  // Index of the current attempt: every restart and every preemption starts a new one.
  int attempt() const { return restarts + preemptions; }

  const std::string& name() const { return spec.name; }
};

struct JobEvent {
  std::int64_t id = 0;  // assigned by the store
  std::string job;
  Time time{};
  std::string type;  // "Submitted", "StateChanged", "Stopping", "Restarting", ...
  std::string message;
};

// A query over jobs, as the API and the store understand it.
struct JobFilter {
  std::optional<JobState> state;
  bool active_only = false;                   // not Succeeded, Failed or Stopped
  bool ended_only = false;                    // only Succeeded, Failed or Stopped
  std::string team;                           // empty: all teams
  std::map<std::string, std::string> labels;  // all must match
  std::int64_t submitted_after = 0;           // only jobs whose submit_seq is greater
};

// Where one rank's output of one attempt is kept.
struct LogFile {
  std::string job;
  int attempt = 0;
  int rank = 0;
  std::string path;
};

// Whose persistent home a job created by `created_by` uses: the user of a
// "user/NAME" creator, else the creator with '/' as '-' ("workflow-x"),
// "anonymous" when the server runs without authentication.
std::string HomeOwner(std::string_view created_by);

// Job names are used in URLs, paths and Slurm job names: lowercase DNS labels.
bool IsValidJobName(std::string_view name);

// Memory sizes as Kubernetes writes them: "512Mi", "16Gi", "2G", "1500000"
// (bytes). nullopt for anything else, or below 4 MiB (no job starts in less).
std::optional<std::int64_t> ParseMemoryQuantity(std::string_view text);
// The same units without a minimum ("0", "512", "1Mi", "500Gi"); nullopt when malformed.
std::optional<std::int64_t> ParseByteQuantity(std::string_view text);
// The shortest exact form: "16Gi", "1536Mi", or plain bytes.
std::string FormatMemoryQuantity(std::int64_t bytes);

// Like sbatch, a job runs where it was submitted from unless it says
// otherwise, and a relative working_dir is taken from there. A submit_dir
// that is not absolute, or a job in an image, changes nothing.
void ApplySubmitDir(JobSpec& spec, std::string_view submit_dir);

}  // namespace headway
