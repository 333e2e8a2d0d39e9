// The attempt lifecycle as a pure state machine: every transition driven by
// hand-picked times, no processes, no clock.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include "lifecycle/attempt.h"
#include "lifecycle/retention.h"

namespace headway::lifecycle {
namespace {

using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Time kT0 = FromUnixMillis(1'800'000'000'000);

ExecStatus Running() { return ExecStatus{ExecStatus::Phase::kRunning, 0, "", ""}; }

Action Sig(int signal) { return {Action::Kind::kSignal, signal}; }
const Action kLaunch{Action::Kind::kLaunch, 0};

Job Queued(std::string name = "train") {
  Job job;
  job.spec.name = std::move(name);
  job.spec.termination_grace = seconds(30);
  job.executor = "local";
  job.state = JobState::kQueued;
  return job;
}

// A job whose attempt is launched and running since kT0.
Job RunningJob(AttemptMemo& memo) {
  Job job = Queued();
  Schedule(job, {0}, "hash", "", kT0);
  Launched(job, memo, "h-1", "pid 1", {}, kT0);
  Observe(job, memo, Running(), false, kT0);
  return job;
}

ExecStatus Exited(int code, std::string reason = {}) {
  ExecStatus s;
  s.phase = ExecStatus::Phase::kExited;
  s.exit_code = code;
  s.reason = std::move(reason);
  return s;
}

TEST(Lifecycle, ScheduleStoresTheIntentBeforeAskingForTheLaunch) {
  Job job = Queued();
  Step step = Schedule(job, {2, 3}, "hash", "", kT0);
  EXPECT_TRUE(step.changed);
  EXPECT_EQ(job.state, JobState::kStarting);
  EXPECT_EQ(job.gpu_ids, (std::vector<int>{2, 3}));
  EXPECT_EQ(job.token_hash, "hash");
  EXPECT_TRUE(job.executor_handle.empty());
  EXPECT_THAT(step.actions, ElementsAre(kLaunch));
  // Scheduling a job that is not waiting does nothing.
  EXPECT_TRUE(Schedule(job, {1}, "other", "", kT0).empty());
  EXPECT_EQ(job.token_hash, "hash");
}

TEST(Lifecycle, ALaunchedAttemptRunsAndSucceeds) {
  AttemptMemo memo;
  Job job = RunningJob(memo);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.started_at, kT0);
  Step step = Observe(job, memo, Exited(0), false, kT0 + seconds(5));
  EXPECT_EQ(job.state, JobState::kSucceeded);
  EXPECT_EQ(job.reason, "Completed");
  EXPECT_TRUE(job.gpu_ids.empty());
  EXPECT_TRUE(job.executor_handle.empty());
  EXPECT_EQ(job.finished_at, kT0 + seconds(5));
  EXPECT_TRUE(step.actions.empty());
}

TEST(Lifecycle, AnElasticJobsResizeIsStoredWithItsReasonBeforeTheExecutorIsAsked) {
  AttemptMemo memo;
  Job job = RunningJob(memo);
  // A job that is not elastic is never resized.
  EXPECT_TRUE(Resize(job, {0, 1}, "grew", kT0).empty());
  job.spec.elastic = ElasticRange{0, 0, 1, 3};
  Step step = Resize(job, {0, 1, 2}, "grew to 3 rank groups: 2 GPUs idle", kT0 + seconds(60));
  EXPECT_TRUE(step.changed);
  EXPECT_EQ(job.gpu_ids, (std::vector<int>{0, 1, 2}));
  ASSERT_EQ(step.events.size(), 1u);
  EXPECT_EQ(step.events[0].type, "Resized");
  EXPECT_EQ(step.events[0].message, "grew to 3 rank groups: 2 GPUs idle");
  EXPECT_THAT(step.actions, ElementsAre(Action{Action::Kind::kResize, 0}));
  // The same grant again is nothing; a job being stopped is not resized.
  EXPECT_TRUE(Resize(job, {0, 1, 2}, "again", kT0 + seconds(61)).empty());
  RequestStop(job, StopReason::kUser, "", kT0 + seconds(62));
  EXPECT_TRUE(Resize(job, {0}, "shrank", kT0 + seconds(63)).empty());
  EXPECT_EQ(job.gpu_ids, (std::vector<int>{0, 1, 2}));
}

TEST(Lifecycle, AFailingAttemptRestartsUpToMaxRestartsThenFails) {
  AttemptMemo memo;
  Job job = Queued();
  job.spec.max_restarts = 1;
  Schedule(job, {0}, "h", "", kT0);
  Launched(job, memo, "h-1", "", {}, kT0);
  Observe(job, memo, Exited(3), false, kT0);
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_EQ(job.reason, "Restarting");
  EXPECT_EQ(job.attempt(), 1);
  Schedule(job, {0}, "h2", "", kT0);
  Launched(job, memo, "h-2", "", {}, kT0);
  Observe(job, memo, Exited(3), false, kT0);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.reason, "ExitCode");
  EXPECT_EQ(job.exit_code, 3);
}

