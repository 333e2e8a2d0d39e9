// Elastic sizing decisions (sched/elastic.h), with a fake clock: the state's
// `now` is all the time there is.
#include "sched/elastic.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace headway::sched {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::HasSubstr;

Time AtMinute(int minutes_from_start) {
  return FromUnixMillis(1'800'000'000'000LL + minutes_from_start * 60'000LL);
}

// One node of `gpus` GPUs, and an elastic job of 1-GPU rank groups on it.
struct Pool {
  ClusterState state;
  std::vector<ElasticJob> elastic;

  explicit Pool(int gpus = 4) {
    state.now = AtMinute(60);
    state.nodes = {{"n1", gpus}};
  }

  ElasticJob& AddElastic(std::string name, std::string queue, int size, int min, int max,
                         std::map<int, double> throughput = {{1, 10.0}}) {
    RunningJob r;
    r.name = name;
    r.queue = std::move(queue);
    r.placement = {{"n1", size}};
    r.started_at = AtMinute(0);
    state.running.push_back(r);
    ElasticJob e;
    e.name = std::move(name);
    e.size = size;
    e.min_size = min;
    e.max_size = max;
    e.gpus_per_unit = 1;
    e.throughput = std::move(throughput);
    e.last_change = AtMinute(0);
    e.eta = std::chrono::hours(2);
    elastic.push_back(e);
    return elastic.back();
  }

  void AddRigid(std::string name, std::string queue, int gpus) {
    RunningJob r;
    r.name = std::move(name);
    r.queue = std::move(queue);
    r.placement = {{"n1", gpus}};
    r.started_at = AtMinute(0);
    state.running.push_back(r);
  }

  void AddWaiting(std::string name, std::string queue, int gpus) {
    WaitingJob w;
    w.name = std::move(name);
    w.queue = std::move(queue);
    w.gpus_per_node = gpus;
    w.submit_seq = static_cast<std::int64_t>(state.waiting.size()) + 1;
    w.queued_at = state.now;
    state.waiting.push_back(w);
  }

  ElasticPlan Plan(const ElasticOptions& options = {}) const {
    return PlanWithElastic(state, elastic, {}, options);
  }
};

const Resize* ResizeOf(const ElasticPlan& plan, const std::string& job) {
  for (const Resize& r : plan.resizes) {
    if (r.job == job) return &r;
  }
  return nullptr;
}

TEST(Elastic, IdleGpusGoToAnElasticJobUpToItsMax) {
  Pool pool(4);
  pool.AddElastic("train", "nlp", 1, 1, 3);
  ElasticPlan plan = pool.Plan();
  const Resize* r = ResizeOf(plan, "train");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->from, 1);
  EXPECT_EQ(r->to, 3);  // its max, though a 4th GPU is idle
  ASSERT_EQ(r->placement.size(), 1u);
  EXPECT_EQ(r->placement[0].gpus, 3);
  EXPECT_THAT(r->reason, HasSubstr("grew to 3 rank groups: 3 GPUs idle"));
  EXPECT_THAT(r->reason, HasSubstr("scaling not measured yet"));
}

TEST(Elastic, AJobThatIsNotElasticOrNotMeasuredYetDoesNotGrow) {
  Pool pool(4);
  pool.AddRigid("rigid", "nlp", 1);
  pool.AddElastic("fresh", "nlp", 1, 1, 3, /*throughput=*/{});
  EXPECT_TRUE(pool.Plan().resizes.empty());
}

TEST(Elastic, AWaitingJobTakesTheGpusAboveTheMinimumInsteadOfPreempting) {
  Pool pool(4);
  pool.AddElastic("train", "nlp", 4, 1, 4, {{1, 10}, {2, 19}, {4, 35}});
  pool.AddWaiting("eval", "vision", 2);
  ElasticPlan plan = pool.Plan();
  const Resize* r = ResizeOf(plan, "train");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->to, 2);  // exactly what the waiting job needs
  EXPECT_EQ(r->for_job, "eval");
  EXPECT_THAT(r->reason,
              HasSubstr("shrank to 2 rank groups to make room for a waiting job of team vision"));
  // Nothing preempted; the job starts once the GPUs are back.
  EXPECT_TRUE(plan.decision.preemptions.empty());
  EXPECT_TRUE(plan.decision.starts.empty());
  ASSERT_FALSE(plan.decision.pending.empty());
  EXPECT_EQ(plan.decision.pending[0].why, Pending::Why::kVictimsLeaving);
  EXPECT_EQ(plan.decision.expected_starts.at("eval"), pool.state.now);
}

