// The attempt lifecycle: what happens to a job's current attempt when it is
// scheduled, launched, polled, stopped, preempted or runs past a deadline,
// and when the server restarts in the middle of any of that.
//
// Pure decisions over a Job record: each function takes the job, what was
// observed and the time, changes the record, and returns a Step: the events
// to store with it and the actions (launch, signals) the controller carries
// out once the record and events are stored, never before. That order is
// what makes recovery exact: whatever the server was doing when it died,
// the stored record says what it had decided, and Recover/Readopt finish
// that decision without repeating what was done (an attempt is never
// launched twice; a signal may be sent twice, never lost).
//
// No I/O, no clocks, no threads: tests drive it with any time they like.
//
//   Queued/Preempted --Schedule--> Starting (intent: GPUs, token; action Launch)
//   Starting --Launched--> Starting with a handle --Observe(Running)--> Running
//   Running --RequestStop--> (SIGTERM) --EnforceDeadlines, grace over--> (SIGKILL)
//   Running --Preempt--> (SIGUSR1) --grace over--> (SIGTERM) --exit--> Preempted
//   any attempt --Observe(exited)--> Succeeded | Failed | Stopped | Queued (restart)
//                                    | Preempted (requeued)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/exec_status.h"
#include "core/health.h"
#include "core/job.h"
#include "core/time.h"

namespace headway::lifecycle {

// Something the controller does once the step's record and events are stored.
struct Action {
  // kResize: hand an elastic job's new GPUs (the record's gpu_ids) to its attempt.
  enum class Kind { kLaunch, kSignal, kResize };
  Kind kind = Kind::kSignal;
  int signal = 0;  // kSignal: SIGUSR1 (checkpoint warning), SIGTERM or SIGKILL

  friend bool operator==(const Action&, const Action&) = default;
};

struct Step {
  bool changed = false;          // the job record changed: store it, with `events`
  std::vector<JobEvent> events;  // in order; ids are assigned by the store
  std::vector<Action> actions;   // in order, after the store has the record