TEST(Lifecycle, StoppingAQueuedJobEndsItAtOnce) {
  Job job = Queued();
  Step step = RequestStop(job, StopReason::kUser, "by alice", kT0);
  EXPECT_EQ(job.state, JobState::kStopped);
  EXPECT_EQ(job.reason, "Stopped");
  EXPECT_TRUE(step.actions.empty());
}

TEST(Lifecycle, AStopSendsSigtermThenSigkillAfterTheGraceAndEndsStopped) {
  AttemptMemo memo;
  Job job = RunningJob(memo);
  Step stop = RequestStop(job, StopReason::kUser, "by alice", kT0 + seconds(10));
  EXPECT_THAT(stop.actions, ElementsAre(Sig(SIGTERM)));
  EXPECT_EQ(job.stop_requested_at, kT0 + seconds(10));
  // Stopping again is a no-op.
  EXPECT_TRUE(RequestStop(job, StopReason::kUser, "again", kT0 + seconds(11)).empty());
  EXPECT_TRUE(EnforceDeadlines(job, memo, {}, kT0 + seconds(39)).actions.empty());
  EXPECT_THAT(EnforceDeadlines(job, memo, {}, kT0 + seconds(40)).actions,
              ElementsAre(Sig(SIGKILL)));
  // SIGKILL goes out once.
  EXPECT_TRUE(EnforceDeadlines(job, memo, {}, kT0 + seconds(41)).actions.empty());
  Observe(job, memo, Exited(137), false, kT0 + seconds(41));
  EXPECT_EQ(job.state, JobState::kStopped);
  EXPECT_EQ(job.message, "by alice");
}

TEST(Lifecycle, AStopWhileLaunchingIsDeliveredOnceTheAttemptStarted) {
  AttemptMemo memo;
  Job job = Queued();
  Schedule(job, {0}, "h", "", kT0);
  Step stop = RequestStop(job, StopReason::kUser, "by alice", kT0);
  EXPECT_TRUE(stop.actions.empty());  // nothing to signal yet
  EXPECT_EQ(job.state, JobState::kStarting);
  Step launched = Launched(job, memo, "h-1", "pid 1", {}, kT0 + seconds(2));
  EXPECT_THAT(launched.actions, ElementsAre(Sig(SIGTERM)));
  EXPECT_EQ(job.stop_requested_at, kT0 + seconds(2));  // the grace runs from the SIGTERM
}

TEST(Lifecycle, AStopWhileLaunchingEndsStoppedIfTheLaunchFails) {
  Job job = Queued();
  Schedule(job, {0}, "h", "", kT0);
  RequestStop(job, StopReason::kUser, "by alice", kT0);
  LaunchFailed(job, "no such file", kT0);
  EXPECT_EQ(job.state, JobState::kStopped);
  EXPECT_TRUE(job.gpu_ids.empty());
}

TEST(Lifecycle, AForcedStopKillsAtOnceOrAsSoonAsLaunched) {
  AttemptMemo memo;
  Job job = RunningJob(memo);
  EXPECT_THAT(ForceStop(job, memo, "now", kT0).actions, ElementsAre(Sig(SIGKILL)));
  EXPECT_TRUE(memo.killed);

  AttemptMemo launching_memo;
  Job launching = Queued();
  Schedule(launching, {0}, "h", "", kT0);
  EXPECT_TRUE(ForceStop(launching, launching_memo, "now", kT0).actions.empty());
  EXPECT_THAT(Launched(launching, launching_memo, "h-1", "", {}, kT0).actions,
              ElementsAre(Sig(SIGKILL)));
}