// Schedule() sees the GPUs above a minimum as free and places best fit, so
// it may pick the elastic job's node over an idle one: the start goes to the
// idle GPUs instead, and nothing shrinks.
TEST(Elastic, AWaitingJobThatFitsIdleGpusTakesThemAndNothingShrinks) {
  Pool pool(8);
  pool.state.nodes.push_back({"n2", 8});
  pool.AddElastic("train", "nlp", 8, 1, 8, {{1, 10}, {8, 70}});
  pool.AddWaiting("eval", "vision", 2);
  ElasticPlan plan = pool.Plan();
  EXPECT_TRUE(plan.resizes.empty());
  ASSERT_EQ(plan.decision.starts.size(), 1u);
  EXPECT_EQ(plan.decision.starts[0].job, "eval");
  ASSERT_EQ(plan.decision.starts[0].placement.size(), 1u);
  EXPECT_EQ(plan.decision.starts[0].placement[0].node, "n2");
  EXPECT_EQ(plan.decision.starts[0].placement[0].gpus, 2);
}

// The same for a job of whole nodes: an idle node takes it before a node of
// an elastic job of node units is given back.
TEST(Elastic, AWholeNodeJobGoesToAnIdleNodeBeforeAShrink) {
  Pool pool(8);
  pool.state.nodes.push_back({"n2", 8});
  pool.state.nodes.push_back({"n3", 8});
  ElasticJob& e = pool.AddElastic("train", "nlp", 2, 1, 3, {{1, 10}, {2, 19}});
  e.gpus_per_unit = 8;
  e.units_are_nodes = true;
  pool.state.running[0].placement = {{"n1", 8}, {"n2", 8}};
  pool.AddWaiting("big", "vision", 8);
  ElasticPlan plan = pool.Plan();
  EXPECT_TRUE(plan.resizes.empty());
  ASSERT_EQ(plan.decision.starts.size(), 1u);
  ASSERT_EQ(plan.decision.starts[0].placement.size(), 1u);
  EXPECT_EQ(plan.decision.starts[0].placement[0].node, "n3");
}

// Schedule() may place a start on any node above an elastic job's minimum,
// not only its last: that node is the one given back.
TEST(Elastic, ANodeJobGivesBackTheNodeTheStartWasPlacedOn) {
  Pool pool(8);
  pool.state.nodes.push_back({"n2", 8});
  pool.state.nodes.push_back({"n3", 8});
  ElasticJob& e = pool.AddElastic("train", "nlp", 3, 1, 3, {{1, 10}, {3, 28}});
  e.gpus_per_unit = 8;
  e.units_are_nodes = true;
  pool.state.running[0].placement = {{"n1", 8}, {"n2", 8}, {"n3", 8}};
  pool.AddWaiting("big", "vision", 8);
  ElasticPlan plan = pool.Plan();
  EXPECT_TRUE(plan.decision.starts.empty());  // it waits for the node
  const Resize* r = ResizeOf(plan, "train");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->to, 2);
  EXPECT_EQ(r->for_job, "big");
  ASSERT_EQ(plan.decision.pending.size(), 1u);
  EXPECT_EQ(plan.decision.pending[0].why, Pending::Why::kVictimsLeaving);
  // Whichever node the start was placed on, the job no longer holds it.
  std::set<std::string> kept;
  for (const NodeGpus& p : r->placement) kept.insert(p.node);
  EXPECT_EQ(kept.count("n1"), 1u);
  EXPECT_EQ(kept.size(), 2u);
}

TEST(Elastic, OnceTheShrinkIsUnderWayTheWaitingJobWaitsForItAndThenStarts) {
  Pool pool(4);
  ElasticJob& e = pool.AddElastic("train", "nlp", 2, 1, 4, {{1, 10}, {2, 19}, {4, 35}});
  e.releasing = {{"n1", 2}};
  pool.state.running[0].placement = {{"n1", 2}};
  pool.AddWaiting("eval", "vision", 2);
  ElasticPlan plan = pool.Plan();
  // The GPUs are still on their way back: no second shrink, no start, no growth.
  EXPECT_TRUE(plan.resizes.empty());
  EXPECT_TRUE(plan.decision.starts.empty());
  EXPECT_TRUE(plan.decision.preemptions.empty());

  pool.elastic[0].releasing.clear();
  pool.elastic[0].last_change = pool.state.now;
  plan = pool.Plan();
  ASSERT_EQ(plan.decision.starts.size(), 1u);
  EXPECT_EQ(plan.decision.starts[0].job, "eval");
  EXPECT_TRUE(plan.resizes.empty());
}

