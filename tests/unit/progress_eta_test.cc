#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "progress/eta.h"

namespace headway::progress {
namespace {

// A synthetic job: step k takes StepTime(k) seconds; reports every step.
struct Job {
  double step_s = 0.25;
  double jitter = 0.05;         // deterministic +-jitter pattern
  double compile_s = 0;         // extra time of step 1
  std::int64_t ramp_steps = 0;  // warm-up: 3x slower decaying to 1x
  std::int64_t eval_every = 0;  // a pause after every N steps...
  double eval_s = 0;            // ...this long
  std::int64_t change_at = 0;   // after this step, step time is...
  double change_to = 0;         // ...this (0: no change)

  double StepTime(std::int64_t k) const {
    double base = change_at > 0 && k > change_at ? change_to : step_s;
    // A fixed pseudo-random pattern in [-1, 1] (no RNG: exact across platforms).
    double noise = static_cast<double>((k * 7919) % 201 - 100) / 100.0;
    double t = base * (1 + jitter * noise);
    if (k <= ramp_steps) {
      t *= 1 + 2 * (1 - static_cast<double>(k - 1) / static_cast<double>(ramp_steps));
    }
    if (k == 1) {
      t += compile_s;
    }
    if (eval_every > 0 && k > 1 && (k - 1) % eval_every == 0) {
      t += eval_s;
    }
    return t;
  }

  // Samples for steps 0..last (step 0 at time 0).
  std::vector<StepSample> Series(std::int64_t last) const {
    std::vector<StepSample> v{{0, 0.0}};
    double t = 0;
    for (std::int64_t k = 1; k <= last; ++k) {
      t += StepTime(k);
      v.push_back({k, t});
    }
    return v;
  }