TEST(Lifecycle, APreemptionWarnsThenTerminatesAfterTheGraceThenRequeues) {
  AttemptMemo memo;
  Job job = RunningJob(memo);
  DeadlineOptions options;
  options.preemption_grace = seconds(20);
  Step preempt = Preempt(job, "preempted by big-run", "big-run", options, kT0);
  EXPECT_THAT(preempt.actions, ElementsAre(Sig(SIGUSR1)));
  EXPECT_TRUE(Preempt(job, "again", "big-run", options, kT0).empty());
  EXPECT_TRUE(EnforceDeadlines(job, memo, options, kT0 + seconds(19)).actions.empty());
  Step term = EnforceDeadlines(job, memo, options, kT0 + seconds(20));
  EXPECT_THAT(term.actions, ElementsAre(Sig(SIGTERM)));
  EXPECT_EQ(job.stop_reason, StopReason::kPreempted);
  Observe(job, memo, Exited(143), false, kT0 + seconds(21));
  EXPECT_EQ(job.state, JobState::kPreempted);
  EXPECT_EQ(job.preemptions, 1);
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(job.requeued_at, kT0 + seconds(21));
  EXPECT_EQ(job.stop_reason, StopReason::kNone);
  EXPECT_FALSE(job.stop_requested_at);
}

TEST(Lifecycle, APreemptedJobThatFinishedItsStepsSucceedsInsteadOfRequeueing) {
  AttemptMemo memo;
  Job job = RunningJob(memo);
  Preempt(job, "preempted", "big", {}, kT0);
  Observe(job, memo, Exited(0), /*completed=*/true, kT0 + seconds(1));
  EXPECT_EQ(job.state, JobState::kSucceeded);
}

TEST(Lifecycle, AUserStopDuringAPreemptionEndsTheJobInsteadOfRequeueingIt) {
  AttemptMemo memo;
  Job job = RunningJob(memo);
  Preempt(job, "preempted", "big", {}, kT0);
  EnforceDeadlines(job, memo, {}, kT0 + seconds(30));  // SIGTERM for the preemption
  Step stop = RequestStop(job, StopReason::kUser, "by alice", kT0 + seconds(31));
  EXPECT_TRUE(stop.changed);
  EXPECT_TRUE(stop.actions.empty());  // SIGTERM already went out
  Observe(job, memo, Exited(143), false, kT0 + seconds(32));
  EXPECT_EQ(job.state, JobState::kStopped);
}

TEST(Lifecycle, TheTimeLimitWarnsBeforeAndFailsTheJobAtTheLimit) {
  AttemptMemo memo;
  Job job = RunningJob(memo);
  job.spec.time_limit = seconds(600);
  job.spec.checkpoint_warning = seconds(60);
  EXPECT_TRUE(EnforceDeadlines(job, memo, {}, kT0 + seconds(539)).empty());
  Step warn = EnforceDeadlines(job, memo, {}, kT0 + seconds(540));
  EXPECT_THAT(warn.actions, ElementsAre(Sig(SIGUSR1)));
  EXPECT_TRUE(EnforceDeadlines(job, memo, {}, kT0 + seconds(541)).empty());  // warned once
  Step limit = EnforceDeadlines(job, memo, {}, kT0 + seconds(600));
  EXPECT_THAT(limit.actions, ElementsAre(Sig(SIGTERM)));
  Observe(job, memo, Exited(143), false, kT0 + seconds(601));
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.reason, "TimeLimitExceeded");
}

TEST(Lifecycle, AnExecutorThatEnforcesTheTimeLimitGetsNoDeadlineSignals) {
  AttemptMemo memo;
  Job job = RunningJob(memo);
  job.spec.time_limit = seconds(600);
  job.spec.checkpoint_warning = seconds(60);
  DeadlineOptions slurm;
  slurm.executor_enforces_time_limit = true;
  EXPECT_TRUE(EnforceDeadlines(job, memo, slurm, kT0 + seconds(700)).empty());
  Observe(job, memo, Exited(0, std::string(kExitTimeLimit)), false, kT0 + seconds(700));
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.reason, "TimeLimitExceeded");
}

