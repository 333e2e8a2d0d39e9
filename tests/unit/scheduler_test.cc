#include "sched/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace headway::sched {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using ::testing::HasSubstr;
using ::testing::Not;

Time T(int minutes_from_start) {
  return FromUnixMillis(1'800'000'000'000LL + minutes_from_start * 60'000LL);
}

ClusterState TwoNodes(int gpus_each = 8) {
  ClusterState s;
  s.now = T(0);
  s.nodes = {{"n1", gpus_each}, {"n2", gpus_each}};
  return s;
}

WaitingJob Waiting(std::string name, std::string queue, int gpus, std::int64_t seq,
                   int priority = 0, int nodes = 1) {
  WaitingJob w;
  w.name = std::move(name);
  w.queue = std::move(queue);
  w.gpus_per_node = gpus;
  w.nodes = nodes;
  w.submit_seq = seq;
  w.priority = priority;
  w.queued_at = T(0);
  return w;
}

RunningJob Running(std::string name, std::string queue, std::vector<NodeGpus> placement,
                   std::optional<Time> end = std::nullopt, int priority = 0) {
  RunningJob r;
  r.name = std::move(name);
  r.queue = std::move(queue);
  r.placement = std::move(placement);
  r.expected_end = end;
  r.priority = priority;
  r.started_at = T(-10);
  return r;
}

const Start* Started(const Decision& d, const std::string& job) {
  for (const Start& s : d.starts) {
    if (s.job == job) return &s;
  }
  return nullptr;
}

TEST(Scheduler, QuotaBlocksATeamAtItsNominalPlusBorrowingLimit) {
  ClusterState s = TwoNodes();
  s.queues = {{"vision", {8, 0, 1}}, {"speech", {8, 4, 1}}};
  s.running = {Running("v1", "vision", {{"n1", 8}})};
  s.waiting = {Waiting("v2", "vision", 1, 1), Waiting("s1", "speech", 8, 2),
               Waiting("s2", "speech", 4, 3)};
  Decision d = Schedule(s);
  EXPECT_EQ(Started(d, "v2"), nullptr);
  EXPECT_THAT(Explain(s, d).reasons.at("v2"), HasSubstr("team quota 8/8 used"));
  ASSERT_NE(Started(d, "s1"), nullptr);
  // s2 would be 12 of speech's 8 + 4: allowed by quota, but only 0 GPUs are left.
  EXPECT_EQ(Started(d, "s2"), nullptr);
}

TEST(Scheduler, IdleQuotaCanBeBorrowedUpToTheLimit) {
  ClusterState s = TwoNodes();
  s.queues = {{"vision", {8, 4, 1}}, {"speech", {8, 0, 1}}};
  s.waiting = {Waiting("v1", "vision", 8, 1), Waiting("v2", "vision", 4, 2),
               Waiting("v3", "vision", 1, 3)};
  Decision d = Schedule(s);
  EXPECT_NE(Started(d, "v1"), nullptr);
  EXPECT_NE(Started(d, "v2"), nullptr);  // 12 = 8 nominal + 4 borrowed
  EXPECT_EQ(Started(d, "v3"), nullptr);
  EXPECT_THAT(Explain(s, d).reasons.at("v3"), HasSubstr("team quota 12/8 used (may borrow 4)"));
}

TEST(Scheduler, GangStartsOnlyWhenAllNodesFitTogether) {
  ClusterState s = TwoNodes();
  s.running = {Running("r", "a", {{"n2", 1}})};
  s.waiting = {Waiting("gang", "a", 8, 1, 0, /*nodes=*/2)};
  Decision d = Schedule(s, {.backfill = true, .preemption = false});
  EXPECT_TRUE(d.starts.empty());
  EXPECT_THAT(Explain(s, d).reasons.at("gang"), HasSubstr("waiting for 16 GPUs (15 of 16 free)"));
  s.running.clear();
  d = Schedule(s);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].placement.size(), 2u);
}

TEST(Scheduler, PlacementPacksOntoTheFullestNodeThatFits) {
  ClusterState s = TwoNodes();
  s.running = {Running("r", "a", {{"n2", 6}})};
  s.waiting = {Waiting("small", "a", 2, 1), Waiting("big", "a", 8, 2)};
  Decision d = Schedule(s);
  ASSERT_NE(Started(d, "small"), nullptr);
  EXPECT_EQ(Started(d, "small")->placement[0].node, "n2");  // keeps n1's 8 whole
  ASSERT_NE(Started(d, "big"), nullptr);
  EXPECT_EQ(Started(d, "big")->placement[0].node, "n1");
}

