#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "progress/health.h"

namespace headway::progress {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Steps 1..n, one every `every_s` seconds after `start`.
std::vector<StepSample> Steps(int n, double every_s, double start = 1000) {
  std::vector<StepSample> v;
  for (int i = 1; i <= n; ++i) {
    v.push_back({i, start + every_s * i});
  }
  return v;
}

// A loss per step: 2.0 decaying towards 0.5.
std::vector<MetricSample> DecayingLoss(int n) {
  std::vector<MetricSample> v;
  for (int i = 1; i <= n; ++i) {
    v.push_back({i, 0.5 + 1.5 * std::exp(-i / 50.0)});
  }
  return v;
}

// A healthy running job: 100 steps, one a second, decaying loss; now is 1 s
// after the last report.
struct Fixture {
  std::vector<StepSample> steps = Steps(100, 1.0);
  std::vector<MetricSample> loss = DecayingLoss(100);
  HealthInput Input() const {
    HealthInput in;
    in.started_at_s = 1000;
    in.now_s = steps.empty() ? 1001 : steps.back().time_s + 1;
    in.steps = steps;
    in.loss = loss;
    in.objective = loss;
    in.objective_name = "loss";
    return in;
  }
};

TEST(HealthName, RoundTripsAndParsesCaseInsensitively) {
  for (Health h : {Health::kUnknown, Health::kProgressing, Health::kStalled, Health::kDiverging,
                   Health::kPlateaued}) {
    EXPECT_EQ(ParseHealth(HealthName(h)), h);
  }
  EXPECT_EQ(HealthName(Health::kPlateaued), "Plateaued");
  EXPECT_EQ(ParseHealth("stalled"), Health::kStalled);
  EXPECT_EQ(ParseHealth("DIVERGING"), Health::kDiverging);
  EXPECT_FALSE(ParseHealth("Stall"));
  EXPECT_FALSE(ParseHealth(""));
}

TEST(ClassifyHealth, HealthyJobIsProgressing) {
  Fixture f;
  HealthVerdict v = ClassifyHealth(f.Input());
  EXPECT_EQ(v.health, Health::kProgressing);
  EXPECT_EQ(v.reason, "step 100 reported 1.0s ago");
}

TEST(ClassifyHealth, UnknownBeforeFirstReportThenGraceReason) {
  Fixture f;
  f.steps.clear();
  f.loss.clear();
  HealthInput in = f.Input();
  in.now_s = in.started_at_s + 10;
  HealthVerdict v = ClassifyHealth(in);
  EXPECT_EQ(v.health, Health::kUnknown);
  EXPECT_EQ(v.reason, "waiting for first report");

  in.now_s = in.started_at_s + 300;
  v = ClassifyHealth(in);
  EXPECT_EQ(v.health, Health::kUnknown);
  EXPECT_EQ(v.reason, "no progress reported for 5m since start");

  in.now_s = in.started_at_s + 3 * 3600 + 120;
  EXPECT_EQ(ClassifyHealth(in).reason, "no progress reported for 3h2m since start");
}

TEST(ClassifyHealth, HangWhileAliveIsStalledAfterTheFloor) {
  Fixture f;  // a report every second: 10 x median = 10 s, floor 60 s
  HealthInput in = f.Input();
  in.now_s = f.steps.back().time_s + 30;
  EXPECT_EQ(ClassifyHealth(in).health, Health::kProgressing);
  in.now_s = f.steps.back().time_s + 59;
  EXPECT_EQ(ClassifyHealth(in).health, Health::kProgressing);
  in.now_s = f.steps.back().time_s + 12 * 60;
  HealthVerdict v = ClassifyHealth(in);
  EXPECT_EQ(v.health, Health::kStalled);
  EXPECT_EQ(v.reason, "no new step for 12m (median interval 1.0s)");
}

TEST(ClassifyHealth, StallThresholdScalesWithTheReportInterval) {
  Fixture f;
  f.steps = Steps(50, 20.0);  // a report every 20 s: stalled after 200 s
  HealthInput in = f.Input();
  in.now_s = f.steps.back().time_s + 150;
  EXPECT_EQ(ClassifyHealth(in).health, Health::kProgressing);
  in.now_s = f.steps.back().time_s + 250;
  HealthVerdict v = ClassifyHealth(in);
  EXPECT_EQ(v.health, Health::kStalled);
  EXPECT_NE(v.reason.find("(median interval 20s)"), std::string::npos) << v.reason;
}

TEST(ClassifyHealth, ARecurringLongPauseIsNotAStall) {
  Fixture f;
  // Reports every second, with a 5-minute eval after step 50.
  for (StepSample& s : f.steps) {
    if (s.step > 50) {
      s.time_s += 300;
    }
  }
  HealthInput in = f.Input();
  in.now_s = f.steps.back().time_s + 240;  // in the next eval
  EXPECT_EQ(ClassifyHealth(in).health, Health::kProgressing);
  in.now_s = f.steps.back().time_s + 600;  // twice as long as any eval seen
  EXPECT_EQ(ClassifyHealth(in).health, Health::kStalled);
}

TEST(ClassifyHealth, SingleReportUsesTheGracePeriod) {
  Fixture f;
  f.steps = {{1, 1010}};
  HealthInput in = f.Input();
  in.now_s = 1010 + 200;
  EXPECT_EQ(ClassifyHealth(in).health, Health::kProgressing);
  in.now_s = 1010 + 400;
  EXPECT_EQ(ClassifyHealth(in).health, Health::kStalled);
}

TEST(ClassifyHealth, NonFiniteLossIsDiverging) {
  Fixture f;
  f.loss.push_back({1200, kNaN});
  HealthVerdict v = ClassifyHealth(f.Input());
  EXPECT_EQ(v.health, Health::kDiverging);
  EXPECT_EQ(v.reason, "loss is NaN at step 1200");

  f.loss.back().value = kInf;
  EXPECT_EQ(ClassifyHealth(f.Input()).reason, "loss is inf at step 1200");
}

TEST(ClassifyHealth, FiniteLossAfterNaNClearsDivergence) {
  Fixture f;
  f.loss.push_back({101, kNaN});  // e.g. an fp16 overflow the loss scaler skipped
  f.loss.push_back({102, 0.51});
  HealthInput in = f.Input();
  in.any_non_finite_loss = true;
  EXPECT_EQ(ClassifyHealth(in).health, Health::kProgressing);
}

TEST(ClassifyHealth, AHugeLossRightAfterNaNStaysDiverging) {
  // NaN for three steps, then finite but 100x-plus the best: the median of the
  // newest three finite losses would still be the sound ones before the NaN.
  Fixture f;
  f.loss = DecayingLoss(24);
  for (int step = 25; step < 28; ++step) {
    f.loss.push_back({step, kNaN});
  }
  f.loss.push_back({28, 2800.0});
  HealthInput in = f.Input();
  in.any_non_finite_loss = true;
  HealthVerdict v = ClassifyHealth(in);
  EXPECT_EQ(v.health, Health::kDiverging);
  EXPECT_EQ(
      v.reason.rfind("loss held 2.8e+03 over the last 1 report, back at or above its starting "
                     "level",
                     0),
      0u)
      << v.reason;
  f.loss.push_back({29, 2900.0});
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kDiverging);
  // Two sound losses after the NaN clear it, as one does.
  f.loss.resize(27);
  f.loss.push_back({28, 0.52});
  f.loss.push_back({29, 0.51});
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kProgressing);
}

