// What the REST API needs from the control plane. The server implements it;
// keeping it here lets the API be built and tested without the server.
//
// Thread safety: implementations must allow concurrent calls.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/http_server.h"
#include "core/job.h"
#include "core/progress_report.h"
#include "core/status.h"

namespace headway::api {

// One queue of the shared pool as the scheduler last saw it. Local queues are
// teams (quota per team); queues mapped to a cluster engine are listed with
// that executor and no quota (the engine enforces its own).
struct QueueStatus {
  std::string name;
  std::string executor = "local";
  std::optional<int> nominal_gpus;     // unset: no quota, bounded by the pool alone
  std::optional<int> borrowing_limit;  // GPUs it may take beyond nominal
  double weight = 1.0;
  int gpus_in_use = 0;
  int running = 0;
  int pending = 0;
  std::string next_job;        // the pending job that starts first, if any
  std::string pending_reason;  // why it waits, e.g. "waiting for 4 GPUs; team quota 8/8 used"
};

struct NodeStatus {
  std::string name;
  std::string executor = "local";
  int gpus = 0;
  int gpus_in_use = 0;
  std::vector<std::string> jobs;  // running or starting on it
};

// A command to run inside a running job (`headway exec`, `headway ssh`).
struct ExecOptions {
  int rank = 0;
  std::vector<std::string> argv;  // empty: the job account's login shell
  bool tty = false;
  bool stdin = false;  // the client sends it; otherwise the command's stdin is at its end
  int columns = 80, rows = 24;
  // Instead of a command, an SSH server on the streams (`headway ssh
  // --stdio`, OpenSSH's ProxyCommand): the client's ssh runs its commands.
  bool ssh = false;
};

// Where a queued job stands: its place in the scheduler's order across
// queues (1: next; 0: not waiting) and, for the job first in line when the
// running jobs' expected ends tell, when it is expected to start.
struct QueuePlace {
  int position = 0;
  std::optional<Time> expected_start;
  bool operator==(const QueuePlace&) const = default;
};

// What an elastic job (JobSpec::elastic) measured while it ran: its work
// per second (steps/s) at each size, and how long its last resize or start
// took to its first report. Empty for other jobs.
struct ElasticStatus {
  std::map<int, double> throughput;
  std::optional<double> restart_seconds;
};

// The ranks a job's attempt may run, each with its log and a place for
// `exec --rank`: an elastic job's rank groups up to its maximum.
inline int RankSlots(const JobSpec& spec) {
  if (spec.elastic && !spec.elastic->ByNodes()) return spec.elastic->max_ranks;
  return spec.resources.processes();
}

class JobService {
 public:
  virtual ~JobService() = default;