TEST(Scheduler, BackfillNeverDelaysTheHeadJob) {
  ClusterState s = TwoNodes();
  // n1 busy until +60m, n2 busy with 4 GPUs until +30m.
  s.running = {Running("a", "q", {{"n1", 8}}, T(60)), Running("b", "q", {{"n2", 4}}, T(30))};
  WaitingJob head = Waiting("head", "q", 8, 1);        // needs a whole node: n2 at +30m
  WaitingJob long_job = Waiting("long", "q", 4, 2);    // would hold n2 past +30m
  WaitingJob short_job = Waiting("short", "q", 4, 3);  // ends at +20m: before the reservation
  short_job.time_limit = minutes(20);
  long_job.time_limit = hours(5);
  WaitingJob unknown = Waiting("unknown", "q", 1, 4);  // no time limit: assumed to run forever
  s.waiting = {head, short_job, long_job, unknown};
  Decision d = Schedule(s, {.backfill = true, .preemption = false});
  EXPECT_EQ(Started(d, "head"), nullptr);
  ASSERT_NE(Started(d, "short"), nullptr);
  EXPECT_TRUE(Started(d, "short")->backfilled);
  EXPECT_EQ(Started(d, "long"), nullptr);
  EXPECT_THAT(Explain(s, d).reasons.at("long"), HasSubstr("would delay head"));
  EXPECT_EQ(Started(d, "unknown"), nullptr);
}

// What a waiting job's owner is told: its place in line, and when the job
// first in line will start, from the running jobs' expected ends.
TEST(Scheduler, EveryWaitingJobHasItsPlaceInLineAndTheFirstItsExpectedStart) {
  ClusterState s = TwoNodes();
  s.running = {Running("a", "q", {{"n1", 8}}, T(60)), Running("b", "q", {{"n2", 4}}, T(30))};
  WaitingJob head = Waiting("head", "q", 8, 1);
  WaitingJob urgent = Waiting("urgent", "q", 8, 5, /*priority=*/10);
  WaitingJob small = Waiting("small", "q", 2, 3);
  small.time_limit = minutes(20);  // ends before the reservation: backfilled
  WaitingJob later = Waiting("later", "q", 8, 4);
  s.waiting = {head, small, later, urgent};
  Decision d = Schedule(s, {.backfill = true, .preemption = false});
  ASSERT_NE(Started(d, "small"), nullptr) << "it starts now, so it has no place in line";
  EXPECT_EQ(Explain(s, d).positions.count("small"), 0u);
  EXPECT_EQ(Explain(s, d).positions.at("urgent"), 1) << "higher priority goes first";
  EXPECT_EQ(Explain(s, d).positions.at("head"), 2);
  EXPECT_EQ(Explain(s, d).positions.at("later"), 3);
  // urgent holds the reservation: n2 frees at +30m when b ends.
  EXPECT_EQ(d.expected_starts.at("urgent"), T(30));
  EXPECT_EQ(d.expected_starts.count("head"), 0u) << "only the reservation is computed";

  // Without any expected end nothing is promised.
  s.running = {Running("a", "q", {{"n1", 8}}), Running("b", "q", {{"n2", 8}})};
  s.waiting = {head};
  Decision unknown = Schedule(s, {.backfill = true, .preemption = false});
  EXPECT_EQ(Explain(s, unknown).positions.at("head"), 1);
  EXPECT_TRUE(unknown.expected_starts.empty());
}

TEST(Scheduler, ABackfillReasonNamesNoOtherTeamsJob) {
  ClusterState s = TwoNodes();
  s.running = {Running("a", "q", {{"n1", 8}}, T(60)), Running("b", "q", {{"n2", 4}}, T(30))};
  WaitingJob head = Waiting("secret-head", "other-team", 8, 1);
  WaitingJob long_job = Waiting("long", "q", 4, 2);
  long_job.time_limit = hours(5);
  s.waiting = {head, long_job};
  Decision d = Schedule(s, {.backfill = true, .preemption = false});
  EXPECT_EQ(Started(d, "long"), nullptr);
  EXPECT_THAT(Explain(s, d).reasons.at("long"),
              HasSubstr("would delay the next job of queue other-team"));
  EXPECT_THAT(Explain(s, d).reasons.at("long"), Not(HasSubstr("secret-head")));
}

TEST(Scheduler, BackfillMayUseGpusTheReservationDoesNotNeed) {
  ClusterState s;
  s.now = T(0);
  s.nodes = {{"n1", 8}, {"n2", 8}, {"n3", 8}, {"n4", 8}};
  s.running = {Running("a", "q", {{"n1", 8}}, T(60)), Running("b", "q", {{"n2", 8}}, T(90)),
               Running("c", "q", {{"n3", 4}})};
  // Two whole nodes: n1 frees at +60m, n4 is free: the reservation holds n1 and n4.
  WaitingJob head = Waiting("head", "q", 8, 1, 0, /*nodes=*/2);
  WaitingJob on_n4 = Waiting("on-n4", "q", 8, 2);  // only n4 fits it: that would delay head
  on_n4.time_limit = hours(10);
  WaitingJob on_n3 = Waiting("on-n3", "q", 4, 3);  // n3's 4 free GPUs are not reserved
  on_n3.time_limit = hours(10);
  s.waiting = {head, on_n4, on_n3};
  Decision d = Schedule(s, {.backfill = true, .preemption = false});
  EXPECT_EQ(Started(d, "head"), nullptr);
  EXPECT_EQ(Started(d, "on-n4"), nullptr);
  ASSERT_NE(Started(d, "on-n3"), nullptr);
  EXPECT_EQ(Started(d, "on-n3")->placement[0].node, "n3");
}