TEST(ClassifyHealth, NonFiniteFlagDecidesWhenNoLossIsKept) {
  Fixture f;
  f.loss.clear();
  HealthInput in = f.Input();
  EXPECT_EQ(ClassifyHealth(in).health, Health::kProgressing);
  in.any_non_finite_loss = true;
  EXPECT_EQ(ClassifyHealth(in).health, Health::kDiverging);
}

HealthOptions PlateauAfter(std::int64_t window) {
  HealthOptions o;
  o.plateau_window_steps = window;
  return o;
}

TEST(ClassifyHealth, ExplodingLossIsDiverging) {
  Fixture f;
  f.loss = {{1, 2.0}, {2, 1.2}, {3, 0.79}, {4, 0.8}, {5, 0.81}, {6, 41.2}, {7, 41.2}, {8, 40.0}};
  HealthVerdict v = ClassifyHealth(f.Input());
  EXPECT_EQ(v.health, Health::kDiverging);
  EXPECT_EQ(v.reason.rfind(
                "loss held 40 over the last 3 reports, back at or above its starting level", 0),
            0u)
      << v.reason;
  ASSERT_TRUE(v.evidence);
  EXPECT_DOUBLE_EQ(v.evidence->level, 40.0);
  EXPECT_DOUBLE_EQ(v.evidence->best, 0.81);  // the lowest level 3 reports in a row held
  EXPECT_EQ(v.evidence->best_step, 5);
  EXPECT_EQ(v.evidence->window_reports, 3);
  EXPECT_FALSE(v.immediate);
}