TEST(Elastic, AnElasticJobAtItsMinimumIsPreemptedLikeAnyOther) {
  Pool pool(2);
  pool.AddElastic("train", "nlp", 2, 2, 4, {{2, 10}});
  pool.state.queues["vision"] = {2, 0, 1.0};
  pool.state.queues["nlp"] = {0, 2, 1.0};
  pool.AddWaiting("eval", "vision", 2);
  ElasticPlan plan = pool.Plan();
  EXPECT_TRUE(plan.resizes.empty());
  ASSERT_EQ(plan.decision.preemptions.size(), 1u);
  EXPECT_EQ(plan.decision.preemptions[0].job, "train");
}

TEST(Elastic, TheJobThatNoLongerLearnsGivesBackFirst) {
  Pool pool(4);
  pool.AddElastic("learning", "nlp", 2, 1, 2, {{1, 10}, {2, 19}});
  ElasticJob& flat = pool.AddElastic("flat", "nlp", 2, 1, 2, {{1, 10}, {2, 19}});
  flat.winding_down = true;
  pool.AddWaiting("eval", "vision", 1);
  ElasticPlan plan = pool.Plan();
  EXPECT_EQ(ResizeOf(plan, "learning"), nullptr);
  ASSERT_NE(ResizeOf(plan, "flat"), nullptr);
  EXPECT_EQ(ResizeOf(plan, "flat")->to, 1);
}

TEST(Elastic, AJobThatMeetsItsDeadlineAnywayGivesBackBeforeOneThatScalesWorse) {
  Pool pool(4);
  ElasticJob& late = pool.AddElastic("late", "nlp", 2, 1, 2, {{1, 10}, {2, 12}});
  late.deadline = pool.state.now + std::chrono::hours(1);  // ETA 2 h: it needs the GPUs
  ElasticJob& early = pool.AddElastic("early", "nlp", 2, 1, 2, {{1, 10}, {2, 19}});
  early.deadline = pool.state.now + std::chrono::hours(5);
  pool.AddWaiting("eval", "vision", 1);
  ElasticPlan plan = pool.Plan();
  ASSERT_NE(ResizeOf(plan, "early"), nullptr);
  EXPECT_EQ(ResizeOf(plan, "late"), nullptr);
}

TEST(Elastic, WithoutDeadlinesTheLeastGainPerGpuGivesBack) {
  Pool pool(4);
  pool.AddElastic("scales", "nlp", 2, 1, 2, {{1, 10}, {2, 19}});
  pool.AddElastic("barely", "nlp", 2, 1, 2, {{1, 10}, {2, 12}});
  pool.AddWaiting("eval", "vision", 1);
  ElasticPlan plan = pool.Plan();
  ASSERT_NE(ResizeOf(plan, "barely"), nullptr);
  EXPECT_EQ(ResizeOf(plan, "scales"), nullptr);
}

TEST(Elastic, GrowthGoesFirstToTheJobThatSavesTheMostTimePerGpu) {
  Pool pool(3);
  ElasticJob& near_done = pool.AddElastic("near-done", "nlp", 1, 1, 2, {{1, 10}});
  near_done.eta = minutes(30);
  ElasticJob& far = pool.AddElastic("far", "vision", 1, 1, 2, {{1, 10}});
  far.eta = std::chrono::hours(10);
  ElasticPlan plan = pool.Plan();
  ASSERT_NE(ResizeOf(plan, "far"), nullptr);
  EXPECT_EQ(ResizeOf(plan, "far")->to, 2);
  EXPECT_EQ(ResizeOf(plan, "near-done"), nullptr);  // one GPU was left, and far took it
}

TEST(Elastic, MeasuredScalingDecidesAndAUselessUnitIsGivenBack) {
  Pool pool(8);
  // Measured: 2 rank groups gave 1.9x; a third is worth trying.
  pool.AddElastic("good", "nlp", 2, 1, 3, {{1, 10}, {2, 19}});
  // Measured: 3 gave 1.01x of 2: it goes back to 2 and does not grow again.
  pool.AddElastic("flat", "vision", 3, 1, 4, {{1, 10}, {2, 19}, {3, 19.2}});
  ElasticPlan plan = pool.Plan();
  const Resize* good = ResizeOf(plan, "good");
  ASSERT_NE(good, nullptr);
  EXPECT_EQ(good->to, 3);
  EXPECT_THAT(good->reason, HasSubstr("1.90x throughput measured at 2 rank groups vs 1"));
  const Resize* flat = ResizeOf(plan, "flat");
  ASSERT_NE(flat, nullptr);
  EXPECT_EQ(flat->to, 2);
  EXPECT_THAT(flat->reason,
              HasSubstr("shrank to 2 rank groups: 3 gave only 1.01x the throughput of 2"));
}