TEST(Scheduler, WithoutBackfillNothingPassesTheJobFirstInLine) {
  ClusterState s;
  s.now = T(0);
  s.nodes = {{"n1", 8}, {"n2", 8}, {"n3", 8}, {"n4", 8}};
  s.running = {Running("a", "q", {{"n1", 8}}, T(60)), Running("b", "q", {{"n2", 8}}, T(90)),
               Running("c", "q", {{"n3", 4}})};
  WaitingJob head = Waiting("head", "q", 8, 1, 0, /*nodes=*/2);
  WaitingJob small = Waiting("small", "q", 4, 2);  // fits n3 without delaying head
  small.time_limit = hours(10);
  s.waiting = {head, small};
  EXPECT_NE(Started(Schedule(s, {.backfill = true, .preemption = false}), "small"), nullptr);
  Decision strict = Schedule(s, {.backfill = false, .preemption = false});
  EXPECT_EQ(Started(strict, "small"), nullptr);
  EXPECT_THAT(Explain(s, strict).reasons.at("small"), HasSubstr("head"));
}

TEST(Scheduler, HigherPriorityPreemptsTheLowestPriorityNewestJobFirst) {
  ClusterState s = TwoNodes();
  RunningJob old_low = Running("old-low", "q", {{"n1", 8}}, std::nullopt, 0);
  old_low.started_at = T(-100);
  RunningJob new_low = Running("new-low", "q", {{"n2", 8}}, std::nullopt, 0);
  new_low.started_at = T(-5);
  RunningJob mid = Running("mid", "q", {{"n2", 0}}, std::nullopt, 5);
  s.running = {old_low, new_low, mid};
  s.waiting = {Waiting("urgent", "q", 8, 1, /*priority=*/10)};
  Decision d = Schedule(s);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].job, "new-low");  // least work lost
  EXPECT_EQ(d.preemptions[0].for_job, "urgent");
  EXPECT_THAT(Explain(s, d).reasons.at("urgent"), HasSubstr("preempting 1 job(s)"));
  EXPECT_TRUE(d.starts.empty());  // it starts once the victim has checkpointed and left
}

TEST(Scheduler, ATeamWithinItsQuotaReclaimsBorrowedGpusFirstAndStalledJobsBeforeThat) {
  ClusterState s = TwoNodes();
  s.queues = {{"vision", {8, 8, 1}}, {"speech", {8, 8, 1}}};
  RunningJob borrowed = Running("borrowed", "vision", {{"n2", 8}});
  RunningJob own = Running("own", "vision", {{"n1", 8}});
  own.started_at = T(-1);  // newer, but within vision's nominal... both are vision's
  s.running = {own, borrowed};
  s.waiting = {Waiting("s1", "speech", 8, 1)};
  Decision d = Schedule(s);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.preemptions[0].reason, HasSubstr("reclaimed by queue speech"));
  // A stalled job goes before any healthy one.
  s.running[1].reclaimable = true;
  s.running[0].reclaimable = false;
  d = Schedule(s);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].job, "borrowed");
  EXPECT_THAT(d.preemptions[0].reason, HasSubstr("stalled"));
}

TEST(Scheduler, AVictimAlreadyLeavingIsNotJoinedByASecondOne) {
  // The decision is re-made every tick while the victim checkpoints: it must
  // not pick another victim for the same waiting job meanwhile.
  ClusterState s = TwoNodes();
  RunningJob going = Running("going", "q", {{"n1", 8}}, std::nullopt, 0);
  going.leaving = true;
  s.running = {going, Running("other-low", "q", {{"n2", 8}}, std::nullopt, 0)};
  s.waiting = {Waiting("urgent", "q", 8, 1, /*priority=*/10), Waiting("small", "q", 1, 2)};
  Decision d = Schedule(s);
  EXPECT_TRUE(d.preemptions.empty());
  EXPECT_TRUE(d.starts.empty());
  EXPECT_THAT(Explain(s, d).reasons.at("urgent"),
              HasSubstr("preempted job(s) to checkpoint and leave"));
  // Once it has gone, the urgent job takes its GPUs.
  s.running.erase(s.running.begin());
  d = Schedule(s);
  ASSERT_NE(Started(d, "urgent"), nullptr);
  EXPECT_TRUE(d.preemptions.empty());
}

TEST(Scheduler, APreemptedJobRequeuesBehindTheJobItMadeRoomFor) {
  ClusterState s = TwoNodes(1);
  s.nodes = {{"n1", 1}};
  WaitingJob victim = Waiting("victim", "q", 1, /*seq=*/1);
  victim.queued_at = T(5);  // requeued when it was preempted
  WaitingJob waiter = Waiting("waiter", "q", 1, /*seq=*/2);
  waiter.queued_at = T(2);
  s.waiting = {victim, waiter};
  Decision d = Schedule(s);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, "waiter");
}