TEST(ClassifyHealth, ASingleLossSpikeIsNotDivergence) {
  Fixture f;
  f.loss = {{1, 2.0}, {2, 1.2}, {3, 0.79}, {4, 41.2}, {5, 0.8}};
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kProgressing);
  // Nor are two in a row.
  f.loss = {{1, 2.0}, {2, 1.2}, {3, 0.79}, {4, 0.8}, {5, 0.8}, {6, 41.2}, {7, 41.2}, {8, 0.8}};
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kProgressing);
}

TEST(ClassifyHealth, ASharpImprovementIsNotDivergence) {
  // 1.9 -> 1.8 -> 0.15: one low batch sets no best, so the older, higher
  // losses still held are not a rise above it.
  Fixture f;
  f.loss = {{1, 2.0}, {2, 1.95}, {3, 1.9}, {4, 1.8}, {5, 0.15}};
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kProgressing);
  f.loss.push_back({6, 0.16});
  f.loss.push_back({7, 0.14});
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kProgressing);
}

TEST(ClassifyHealth, NoisyConvergenceNearZeroIsNeverDiverging) {
  // Every classifier near convergence: decays to 0.05 with noise sd 0.03
  // (clipped at 0), 20 seeds, judged after every report.
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> noise(0, 0.03);
    Fixture f;
    f.steps = Steps(2000, 1.0);
    f.loss.clear();
    int alarms = 0;
    for (int i = 1; i <= 2000; ++i) {
      f.loss.push_back({i, std::max(0.0, 0.05 + 2.0 * std::exp(-i / 100.0) + noise(rng))});
      HealthInput in = f.Input();
      in.loss = std::span(f.loss).last(std::min<std::size_t>(512, f.loss.size()));
      alarms += ClassifyHealth(in).health == Health::kDiverging ? 1 : 0;
    }
    EXPECT_EQ(alarms, 0) << "seed " << seed;
  }
}

TEST(ClassifyHealth, ACollapseToUniformIsDivergingThoughUnder10xItsBest) {
  // A language model (vocabulary 50k) that learned to 3.2 and collapses to
  // ln 50000 = 10.8: 3.4x its best, which a 10x rule never flags.
  Fixture f;
  f.loss.clear();
  for (int i = 1; i <= 60; ++i) f.loss.push_back({i, 3.2 + 7.6 * std::exp(-i / 10.0)});
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kProgressing);
  for (int i = 61; i <= 64; ++i) f.loss.push_back({i, 10.8});
  HealthVerdict v = ClassifyHealth(f.Input());
  EXPECT_EQ(v.health, Health::kDiverging);
  EXPECT_NE(v.reason.find("back at or above its starting level"), std::string::npos) << v.reason;
}

TEST(ClassifyHealth, ARunBadFromItsFirstReportIsDiverging) {
  // QLoRA at lr 5: 1.64 -> 10.37 and stays there; no earlier minimum to
  // compare with but its own start.
  Fixture f;
  f.loss = {{10, 1.64}, {20, 1.7}, {30, 1.66}, {40, 4.1}, {50, 9.8}, {60, 10.37}, {70, 10.2}};
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kDiverging);
}

