#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "hpo/early_stopping.h"

namespace headway::hpo {
namespace {

using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A curve with one point per step 1..steps, all of value `value`.
TrialCurve Flat(std::string name, double value, std::int64_t steps) {
  TrialCurve c{std::move(name), {}};
  for (std::int64_t s = 1; s <= steps; ++s) c.points.push_back({s, value});
  return c;
}

EarlyStoppingOptions Median(int min_trials, std::int64_t start_step) {
  EarlyStoppingOptions o;
  o.rule = StoppingRule::kMedian;
  o.min_trials = min_trials;
  o.start_step = start_step;
  return o;
}

EarlyStoppingOptions Asha(std::int64_t min_resource, double eta) {
  EarlyStoppingOptions o;
  o.rule = StoppingRule::kAsha;
  o.min_resource = min_resource;
  o.reduction_factor = eta;
  return o;
}

std::vector<TrialCurve> FlatPeers(const std::vector<double>& values, std::int64_t steps) {
  std::vector<TrialCurve> peers;
  for (std::size_t i = 0; i < values.size(); ++i) {
    peers.push_back(Flat("p" + std::to_string(i), values[i], steps));
  }
  return peers;
}

// --- Median stopping rule ---------------------------------------------------

TEST(MedianStoppingRule, StopsAClearlyWorseTrialAndKeepsABetterOne) {
  const auto peers = FlatPeers({0.3, 0.31, 0.32, 0.35, 0.4}, 40);
  StopDecision worse = ShouldStop(Flat("t", 0.52, 40), peers, Median(3, 10));
  EXPECT_TRUE(worse.stop);
  EXPECT_THAT(worse.reason, HasSubstr("median stopping rule"));
  EXPECT_THAT(worse.reason, HasSubstr("0.52"));
  EXPECT_THAT(worse.reason, HasSubstr("step 40"));
  EXPECT_THAT(worse.reason, HasSubstr("0.32"));
  EXPECT_THAT(worse.reason, HasSubstr("5 trials"));

  EXPECT_FALSE(ShouldStop(Flat("t", 0.2, 40), peers, Median(3, 10)).stop);
  // Equal to the median is not worse.
  EXPECT_FALSE(ShouldStop(Flat("t", 0.32, 40), peers, Median(3, 10)).stop);
}

TEST(MedianStoppingRule, ComparesBestSoFarAgainstRunningAverages) {
  // Peers fall from 1.0 to 0.1 over 10 steps: at step 10 their value is 0.1
  // but their running average is 0.55.
  std::vector<TrialCurve> peers;
  for (int i = 0; i < 3; ++i) {
    TrialCurve c{"p" + std::to_string(i), {}};
    for (int s = 1; s <= 10; ++s) c.points.push_back({s, 1.1 - 0.1 * s});
    peers.push_back(c);
  }
  // The trial was at 0.5 once and has got worse since: its best counts.
  TrialCurve t{"t", {{1, 0.9}, {5, 0.5}, {10, 0.8}}};
  EXPECT_FALSE(ShouldStop(t, peers, Median(3, 0)).stop);
  t.points[1].value = 0.6;
  t.points[2].value = 0.7;
  EXPECT_TRUE(ShouldStop(t, peers, Median(3, 0)).stop);  // 0.6 > 0.55
}

TEST(MedianStoppingRule, NoDecisionBeforeStartStep) {
  const auto peers = FlatPeers({0.1, 0.1, 0.1}, 50);
  EXPECT_FALSE(ShouldStop(Flat("t", 0.9, 9), peers, Median(3, 10)).stop);
  EXPECT_TRUE(ShouldStop(Flat("t", 0.9, 10), peers, Median(3, 10)).stop);
}

TEST(MedianStoppingRule, NoDecisionWithFewerThanMinTrialsPeers) {
  const auto peers = FlatPeers({0.1, 0.1}, 50);
  EXPECT_FALSE(ShouldStop(Flat("t", 0.9, 20), peers, Median(3, 0)).stop);
  EXPECT_TRUE(ShouldStop(Flat("t", 0.9, 20), peers, Median(2, 0)).stop);
  // min_trials 0 still needs one peer to have a median at all.
  EXPECT_FALSE(ShouldStop(Flat("t", 0.9, 20), {}, Median(0, 0)).stop);
}

TEST(MedianStoppingRule, NoDecisionWithoutPoints) {
  const auto peers = FlatPeers({0.1, 0.1, 0.1}, 50);
  EXPECT_FALSE(ShouldStop(TrialCurve{"t", {}}, peers, Median(3, 0)).stop);
}

TEST(MedianStoppingRule, OnlyPeersThatReachedTheStepCount) {
  // Three good peers stopped at step 10; two bad ones ran to step 60.
  std::vector<TrialCurve> peers = FlatPeers({0.1, 0.1, 0.1}, 10);
  peers.push_back(Flat("slow1", 0.9, 60));
  peers.push_back(Flat("slow2", 0.9, 60));
  // At step 50 only the two bad peers count: fewer than min_trials 3.
  EXPECT_FALSE(ShouldStop(Flat("t", 0.5, 50), peers, Median(3, 0)).stop);
  // With min_trials 2 the median is 0.9: the trial is better.
  EXPECT_FALSE(ShouldStop(Flat("t", 0.5, 50), peers, Median(2, 0)).stop);
  // At step 10 all five count and the median is 0.1.
  EXPECT_TRUE(ShouldStop(Flat("t", 0.5, 10), peers, Median(3, 0)).stop);
}

TEST(MedianStoppingRule, PeerPointsAfterTheStepDoNotCount) {
  // Peers got much better after step 20; the trial at step 20 is compared with
  // their running averages up to step 20 only.
  std::vector<TrialCurve> peers;
  for (int i = 0; i < 3; ++i) {
    TrialCurve c = Flat("p" + std::to_string(i), 0.8, 20);
    for (int s = 21; s <= 40; ++s) c.points.push_back({s, 0.0});
    peers.push_back(c);
  }
  EXPECT_FALSE(ShouldStop(Flat("t", 0.7, 20), peers, Median(3, 0)).stop);
  EXPECT_TRUE(ShouldStop(Flat("t", 0.7, 40), peers, Median(3, 0)).stop);  // averages 0.4
}

TEST(MedianStoppingRule, NaNLossesCountAsWorst) {
  const auto good_peers = FlatPeers({0.3, 0.3, 0.3}, 20);
  EXPECT_TRUE(ShouldStop(Flat("t", kNaN, 20), good_peers, Median(3, 0)).stop);
  TrialCurve inf = Flat("t", std::numeric_limits<double>::infinity(), 20);
  EXPECT_TRUE(ShouldStop(inf, good_peers, Median(3, 0)).stop);

  // One NaN among the peers makes that peer's average +inf, the worst; it
  // must not drag the median (0.3 or inf) below a good trial's 0.2.
  std::vector<TrialCurve> peers = FlatPeers({0.3, 0.3, 0.3}, 20);
  peers[0].points[5].value = kNaN;
  EXPECT_FALSE(ShouldStop(Flat("t", 0.2, 20), peers, Median(3, 0)).stop);
  peers = FlatPeers({kNaN, kNaN, 0.3}, 20);
  EXPECT_FALSE(ShouldStop(Flat("t", 0.2, 20), peers, Median(3, 0)).stop);
  // A NaN trial among NaN peers is not worse than them.
  EXPECT_FALSE(
      ShouldStop(Flat("t", kNaN, 20), FlatPeers({kNaN, kNaN, kNaN}, 20), Median(3, 0)).stop);
  // A trial with one NaN point keeps its finite best.
  TrialCurve mixed = Flat("t", 0.2, 20);
  mixed.points[3].value = kNaN;
  EXPECT_FALSE(ShouldStop(mixed, good_peers, Median(3, 0)).stop);
}

// --- ASHA --------------------------------------------------------------------

TEST(Asha, KeepsExactlyTheTopThirdOfNineAtRungOne) {
  // eta 3, min_resource 10: rungs at 10, 30, 90. Nine trials at step 35, with
  // distinct values 0.1 .. 0.9 by rung 1 (step 30).
  std::vector<TrialCurve> all;
  for (int i = 0; i < 9; ++i) all.push_back(Flat("t" + std::to_string(i), 0.1 * (i + 1), 35));
  int stopped = 0;
  for (int i = 0; i < 9; ++i) {
    std::vector<TrialCurve> others;
    for (int j = 0; j < 9; ++j) {
      if (j != i) others.push_back(all[j]);
    }
    StopDecision d = ShouldStop(all[i], others, Asha(10, 3));
    EXPECT_EQ(d.stop, i >= 3) << "trial " << i;
    if (d.stop) {
      ++stopped;
      EXPECT_THAT(d.reason, HasSubstr("ASHA: at rung 1 (step 30)"));
      EXPECT_THAT(d.reason, HasSubstr("ranks " + std::to_string(i + 1) + " of 9"));
      EXPECT_THAT(d.reason, HasSubstr("only the top 3 continue"));
    }
  }
  EXPECT_EQ(stopped, 6);
}

TEST(Asha, TrialBelowRungZeroIsNeverStopped) {
  const auto peers = FlatPeers({0.1, 0.1, 0.1, 0.1, 0.1}, 100);
  EXPECT_FALSE(ShouldStop(Flat("t", 0.9, 9), peers, Asha(10, 3)).stop);
  EXPECT_FALSE(ShouldStop(TrialCurve{"t", {}}, peers, Asha(10, 3)).stop);
  EXPECT_TRUE(ShouldStop(Flat("t", 0.9, 10), peers, Asha(10, 3)).stop);
}

TEST(Asha, FewerThanEtaTrialsAtARungContinue) {
  // Only one peer (plus the trial) reached rung 0: 2 < eta 3.
  std::vector<TrialCurve> peers = FlatPeers({0.1}, 12);
  peers.push_back(Flat("young", 0.05, 5));  // has not reached the rung: not counted
  EXPECT_FALSE(ShouldStop(Flat("t", 0.9, 12), peers, Asha(10, 3)).stop);
  peers.push_back(Flat("p2", 0.1, 10));
  EXPECT_TRUE(ShouldStop(Flat("t", 0.9, 12), peers, Asha(10, 3)).stop);
}

TEST(Asha, TiesContinue) {
  // Nine trials, all equal at the rung: nobody is strictly better.
  const auto peers = FlatPeers({0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, 12);
  EXPECT_FALSE(ShouldStop(Flat("t", 0.5, 12), peers, Asha(10, 3)).stop);
  // Tied with the third best of nine: two are strictly better, under 3.
  const auto ranked = FlatPeers({0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}, 12);
  EXPECT_FALSE(ShouldStop(Flat("t", 0.3, 12), ranked, Asha(10, 3)).stop);
  EXPECT_TRUE(ShouldStop(Flat("t", 0.31, 12), ranked, Asha(10, 3)).stop);
}

TEST(Asha, RungValueIsTheBestSoFarUpToTheRung) {
  const auto peers = FlatPeers({0.2, 0.2, 0.2}, 12);
  // Was at 0.1 at step 4, worse since: its best up to the rung counts.
  TrialCurve t = Flat("t", 0.9, 12);
  t.points[3].value = 0.1;
  EXPECT_FALSE(ShouldStop(t, peers, Asha(10, 3)).stop);
  // A good value after the rung (step 11) does not count at rung 10.
  t = Flat("t", 0.9, 12);
  t.points[10].value = 0.1;
  EXPECT_TRUE(ShouldStop(t, peers, Asha(10, 3)).stop);
}

// Three peers at step 40 that are at `before` up to step 10 and `after` later.
std::vector<TrialCurve> TwoPhasePeers(double before, double after) {
  std::vector<TrialCurve> peers;
  for (int i = 0; i < 3; ++i) {
    TrialCurve c{"p" + std::to_string(i), {}};
    for (int s = 1; s <= 40; ++s) c.points.push_back({s, s <= 10 ? before : after});
    peers.push_back(c);
  }
  return peers;
}

TEST(Asha, DecisionAtTheHighestReachedRungIsWhatCounts) {
  // Rungs 10 and 30. The trial is the worst at rung 10 but the best by rung
  // 30: stopped while at rung 10, kept once at rung 30.
  const auto peers = TwoPhasePeers(0.2, 0.15);
  TrialCurve late{"late", {}};
  for (int s = 1; s <= 35; ++s) late.points.push_back({s, s <= 10 ? 0.5 : 0.05});
  TrialCurve late_at_rung_0 = late;
  late_at_rung_0.points.resize(12);
  EXPECT_TRUE(ShouldStop(late_at_rung_0, peers, Asha(10, 3)).stop);
  EXPECT_FALSE(ShouldStop(late, peers, Asha(10, 3)).stop);

  // Conversely a trial best at rung 10 whose peers overtake it by rung 30.
  const auto improving = TwoPhasePeers(0.9, 0.01);
  TrialCurve early{"early", {}};
  for (int s = 1; s <= 35; ++s) early.points.push_back({s, s <= 10 ? 0.05 : 0.5});
  TrialCurve early_at_rung_0 = early;
  early_at_rung_0.points.resize(12);
  EXPECT_FALSE(ShouldStop(early_at_rung_0, improving, Asha(10, 3)).stop);
  StopDecision d = ShouldStop(early, improving, Asha(10, 3));
  EXPECT_TRUE(d.stop);
  EXPECT_THAT(d.reason, HasSubstr("rung 1 (step 30) objective 0.05 ranks 4 of 4"));
}

TEST(Asha, DecisionIsStableWhileBetweenRungs) {
  // Called every control-loop tick: once below the cut at rung 30 the trial
  // keeps being told to stop at every step until the next rung. Peers are
  // 0.5 .. 0.9 up to step 10 and 0.1 .. 0.5 after; the trial is flat at 0.35,
  // so it is the best at rung 10 and fourth of six at rung 30 (top 2 continue).
  std::vector<TrialCurve> peers;
  for (int j = 0; j < 5; ++j) {
    TrialCurve c{"p" + std::to_string(j), {}};
    for (int s = 1; s <= 100; ++s) c.points.push_back({s, (s <= 10 ? 0.5 : 0.1) + 0.1 * j});
    peers.push_back(c);
  }
  TrialCurve t{"t", {}};
  for (int s = 1; s <= 89; ++s) {
    t.points.push_back({s, 0.35});
    const bool stop = ShouldStop(t, peers, Asha(10, 3)).stop;
    EXPECT_EQ(stop, s >= 30) << "step " << s;
  }
}

TEST(Asha, NonFiniteValuesAreWorst) {
  const auto peers = FlatPeers({0.1, 0.2, 0.3}, 12);
  EXPECT_TRUE(ShouldStop(Flat("t", kNaN, 12), peers, Asha(10, 3)).stop);
  // NaN peers do not beat a finite trial.
  EXPECT_FALSE(ShouldStop(Flat("t", 0.9, 12), FlatPeers({kNaN, kNaN, kNaN}, 12), Asha(10, 3)).stop);
}

TEST(Asha, RoundsRungsForFractionalEta) {
  // min_resource 2, eta 1.5: rungs 2, 3, 4.5 -> 5 (llround), 6.75 -> 7, ...
  const auto peers = FlatPeers({0.1, 0.2}, 20);
  StopDecision d = ShouldStop(Flat("t", 0.9, 6), peers, Asha(2, 1.5));
  EXPECT_TRUE(d.stop);
  EXPECT_THAT(d.reason, HasSubstr("rung 2 (step 5)"));
}

TEST(Asha, BadOptionsNeverStop) {
  const auto peers = FlatPeers({0.1, 0.1, 0.1, 0.1, 0.1}, 100);
  const TrialCurve t = Flat("t", 0.9, 100);
  for (double eta : {1.0, 0.5, 0.0, -3.0, kNaN, std::numeric_limits<double>::infinity()}) {
    EXPECT_FALSE(ShouldStop(t, peers, Asha(10, eta)).stop) << "eta " << eta;
  }
  EXPECT_FALSE(ShouldStop(t, peers, Asha(0, 3)).stop);
  EXPECT_FALSE(ShouldStop(t, peers, Asha(-5, 3)).stop);
  // An eta barely above 1 is valid and must stay cheap.
  EXPECT_TRUE(ShouldStop(t, peers, Asha(10, 1 + 1e-12)).stop);
  // A huge eta: no rung ever holds eta trials; a huge min_resource: no rung
  // within reach. Neither overflows.
  EXPECT_FALSE(ShouldStop(t, peers, Asha(10, 1e300)).stop);
  EXPECT_FALSE(ShouldStop(t, peers, Asha(std::numeric_limits<std::int64_t>::max(), 3)).stop);
  // Steps near the int64 limit do not overflow the rung arithmetic.
  TrialCurve far{"far", {{std::numeric_limits<std::int64_t>::max(), 0.9}}};
  EXPECT_FALSE(ShouldStop(far, peers, Asha(10, 3)).stop);
}

TEST(NoStoppingRule, NeverStops) {
  const auto peers = FlatPeers({0.1, 0.1, 0.1, 0.1, 0.1}, 100);
  EarlyStoppingOptions none;  // rule kNone by default
  none.min_trials = 1;
  none.min_resource = 1;
  EXPECT_FALSE(ShouldStop(Flat("t", 0.9, 100), peers, none).stop);
  EXPECT_FALSE(ShouldStop(Flat("t", kNaN, 100), peers, none).stop);
  EXPECT_TRUE(ShouldStop(Flat("t", 0.9, 100), peers, none).reason.empty());
}

// --- Simulation --------------------------------------------------------------

// 27 synthetic learning curves loss_t = a_i + b_i / sqrt(t), evaluated one step
// at a time round-robin (as trials running side by side report), stopping each
// trial the first time the rule says so.
struct Simulation {
  std::int64_t steps_spent = 0;
  bool best_stopped = false;
  int completed = 0;
};

Simulation Simulate(const EarlyStoppingOptions& options) {
  constexpr int kTrials = 27;
  constexpr int kSteps = 100;
  std::vector<double> a(kTrials), b(kTrials);
  int best = 0;
  for (int i = 0; i < kTrials; ++i) {
    // Quality spread in a fixed scrambled order, so the best trial is not the
    // first (or last) one evaluated each round; b varies too, so the curves
    // cross early on.
    const int rank = (i * 10) % kTrials;
    a[i] = 0.1 + 0.04 * rank;
    b[i] = 0.6 + 0.4 * static_cast<double>((i * 7) % kTrials) / kTrials;
    if (a[i] < a[best]) best = i;
  }
  std::vector<TrialCurve> curves(kTrials);
  std::vector<bool> stopped(kTrials, false);
  for (int i = 0; i < kTrials; ++i) curves[i].trial = "t" + std::to_string(i);
  Simulation sim;
  for (int t = 1; t <= kSteps; ++t) {
    for (int i = 0; i < kTrials; ++i) {
      if (stopped[i]) continue;
      curves[i].points.push_back({t, a[i] + b[i] / std::sqrt(static_cast<double>(t))});
      ++sim.steps_spent;
      std::vector<TrialCurve> others;
      for (int j = 0; j < kTrials; ++j) {
        if (j != i) others.push_back(curves[j]);
      }
      if (ShouldStop(curves[i], others, options).stop) {
        stopped[i] = true;
        if (i == best) sim.best_stopped = true;
      }
    }
  }
  for (int i = 0; i < kTrials; ++i) sim.completed += stopped[i] ? 0 : 1;
  return sim;
}

TEST(Asha, SimulationKeepsTheBestCurveAndSavesSteps) {
  const Simulation sim = Simulate(Asha(10, 3));
  EXPECT_FALSE(sim.best_stopped);
  EXPECT_LT(sim.steps_spent, 27 * 100 / 2);
  EXPECT_GE(sim.completed, 1);
}

TEST(MedianStoppingRule, SimulationKeepsTheBestCurveAndSavesSteps) {
  const Simulation sim = Simulate(Median(3, 10));
  EXPECT_FALSE(sim.best_stopped);
  EXPECT_LT(sim.steps_spent, 27 * 100 / 2);
  EXPECT_GE(sim.completed, 1);
}

TEST(HealthStopping, AConfirmedVerdictTheSpecNamesStopsTheTrialSayingWhy) {
  EarlyStoppingOptions options;  // Diverging and Overfitting by default
  StopDecision d = ShouldStopOnHealth(
      Health::kOverfitting, "eval_loss held 0.7 ...; the best checkpoint is step 400", options);
  EXPECT_TRUE(d.stop);
  EXPECT_EQ(d.reason, "Overfitting: eval_loss held 0.7 ...; the best checkpoint is step 400");
  EXPECT_TRUE(ShouldStopOnHealth(Health::kDiverging, "loss is NaN at step 3", options).stop);
  for (Health h : {Health::kProgressing, Health::kStalled, Health::kPlateaued, Health::kUnknown}) {
    EXPECT_FALSE(ShouldStopOnHealth(h, "", options).stop) << HealthName(h);
  }
  options.stop_on_health = {Health::kPlateaued};
  EXPECT_TRUE(ShouldStopOnHealth(Health::kPlateaued, "", options).stop);
  EXPECT_FALSE(ShouldStopOnHealth(Health::kDiverging, "", options).stop);
  options.stop_on_health.clear();
  EXPECT_FALSE(ShouldStopOnHealth(Health::kDiverging, "", options).stop);
}

}  // namespace
}  // namespace headway::hpo