  // True seconds from step `from` to step `to`.
  double Remaining(std::int64_t from, std::int64_t to) const {
    double t = 0;
    for (std::int64_t k = from + 1; k <= to; ++k) {
      t += StepTime(k);
    }
    return t;
  }
};

double RelativeError(const EtaEstimate& e, double truth) {
  EXPECT_TRUE(e.eta_seconds.has_value());
  return e.eta_seconds ? std::abs(*e.eta_seconds - truth) / truth : INFINITY;
}

TEST(EstimateEta, NoEstimateWithFewerThanTwoSamples) {
  std::vector<StepSample> none;
  EXPECT_FALSE(EstimateEta(none, 100, 0).eta_seconds);
  std::vector<StepSample> one{{10, 5.0}};
  EtaEstimate e = EstimateEta(one, 100, 6);
  EXPECT_FALSE(e.eta_seconds);
  EXPECT_EQ(e.steps_per_second, 0);
  EXPECT_FALSE(EstimateEtaAverage(one, 100, 6).eta_seconds);
  EXPECT_FALSE(EstimateEtaEma(one, 100, 6).eta_seconds);
}

TEST(EstimateEta, NoEstimateWithoutTotalButRateIsKnown) {
  std::vector<StepSample> v = Job{.step_s = 0.5, .jitter = 0}.Series(100);
  for (std::int64_t total : {0, -1}) {
    EtaEstimate e = EstimateEta(v, total, v.back().time_s);
    EXPECT_FALSE(e.eta_seconds);
    EXPECT_NEAR(e.steps_per_second, 2.0, 1e-9);
  }
}

TEST(EstimateEta, NoEstimateWithoutMovement) {
  std::vector<StepSample> v{{1, 10.0}, {2, 10.0}, {3, 10.0}};
  EXPECT_FALSE(EstimateEta(v, 100, 11).eta_seconds);
  std::vector<StepSample> backwards{{1, 10.0}, {2, 9.0}, {3, 8.0}};
  EXPECT_FALSE(EstimateEta(backwards, 100, 11).eta_seconds);
}

TEST(EstimateEta, ConvergesOnConstantSpeed) {
  Job job{.step_s = 0.5, .jitter = 0.1};
  for (std::int64_t at : {50, 200, 1000, 5000}) {
    std::vector<StepSample> v = job.Series(at);
    EtaEstimate e = EstimateEta(v, 10000, v.back().time_s);
    EXPECT_LT(RelativeError(e, job.Remaining(at, 10000)), 0.02) << "at step " << at;
    EXPECT_NEAR(e.steps_per_second, 2.0, 0.05);
  }
}

TEST(EstimateEta, FinishedJobHasZeroEta) {
  std::vector<StepSample> v = Job{}.Series(100);
  EXPECT_EQ(EstimateEta(v, 100, v.back().time_s).eta_seconds, 0.0);
  EXPECT_EQ(EstimateEta(v, 50, v.back().time_s).eta_seconds, 0.0);
}

TEST(EstimateEta, WarmupDoesNotInflateEtaOnceSteady) {
  Job job{.step_s = 0.25, .compile_s = 30, .ramp_steps = 60};
  std::vector<StepSample> v = job.Series(1000);
  double truth = job.Remaining(1000, 5000);  // about 1000 s
  EtaEstimate headway = EstimateEta(v, 5000, v.back().time_s);
  EXPECT_LT(RelativeError(headway, truth), 0.01);
  // The average still carries the warm-up: about 15% too long here.
  EXPECT_GT(RelativeError(EstimateEtaAverage(v, 5000, v.back().time_s), truth), 0.1);
}

TEST(EstimateEta, ACoarseSeriesWhoseSpeedSettlesSlowlyIsFollowedWithinAFewReports) {
  // One report per 1000 iterations, as MLPerf's DLRM log has
  // (bench/data/eta-logs): the first reports up to 1.7x slower, settling to
  // the steady speed over 13 of them, too gradually for the warm-up rule.
  auto seconds_of_report = [](int r) {
    double settling = r <= 13 ? 1 + 0.7 * (13 - r) / 12.0 : 1.0;
    return 2.4 * settling * (1 + 0.01 * ((r * 37) % 5 - 2));
  };
  std::vector<StepSample> v{{0, 0.0}};
  double t = 0;
  for (int r = 1; r <= 30; ++r) {
    t += seconds_of_report(r);
    v.push_back({r * 1000, t});
  }
  double truth = 0;
  for (int r = 31; r <= 68; ++r) truth += seconds_of_report(r);
  EXPECT_LT(RelativeError(EstimateEta(v, 68000, t), truth), 0.03);
  // The whole window still carries the settling.
  EtaOptions whole_window;
  whole_window.backtest_margin = 0;
  EXPECT_GT(RelativeError(EstimateEta(v, 68000, t, whole_window), truth), 0.06);
}

TEST(EstimateEta, EvalPauseIsAmortisedNotExtrapolated) {
  Job job{.step_s = 0.2, .eval_every = 500, .eval_s = 20};
  // Right after a pause (step 1501 closed the 20 s gap), between pauses, and
  // right before one.
  for (std::int64_t at : {1501, 1750, 1999, 3200}) {
    std::vector<StepSample> v = job.Series(at);
    double truth = job.Remaining(at, 5000);
    EtaEstimate e = EstimateEta(v, 5000, v.back().time_s);
    EXPECT_LT(RelativeError(e, truth), 0.02) << "at step " << at;
    // The rate is the training speed, pauses excluded.
    EXPECT_NEAR(e.steps_per_second, 5.0, 0.1);
  }
  // tqdm's EMA extrapolates the pause as the new speed.
  std::vector<StepSample> v = job.Series(1501);
  EXPECT_GT(RelativeError(EstimateEtaEma(v, 5000, v.back().time_s), job.Remaining(1501, 5000)),
            1.0);
}

TEST(EstimateEta, SpeedChangeConvergesWithinBoundedSamples) {
  // Halfway the job slows down 2x, or speeds up 2x.
  for (double to : {0.4, 0.1}) {
    Job job{.step_s = 0.2, .change_at = 2000, .change_to = to};
    // Within 32 reports of the change the ETA is within 5% of the truth...
    std::vector<StepSample> v = job.Series(2032);
    EtaEstimate e = EstimateEta(v, 4000, v.back().time_s);
    EXPECT_LT(RelativeError(e, job.Remaining(2032, 4000)), 0.05) << "to " << to;
    EXPECT_NEAR(e.steps_per_second, 1 / to, 0.05 / to);
    // ...and stays there.
    for (std::int64_t at : {2100, 2500, 3500}) {
      v = job.Series(at);
      EXPECT_LT(RelativeError(EstimateEta(v, 4000, v.back().time_s), job.Remaining(at, 4000)), 0.02)
          << "to " << to << " at " << at;
    }
  }
}

TEST(EstimateEta, SmallSpeedChangeIsFollowedByTheWindow) {
  // A 10% change is below change_ratio: the rate follows as the window slides.
  Job job{.step_s = 0.2, .jitter = 0.02, .change_at = 1000, .change_to = 0.22};
  EtaOptions options;
  options.rate_window = 200;
  std::vector<StepSample> v = job.Series(1200);
  EtaEstimate e = EstimateEta(v, 4000, v.back().time_s, options);
  EXPECT_LT(RelativeError(e, job.Remaining(1200, 4000)), 0.01);
}

TEST(EstimateEta, CountsDownBetweenReportsButHoldsWhenSilent) {
  Job job{.step_s = 10, .jitter = 0};  // a report every 10 s
  std::vector<StepSample> v = job.Series(100);
  double at_report = *EstimateEta(v, 200, v.back().time_s).eta_seconds;
  EXPECT_NEAR(at_report, 1000, 1e-6);
  EXPECT_NEAR(*EstimateEta(v, 200, v.back().time_s + 4).eta_seconds, 996, 1e-6);
  // Silent for an hour: the job is late, not done; at most one interval is credited.
  EXPECT_NEAR(*EstimateEta(v, 200, v.back().time_s + 3600).eta_seconds, 990, 1e-6);
  // A clock behind the last sample does not add time.
  EXPECT_NEAR(*EstimateEta(v, 200, v.back().time_s - 50).eta_seconds, 1000, 1e-6);
}

TEST(EstimateEta, BatchedReportsSharingATimestampAreMerged) {
  // Ten steps per batch (steps 10b+1..10b+10), every report of a batch
  // stamped with the time it was sent, just after its last step.
  std::vector<StepSample> v{{0, 0.0}};
  for (std::int64_t k = 1; k <= 1000; ++k) {
    const std::int64_t batch = (k + 9) / 10;  // 1 for steps 1..10
    v.push_back({k, 2.5 * static_cast<double>(batch)});
  }
  EtaEstimate e = EstimateEta(v, 2000, v.back().time_s);
  EXPECT_NEAR(e.steps_per_second, 4.0, 1e-9);
  EXPECT_NEAR(*e.eta_seconds, 250, 1e-6);
}

TEST(EstimateEta, SparseReportsWithPeriodicPauses) {
  // A report every 10 steps, a 60 s eval after every 1000.
  Job job{.step_s = 0.2, .eval_every = 1000, .eval_s = 60};
  std::vector<StepSample> dense = job.Series(12000);
  std::vector<StepSample> v;
  for (const StepSample& s : dense) {
    if (s.step % 10 == 0) {
      v.push_back(s);
    }
  }
  EtaEstimate e = EstimateEta(v, 20000, v.back().time_s);
  EXPECT_LT(RelativeError(e, job.Remaining(12000, 20000)), 0.02);
}

TEST(EstimateEta, ReadsOnlyTheBoundedTail) {
  // 1M samples; the first 900k at another speed. Only the last max_samples
  // matter, so the answer equals the one for the tail alone.
  std::vector<StepSample> v;
  v.reserve(1'000'000);
  double t = 0;
  for (std::int64_t k = 0; k < 1'000'000; ++k) {
    t += k < 900'000 ? 1.0 : 0.1 * (1 + 0.01 * static_cast<double>(k % 7));
    v.push_back({k, t});
  }
  EtaOptions options;
  std::span<const StepSample> all(v);
  EtaEstimate full = EstimateEta(all, 2'000'000, t, options);
  EtaEstimate tail = EstimateEta(all.subspan(all.size() - options.max_samples), 2'000'000, t);
  ASSERT_TRUE(full.eta_seconds);
  EXPECT_EQ(*full.eta_seconds, *tail.eta_seconds);
  EXPECT_NEAR(full.steps_per_second, 1 / 0.103, 0.1);
}

TEST(EstimateEta, MalformedInputGivesADefinedAnswer) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<StepSample> v{{0, 0}, {1, nan}, {2, 2}, {1, 3}, {3, 3}, {4, 4}, {5, 5}};
  EtaEstimate e = EstimateEta(v, 10, 5);
  ASSERT_TRUE(e.eta_seconds);
  EXPECT_NEAR(*e.eta_seconds, 5, 1e-9);
  EXPECT_NEAR(e.steps_per_second, 1, 1e-9);
}

TEST(EstimateEtaAverage, IsTheMeanStepTimeSinceTheFirstSample) {
  std::vector<StepSample> v{{10, 100}, {20, 110}, {30, 150}};  // 50 s for 20 steps
  EtaEstimate e = EstimateEtaAverage(v, 130, 150);
  EXPECT_NEAR(*e.eta_seconds, 250, 1e-9);
  EXPECT_NEAR(e.steps_per_second, 0.4, 1e-12);
  EXPECT_NEAR(*EstimateEtaAverage(v, 130, 160).eta_seconds, 240, 1e-9);
}

TEST(EstimateEtaEma, WeighsRecentIntervalsLikeTqdm) {
  // 100 intervals at 1 s/step then 10 at 2 s/step: with smoothing 0.3 the
  // rate is almost the new one; smoothing 0 is the plain average.
  std::vector<StepSample> v{{0, 0}};
  for (int i = 1; i <= 110; ++i) {
    v.push_back({i, v.back().time_s + (i <= 100 ? 1.0 : 2.0)});
  }
  EtaEstimate ema = EstimateEtaEma(v, 210, v.back().time_s);
  EXPECT_NEAR(ema.steps_per_second, 0.5, 0.02);
  EtaEstimate avg = EstimateEtaEma(v, 210, v.back().time_s, 0);
  EXPECT_NEAR(avg.steps_per_second, 110.0 / 120.0, 1e-9);
}

TEST(PercentComplete, StepsThenEpochs) {
  EXPECT_DOUBLE_EQ(*PercentComplete(250, 1000, 3.0, 4.0), 25);
  // No total steps (or 0): epochs.
  EXPECT_DOUBLE_EQ(*PercentComplete(250, std::nullopt, 3.0, 4.0), 75);
  EXPECT_DOUBLE_EQ(*PercentComplete(250, 0, 3.0, 4.0), 75);
  // Nothing usable.
  EXPECT_FALSE(PercentComplete(250, std::nullopt, 3.0, std::nullopt));
  EXPECT_FALSE(PercentComplete(std::nullopt, std::nullopt, std::nullopt, 0.0));
  EXPECT_FALSE(PercentComplete(std::nullopt, 1000, std::nullopt, std::nullopt));
}

TEST(PercentComplete, ClampedAndNonFiniteIgnored) {
  EXPECT_DOUBLE_EQ(*PercentComplete(1200, 1000, std::nullopt, std::nullopt), 100);
  EXPECT_DOUBLE_EQ(*PercentComplete(-5, 1000, std::nullopt, std::nullopt), 0);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(PercentComplete(std::nullopt, std::nullopt, nan, 4.0));
}

TEST(ChooseEta, PrefersHeadwaysEstimateOnlyOnceItHasEnoughReports) {
  EXPECT_EQ(ChooseEta(100.0, 3, 500.0, 10.0, 15.0), 495.0);
  EXPECT_EQ(ChooseEta(100.0, kMinOwnEtaSamples, 500.0, 10.0, 15.0), 100.0);
  EXPECT_EQ(ChooseEta(std::nullopt, 50, 500.0, 10.0, 10.0), 500.0);
  EXPECT_EQ(ChooseEta(100.0, 1, std::nullopt, 0.0, 10.0), 100.0);
  EXPECT_EQ(ChooseEta(std::nullopt, 0, std::nullopt, 0.0, 10.0), std::nullopt);
  EXPECT_EQ(ChooseEta(std::nullopt, 0, 5.0, 0.0, 100.0), 0.0);
  EXPECT_EQ(ChooseEta(std::nullopt, 0, 5.0, 10.0, 5.0), 5.0) << "a clock behind counts nothing";
}

}  // namespace
}  // namespace headway::progress