TEST(ClassifyHealth, TheRunsHistoryGivesTheBestATailNoLongerHolds) {
  // The tail alone rose from 1.0 to 5, but the run (kept by the caller)
  // had come down from 9 to 0.2.
  Fixture f;
  f.loss = {{901, 1.0}, {902, 3.0}, {903, 5.0}, {904, 5.0}, {905, 5.0}};
  HealthInput in = f.Input();
  LossHistory history;
  for (int i = 1; i <= 900; ++i) history.Add(i, 0.2 + 8.8 * std::exp(-i / 50.0));
  in.loss_history = &history;
  HealthVerdict v = ClassifyHealth(in);
  EXPECT_EQ(v.health, Health::kDiverging);
  ASSERT_TRUE(v.evidence);
  EXPECT_NEAR(v.evidence->best, 0.2, 1e-3);
}

TEST(ClassifyHealth, LossesNearZeroOrNegativeAreJudgedOnTheirOwnScale) {
  Fixture f;
  // Converged to ~1e-6 from 2.0: 1e-4 is 100x the minimum but tiny on the
  // scale of what the run learned.
  f.loss = {{1, 2.0}, {2, 0.1}, {3, 1e-6}, {4, 1e-6}, {5, 1e-6}, {6, 1e-4}, {7, 1e-4}, {8, 1e-4}};
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kProgressing);
  // ...but back to the starting scale is divergence.
  f.loss = {{1, 2.0}, {2, 0.1}, {3, 1e-6}, {4, 1e-6}, {5, 1e-6}, {6, 1.0}, {7, 1.0}, {8, 1.0}};
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kDiverging);
  // Negative losses (an ELBO, say): a rise of 0.5 from -5 after coming down
  // from 0 is within range; back to 0 is not.
  f.loss = {{1, 0.0}, {2, -5.0}, {3, -5.0}, {4, -5.0}, {5, -4.5}, {6, -4.5}, {7, -4.5}};
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kProgressing);
  f.loss = {{1, 0.0}, {2, -5.0}, {3, -5.0}, {4, -5.0}, {5, 0.0}, {6, 0.0}, {7, 0.0}};
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kDiverging);
}

TEST(ClassifyHealth, AJobWithoutALossIsJudgedOnItsObjectiveTheRightWayRound) {
  // An RL job reporting only its reward: it learns to 200, then collapses.
  Fixture f;
  f.loss.clear();
  std::vector<MetricSample> reward;
  for (int i = 1; i <= 100; ++i) reward.push_back({i, 200.0 - 190.0 * std::exp(-i / 20.0)});
  HealthInput in = f.Input();
  in.objective = reward;
  in.objective_name = "reward";
  in.objective_goal = GoalOfMetric("reward");
  EXPECT_EQ(ClassifyHealth(in).health, Health::kProgressing) << "a rising reward is progress";
  for (int i = 101; i <= 104; ++i) reward.push_back({i, 15.0});
  in.objective = reward;
  HealthVerdict v = ClassifyHealth(in);
  EXPECT_EQ(v.health, Health::kDiverging);
  EXPECT_EQ(v.reason.rfind("reward held 15 over the last 3 reports, back at or below its starting "
                           "level",
                           0),
            0u)
      << v.reason;
}

TEST(ClassifyHealth, ANaNObjectiveOfAJobWithoutALossIsDivergingAtOnce) {
  Fixture f;
  f.loss.clear();
  std::vector<MetricSample> eval = {{327, 0.98}, {654, 0.955}, {981, kNaN}};
  HealthInput in = f.Input();
  in.objective = eval;
  in.eval_loss = eval;
  in.objective_name = "eval_loss";
  HealthVerdict v = ClassifyHealth(in);
  EXPECT_EQ(v.health, Health::kDiverging);
  EXPECT_TRUE(v.immediate);
  EXPECT_EQ(v.reason, "eval_loss is NaN at step 981");
}