TEST(Scheduler, NoPreemptionForAJobOverItsQuotaOrOfEqualPriority) {
  ClusterState s = TwoNodes();
  s.queues = {{"vision", {16, 0, 1}}, {"speech", {0, 16, 1}}};
  s.running = {Running("v", "vision", {{"n1", 8}, {"n2", 8}})};
  s.waiting = {Waiting("s1", "speech", 8, 1)};
  Decision d = Schedule(s);
  EXPECT_TRUE(d.preemptions.empty());
}

TEST(Scheduler, FairShareFavoursTheTeamUsingLessOfItsWeight) {
  ClusterState s = TwoNodes();
  s.running = {Running("a-run", "a", {{"n1", 6}})};
  s.waiting = {Waiting("a-next", "a", 2, 1), Waiting("b-next", "b", 2, 2),
               Waiting("b-more", "b", 8, 3)};
  Decision d = Schedule(s, {.backfill = false, .preemption = false});
  ASSERT_GE(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job,
            "b-next");  // b uses 0, a uses 6: b goes first despite a's earlier submit
}

TEST(Scheduler, AnOldWholeNodeJobKeepsItsReservationAgainstAStreamOfSmallJobs) {
  // One 8-GPU node. Team train runs 4 GPUs until +3h and has waited for the
  // whole node since T(0). Team eval, under its share (weight 2), runs four
  // 1-GPU jobs ending at +1h..+4h and submits a 1-GPU, 10-hour job every
  // 30 minutes. Once train's job has waited past the starvation bound it
  // holds the reservation for good: none of eval's 10-hour jobs may take
  // the GPUs it waits for, and it starts when the jobs already running end.
  ClusterState s;
  s.nodes = {{"n1", 8}};
  s.queues = {{"train", {4, 8, 1.0}}, {"eval", {4, 4, 2.0}}};
  s.running = {Running("train-run", "train", {{"n1", 4}}, T(180))};
  for (int i = 1; i <= 4; ++i) {
    s.running.push_back(Running("eval-run-" + std::to_string(i), "eval", {{"n1", 1}}, T(60 * i)));
  }
  WaitingJob big = Waiting("big", "train", 8, 0);
  big.queued_at = T(0);
  big.time_limit = hours(10);
  s.waiting = {big};
  std::optional<int> big_started;
  std::vector<std::string> started_while_big_waited;
  for (int t = 0; t <= 15 * 60 && !big_started; t += 10) {
    s.now = T(t);
    std::erase_if(s.running, [&](const RunningJob& r) { return *r.expected_end <= s.now; });
    if (t % 30 == 0) {
      WaitingJob small = Waiting("eval-" + std::to_string(t), "eval", 1, 1 + t);
      small.queued_at = s.now;
      small.time_limit = hours(10);
      s.waiting.push_back(small);
    }
    Decision d = Schedule(s, {.backfill = true, .preemption = false});
    const auto why = Explain(s, d).reasons;  // before the state changes below
    for (const Start& start : d.starts) {
      auto it = std::find_if(s.waiting.begin(), s.waiting.end(),
                             [&](const WaitingJob& w) { return w.name == start.job; });
      ASSERT_NE(it, s.waiting.end());
      RunningJob r = Running(it->name, it->queue, start.placement, s.now + *it->time_limit);
      r.started_at = s.now;
      s.running.push_back(r);
      if (it->name == "big") {
        big_started = t;
      } else if (t >= 30) {
        started_while_big_waited.push_back(it->name + " at +" + std::to_string(t) + "m");
      }
      s.waiting.erase(it);
    }
    // Whenever a GPU is free, eval's oldest job is told it would delay train's.
    if (!big_started && t >= 30 && why.count("eval-0") &&
        why.at("eval-0").find("(0 of 8 free)") == std::string::npos) {
      EXPECT_THAT(why.at("eval-0"), HasSubstr("would delay the next job of queue train"))
          << "at +" << t << "m";
    }
  }
  EXPECT_THAT(started_while_big_waited, testing::IsEmpty());
  ASSERT_TRUE(big_started.has_value()) << "the whole-node job never started";
  // The last job running when it passed the bound (eval-run-4) ends at +4h.
  EXPECT_EQ(*big_started, 4 * 60);
}