TEST(Lifecycle, EndingsTheExecutorReportsKeepTheirCause) {
  AttemptMemo memo;
  Job cancelled = RunningJob(memo);
  Observe(cancelled, memo, Exited(0, std::string(kExitCancelled)), false, kT0);
  EXPECT_EQ(cancelled.state, JobState::kStopped);
  EXPECT_EQ(cancelled.reason, "Cancelled");

  Job lost = RunningJob(memo);
  ExecStatus gone;
  gone.phase = ExecStatus::Phase::kLost;
  gone.message = "supervisor gone";
  Observe(lost, memo, gone, false, kT0);
  EXPECT_EQ(lost.state, JobState::kFailed);
  EXPECT_EQ(lost.reason, "Lost");

  Job oom = RunningJob(memo);
  oom.spec.max_restarts = 3;  // a backend's cause is not retried
  Observe(oom, memo, Exited(137, "OOMKilled"), false, kT0);
  EXPECT_EQ(oom.state, JobState::kFailed);
  EXPECT_EQ(oom.reason, "OOMKilled");
}

TEST(Lifecycle, HealthChangeNamesTheStepItWasSeenAt) {
  AttemptMemo memo;
  Job job = RunningJob(memo);
  ASSERT_EQ(HealthSeen(job, Health::kProgressing, "", kT0, 3).events[0].message,
            "Unknown -> Progressing (at step 3)");
  Step diverging = HealthSeen(job, Health::kDiverging, "loss is NaN at step 120", kT0, 120);
  ASSERT_EQ(diverging.events.size(), 1u);
  EXPECT_EQ(diverging.events[0].message,
            "Progressing -> Diverging: loss is NaN at step 120 (at step 120)");
  EXPECT_TRUE(diverging.actions.empty());  // default policy: notify only
}

TEST(Lifecycle, HealthIsAnnouncedOncePerChangeAndItsPolicyApplied) {
  AttemptMemo memo;
  Job job = RunningJob(memo);
  job.spec.policies.on_stall = HealthAction::kStop;
  Step progressing = HealthSeen(job, Health::kProgressing, "", kT0);
  ASSERT_EQ(progressing.events.size(), 1u);
  EXPECT_EQ(progressing.events[0].message, "Unknown -> Progressing");
  EXPECT_TRUE(HealthSeen(job, Health::kProgressing, "", kT0).empty());
  Step stalled = HealthSeen(job, Health::kStalled, "no new step for 12m", kT0);
  EXPECT_EQ(job.health, Health::kStalled);
  EXPECT_EQ(stalled.events[0].message, "Progressing -> Stalled: no new step for 12m");
  EXPECT_THAT(stalled.actions, ElementsAre(Sig(SIGTERM)));
  EXPECT_EQ(job.stop_reason, StopReason::kStalled);
  Observe(job, memo, Exited(143), false, kT0 + seconds(1));
  EXPECT_EQ(job.state, JobState::kStopped);
  EXPECT_EQ(job.reason, "Stalled");
  // The verdict stays with the ended job.
  EXPECT_EQ(job.health, Health::kStalled);
  EXPECT_EQ(job.health_reason, "no new step for 12m");
}

TEST(Lifecycle, AnEndedRunKeepsTheVerdictItsSeriesShows) {
  AttemptMemo memo;
  Job job = RunningJob(memo);
  HealthSeen(job, Health::kProgressing, "", kT0);
  Observe(job, memo, Exited(0), false, kT0 + seconds(5));
  ASSERT_EQ(job.state, JobState::kSucceeded);
  EXPECT_EQ(job.health, Health::kProgressing);
  // Its last reports (read as it exited) were NaN: Succeeded, but diverged.
  Step final = FinalHealth(job, Health::kDiverging, "loss is NaN at step 40", kT0 + seconds(5), 40);
  EXPECT_EQ(job.health, Health::kDiverging);
  EXPECT_EQ(job.health_reason, "loss is NaN at step 40");
  ASSERT_EQ(final.events.size(), 1u);
  EXPECT_EQ(final.events[0].type, "HealthChanged");
  EXPECT_EQ(
      final.events[0].message,
      "Progressing -> Diverging: loss is NaN at step 40; the run's final verdict (at step 40)");
  EXPECT_TRUE(FinalHealth(job, Health::kDiverging, "loss is NaN at step 40", kT0).empty());
}