TEST(ClassifyHealth, HuggingFacesNaNSignatureIsDivergingAtOnce) {
  // The Trainer logs a window of NaN losses as loss 0.0 with grad_norm NaN.
  Fixture f;
  std::vector<MetricSample> grad;
  for (const MetricSample& s : f.loss) grad.push_back({s.step, 3.0});
  f.loss.push_back({101, 0.0});
  grad.push_back({101, kNaN});
  HealthInput in = f.Input();
  in.grad_norm = grad;
  HealthVerdict v = ClassifyHealth(in);
  EXPECT_EQ(v.health, Health::kDiverging);
  EXPECT_TRUE(v.immediate);
  EXPECT_EQ(v.reason, "loss 0 with a non-finite grad_norm at step 101");
  // A converged classifier's loss of 0.0 with a finite grad_norm is no NaN.
  grad.back().value = 1e-5;
  EXPECT_EQ(ClassifyHealth(in).health, Health::kProgressing);
}

TEST(ClassifyHealth, ASkippedFp16StepIsNotDivergingButALastingNaNGradientIs) {
  Fixture f;
  std::vector<MetricSample> grad;
  for (const MetricSample& s : f.loss) grad.push_back({s.step, 3.0});
  grad[50].value = kNaN;  // the loss scaler skipped one step
  grad[51].value = kInf;
  HealthInput in = f.Input();
  in.grad_norm = grad;
  EXPECT_EQ(ClassifyHealth(in).health, Health::kProgressing);
  for (std::size_t i = grad.size() - 8; i < grad.size(); ++i) grad[i].value = kNaN;
  HealthVerdict v = ClassifyHealth(in);
  EXPECT_EQ(v.health, Health::kDiverging);
  EXPECT_EQ(v.reason, "grad_norm non-finite in each of the last 8 reports (since step 93)");
}

// Train loss falling throughout; eval_loss every 100 steps, best at 400.
struct OverfitFixture : Fixture {
  std::vector<MetricSample> eval;
  OverfitFixture() {
    steps = Steps(1000, 1.0);
    loss.clear();
    for (int i = 1; i <= 1000; ++i) loss.push_back({i, 0.1 + 2.0 * std::exp(-i / 200.0)});
    for (int i = 100; i <= 1000; i += 100) {
      eval.push_back({i, 0.6 + 0.0000025 * (i - 400) * (i - 400)});
    }
  }
  HealthInput Input() const {
    HealthInput in = Fixture::Input();
    in.eval_loss = eval;
    in.objective = eval;
    in.objective_name = "eval_loss";
    return in;
  }
};

TEST(ClassifyHealth, EvalLossRisingWhileTrainingLossFallsIsOverfitting) {
  OverfitFixture f;
  HealthVerdict v = ClassifyHealth(f.Input());
  EXPECT_EQ(v.health, Health::kOverfitting);
  EXPECT_NE(v.reason.find("best checkpoint is step 400"), std::string::npos) << v.reason;
  ASSERT_TRUE(v.evidence);
  EXPECT_EQ(v.evidence->best_step, 400);
  EXPECT_EQ(v.evidence->series, "eval_loss");
  // Overfitting wins over the plateau its objective also shows.
  EXPECT_EQ(ClassifyHealth(f.Input(), PlateauAfter(300)).health, Health::kOverfitting);
}

TEST(ClassifyHealth, EvalLossRisingWithTheTrainingLossIsNotOverfitting) {
  OverfitFixture f;
  for (auto& s : f.loss) {
    if (s.step > 400) s.value = 0.1 + 2.0 * std::exp(-400 / 200.0) + 0.0001 * (s.step - 400);
  }
  EXPECT_NE(ClassifyHealth(f.Input()).health, Health::kOverfitting);
  // Nor is one evaluation up: it takes two.
  OverfitFixture g;
  g.eval.resize(6);  // up to step 600: the best at 400, then 500 and 600 above it
  g.eval.push_back({700, 0.55});
  EXPECT_EQ(ClassifyHealth(g.Input()).health, Health::kProgressing);
}