  // Validates against the executor and the GPU pool, then queues the job,
  // recording `created_by` (see Job::created_by) with it.
  // InvalidArgument (naming the field) or Conflict for a taken name.
  virtual Result<Job> Submit(JobSpec spec, std::string created_by) = 0;
  virtual Result<Job> Get(std::string_view name) = 0;
  virtual Result<std::vector<Job>> List(const JobFilter& filter) = 0;
  // Asks a job to stop: a queued one stops at once, a running one gets SIGTERM
  // and, after its termination grace, SIGKILL. Conflict if it already ended.
  virtual Result<Job> Stop(std::string_view name, std::string why) = 0;
  // As Stop, with `reason` (a policy's, such as StopReason::kGpuIdle) as the
  // job's reason instead of a user's stop.
  virtual Result<Job> StopFor(std::string_view name, StopReason reason, std::string why) {
    (void)reason;
    return Stop(name, std::move(why));
  }
  // Ends a job at once: a queued one stops, a running one gets SIGKILL now,
  // with no grace (also when a stop or preemption is already waiting out its
  // grace); recorded as a "Killed" event. Conflict if it already ended.
  virtual Result<Job> ForceStop(std::string_view name, std::string why) = 0;
  // Deletes an ended job with its progress, events, logs and run directory;
  // its name is free again. A job that has not ended is Conflict, unless
  // `when_ended`: then it is asked to stop (as Stop) and deleted once it has
  // ended. Returns the job as it was (still listed when it has not ended).
  virtual Result<Job> Delete(std::string_view name, bool when_ended) {
    (void)name;
    (void)when_ended;
    return Unavailable("this server cannot delete jobs");
  }
  virtual Result<std::vector<JobEvent>> Events(std::string_view name, std::int64_t after_id) = 0;
  // Starts a command inside the running job, recorded as an "Exec" event
  // naming `who` (and "ExecEnded" with its exit code). Conflict when the
  // job is not running; InvalidArgument for a rank it does not have.
  virtual Result<std::shared_ptr<AttachedProcess>> Exec(std::string_view name,
                                                        const ExecOptions& options,
                                                        const std::string& who) {
    (void)name;
    (void)options;
    (void)who;
    return Unavailable("this server cannot run commands inside jobs");
  }
  // Records an event of the job's (a controller's own, such as a notebook's
  // idle warning); NotFound for an unknown job.
  virtual Status AddEvent(std::string_view name, std::string type, std::string message) {
    (void)name;
    (void)type;
    (void)message;
    return Unavailable("this server cannot record events");
  }
  virtual Result<std::vector<LogFile>> LogFiles(std::string_view name) = 0;
  // Stores reports sent by the job itself, authorised by its report token;
  // returns once they are durable. Unauthenticated without a token,
  // PermissionDenied with a token that is not this job's.
  virtual Status ReportProgress(std::string_view name, std::string_view token,
                                std::vector<ProgressReport> reports) = 0;
  // ReportProgress without waiting: `done` gets its outcome once the reports
  // are durable or refused, possibly on another thread and possibly before
  // this returns. The default waits on the caller's thread.
  virtual void ReportProgressThen(std::string_view name, std::string_view token,
                                  std::vector<ProgressReport> reports,
                                  std::function<void(const Status&)> done) {
    done(ReportProgress(name, token, std::move(reports)));
  }
  // Whether `token` may report for job `name` now: the checks of
  // ReportProgress (Unauthenticated, PermissionDenied, NotFound), and
  // Conflict once the job has ended. Stores nothing.
  virtual Status MayReport(std::string_view name, std::string_view token) = 0;
  // Progress, ETA and health of `job` as of now (all unset before the first report).
  virtual ProgressView Progress(const Job& job) = 0;
  // Every point of one metric, ascending by step. NotFound for an unknown job.
  virtual Result<std::vector<MetricPoint>> MetricSeries(std::string_view name,
                                                        std::string_view metric) = 0;
  // A chart of one metric: every point when it has at most `buckets` points
  // (or `buckets` is 0), else `buckets` buckets of about equal point count
  // (Downsample, or a kept SeriesSummary of it). NotFound as MetricSeries.
  virtual Result<MetricChart> MetricChartOf(std::string_view name, std::string_view metric,
                                            std::size_t buckets) {
    auto points = MetricSeries(name, metric);
    if (!points.ok()) return points.status();
    MetricChart chart;
    chart.count = points->size();
    if (buckets == 0 || points->size() <= buckets) {
      chart.points = std::move(points.value());
    } else {
      chart.buckets = Downsample(*points, buckets);
    }
    return chart;
  }
  // Up to `limit` points of one metric with step > after_step, ascending by
  // step; empty when there are none yet. NotFound for an unknown job.
  virtual Result<std::vector<MetricPoint>> MetricSeriesAfter(std::string_view name,
                                                             std::string_view metric,
                                                             std::int64_t after_step,
                                                             std::size_t limit) = 0;
  virtual Result<std::vector<std::string>> MetricNames(std::string_view name) = 0;
  // Why a queued job is not running yet; empty when it is not queued.
  virtual std::string PendingReason(std::string_view name) = 0;
  // The address of the host a running job's rank 0 is on (its executor's
  // answer: loopback on this machine, the node's address on a cluster).
  virtual Result<std::string> PrimaryHost(std::string_view name) {
    (void)name;
    return std::string("127.0.0.1");
  }
  // A socket connected to `port` where the running job serves it (inside
  // its own network where it has one); the caller owns the descriptor.
  virtual Result<int> ConnectToJob(std::string_view name, int port) {
    (void)name;
    (void)port;
    return Unavailable("this server cannot connect to its jobs");
  }
  // How many of `team`'s jobs wait (queued or preempted), as of the last
  // scheduling pass and the submissions since.
  virtual int QueuedJobsOf(std::string_view team) {
    (void)team;
    return 0;
  }
  // A queued job's place in line, as of the last scheduling pass.
  virtual QueuePlace QueuePlaceOf(std::string_view name) {
    (void)name;
    return {};
  }
  // Quota use per queue and GPU use per node, as of the last scheduling pass.
  virtual ElasticStatus ElasticOf(std::string_view name) {
    (void)name;
    return {};
  }
  virtual std::vector<QueueStatus> Queues() = 0;
  virtual std::vector<NodeStatus> Nodes() = 0;
};

}  // namespace headway::api