  bool empty() const { return !changed && events.empty() && actions.empty(); }
  // Appends `next`, which happened after this step.
  void Then(Step next);
};

// What the controller remembers of an attempt between ticks without storing
// it. Lost on a restart, which costs at most a repeated signal.
struct AttemptMemo {
  bool warned = false;  // the checkpoint warning before the time limit went out
  bool killed = false;  // SIGKILL went out
  bool force = false;   // a forced stop came while launching: SIGKILL once launched
};

struct DeadlineOptions {
  // Between a preemption's checkpoint warning and its SIGTERM, for jobs
  // whose spec sets no checkpoint_warning.
  Duration preemption_grace = std::chrono::seconds(30);
  // The job's executor ends attempts at the time limit itself (Slurm).
  bool executor_enforces_time_limit = false;
};

// The executor-reported causes the lifecycle treats specially (ExecStatus::reason).
inline constexpr std::string_view kExitTimeLimit = "TimeLimitExceeded";
inline constexpr std::string_view kExitCancelled = "Cancelled";

Duration PreemptionGrace(const Job& job, const DeadlineOptions& options);
// What the job's spec says to do when its health turns to `health`.
HealthAction PolicyFor(const HealthPolicies& policies, Health health);
// The stop reason of a policy stop for `health` (kStalled, kDiverging, kPlateaued).
StopReason StopReasonFor(Health health);

// The scheduler granted `gpu_ids`: the launch intent (GPUs, the new report
// token's hash) becomes part of the record, then Launch. Queued or Preempted only.
Step Schedule(Job& job, std::vector<int> gpu_ids, std::string token_hash, std::string why,
              Time now);
// An elastic job's running attempt takes `gpu_ids` instead of the GPUs it
// held (sched/elastic.h decided it, for `reason`): the record holds the new
// grant, then Resize. Running, and not being stopped or preempted, only.
Step Resize(Job& job, std::vector<int> gpu_ids, const std::string& reason, Time now);

// The executor started the attempt. A stop that came while it was being
// launched is delivered now.
Step Launched(Job& job, AttemptMemo& memo, const std::string& handle,
              const std::string& description, const std::vector<std::string>& warnings, Time now);
// The executor could not start it: the job fails (or ends Stopped when a
// stop came meanwhile), and its GPUs are free.
Step LaunchFailed(Job& job, const std::string& message, Time now);

// A poll of a launched attempt. `completed` says whether the job has
// reported all its steps (a preempted job that exits having finished is not
// requeued); only consulted once the attempt ended.
Step Observe(Job& job, AttemptMemo& memo, const ExecStatus& status, bool completed, Time now);

// A stop for `reason`: a job not launched ends at once; a launched one gets
// SIGTERM and SIGKILL after its termination grace; one being launched gets
// SIGTERM as soon as it is. Stopping twice is a no-op, except that a user's
// stop turns a preemption under way into a stop (the job is not requeued).
Step RequestStop(Job& job, StopReason reason, const std::string& why, Time now);
// SIGKILL without waiting for the grace; the job ends Stopped, not requeued.
Step ForceStop(Job& job, AttemptMemo& memo, const std::string& why, Time now);
// The scheduler wants the job's GPUs: the checkpoint warning now, SIGTERM
// after the grace (EnforceDeadlines), then requeued when it exits.
Step Preempt(Job& job, const std::string& reason, const std::string& for_job,
             const DeadlineOptions& options, Time now);
// Time-driven transitions of a running attempt: preemption grace, the
// checkpoint warning before the time limit, the time limit, the termination grace.
Step EnforceDeadlines(Job& job, AttemptMemo& memo, const DeadlineOptions& options, Time now);
// The classifier's verdict for a running job: announced once per change,
// and the spec's policy applied (on_stall: stop, ...). `step`, the job's
// latest reported step, ends the event's text: "A -> B: reason (at step N)"
// (the dashboard marks the change on its charts there).
Step HealthSeen(Job& job, Health health, const std::string& reason, Time now,
                std::optional<std::int64_t> step = std::nullopt);
// A running job that has not reported once `overdue` (the no-report grace
// since it started has passed): one NoReports event per attempt, and
// `reason` kept as its health_reason while its health stays Unknown. Not
// for a notebook's job (kNotebookLabel), which is not expected to report.
Step NoReportsSeen(Job& job, bool overdue, const std::string& reason, Time now);
// The verdict a job keeps once it ended (Succeeded, Failed, Stopped), so a
// run that diverged and still exited 0 says so. `verdict` is the
// classifier's over the whole series as of the last report (an end is not
// a stall). What the series shows (Diverging, Plateaued) wins; otherwise a
// job that was Stalled when it ended stays Stalled; otherwise the verdict,
// unless it is Unknown (no report), which keeps what was announced. A
// change is announced as a HealthChanged event, worded as HealthSeen's
// ("A -> B: reason; the run's final verdict (at step N)"). No-op for other states.
Step FinalHealth(Job& job, Health verdict, const std::string& reason, Time now,
                 std::optional<std::int64_t> step = std::nullopt);

// After a restart, for a job the store says was being launched (Starting,
// no handle): `found` is the attempt the executor finds it had started
// (Executor::FindLaunched), adopted instead of launched again; without one
// the job is queued again (or ends Stopped if a stop had come).
struct FoundAttempt {
  std::string handle;
  std::string description;
};
Step RecoverLaunch(Job& job, AttemptMemo& memo, const std::optional<FoundAttempt>& found, Time now);
// After a restart, for a launched job: its attempt is adopted if it runs,
// finished if it ended. A stop or preemption the server had decided but may
// not have signalled before it died is signalled again.
Step Readopt(Job& job, AttemptMemo& memo, const ExecStatus& status, bool completed, Time now);

}  // namespace headway::lifecycle