TEST(ClassifyHealth, ASmallNoisyEvaluationSetSwingingIsNotOverfitting) {
  // A tiny evaluation set (hf_bert_subjectivity_lowlr): eval_loss swings 30%
  // between evaluations while the training loss falls. The two newest
  // evaluations disagree by far more than they sit above the best.
  OverfitFixture f;
  f.eval = {{100, 0.726}, {200, 0.951}, {300, 0.738}};
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kProgressing);
  // The same three evaluations agreeing on a rise are one.
  f.eval = {{100, 0.726}, {200, 0.951}, {300, 0.94}};
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kOverfitting);
  // A flat eval_loss with 6% noise (hf_serverlog) read over 9 evaluations:
  // its noise is estimated from them and a 2% bump is inside it.
  f.eval = {{100, 0.201},  {200, 0.171},  {300, 0.135},  {400, 0.094}, {500, 0.065},
            {600, 0.0292}, {700, 0.0310}, {800, 0.0298}, {900, 0.0316}};
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kProgressing);
}

TEST(GoalOfMetric, MetricsThatRiseAreMaximised) {
  for (const char* name :
       {"accuracy", "eval_accuracy", "val_acc", "f1", "eval_bleu", "rougeL", "reward",
        "episode_return", "auc", "mAP", "iou", "eval_answer_accuracy", "f1_score", "eval/rouge2"}) {
    EXPECT_EQ(GoalOfMetric(name), Goal::kMaximize) << name;
  }
  for (const char* name : {"loss", "eval_loss", "val_loss", "perplexity", "wer", "error_rate",
                           "mse", "whatever", "eval_mape", "train/nll", "power"}) {
    EXPECT_EQ(GoalOfMetric(name), Goal::kMinimize) << name;
  }
}

TEST(LossHistory, KeepsTheStartAndTheBestLevelHeldInO1) {
  LossHistory h;
  EXPECT_FALSE(h.start());
  h.Add(1, 5.0);
  h.Add(2, 4.0);
  EXPECT_FALSE(h.best());
  h.Add(3, 4.5);
  EXPECT_EQ(h.start(), 5.0);  // where it began
  EXPECT_EQ(h.best(), 5.0);
  h.Add(4, 0.1);  // one low batch: held by none of the windows
  EXPECT_EQ(h.best(), 4.5);
  h.Add(5, 1.0);
  h.Add(6, 1.1);
  EXPECT_EQ(h.best(), 1.1);
  EXPECT_EQ(h.best_step(), 6);
  h.Add(6, 0.0);   // not newer: ignored
  h.Add(7, kNaN);  // not finite: ignored
  EXPECT_EQ(h.count(), 6);
}

TEST(ClassifyHealth, FlatObjectiveIsPlateaued) {
  Fixture f;
  f.steps = Steps(1000, 1.0);
  f.loss.clear();
  for (int i = 1; i <= 1000; ++i) {
    // Improving until step 400, then flat with noise that never beats the best.
    double v = i <= 400 ? 2.0 - i / 400.0 : 1.0 + 0.01 * ((i * 37) % 11) / 11.0;
    f.loss.push_back({i, v});
  }
  HealthVerdict v = ClassifyHealth(f.Input(), PlateauAfter(500));
  EXPECT_EQ(v.health, Health::kPlateaued);
  EXPECT_EQ(v.reason,
            "best loss 1.01 over the last 500 steps improved on 1 (step 400) by less than 0.001");
  // Off by default.
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kProgressing);
}

TEST(ClassifyHealth, ImprovingObjectiveIsNotPlateaued) {
  Fixture f;
  f.steps = Steps(1000, 1.0);
  f.loss.clear();
  // Slow but steady: 0.1% better every 100 steps.
  for (int i = 1; i <= 1000; ++i) {
    f.loss.push_back({i, std::pow(0.999, i / 100.0)});
  }
  EXPECT_EQ(ClassifyHealth(f.Input(), PlateauAfter(500)).health, Health::kProgressing);
}

