#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
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
  EXPECT_EQ(v.reason.rfind("loss 2.8e+03 is ", 0), 0u) << v.reason;
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

TEST(ClassifyHealth, ExplodingLossIsDiverging) {
  Fixture f;
  f.loss = {{1, 2.0}, {2, 1.2}, {3, 0.79}, {4, 0.8}, {5, 41.2}, {6, 41.2}, {7, 40.0}};
  HealthVerdict v = ClassifyHealth(f.Input());
  EXPECT_EQ(v.health, Health::kDiverging);
  EXPECT_EQ(v.reason, "loss 41.2 is 52.2x its minimum 0.79");
}

TEST(ClassifyHealth, ASingleLossSpikeIsNotDivergence) {
  Fixture f;
  f.loss = {{1, 2.0}, {2, 1.2}, {3, 0.79}, {4, 41.2}, {5, 0.8}};
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kProgressing);
  // Nor is a rise below the factor.
  f.loss = {{1, 2.0}, {2, 1.0}, {3, 5.0}, {4, 6.0}, {5, 7.0}};
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kProgressing);
}

TEST(ClassifyHealth, ExplosionIsMeasuredAgainstTheRunsMinimum) {
  // The tail alone rose only 5x, but the run's best (kept by the caller) was
  // far lower.
  Fixture f;
  f.loss = {{901, 1.0}, {902, 3.0}, {903, 5.0}, {904, 5.0}};
  HealthInput in = f.Input();
  EXPECT_EQ(ClassifyHealth(in).health, Health::kProgressing);
  in.first_loss = 9.0;
  in.min_loss = 0.2;
  HealthVerdict v = ClassifyHealth(in);
  EXPECT_EQ(v.health, Health::kDiverging);
  EXPECT_EQ(v.reason, "loss 5 is 25x its minimum 0.2");
}

TEST(ClassifyHealth, LossesNearZeroOrNegativeDoNotTripOnNoise) {
  Fixture f;
  // Converged to ~1e-6 from 2.0: 1e-4 is 100x the minimum but tiny on the
  // loss's own scale.
  f.loss = {{1, 2.0}, {2, 0.1}, {3, 1e-6}, {4, 1e-4}, {5, 1e-4}, {6, 1e-4}};
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kProgressing);
  // ...but back to the starting scale is divergence.
  f.loss = {{1, 2.0}, {2, 0.1}, {3, 1e-6}, {4, 1.0}, {5, 1.0}, {6, 1.0}};
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kDiverging);
  // Negative losses: from a minimum of -5, 3 is 8 above (< 9 x |min|), 60 is 65 above.
  f.loss = {{1, 0.0}, {2, -5.0}, {3, 3.0}, {4, 3.0}, {5, 3.0}};
  EXPECT_EQ(ClassifyHealth(f.Input()).health, Health::kProgressing);
  f.loss = {{1, 0.0}, {2, -5.0}, {3, 60.0}, {4, 60.0}, {5, 60.0}};
  HealthVerdict v = ClassifyHealth(f.Input());
  EXPECT_EQ(v.health, Health::kDiverging);
  EXPECT_EQ(v.reason, "loss 60 is 65 above its minimum -5");
}

HealthOptions PlateauAfter(std::int64_t window) {
  HealthOptions o;
  o.plateau_window_steps = window;
  return o;
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
  EXPECT_EQ(v.reason, "best loss improved <0.01% over the last 500 steps");
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

}  // namespace
}  // namespace headway::progress