TEST(Scheduler, TheOldestJobPastTheStarvationBoundHoldsTheReservationWhateverTheShares) {
  ClusterState s = TwoNodes();
  s.now = T(120);
  // Team a uses 12 GPUs, team b 2: fair share puts b first. n2 empties at +160m.
  s.running = {Running("a-run", "a", {{"n1", 8}}, T(600)),
               Running("a-run2", "a", {{"n2", 4}}, T(150)),
               Running("b-run", "b", {{"n2", 2}}, T(160))};
  WaitingJob old_big = Waiting("a-big", "a", 8, 1);
  old_big.queued_at = T(0);  // waited 2 h
  WaitingJob b_mid = Waiting("b-mid", "b", 4, 2);
  b_mid.queued_at = T(110);  // waited 10 min: not past the bound
  WaitingJob b_small = Waiting("b-small", "b", 2, 3);
  b_small.queued_at = T(115);
  b_small.time_limit = hours(10);
  s.waiting = {old_big, b_mid, b_small};
  Decision d = Schedule(s, {.backfill = true, .preemption = false});
  // a-big holds the reservation (all of n2): b's 10-hour job may not take n2's free GPUs.
  EXPECT_TRUE(d.starts.empty());
  EXPECT_THAT(Explain(s, d).reasons.at("b-small"),
              HasSubstr("would delay the next job of queue a"));

  // Fair share alone: b-mid holds the reservation, which leaves n2's 2 free GPUs to b-small.
  SchedulerOptions fair_share_only{.backfill = true, .preemption = false};
  fair_share_only.starvation_bound.reset();
  d = Schedule(s, fair_share_only);
  EXPECT_NE(Started(d, "b-small"), nullptr);

  // A higher priority still goes first, starving or not.
  s.waiting[1].priority = 1;
  d = Schedule(s, {.backfill = true, .preemption = false});
  EXPECT_NE(Started(d, "b-small"), nullptr);
}

TEST(Scheduler, ExplainsEveryJobLeftWaiting) {
  ClusterState s = TwoNodes(1);
  s.waiting = {Waiting("x", "q", 1, 1), Waiting("y", "q", 1, 2), Waiting("z", "q", 4, 3),
               Waiting("w", "q", 1, 4)};
  Decision d = Schedule(s);
  EXPECT_EQ(d.starts.size(), 2u);
  EXPECT_EQ(Explain(s, d).reasons.size(), 2u);
  EXPECT_THAT(Explain(s, d).reasons.at("z"), HasSubstr("needs 4 GPUs but the pool has only 2"));
}

// Within a queue: higher priority first, then the earliest queued (a
// requeued job goes by when it re-entered), whatever order the state lists
// them in; also with more priorities than the split by priority handles.
TEST(Scheduler, AQueueOrdersByPriorityThenByWhenEachJobEnteredIt) {
  for (int priorities : {3, 8, 12}) {
    ClusterState s;
    s.now = T(100);
    s.nodes = {{"n1", 1}};
    s.running = {Running("holder", "q", {{"n1", 1}})};
    for (int i = 0; i < 60; ++i) {
      WaitingJob w = Waiting("j" + std::to_string(i), "q", 1, i, (i * 7) % priorities);
      w.queued_at = T(i % 5 == 4 ? 60 - i : i);  // every fifth job was requeued out of order
      s.waiting.push_back(w);
    }
    std::vector<const WaitingJob*> expected;
    for (const WaitingJob& w : s.waiting) expected.push_back(&w);
    std::stable_sort(expected.begin(), expected.end(),
                     [](const WaitingJob* a, const WaitingJob* b) {
                       if (a->priority != b->priority) return a->priority > b->priority;
                       if (a->queued_at != b->queued_at) return a->queued_at < b->queued_at;
                       return a->submit_seq < b->submit_seq;
                     });
    SchedulerOptions no_preemption;
    no_preemption.preemption = false;
    const Decision d = Schedule(s, no_preemption);
    ASSERT_EQ(d.pending.size(), expected.size()) << priorities << " priorities";
    for (std::size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(s.waiting[d.pending[i].job].name, expected[i]->name)
          << "place " << i + 1 << " with " << priorities << " priorities";
    }
  }
}

// Heads alike in every respect (a restore may give jobs one submit number):
// the queue first by name goes first, whatever order the state lists them in,
// so the same state always gives the same decision.
TEST(Scheduler, HeadsAlikeInEveryRespectGoByQueueName) {
  ClusterState s;
  s.now = T(0);
  s.nodes = {{"n1", 1}};
  s.waiting = {Waiting("from-b", "b-team", 1, 7), Waiting("from-a", "a-team", 1, 7)};
  Decision d = Schedule(s);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, "from-a");
  EXPECT_EQ(Explain(s, d).positions.at("from-b"), 1);
}

// --- Ordering::kShortestWork (progress-aware) ---

SchedulerOptions ShortestWork(bool preemption = false) {
  SchedulerOptions o;
  o.ordering = Ordering::kShortestWork;
  o.preemption = preemption;
  return o;
}

WaitingJob Expecting(WaitingJob w, std::optional<Duration> run,
                     std::optional<Duration> limit = std::nullopt) {
  w.expected_run = run;
  w.time_limit = limit;
  return w;
}