TEST(ClassifyHealth, PlateauFollowsTheGoal) {
  Fixture f;
  f.steps = Steps(1000, 1.0);
  std::vector<MetricSample> accuracy;
  for (int i = 1; i <= 1000; ++i) {
    accuracy.push_back({i, 0.5 + 0.4 * i / 1000.0});
  }
  HealthInput in = f.Input();
  in.objective = accuracy;
  in.objective_name = "accuracy";
  in.objective_goal = Goal::kMaximize;
  EXPECT_EQ(ClassifyHealth(in, PlateauAfter(500)).health, Health::kProgressing);
  // Rising accuracy is a plateau when the goal is to minimise it.
  in.objective_goal = Goal::kMinimize;
  HealthVerdict v = ClassifyHealth(in, PlateauAfter(500));
  EXPECT_EQ(v.health, Health::kPlateaued);
  EXPECT_EQ(v.reason.rfind("best accuracy", 0), 0u) << v.reason;
}

TEST(ClassifyHealth, NoPlateauVerdictBeforeTheWindowIsCovered) {
  Fixture f;  // 100 steps of history, flat objective
  f.loss.assign(100, {0, 1.0});
  for (int i = 0; i < 100; ++i) {
    f.loss[static_cast<std::size_t>(i)].step = i + 1;
  }
  EXPECT_EQ(ClassifyHealth(f.Input(), PlateauAfter(500)).health, Health::kProgressing);
  EXPECT_EQ(ClassifyHealth(f.Input(), PlateauAfter(50)).health, Health::kPlateaued);
}

TEST(ClassifyHealth, PrecedenceDivergingStalledPlateaued) {
  Fixture f;
  f.loss.assign(100, {0, 1.0});  // flat: plateaued with a 50-step window
  for (int i = 0; i < 100; ++i) {
    f.loss[static_cast<std::size_t>(i)].step = i + 1;
  }
  HealthOptions o = PlateauAfter(50);
  HealthInput in = f.Input();
  EXPECT_EQ(ClassifyHealth(in, o).health, Health::kPlateaued);
  // Stalled beats Plateaued.
  in.now_s = f.steps.back().time_s + 3600;
  EXPECT_EQ(ClassifyHealth(in, o).health, Health::kStalled);
  // Diverging beats Stalled.
  f.loss.push_back({101, kNaN});
  in.loss = f.loss;
  EXPECT_EQ(ClassifyHealth(in, o).health, Health::kDiverging);
  // Unknown (no step yet) beats everything.
  in.steps = {};
  EXPECT_EQ(ClassifyHealth(in, o).health, Health::kUnknown);
}

TEST(ClassifyHealth, ANoisyFlatObjectiveIsPlateauedAndANoisyImprovingOneIsNot) {
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 0.05);
  Fixture flat, improving;
  flat.steps = improving.steps = Steps(1000, 1.0);
  flat.loss.clear();
  improving.loss.clear();
  for (int i = 1; i <= 1000; ++i) {
    flat.loss.push_back({i, 1.386 + noise(rng)});  // stuck at ln 4
    improving.loss.push_back({i, 1.0 - 0.0004 * i + noise(rng)});
  }
  EXPECT_EQ(ClassifyHealth(flat.Input(), PlateauAfter(250)).health, Health::kPlateaued);
  EXPECT_EQ(ClassifyHealth(improving.Input(), PlateauAfter(250)).health, Health::kProgressing);
}

TEST(ClassifyHealth, StalenessIsMeasuredByTheServersClock) {
  // The client's clock is 10 minutes behind: by its timestamps the job
  // looks silent for 10 minutes, but its last report arrived 1 s ago.
  Fixture f;
  HealthInput in = f.Input();
  in.now_s += 600;
  in.last_report_age_s = 1;
  EXPECT_EQ(ClassifyHealth(in).health, Health::kProgressing);
  EXPECT_EQ(ClassifyHealth(in).reason, "step 100 reported 1.0s ago");
  // A year ahead: its timestamps say it reported in the future, but nothing
  // arrived for 12 minutes.
  in = f.Input();
  in.now_s -= 365 * 86400.0;
  in.last_report_age_s = 720;
  EXPECT_EQ(ClassifyHealth(in).health, Health::kStalled);
}