TEST(Lifecycle, TheFinalVerdictKeepsAStallAndWhatWasAnnouncedWithoutReports) {
  AttemptMemo memo;
  Job stalled = RunningJob(memo);
  HealthSeen(stalled, Health::kStalled, "no new step for 12m", kT0);
  Observe(stalled, memo, Exited(0), false, kT0);
  EXPECT_TRUE(FinalHealth(stalled, Health::kProgressing, "", kT0).empty());
  EXPECT_EQ(stalled.health, Health::kStalled);

  AttemptMemo other;
  Job silent = RunningJob(other);
  Observe(silent, other, Exited(0), false, kT0);
  EXPECT_TRUE(FinalHealth(silent, Health::kUnknown, "waiting for first report", kT0).empty());
  EXPECT_EQ(silent.health, Health::kUnknown);

  // A job that is only requeued keeps no verdict: its next attempt starts afresh.
  AttemptMemo third;
  Job restarting = RunningJob(third);
  restarting.spec.max_restarts = 1;
  HealthSeen(restarting, Health::kDiverging, "loss is NaN at step 3", kT0);
  Observe(restarting, third, Exited(1), false, kT0);
  EXPECT_EQ(restarting.state, JobState::kQueued);
  EXPECT_EQ(restarting.health, Health::kUnknown);
  EXPECT_TRUE(FinalHealth(restarting, Health::kDiverging, "x", kT0).empty());
}

TEST(Lifecycle, NoReportsIsSaidOncePerAttempt) {
  AttemptMemo memo;
  Job job = RunningJob(memo);
  EXPECT_TRUE(NoReportsSeen(job, /*overdue=*/false, "waiting for first report", kT0).empty());
  Step said = NoReportsSeen(job, true, "no progress reported for 5m since start", kT0);
  ASSERT_EQ(said.events.size(), 1u);
  EXPECT_EQ(said.events[0].type, "NoReports");
  EXPECT_THAT(said.events[0].message, HasSubstr("no progress reported for 5m since start"));
  EXPECT_TRUE(said.changed);
  EXPECT_EQ(job.health_reason, "no progress reported for 5m since start");
  EXPECT_TRUE(NoReportsSeen(job, true, "no progress reported for 6m since start", kT0).empty());
  // A job that reported once has a health: nothing to say.
  AttemptMemo other;
  Job reporting = RunningJob(other);
  HealthSeen(reporting, Health::kProgressing, "", kT0);
  EXPECT_TRUE(NoReportsSeen(reporting, true, "x", kT0).empty());
  // The next attempt may say it again.
  job.spec.max_restarts = 1;
  Observe(job, memo, Exited(1), false, kT0);
  Schedule(job, {0}, "hash2", "", kT0);
  Launched(job, memo, "h-2", "pid 2", {}, kT0);
  Observe(job, memo, Running(), false, kT0);
  EXPECT_EQ(NoReportsSeen(job, true, "no progress reported for 5m since start", kT0).events.size(),
            1u);
}

TEST(Lifecycle, ANotebooksJobIsNotToldItHasNotReported) {
  AttemptMemo memo;
  Job job = RunningJob(memo);
  job.spec.labels[std::string(kNotebookLabel)] = "alice-nb";
  EXPECT_TRUE(NoReportsSeen(job, true, "no progress reported for 5m since start", kT0).empty());
  EXPECT_TRUE(job.health_reason.empty());
}

TEST(Retention, AnEndedJobIsDueAfterItsTtlOrTheServersOrWhenItsDeleteWaited) {
  Job job = Queued();
  EXPECT_FALSE(DeleteDueAt(job, seconds(60)));  // not ended
  job.state = JobState::kSucceeded;
  job.finished_at = kT0;
  EXPECT_FALSE(DeleteDueAt(job, std::nullopt));  // kept until deleted
  EXPECT_EQ(DeleteDueAt(job, seconds(60)), kT0 + seconds(60));
  job.spec.ttl_after_finished = seconds(5);  // the spec's wins
  EXPECT_EQ(DeleteDueAt(job, seconds(60)), kT0 + seconds(5));
  job.spec.ttl_after_finished = seconds(0);
  EXPECT_EQ(DeleteDueAt(job, std::nullopt), kT0);
  job.spec.ttl_after_finished.reset();
  job.delete_requested_at = kT0 - seconds(10);
  EXPECT_EQ(DeleteDueAt(job, std::nullopt), kT0);
}