TEST(Elastic, AJobResizedRecentlyWaitsUntilItsRestartIsAmortised) {
  Pool pool(4);
  ElasticJob& e = pool.AddElastic("train", "nlp", 1, 1, 3);
  e.restart_cost = seconds(90);  // x4 = 6 min between resizes
  e.last_change = pool.state.now - minutes(5);
  EXPECT_TRUE(pool.Plan().resizes.empty());
  pool.state.now = pool.state.now + minutes(1);
  EXPECT_FALSE(pool.Plan().resizes.empty());
}

TEST(Elastic, AShortRunLeftIsNotWorthARestart) {
  Pool pool(4);
  ElasticJob& e = pool.AddElastic("train", "nlp", 1, 1, 3);
  e.restart_cost = minutes(2);
  e.eta = minutes(10);  // one more GPU saves ~4 min, less than 4 restarts (8 min)
  EXPECT_TRUE(pool.Plan().resizes.empty());
}

TEST(Elastic, NoGrowthWhileAJobWaitsForRoom) {
  Pool pool(4);
  pool.AddRigid("big", "vision", 2);
  pool.AddElastic("train", "nlp", 1, 1, 3);
  pool.AddWaiting("huge", "vision", 4);  // cannot start until "big" ends
  ElasticPlan plan = pool.Plan();
  EXPECT_TRUE(plan.resizes.empty());
}

TEST(Elastic, GrowthStaysWithinTheTeamsQuota) {
  Pool pool(8);
  pool.state.queues["nlp"] = {2, 1, 1.0};  // at most 3 GPUs
  pool.AddElastic("train", "nlp", 1, 1, 8);
  ElasticPlan plan = pool.Plan();
  ASSERT_NE(ResizeOf(plan, "train"), nullptr);
  EXPECT_EQ(ResizeOf(plan, "train")->to, 3);
}

TEST(Elastic, NodeUnitsGrowOntoNodesTheJobDoesNotUseYet) {
  ClusterState s;
  s.now = AtMinute(60);
  s.nodes = {{"n1", 4}, {"n2", 4}, {"n3", 2}};
  RunningJob r;
  r.name = "ddp";
  r.queue = "nlp";
  r.placement = {{"n1", 4}};
  r.started_at = AtMinute(0);
  s.running.push_back(r);
  ElasticJob e;
  e.name = "ddp";
  e.units_are_nodes = true;
  e.size = 1;
  e.min_size = 1;
  e.max_size = 3;
  e.gpus_per_unit = 4;
  e.throughput = {{1, 100.0}};
  e.last_change = AtMinute(0);
  ElasticPlan plan = PlanWithElastic(s, {e});
  ASSERT_EQ(plan.resizes.size(), 1u);
  EXPECT_EQ(plan.resizes[0].to, 2);  // n3 has too few GPUs for a node unit
  ASSERT_EQ(plan.resizes[0].placement.size(), 2u);
  EXPECT_EQ(plan.resizes[0].placement[0].node, "n1");
  EXPECT_EQ(plan.resizes[0].placement[1].node, "n2");
  EXPECT_THAT(plan.resizes[0].reason, HasSubstr("grew to 2 nodes"));
}

TEST(Elastic, ThroughputAtAnUnmeasuredSizeFollowsTheMeasuredScaling) {
  ElasticJob e;
  e.throughput = {{1, 10.0}};
  EXPECT_NEAR(ExpectedThroughput(e, 2), 10 * std::pow(2.0, 0.8), 1e-9);  // assumed
  e.throughput = {{1, 10.0}, {2, 20.0}};
  EXPECT_NEAR(ExpectedThroughput(e, 4), 40.0, 1e-9);  // linear, as measured
  e.throughput = {{2, 20.0}, {4, 20.0}};
  EXPECT_NEAR(ExpectedThroughput(e, 8), 20.0, 1e-9);  // flat, as measured
  EXPECT_NEAR(ExpectedThroughput(e, 3), 20.0, 1e-9);  // between two measurements
  e.throughput = {{1, 10.0}, {4, 20.0}};
  EXPECT_NEAR(ExpectedThroughput(e, 2), 10 * std::sqrt(2.0), 1e-9);
  EXPECT_EQ(ExpectedThroughput(ElasticJob{}, 2), 0.0);
}

}  // namespace
}  // namespace headway::sched
