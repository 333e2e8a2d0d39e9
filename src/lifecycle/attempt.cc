#include "lifecycle/attempt.h"

#include <signal.h>

#include <utility>

namespace headway::lifecycle {

namespace {

JobEvent Event(const Job& job, Time now, std::string type, std::string message) {
  return {0, job.name(), now, std::move(type), std::move(message)};
}

Action Signal(int signal) { return {Action::Kind::kSignal, signal}; }

void SetState(Job& job, Step& step, JobState state, std::string reason, std::string message,
              Time now) {
  std::string text =
      std::string(JobStateName(job.state)) + " -> " + std::string(JobStateName(state));
  if (!message.empty()) text += ": " + message;
  job.state = state;
  job.reason = std::move(reason);
  job.message = std::move(message);
  if (IsTerminal(state)) job.finished_at = now;
  step.changed = true;
  step.events.push_back(Event(job, now, "StateChanged", std::move(text)));
}

bool Launching(const Job& job) {
  return job.state == JobState::kStarting && job.executor_handle.empty();
}

bool Waiting(const Job& job) {
  return job.state == JobState::kQueued || job.state == JobState::kPreempted;
}

// The attempt ended and the job went back to the queue after a preemption.
void Requeue(Job& job, Step& step, Time now) {
  std::string why = job.preempt_message.empty() ? "preempted" : job.preempt_message;
  job.preemptions += 1;
  job.preempt_requested_at.reset();
  job.preempt_message.clear();
  job.stop_requested_at.reset();
  job.stop_reason = StopReason::kNone;
  job.started_at.reset();
  job.requeued_at = now;
  SetState(job, step, JobState::kPreempted, "Preempted",
           why + "; requeued, attempt " + std::to_string(job.attempt()) +
               " resumes from the job's checkpoint",
           now);
}

// What the job becomes when its attempt is over (Finish's second half).
Step FinishState(Job& job, const ExecStatus& status, bool completed, Time now);

// The attempt is over, whichever way; what the job becomes.
Step Finish(Job& job, AttemptMemo& memo, const ExecStatus& status, bool completed, Time now) {
  Step step;
  step.changed = true;
  memo = {};
  job.exit_code = status.phase == ExecStatus::Phase::kExited ? std::optional<int>(status.exit_code)
                                                             : std::nullopt;
  job.executor_handle.clear();
  job.gpu_ids.clear();
  // The health stays with a job that ended (FinalHealth settles it); one
  // that goes back to the queue starts its next attempt Unknown.
  step.Then(FinishState(job, status, completed, now));
  if (!IsTerminal(job.state)) {
    job.health = Health::kUnknown;
    job.health_reason.clear();
  }
  return step;
}

Step FinishState(Job& job, const ExecStatus& status, bool completed, Time now) {
  Step step;
  step.changed = true;
  if (job.preempt_requested_at &&
      (!job.stop_requested_at || job.stop_reason == StopReason::kPreempted)) {
    // Whatever way it left after the warning, the work is resumable: requeue
    // it, unless it exited cleanly having reported all its steps.
    bool finished =
        status.phase == ExecStatus::Phase::kExited && status.exit_code == 0 && completed;
    if (!finished) {
      Requeue(job, step, now);
      return step;
    }
    job.stop_requested_at.reset();
    job.stop_reason = StopReason::kNone;
  }
  job.preempt_requested_at.reset();
  job.preempt_message.clear();
  if (status.reason == kExitTimeLimit && !job.stop_requested_at) {
    SetState(job, step, JobState::kFailed, std::string(kExitTimeLimit), status.message, now);
    return step;
  }
  if (status.reason == kExitCancelled && !job.stop_requested_at) {
    SetState(job, step, JobState::kStopped, std::string(kExitCancelled),
             "cancelled outside Headway: " + status.message, now);
    return step;
  }
  if (job.stop_requested_at) {
    // Time limits fail a job (as Slurm's TIMEOUT does); other stops are Stopped.
    bool timed_out = job.stop_reason == StopReason::kTimeLimit;
    SetState(job, step, timed_out ? JobState::kFailed : JobState::kStopped,
             std::string(StopReasonName(job.stop_reason)), job.message, now);
    return step;
  }
  if (status.phase == ExecStatus::Phase::kLost) {
    SetState(job, step, JobState::kFailed, "Lost", status.message, now);
    return step;
  }
  if (status.exit_code == 0) {
    SetState(job, step, JobState::kSucceeded, "Completed", "", now);
    return step;
  }
  if (!status.reason.empty()) {
    // The backend ended it (node failure, preemption, out of memory).
    SetState(job, step, JobState::kFailed, status.reason, status.message, now);
    return step;
  }
  std::string what = status.message.empty() ? "exited with code " + std::to_string(status.exit_code)
                                            : status.message;
  if (job.restarts < job.spec.max_restarts) {
    job.restarts += 1;
    job.started_at.reset();
    SetState(job, step, JobState::kQueued, "Restarting",
             what + "; restart " + std::to_string(job.restarts) + " of " +
                 std::to_string(job.spec.max_restarts),
             now);
    return step;
  }
  SetState(job, step, JobState::kFailed, "ExitCode", what, now);
  return step;
}

// A stop that reached a launched attempt: SIGTERM now, SIGKILL after the grace.
void Terminate(Job& job, Step& step, const std::string& why, Time now) {
  step.events.push_back(
      Event(job, now, "Stopping",
            why + "; SIGTERM sent, SIGKILL after " + FormatDuration(job.spec.termination_grace)));
  step.actions.push_back(Signal(SIGTERM));
}

}  // namespace

void Step::Then(Step next) {
  changed = changed || next.changed;
  for (JobEvent& e : next.events) events.push_back(std::move(e));
  for (const Action& a : next.actions) actions.push_back(a);
}

Duration PreemptionGrace(const Job& job, const DeadlineOptions& options) {
  return job.spec.checkpoint_warning.value_or(options.preemption_grace);
}

HealthAction PolicyFor(const HealthPolicies& policies, Health health) {
  switch (health) {
    case Health::kStalled:
      return policies.on_stall;
    case Health::kDiverging:
      return policies.on_diverge;
    case Health::kPlateaued:
      return policies.on_plateau;
    case Health::kOverfitting:
      return policies.on_overfit;
    case Health::kUnknown:
    case Health::kProgressing:
      break;
  }
  return HealthAction::kNotify;
}

StopReason StopReasonFor(Health health) {
  switch (health) {
    case Health::kStalled:
      return StopReason::kStalled;
    case Health::kDiverging:
      return StopReason::kDiverging;
    case Health::kPlateaued:
      return StopReason::kPlateaued;
    case Health::kOverfitting:
      return StopReason::kOverfitting;
    case Health::kUnknown:
    case Health::kProgressing:
      break;
  }
  return StopReason::kUser;
}

Step Schedule(Job& job, std::vector<int> gpu_ids, std::string token_hash, std::string why,
              Time now) {
  Step step;
  if (!Waiting(job)) return step;
  job.gpu_ids = std::move(gpu_ids);
  job.stop_requested_at.reset();
  job.stop_reason = StopReason::kNone;
  job.exit_code.reset();
  job.executor_handle.clear();
  job.health = Health::kUnknown;
  job.health_reason.clear();
  // The token's hash is stored before anything starts: an attempt adopted
  // after a crash mid-launch reports with the token it was given.
  job.token_hash = std::move(token_hash);
  SetState(job, step, JobState::kStarting, "Scheduled", std::move(why), now);
  step.actions.push_back({Action::Kind::kLaunch, 0});
  return step;
}

Step Launched(Job& job, AttemptMemo& memo, const std::string& handle,
              const std::string& description, const std::vector<std::string>& warnings, Time now) {
  Step step;
  if (!Launching(job)) return step;
  step.changed = true;
  for (const std::string& warning : warnings) {
    step.events.push_back(Event(job, now, "Warning", warning));
  }
  job.executor_handle = handle;
  step.events.push_back(Event(job, now, "Launched",
                              "attempt " + std::to_string(job.attempt()) + " handed to " +
                                  job.executor + ": " + description));
  if (job.stop_requested_at) {
    if (memo.force) {
      memo.killed = true;
      step.events.push_back(Event(job, now, "Killed", job.message + ": force stop, SIGKILL sent"));
      step.actions.push_back(Signal(SIGKILL));
    } else {
      // The grace runs from the SIGTERM, not from the request.
      job.stop_requested_at = now;
      Terminate(job, step, job.message, now);
    }
  } else {
    job.message = "launched";
  }
  return step;
}

Step LaunchFailed(Job& job, const std::string& message, Time now) {
  Step step;
  if (!Launching(job)) return step;
  job.gpu_ids.clear();
  if (job.stop_requested_at) {
    SetState(job, step, JobState::kStopped, std::string(StopReasonName(job.stop_reason)),
             job.message + " (its launch failed: " + message + ")", now);
  } else {
    SetState(job, step, JobState::kFailed, "LaunchFailed", message, now);
  }
  return step;
}

Step Observe(Job& job, AttemptMemo& memo, const ExecStatus& status, bool completed, Time now) {
  Step step;
  if (job.executor_handle.empty() ||
      (job.state != JobState::kStarting && job.state != JobState::kRunning)) {
    return step;
  }
  switch (status.phase) {
    case ExecStatus::Phase::kPending:
      if (job.state == JobState::kStarting && job.message != status.message) {
        job.message = status.message;
        step.changed = true;
        step.events.push_back(Event(job, now, "Pending", status.message));
      }
      return step;
    case ExecStatus::Phase::kRunning:
      if (job.state == JobState::kStarting) {
        job.started_at = now;
        std::string where = job.gpu_ids.empty() ? "" : " on GPUs ";
        for (std::size_t i = 0; i < job.gpu_ids.size(); ++i) {
          if (i > 0) where += ',';
          where += std::to_string(job.gpu_ids[i]);
        }
        SetState(job, step, JobState::kRunning, "Started",
                 std::to_string(job.spec.resources.processes()) + " process(es)" + where + " (" +
                     job.executor + ")",
                 now);
      }
      return step;
    case ExecStatus::Phase::kExited:
    case ExecStatus::Phase::kLost:
      return Finish(job, memo, status, completed, now);
  }
  return step;
}

Step RequestStop(Job& job, StopReason reason, const std::string& why, Time now) {
  Step step;
  if (IsTerminal(job.state)) return step;
  if (job.stop_requested_at) {
    // Already stopping: idempotent, except that a user's stop of a job
    // being preempted ends it instead of requeueing it.
    if (job.stop_reason != StopReason::kPreempted || reason != StopReason::kUser) return step;
    job.stop_reason = StopReason::kUser;
    job.message = why;
    step.changed = true;
    step.events.push_back(Event(job, now, "Stopping", why + " (it was already being preempted)"));
    return step;
  }
  job.stop_reason = reason;
  if (Waiting(job)) {
    SetState(job, step, JobState::kStopped, std::string(StopReasonName(reason)), why, now);
    return step;
  }
  job.stop_requested_at = now;
  job.message = why;
  step.changed = true;
  if (Launching(job)) {
    step.events.push_back(
        Event(job, now, "Stopping", why + "; SIGTERM as soon as the attempt is launched"));
    return step;
  }
  Terminate(job, step, why, now);
  return step;
}

Step ForceStop(Job& job, AttemptMemo& memo, const std::string& why, Time now) {
  Step step;
  if (IsTerminal(job.state)) return step;
  job.stop_reason = StopReason::kUser;
  if (Waiting(job)) {
    SetState(job, step, JobState::kStopped, "Stopped", why + " (forced)", now);
    return step;
  }
  // Whatever it was waiting for (a stop's or a preemption's grace), the
  // attempt ends as Stopped, not requeued.
  if (!job.stop_requested_at) job.stop_requested_at = now;
  job.message = why;
  step.changed = true;
  if (Launching(job)) {
    memo.force = true;
    step.events.push_back(Event(job, now, "Stopping",
                                why + ": force stop; SIGKILL as soon as the attempt is launched"));
    return step;
  }
  memo.killed = true;
  step.events.push_back(
      Event(job, now, "Killed", why + ": force stop, SIGKILL sent without waiting for the grace"));
  step.actions.push_back(Signal(SIGKILL));
  return step;
}

Step Preempt(Job& job, const std::string& reason, const std::string& for_job,
             const DeadlineOptions& options, Time now) {
  Step step;
  if (job.preempt_requested_at || job.stop_requested_at || job.executor_handle.empty() ||
      IsTerminal(job.state)) {
    return step;
  }
  job.preempt_requested_at = now;
  job.preempt_message = reason;
  step.changed = true;
  step.events.push_back(Event(job, now, "Preempting",
                              reason + " (for " + for_job +
                                  "); SIGUSR1 sent to checkpoint, SIGTERM in " +
                                  FormatDuration(PreemptionGrace(job, options))));
  step.actions.push_back(Signal(SIGUSR1));
  return step;
}

Step Resize(Job& job, std::vector<int> gpu_ids, const std::string& reason, Time now) {
  Step step;
  if (job.state != JobState::kRunning || job.executor_handle.empty() || job.stop_requested_at ||
      job.preempt_requested_at || !job.spec.elastic || gpu_ids.empty() || gpu_ids == job.gpu_ids) {
    return step;
  }
  job.gpu_ids = std::move(gpu_ids);
  step.changed = true;
  step.events.push_back(Event(job, now, "Resized", reason));
  step.actions.push_back({Action::Kind::kResize, 0});
  return step;
}

Step EnforceDeadlines(Job& job, AttemptMemo& memo, const DeadlineOptions& options, Time now) {
  Step step;
  if (job.state != JobState::kRunning || job.executor_handle.empty()) return step;
  if (job.preempt_requested_at && !job.stop_requested_at &&
      now - *job.preempt_requested_at >= PreemptionGrace(job, options)) {
    return RequestStop(job, StopReason::kPreempted, job.preempt_message, now);
  }
  if (!job.stop_requested_at && !options.executor_enforces_time_limit && job.spec.time_limit &&
      job.started_at) {
    const Duration ran = now - *job.started_at;
    if (job.spec.checkpoint_warning && !memo.warned &&
        ran >= *job.spec.time_limit - *job.spec.checkpoint_warning) {
      memo.warned = true;
      step.events.push_back(Event(job, now, "CheckpointWarning",
                                  "SIGUSR1 sent: the time limit is " +
                                      FormatDuration(*job.spec.checkpoint_warning) + " away"));
      step.actions.push_back(Signal(SIGUSR1));
    }
    if (ran >= *job.spec.time_limit) {
      step.Then(RequestStop(job, StopReason::kTimeLimit,
                            "ran past its time limit of " + FormatDuration(*job.spec.time_limit),
                            now));
      return step;
    }
  }
  if (job.stop_requested_at && !memo.killed &&
      now - *job.stop_requested_at >= job.spec.termination_grace) {
    memo.killed = true;
    step.events.push_back(
        Event(job, now, "Killed", "still running after its termination grace; SIGKILL sent"));
    step.actions.push_back(Signal(SIGKILL));
  }
  return step;
}

Step HealthSeen(Job& job, Health health, const std::string& reason, Time now,
                std::optional<std::int64_t> at_step) {
  Step step;
  if (job.state != JobState::kRunning || health == job.health) return step;
  std::string text = std::string(HealthName(job.health)) + " -> " + std::string(HealthName(health));
  if (!reason.empty()) text += ": " + reason;
  if (at_step) text += " (at step " + std::to_string(*at_step) + ")";
  job.health = health;
  job.health_reason = reason;
  step.changed = true;
  step.events.push_back(Event(job, now, "HealthChanged", std::move(text)));
  if (PolicyFor(job.spec.policies, health) == HealthAction::kStop && !job.stop_requested_at) {
    step.Then(RequestStop(job, StopReasonFor(health), "stopped by policy: " + reason, now));
  }
  return step;
}

Step NoReportsSeen(Job& job, bool overdue, const std::string& reason, Time now) {
  Step step;
  if (job.state != JobState::kRunning || !overdue || job.health != Health::kUnknown ||
      !job.health_reason.empty() || job.spec.labels.count(std::string(kNotebookLabel))) {
    return step;
  }
  job.health_reason = reason.empty() ? std::string("no progress reported since start") : reason;
  step.changed = true;
  step.events.push_back(Event(job, now, "NoReports",
                              job.health_reason +
                                  ": the job has not sent a progress report (SDK, HTTP, or a "
                                  "HEADWAY {\"step\": N} output line)"));
  return step;
}

Step FinalHealth(Job& job, Health verdict, const std::string& reason, Time now,
                 std::optional<std::int64_t> at_step) {
  Step step;
  if (!IsTerminal(job.state)) return step;
  Health final = job.health;
  std::string why = job.health_reason;
  bool series_says = verdict == Health::kDiverging || verdict == Health::kPlateaued ||
                     verdict == Health::kOverfitting;
  if (series_says || (job.health != Health::kStalled && verdict != Health::kUnknown)) {
    final = verdict;
    why = reason;
  }
  if (final == job.health && why == job.health_reason) return step;
  step.changed = true;
  if (final != job.health) {
    std::string text = std::string(HealthName(job.health)) + " -> " +
                       std::string(HealthName(final)) + ": " + (why.empty() ? "" : why + "; ") +
                       "the run's final verdict";
    if (at_step) text += " (at step " + std::to_string(*at_step) + ")";
    step.events.push_back(Event(job, now, "HealthChanged", std::move(text)));
  }
  job.health = final;
  job.health_reason = why;
  return step;
}

Step RecoverLaunch(Job& job, AttemptMemo& memo, const std::optional<FoundAttempt>& found,
                   Time now) {
  Step step;
  if (!Launching(job)) return step;
  if (!found) {
    job.gpu_ids.clear();
    if (job.stop_requested_at) {
      SetState(job, step, JobState::kStopped, std::string(StopReasonName(job.stop_reason)),
               job.message, now);
    } else {
      SetState(job, step, JobState::kQueued, "Requeued", "the server restarted before launch", now);
    }
    return step;
  }
  job.executor_handle = found->handle;
  step.changed = true;
  step.events.push_back(Event(job, now, "Readopted",
                              "the server stopped while launching the attempt, which had "
                              "started: " +
                                  found->description));
  if (job.stop_requested_at) {
    memo = {};
    job.stop_requested_at = now;
    Terminate(job, step, job.message, now);
  }
  return step;
}

Step Readopt(Job& job, AttemptMemo& memo, const ExecStatus& status, bool completed, Time now) {
  Step step;
  if (job.executor_handle.empty()) return step;
  if (status.phase == ExecStatus::Phase::kExited || status.phase == ExecStatus::Phase::kLost) {
    step.changed = true;
    step.events.push_back(
        Event(job, now, "Reconciled", "the attempt ended while the server was down"));
    step.Then(Finish(job, memo, status, completed, now));
    return step;
  }
  step.changed = true;
  step.events.push_back(Event(job, now, "Readopted", "server restarted; the job kept running"));
  // The server may have died between storing a decision and signalling it.
  // Signals are repeated rather than risked lost: a second SIGTERM or
  // checkpoint warning is harmless, a lost one is not.
  if (job.stop_requested_at) {
    step.events.push_back(Event(job, now, "Stopping",
                                "server restarted while the job was stopping; SIGTERM sent again"));
    step.actions.push_back(Signal(SIGTERM));
  } else if (job.preempt_requested_at) {
    step.events.push_back(Event(job, now, "Preempting",
                                "server restarted during the preemption; SIGUSR1 sent again"));
    step.actions.push_back(Signal(SIGUSR1));
  }
  step.Then(Observe(job, memo, status, completed, now));
  return step;
}

}  // namespace headway::lifecycle