TEST(Scheduler, ShortestWorkStartsTheLeastExpectedGpuTimeFirstAcrossQueues) {
  ClusterState s;
  s.now = T(0);
  s.nodes = {{"n1", 4}};
  // Submitted first but 4 GPUs x 10 h; then 2 GPUs x 1 h; then 1 GPU x 30 min.
  s.waiting = {Expecting(Waiting("long", "vision", 4, 1), hours(10)),
               Expecting(Waiting("mid", "speech", 2, 2), hours(1)),
               Expecting(Waiting("short", "speech", 1, 3), minutes(30))};
  Decision d = Schedule(s, ShortestWork());
  EXPECT_NE(Started(d, "short"), nullptr);
  EXPECT_NE(Started(d, "mid"), nullptr);
  EXPECT_EQ(Started(d, "long"), nullptr);
  // Fair share (the default) would have started the first submitted.
  Decision fifo = Schedule(s);
  EXPECT_NE(Started(fifo, "long"), nullptr);
}

TEST(Scheduler, ShortestWorkCapsALearnedEstimateAtTheTimeLimit) {
  ClusterState s;
  s.now = T(0);
  s.nodes = {{"n1", 1}};
  // History says 5 h, but the job may only run 20 min: 20 min is its work.
  s.waiting = {Expecting(Waiting("hour", "a", 1, 1), hours(1)),
               Expecting(Waiting("capped", "a", 1, 2), hours(5), minutes(20)),
               Waiting("unknown", "a", 1, 0)};
  Decision d = Schedule(s, ShortestWork());
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, "capped");
  // Unknown work goes last.
  EXPECT_EQ(Explain(s, d).positions.at("hour"), 1);
  EXPECT_EQ(Explain(s, d).positions.at("unknown"), 2);
}

TEST(Scheduler, ShortestWorkPutsHeadsWithinTheirNominalQuotaBeforeBorrowers) {
  ClusterState s;
  s.now = T(0);
  s.nodes = {{"n1", 8}, {"n2", 2}};
  s.queues = {{"vision", {4, 16, 1}}, {"speech", {4, 16, 1}}};
  s.running = {Running("v-run", "vision", {{"n1", 4}})};
  // vision's tiny job would borrow; speech's bigger one is within its quota.
  s.waiting = {Expecting(Waiting("v-tiny", "vision", 2, 1), minutes(5)),
               Expecting(Waiting("s-big", "speech", 4, 2), hours(3))};
  Decision d = Schedule(s, ShortestWork());
  ASSERT_NE(Started(d, "s-big"), nullptr);
  EXPECT_EQ(Started(d, "s-big")->placement[0].node, "n1");
  EXPECT_NE(Started(d, "v-tiny"), nullptr);  // still starts, on what is left
}

TEST(Scheduler, ShortestWorkLetsAJobThatWaitedTheBoundAndFourTimesItsRunGoFirst) {
  ClusterState s;
  s.now = T(120);
  s.nodes = {{"n1", 1}};
  // Two hours ago: past the 30 min bound and 4x its 20 min run.
  WaitingJob old = Expecting(Waiting("old", "a", 1, 1), minutes(20));
  old.queued_at = T(0);
  WaitingJob fresh = Expecting(Waiting("fresh-short", "a", 1, 2), minutes(1));
  fresh.queued_at = T(119);
  s.waiting = {fresh, old};
  Decision d = Schedule(s, ShortestWork());
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, "old");
  // Expected to run 8 h, two hours of waiting is not yet starving: it is
  // not rescued ahead of short work merely for being old.
  s.waiting = {fresh, Expecting(old, hours(8))};
  d = Schedule(s, ShortestWork());
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, "fresh-short");
}

RunningJob Checkpointing(RunningJob r, Time end) {
  r.checkpointable = true;
  r.expected_end = end;
  return r;
}

TEST(Scheduler, APreemptionReasonNamesAnotherTeamsJobOnlyByItsQueue) {
  ClusterState s = TwoNodes();
  s.running = {Running("low", "vision", {{"n1", 8}}), Running("other", "vision", {{"n2", 8}})};
  s.waiting = {Waiting("secret-urgent", "nlp", 8, 1, /*priority=*/5)};
  Decision d = Schedule(s);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.preemptions[0].reason,
              HasSubstr("preempted by higher-priority a job of queue nlp"));
  EXPECT_THAT(d.preemptions[0].reason, Not(HasSubstr("secret")));
}

TEST(Scheduler, ShortestWorkPreemptsOnlyMuchLongerCheckpointableWork) {
  ClusterState s;
  s.now = T(0);
  s.nodes = {{"n1", 4}, {"n2", 4}};
  // n1: 20 h left and can checkpoint; n2: 20 h left but cannot.
  s.running = {Checkpointing(Running("resumable", "a", {{"n1", 4}}), T(20 * 60)),
               Running("fragile", "a", {{"n2", 4}}, T(20 * 60))};
  s.waiting = {Expecting(Waiting("quick", "b", 4, 1), minutes(30))};
  Decision d = Schedule(s, ShortestWork(/*preemption=*/true));
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].job, "resumable");
  EXPECT_THAT(d.preemptions[0].reason, HasSubstr("checkpoint"));
  EXPECT_THAT(d.preemptions[0].reason, HasSubstr("a job of queue b"));
  EXPECT_THAT(d.preemptions[0].reason, Not(HasSubstr("quick")));  // another team's job
  EXPECT_EQ(d.preemptions[0].for_job, "quick");
  // Fair share, the default, preempts nobody for it.
  SchedulerOptions fair;
  EXPECT_TRUE(Schedule(s, fair).preemptions.empty());
}