HealthVerdict Raw(Health h, bool immediate = false) {
  return {h, std::string(HealthName(h)), immediate, std::nullopt};
}

TEST(HealthConfirmation, AVerdictIsEnteredOnlyAfterReportsAndTime) {
  HealthConfirmation c;
  EXPECT_EQ(c.Update(Raw(Health::kProgressing), 1, 0).health, Health::kProgressing);
  // Diverging said by one report: not yet.
  EXPECT_EQ(c.Update(Raw(Health::kDiverging), 2, 10).health, Health::kProgressing);
  // Asked again before the next report: still one report.
  EXPECT_EQ(c.Update(Raw(Health::kDiverging), 2, 45).health, Health::kProgressing);
  // Two reports, but only 15 s: not yet either.
  EXPECT_EQ(c.Update(Raw(Health::kDiverging), 3, 25).health, Health::kProgressing);
  EXPECT_EQ(c.Update(Raw(Health::kDiverging), 3, 40).health, Health::kDiverging);
}

TEST(HealthConfirmation, OneGoodReportDoesNotClearAnAlarm) {
  HealthConfirmation c;
  c.Update(Raw(Health::kProgressing), 1, 0);
  c.Update(Raw(Health::kDiverging, true), 2, 1);
  EXPECT_EQ(c.confirmed().health, Health::kDiverging) << "NaN enters at once";
  // Progressing for 4 reports over 100 s, then Diverging again: it stays.
  for (std::uint64_t r = 3; r <= 6; ++r) {
    EXPECT_EQ(c.Update(Raw(Health::kProgressing), r, 25.0 * static_cast<double>(r)).health,
              Health::kDiverging);
  }
  EXPECT_EQ(c.Update(Raw(Health::kDiverging), 7, 200).health, Health::kDiverging);
  // Leaving takes 5 reports and 60 s.
  for (std::uint64_t r = 8; r <= 11; ++r) {
    EXPECT_EQ(
        c.Update(Raw(Health::kProgressing), r, 200 + 30.0 * static_cast<double>(r - 7)).health,
        Health::kDiverging);
  }
  EXPECT_EQ(c.Update(Raw(Health::kProgressing), 12, 350).health, Health::kProgressing);
}

TEST(HealthConfirmation, AFlickeringRawVerdictNeverFlipsTheConfirmedOne) {
  HealthConfirmation c;
  c.Update(Raw(Health::kProgressing), 1, 0);
  int changes = 0;
  Health last = Health::kProgressing;
  for (std::uint64_t r = 2; r < 200; ++r) {
    Health raw = r % 2 == 0 ? Health::kPlateaued : Health::kProgressing;
    Health now = c.Update(Raw(raw), r, 60.0 * static_cast<double>(r)).health;
    changes += now != last ? 1 : 0;
    last = now;
  }
  EXPECT_EQ(changes, 0);
}

TEST(HealthConfirmation, StallsAreTheirOwnConfirmation) {
  HealthConfirmation c;
  c.Update(Raw(Health::kProgressing), 1, 0);
  EXPECT_EQ(c.Update(Raw(Health::kStalled), 1, 600).health, Health::kStalled);
  // A report came: no longer stalled.
  EXPECT_EQ(c.Update(Raw(Health::kProgressing), 2, 601).health, Health::kProgressing);
}

TEST(HealthConfirmation, AConfirmedVerdictTakesTheNewestEvidence) {
  HealthConfirmation c;
  c.Update(Raw(Health::kProgressing), 1, 0);
  HealthVerdict newer{Health::kProgressing, "step 2 reported 0.0s ago", false, std::nullopt};
  EXPECT_EQ(c.Update(newer, 2, 1).reason, "step 2 reported 0.0s ago");
}

}  // namespace
}  // namespace headway::progress