TEST(Lifecycle, ReclaimAndNotifyPoliciesDoNotStop) {
  AttemptMemo memo;
  Job job = RunningJob(memo);
  job.spec.policies.on_diverge = HealthAction::kReclaim;
  EXPECT_TRUE(HealthSeen(job, Health::kDiverging, "loss is NaN", kT0).actions.empty());
  EXPECT_FALSE(job.stop_requested_at);
  EXPECT_EQ(PolicyFor(job.spec.policies, job.health), HealthAction::kReclaim);
}

TEST(Lifecycle, RecoveryAdoptsTheAttemptALaunchStartedOrQueuesTheJobAgain) {
  AttemptMemo memo;
  Job started = Queued();
  Schedule(started, {0}, "h", "", kT0);
  Step adopted = RecoverLaunch(started, memo, FoundAttempt{"h-1", "pid 9"}, kT0);
  EXPECT_EQ(started.executor_handle, "h-1");
  EXPECT_TRUE(adopted.actions.empty());
  EXPECT_THAT(adopted.events[0].message, HasSubstr("pid 9"));

  Job never = Queued();
  Schedule(never, {0}, "h", "", kT0);
  RecoverLaunch(never, memo, std::nullopt, kT0);
  EXPECT_EQ(never.state, JobState::kQueued);
  EXPECT_EQ(never.reason, "Requeued");
  EXPECT_TRUE(never.gpu_ids.empty());
  EXPECT_EQ(never.attempt(), 0);  // the same attempt, launched once later

  Job stopping = Queued();
  Schedule(stopping, {0}, "h", "", kT0);
  RequestStop(stopping, StopReason::kUser, "by alice", kT0);
  EXPECT_THAT(RecoverLaunch(stopping, memo, FoundAttempt{"h-1", ""}, kT0).actions,
              ElementsAre(Sig(SIGTERM)));
  Job stopped = Queued();
  Schedule(stopped, {0}, "h", "", kT0);
  RequestStop(stopped, StopReason::kUser, "by alice", kT0);
  RecoverLaunch(stopped, memo, std::nullopt, kT0);
  EXPECT_EQ(stopped.state, JobState::kStopped);
}

TEST(Lifecycle, ReadoptionRepeatsASignalTheServerMayHaveDiedBeforeSending) {
  AttemptMemo memo;
  Job stopping = RunningJob(memo);
  RequestStop(stopping, StopReason::kUser, "by alice", kT0);
  AttemptMemo after_restart;
  EXPECT_THAT(Readopt(stopping, after_restart, Running(), false, kT0).actions,
              ElementsAre(Sig(SIGTERM)));

  Job preempting = RunningJob(memo);
  Preempt(preempting, "preempted", "big", {}, kT0);
  EXPECT_THAT(Readopt(preempting, after_restart, Running(), false, kT0).actions,
              ElementsAre(Sig(SIGUSR1)));

  Job quiet = RunningJob(memo);
  EXPECT_TRUE(Readopt(quiet, after_restart, Running(), false, kT0).actions.empty());

  Job ended = RunningJob(memo);
  Readopt(ended, after_restart, Exited(0), false, kT0);
  EXPECT_EQ(ended.state, JobState::kSucceeded);
}

TEST(Lifecycle, StopReasonsRoundTripThroughTheirStoredNames) {
  for (StopReason r :
       {StopReason::kNone, StopReason::kUser, StopReason::kPreempted, StopReason::kTimeLimit,
        StopReason::kStalled, StopReason::kDiverging, StopReason::kPlateaued}) {
    EXPECT_EQ(ParseStopReason(StopReasonName(r)), r);
  }
  EXPECT_FALSE(ParseStopReason("Bogus"));
}

}  // namespace
}  // namespace headway::lifecycle