TEST(Scheduler, ShortestWorkDoesNotPreemptForWorkNotMuchShorterOrTooSoonAfterAStart) {
  ClusterState s;
  s.now = T(0);
  s.nodes = {{"n1", 4}};
  // 1.5 h left x 4 GPUs against 1 h x 4 GPUs + 5 min restart: not 1.5x.
  s.running = {Checkpointing(Running("near-done", "a", {{"n1", 4}}), T(90))};
  s.waiting = {Expecting(Waiting("hour", "b", 4, 1), hours(1))};
  EXPECT_TRUE(Schedule(s, ShortestWork(true)).preemptions.empty());
  // Much longer, but it started 2 minutes ago: it is left to run.
  s.running = {Checkpointing(Running("just-started", "a", {{"n1", 4}}), T(20 * 60))};
  s.running[0].started_at = T(-2);
  EXPECT_TRUE(Schedule(s, ShortestWork(true)).preemptions.empty());
  s.running[0].started_at = T(-11);
  EXPECT_EQ(Schedule(s, ShortestWork(true)).preemptions.size(), 1u);
}

TEST(Scheduler, ShortestWorkGrantsAJobTwiceTheRunBeforeEachFurtherPreemption) {
  ClusterState s;
  s.now = T(0);
  s.nodes = {{"n1", 4}};
  s.running = {Checkpointing(Running("long", "a", {{"n1", 4}}), T(20 * 60))};  // started at -10 min
  s.waiting = {Expecting(Waiting("quick", "b", 4, 1), minutes(30))};
  EXPECT_EQ(Schedule(s, ShortestWork(true)).preemptions.size(), 1u);
  // Preempted twice before: it may run 40 minutes before the next.
  s.running[0].preemptions = 2;
  EXPECT_TRUE(Schedule(s, ShortestWork(true)).preemptions.empty());
  s.running[0].started_at = T(-39);
  EXPECT_TRUE(Schedule(s, ShortestWork(true)).preemptions.empty());
  s.running[0].started_at = T(-40);
  EXPECT_EQ(Schedule(s, ShortestWork(true)).preemptions.size(), 1u);
}

TEST(Scheduler, ShortestWorkReclaimsBorrowedGpusOnlyAfterTheBorrowerHadItsGrantedRun) {
  ClusterState s;
  s.now = T(0);
  s.nodes = {{"n1", 4}};
  s.queues = {{"a", {2, 2, 1}}, {"b", {2, 2, 1}}};
  RunningJob borrower = Running("a-borrows", "a", {{"n1", 4}});
  borrower.started_at = T(-3);
  s.running = {borrower};
  s.waiting = {Waiting("b-own", "b", 2, 1)};
  // Fair share reclaims at once; progress-aware lets it run 10 minutes first.
  SchedulerOptions fair;
  EXPECT_EQ(Schedule(s, fair).preemptions.size(), 1u);
  EXPECT_TRUE(Schedule(s, ShortestWork(true)).preemptions.empty());
  s.running[0].started_at = T(-10);
  ASSERT_EQ(Schedule(s, ShortestWork(true)).preemptions.size(), 1u);
  EXPECT_THAT(Schedule(s, ShortestWork(true)).preemptions[0].reason, HasSubstr("within its quota"));
}

TEST(Scheduler, ShortestWorkDoesNotTakeATeamBelowItsQuotaForABorrower) {
  ClusterState s;
  s.now = T(0);
  s.nodes = {{"n1", 4}, {"n2", 4}};
  s.queues = {{"a", {4, 4, 1}}, {"b", {4, 4, 1}}};
  // b already uses its 4; a's long job is within a's quota.
  s.running = {Checkpointing(Running("a-long", "a", {{"n1", 4}}), T(20 * 60)),
               Checkpointing(Running("b-long", "b", {{"n2", 4}}), T(30 * 60))};
  s.waiting = {Expecting(Waiting("b-quick", "b", 4, 1), minutes(10))};
  Decision d = Schedule(s, ShortestWork(true));
  // Not a's job (a is within its quota and b-quick would borrow); b's own is fair game.
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].job, "b-long");
}

// --- Ordering::kBalanced ---

SchedulerOptions Balanced(bool preemption = false) {
  SchedulerOptions o;
  o.ordering = Ordering::kBalanced;
  o.preemption = preemption;
  return o;
}

TEST(Scheduler, OrderingsHaveTheServersNames) {
  for (Ordering o : {Ordering::kFairShare, Ordering::kShortestWork, Ordering::kBalanced})
    EXPECT_EQ(ParseOrdering(OrderingName(o)), o);
  EXPECT_EQ(OrderingName(kDefaultOrdering), "fair-share");
  EXPECT_EQ(ParseOrdering("fifo"), std::nullopt);
}

TEST(Scheduler, BalancedStarvesAJobBySlowdownScaledByTheLoad) {
  ClusterState s;
  s.nodes = {{"n1", 1}};
  WaitingJob old = Expecting(Waiting("old", "a", 1, 1), minutes(30));
  WaitingJob fresh = Expecting(Waiting("fresh-short", "a", 1, 2), minutes(1));
  // Two 1-GPU jobs ask for a 1-GPU pool: load 2, so "old" starves after
  // 4 x 2 x its 30 min = 4 h in the system, not at a fixed bound.
  s.now = T(239);
  fresh.queued_at = T(238);
  s.waiting = {fresh, old};
  Decision d = Schedule(s, Balanced());
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, "fresh-short");
  s.now = T(240);
  d = Schedule(s, Balanced());
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, "old");
  // A third job asking for the GPU raises the load: the bound moves to 6 h.
  s.waiting.push_back(Expecting(Waiting("third", "b", 1, 3), hours(2)));
  d = Schedule(s, Balanced());
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, "fresh-short");
}

TEST(Scheduler, BalancedCountsSlowdownFromSubmissionNotFromTheLastPreemption) {
  ClusterState s;
  s.nodes = {{"n1", 1}};
  s.now = T(600);
  // Preempted a minute ago, but submitted 10 h ago for 1 h of work: load 2
  // makes its bound 8 h, long past.
  WaitingJob resumed = Expecting(Waiting("resumed", "a", 1, 1), hours(1));
  resumed.queued_at = T(599);
  resumed.submitted_at = T(0);
  WaitingJob fresh = Expecting(Waiting("fresh-short", "a", 1, 2), minutes(1));
  fresh.queued_at = T(599);
  s.waiting = {fresh, resumed};
  Decision d = Schedule(s, Balanced());
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, "resumed");
  // Without a submission time, its wait counts from its requeue.
  s.waiting[1].submitted_at.reset();
  d = Schedule(s, Balanced());
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, "fresh-short");
}

TEST(Scheduler, BalancedMakesRoomWithinATeamsQuotaFromItsOwnMuchLongerWork) {
  ClusterState s;
  s.now = T(0);
  s.nodes = {{"n1", 2}};
  s.queues = {{"a", {1, 0, 1}}, {"b", {1, 0, 1}}};
  // a is at its quota with 10 h of checkpointable work left; a GPU is idle.
  s.running = {Checkpointing(Running("a-long", "a", {{"n1", 1}}), T(600))};
  s.waiting = {Expecting(Waiting("a-short", "a", 1, 1), minutes(10))};
  Decision d = Schedule(s, Balanced(true));
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].job, "a-long");
  EXPECT_EQ(d.preemptions[0].for_job, "a-short");
  EXPECT_THAT(d.preemptions[0].reason, HasSubstr("within its team's quota"));
  EXPECT_EQ(d.expected_starts.at("a-short"), T(0));
  // Progress-aware leaves the job waiting on its team's quota.
  EXPECT_TRUE(Schedule(s, ShortestWork(true)).preemptions.empty());
  // Not for work that is not much shorter, nor a job that just started.
  s.waiting[0].expected_run = hours(8);
  EXPECT_TRUE(Schedule(s, Balanced(true)).preemptions.empty());
  s.waiting[0].expected_run = minutes(10);
  s.running[0].started_at = T(-2);
  EXPECT_TRUE(Schedule(s, Balanced(true)).preemptions.empty());
}

TEST(Scheduler, BalancedLetsATeamsSmallerWorkPassItsOverQuotaJobUntilThatStarves) {
  ClusterState s;
  s.nodes = {{"n1", 4}};
  s.queues = {{"a", {2, 0, 1}}};
  s.running = {Running("a-run", "a", {{"n1", 1}})};
  // "pair" comes first by work (1.5 GPU-hours) but would take a to 3 of 2.
  WaitingJob pair = Expecting(Waiting("pair", "a", 2, 1), minutes(45));
  WaitingJob single = Expecting(Waiting("single", "a", 1, 2), hours(2));
  s.now = T(10);
  s.waiting = {pair, single};
  Decision d = Schedule(s, Balanced());
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, "single");
  // Fair share keeps a queue FIFO: "pair" holds "single".
  EXPECT_TRUE(Schedule(s, SchedulerOptions{}).starts.empty());
  // Starving (4 x load 1 x 45 min = 3 h), "pair" holds its team's later work.
  s.now = T(180);
  d = Schedule(s, Balanced());
  EXPECT_TRUE(d.starts.empty());
  EXPECT_EQ(Explain(s, d).reasons.at("single"), "waiting behind earlier jobs of queue a");
}

}  // namespace
}  // namespace headway::sched
