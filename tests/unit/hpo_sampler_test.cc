#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <numbers>
#include <set>
#include <string>
#include <vector>

#include "hpo/internal/samplers.h"
#include "hpo/sampler.h"
#include "hpo/search_space.h"
#include "hpo_test_helpers.h"

namespace headway::hpo {
namespace {

using namespace test_helpers;

std::unique_ptr<Sampler> Make(std::string_view name, const SamplerOptions& options) {
  Result<std::unique_ptr<Sampler>> sampler = MakeSampler(name, options);
  EXPECT_TRUE(sampler.ok()) << sampler.status().ToString();
  return std::move(sampler).value();
}

// ---- Every sampler

TEST(Sampler, EverySamplerStaysInAMixedSpace) {
  const SearchSpace space = MixedSpace();
  for (const char* name : {"random", "grid", "tpe"}) {
    SCOPED_TRACE(name);
    SamplerOptions options;
    options.seed = 7;
    options.startup_trials = 5;
    const auto sampler = Make(name, options);
    // RunTrials checks InSpace for every suggestion.
    RunTrials(*sampler, space, MixedObjective, 80, /*fail_every=*/7, /*prune_every=*/5);
  }
}

TEST(Sampler, SameInputsGiveTheSameSuggestionAcrossInstances) {
  const SearchSpace space = MixedSpace();
  for (const char* name : {"random", "grid", "tpe"}) {
    SCOPED_TRACE(name);
    SamplerOptions options;
    options.seed = 42;
    options.startup_trials = 5;
    const auto first = Make(name, options);
    const auto second = Make(name, options);
    const std::vector<Observation> history =
        RunTrials(*first, space, MixedObjective, 30, /*fail_every=*/6, /*prune_every=*/4);
    for (std::int64_t i = 0; i < 30; ++i) {
      const std::span<const Observation> prefix(history.data(), i);
      const Assignment a = first->Suggest(space, prefix, i);
      EXPECT_EQ(a, history[i].params) << "trial " << i << " was not reproduced";
      EXPECT_EQ(a, second->Suggest(space, prefix, i)) << "trial " << i;
    }
    EXPECT_EQ(first->Suggest(space, history, 30), second->Suggest(space, history, 30));
  }
}

TEST(Sampler, DifferentTrialIndicesAndSeedsGiveDifferentDraws) {
  const SearchSpace space = {Double("x", 0, 1)};
  for (const char* name : {"random", "tpe"}) {
    SCOPED_TRACE(name);
    SamplerOptions options;
    options.startup_trials = 5;
    const auto sampler = Make(name, options);
    options.seed = 1;
    const auto reseeded = Make(name, options);
    const std::vector<Observation> history = RunTrials(
        *sampler, space, [](const Assignment& a) { return Num(a, "x"); }, 20);
    for (std::span<const Observation> h :
         {std::span<const Observation>(), std::span<const Observation>(history)}) {
      std::set<double> seen;
      for (std::int64_t i = 20; i < 40; ++i) {
        const double x = Num(sampler->Suggest(space, h, i), "x");
        seen.insert(x);
        EXPECT_NE(x, Num(reseeded->Suggest(space, h, i), "x")) << "trial " << i;
      }
      EXPECT_EQ(seen.size(), 20u);
    }
  }
}

TEST(MakeSampler, AcceptsEveryKnownName) {
  for (const char* name : {"random", "grid", "tpe", "gp"}) {
    Result<std::unique_ptr<Sampler>> sampler = MakeSampler(name, SamplerOptions{});
    ASSERT_TRUE(sampler.ok()) << name;
    EXPECT_NE(sampler.value(), nullptr) << name;
  }
}

TEST(MakeSampler, RejectsUnknownNamesListingTheValidOnes) {
  for (const char* name : {"", "bayes", "TPE", "random "}) {
    Result<std::unique_ptr<Sampler>> sampler = MakeSampler(name, SamplerOptions{});
    ASSERT_FALSE(sampler.ok()) << name;
    EXPECT_EQ(sampler.status().code(), StatusCode::kInvalidArgument);
    for (const char* valid : {"random", "grid", "tpe", "gp"}) {
      EXPECT_THAT(sampler.status().message(), testing::HasSubstr(valid));
    }
  }
}

// ---- Search space

TEST(FormatValue, WritesIntegersWithoutADecimalPoint) {
  EXPECT_EQ(FormatValue(3.0), "3");
  EXPECT_EQ(FormatValue(-7.0), "-7");
  EXPECT_EQ(FormatValue(0.0), "0");
  EXPECT_EQ(FormatValue(1000000.0), "1000000");
  EXPECT_EQ(FormatValue(1024.0), "1024");
}

TEST(FormatValue, WritesDoublesShortestThatRoundTrip) {
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(2.5), "2.5");
  EXPECT_EQ(FormatValue(1e-5), "1e-05");
  for (double v : {1.0 / 3, 0.0003141592653589793, 123456.789, 6.02214076e23, 1e-300}) {
    EXPECT_EQ(std::strtod(FormatValue(v).c_str(), nullptr), v) << FormatValue(v);
  }
}

TEST(FormatValue, WritesStringsAsTheyAre) {
  EXPECT_EQ(FormatValue(std::string("adamw")), "adamw");
  EXPECT_EQ(FormatValue(std::string("")), "");
  EXPECT_EQ(FormatValue(std::string("3")), "3");
}

TEST(InSpace, ChecksEveryParameterAgainstItsSpec) {
  const SearchSpace space = MixedSpace();
  const Assignment good = {{"lr", 1e-3},    {"dropout", 0.5}, {"layers", 1.0},
                           {"batch", 16.0}, {"width", 256.0}, {"optimizer", std::string("adam")}};
  EXPECT_TRUE(InSpace(space, good));
  EXPECT_TRUE(InSpace({}, good));

  auto with = [&](const std::string& name, ParamValue v) {
    Assignment a = good;
    a[name] = std::move(v);
    return a;
  };
  EXPECT_FALSE(InSpace(space, with("lr", 0.2)));
  EXPECT_FALSE(InSpace(space, with("dropout", -0.01)));
  EXPECT_FALSE(InSpace(space, with("dropout", NAN)));
  EXPECT_FALSE(InSpace(space, with("layers", 2.5)));
  EXPECT_FALSE(InSpace(space, with("layers", 9.0)));
  EXPECT_FALSE(InSpace(space, with("width", 100.0)));
  EXPECT_FALSE(InSpace(space, with("optimizer", std::string("rmsprop"))));
  EXPECT_FALSE(InSpace(space, with("optimizer", 1.0)));
  EXPECT_FALSE(InSpace(space, with("lr", std::string("0.001"))));
  Assignment missing = good;
  missing.erase("batch");
  EXPECT_FALSE(InSpace(space, missing));
}

// ---- Shared helpers and the random sampler

TEST(DrawUniform, AdvancesItsStateAndStaysInBounds) {
  const SearchSpace space = MixedSpace();
  std::uint64_t state = internal::MixSeed(3, 0, 0);
  std::set<std::string> distinct;
  for (int i = 0; i < 200; ++i) {
    Assignment a;
    for (const ParamSpec& p : space) a[p.name] = internal::DrawUniform(p, state);
    EXPECT_TRUE(InSpace(space, a));
    distinct.insert(FormatValue(a["lr"]));
  }
  EXPECT_EQ(distinct.size(), 200u);

  std::uint64_t single = 9;
  EXPECT_EQ(internal::DrawUniform(Double("fixed", 0.25, 0.25), single), ParamValue(0.25));
  EXPECT_EQ(internal::DrawUniform(Int("fixed", 3, 3, true), single), ParamValue(3.0));
  EXPECT_EQ(internal::DrawUniform(Categorical("c", {"only"}), single),
            ParamValue(std::string("only")));
}

TEST(NextUnit, IsUniformInTheUnitInterval) {
  std::uint64_t state = internal::MixSeed(0, 0, 0);
  double sum = 0;
  int below_tenth = 0;
  constexpr int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) {
    const double u = internal::NextUnit(state);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    below_tenth += u < 0.1;
  }
  EXPECT_NEAR(sum / kDraws, 0.5, 0.01);
  EXPECT_NEAR(below_tenth / static_cast<double>(kDraws), 0.1, 0.01);
  EXPECT_NE(internal::MixSeed(0, 0, 0), internal::MixSeed(0, 0, 1));
  EXPECT_NE(internal::MixSeed(0, 0, 0), internal::MixSeed(0, 1, 0));
  EXPECT_NE(internal::MixSeed(0, 0, 0), internal::MixSeed(1, 0, 0));
}

TEST(RandomSampler, LogUniformMedianIsNearTheGeometricMean) {
  const SearchSpace space = {Double("lr", 1e-4, 1, /*log=*/true), Double("p", 2, 4),
                             Int("batch", 1, 1000, /*log=*/true)};
  const auto sampler = internal::MakeRandomSampler(SamplerOptions{});
  std::vector<double> lr, p, batch;
  for (std::int64_t i = 0; i < 2000; ++i) {
    const Assignment a = sampler->Suggest(space, {}, i);
    lr.push_back(Num(a, "lr"));
    p.push_back(Num(a, "p"));
    batch.push_back(Num(a, "batch"));
  }
  EXPECT_NEAR(std::log10(Median(lr)), -2.0, 0.15);  // geometric mean of 1e-4 and 1
  EXPECT_NEAR(Median(p), 3.0, 0.1);
  // Log-uniform over [0.5, 1000.5]: the median is sqrt(0.5 * 1000.5), about 22.
  EXPECT_NEAR(Median(batch), 22.4, 4);
  EXPECT_EQ(*std::min_element(batch.begin(), batch.end()), 1.0);
  EXPECT_GT(*std::max_element(batch.begin(), batch.end()), 900.0);
}

TEST(RandomSampler, CoversEveryIntegerDiscreteValueAndCategory) {
  const SearchSpace space = {Int("die", 1, 6), Discrete("width", {64, 128, 256}),
                             Categorical("opt", {"sgd", "adam", "adamw", "lion"})};
  SamplerOptions options;
  options.seed = 11;
  const auto sampler = internal::MakeRandomSampler(options);
  std::map<double, int> die, width;
  std::map<std::string, int> opt;
  constexpr int kDraws = 1200;
  for (std::int64_t i = 0; i < kDraws; ++i) {
    const Assignment a = sampler->Suggest(space, {}, i);
    ++die[Num(a, "die")];
    ++width[Num(a, "width")];
    ++opt[Str(a, "opt")];
  }
  ASSERT_EQ(die.size(), 6u);
  for (const auto& [v, n] : die) EXPECT_NEAR(n, kDraws / 6, 60) << v;
  ASSERT_EQ(width.size(), 3u);
  for (const auto& [v, n] : width) EXPECT_NEAR(n, kDraws / 3, 80) << v;
  ASSERT_EQ(opt.size(), 4u);
  for (const auto& [v, n] : opt) EXPECT_NEAR(n, kDraws / 4, 70) << v;
}

// ---- Grid

TEST(GridSampler, EnumeratesEveryPointFirstParameterSlowestThenWraps) {
  const SearchSpace space = {Double("x", 0, 1), Categorical("c", {"a", "b"}),
                             Discrete("d", {1, 10})};
  SamplerOptions options;
  options.grid_points = 3;
  ASSERT_EQ(GridSize(space, options.grid_points), 12);
  const auto sampler = internal::MakeGridSampler(options);
  std::vector<Assignment> expected;
  for (double x : {0.0, 0.5, 1.0}) {
    for (const char* c : {"a", "b"}) {
      for (double d : {1.0, 10.0}) expected.push_back({{"x", x}, {"c", std::string(c)}, {"d", d}});
    }
  }
  std::set<Assignment> distinct;
  for (std::int64_t i = 0; i < 12; ++i) {
    const Assignment a = sampler->Suggest(space, {}, i);
    EXPECT_EQ(a, expected[i]) << "trial " << i;
    distinct.insert(a);
  }
  EXPECT_EQ(distinct.size(), 12u);
  for (std::int64_t i = 12; i < 30; ++i) {
    EXPECT_EQ(sampler->Suggest(space, {}, i), expected[i % 12]) << "trial " << i;
  }
}

TEST(GridSampler, DeduplicatesRoundedInts) {
  const SearchSpace space = {Int("k", 1, 3)};
  EXPECT_EQ(GridSize(space, 5), 3);
  SamplerOptions options;
  options.grid_points = 5;
  const auto sampler = internal::MakeGridSampler(options);
  std::vector<double> seen;
  for (std::int64_t i = 0; i < 3; ++i) seen.push_back(Num(sampler->Suggest(space, {}, i), "k"));
  EXPECT_THAT(seen, testing::ElementsAre(1.0, 2.0, 3.0));
  EXPECT_EQ(Num(sampler->Suggest(space, {}, 3), "k"), 1.0);
}

TEST(GridSampler, SpacesLogParametersEvenlyInLogSpace) {
  const SearchSpace space = {Double("lr", 1e-4, 1, /*log=*/true),
                             Int("batch", 1, 1000, /*log=*/true)};
  SamplerOptions options;
  options.grid_points = 4;
  ASSERT_EQ(GridSize(space, 4), 16);
  const auto sampler = internal::MakeGridSampler(options);
  std::vector<double> lr, batch;
  for (std::int64_t i = 0; i < 16; i += 4) lr.push_back(Num(sampler->Suggest(space, {}, i), "lr"));
  for (std::int64_t i = 0; i < 4; ++i) {
    batch.push_back(Num(sampler->Suggest(space, {}, i), "batch"));
  }
  EXPECT_THAT(lr,
              testing::ElementsAre(1e-4, testing::DoubleNear(1e-4 * std::pow(1e4, 1.0 / 3), 1e-12),
                                   testing::DoubleNear(1e-4 * std::pow(1e4, 2.0 / 3), 1e-10), 1.0));
  EXPECT_THAT(batch, testing::ElementsAre(1.0, 10.0, 100.0, 1000.0));
}

TEST(GridSize, MultipliesTheValuesOfEveryParameter) {
  EXPECT_EQ(GridSize({}, 5), 1);
  EXPECT_EQ(GridSize(MixedSpace(), 5), 5 * 5 * 5 * 5 * 4 * 3);
  EXPECT_EQ(GridSize({Int("k", 0, 100)}, 7), 7);
  EXPECT_EQ(GridSize({Int("k", 0, 1)}, 7), 2);
  EXPECT_EQ(GridSize({Double("fixed", 2, 2)}, 7), 1);
  EXPECT_EQ(GridSize({Double("x", 0, 1)}, 1), 1);
}

// ---- TPE

TEST(TpeSampler, DrawsAtRandomBeforeStartupTrials) {
  const SearchSpace space = MixedSpace();
  SamplerOptions options;
  options.seed = 5;
  options.startup_trials = 10;
  const auto random = internal::MakeRandomSampler(options);
  const auto tpe = internal::MakeTpeSampler(options);
  // 9 usable observations (the failed ones do not count) keep TPE in startup.
  std::vector<Observation> history =
      RunTrials(*random, space, MixedObjective, 12, /*fail_every=*/4, /*prune_every=*/3);
  for (std::int64_t i = 12; i < 20; ++i) {
    const Assignment a = tpe->Suggest(space, history, i);
    EXPECT_TRUE(InSpace(space, a));
    EXPECT_EQ(a, random->Suggest(space, history, i)) << "trial " << i;
  }
  SamplerOptions other = options;
  other.seed = 6;
  const auto reseeded = internal::MakeTpeSampler(other);
  EXPECT_NE(Num(tpe->Suggest(space, history, 12), "lr"),
            Num(reseeded->Suggest(space, history, 12), "lr"));
}

TEST(TpeSampler, CountsPrunedObservationsTowardsStartup) {
  const SearchSpace space = {Double("x", -1, 1)};
  SamplerOptions options;
  options.startup_trials = 4;
  const auto random = internal::MakeRandomSampler(options);
  const auto tpe = internal::MakeTpeSampler(options);
  std::vector<Observation> history = RunTrials(
      *random, space, [](const Assignment& a) { return Num(a, "x"); }, 4,
      /*fail_every=*/0, /*prune_every=*/2);
  EXPECT_NE(tpe->Suggest(space, history, 4), random->Suggest(space, history, 4));
  // A pruned trial without an objective tells the model nothing.
  history[1].objective.reset();
  EXPECT_EQ(tpe->Suggest(space, history, 4), random->Suggest(space, history, 4));
}

TEST(TpeSampler, IgnoresFailedObservations) {
  const SearchSpace space = MixedSpace();
  SamplerOptions options;
  options.seed = 3;
  options.startup_trials = 8;
  const auto tpe = internal::MakeTpeSampler(options);
  const std::vector<Observation> clean = RunTrials(*tpe, space, MixedObjective, 30);

  // Failures between the real trials, some carrying a stray objective, and a
  // completed trial that reported nothing.
  std::vector<Observation> noisy;
  const auto random = internal::MakeRandomSampler(options);
  for (std::size_t i = 0; i < clean.size(); ++i) {
    noisy.push_back(clean[i]);
    Observation failed;
    failed.params = random->Suggest(space, {}, 1000 + i);
    failed.outcome = i % 3 == 2 ? TrialOutcome::kCompleted : TrialOutcome::kFailed;
    if (i % 3 == 1) failed.objective = -1e9;  // would be the best if it counted
    noisy.push_back(failed);
  }
  for (std::int64_t i = 30; i < 40; ++i) {
    EXPECT_EQ(tpe->Suggest(space, clean, i), tpe->Suggest(space, noisy, i)) << "trial " << i;
  }
}

TEST(TpeSampler, SkipsObservedValuesOutsideTheSpace) {
  // As after the space was edited between trials: values out of bounds, of
  // the wrong type, or missing. The model must neither crash nor leave the space.
  const SearchSpace space = MixedSpace();
  SamplerOptions options;
  options.startup_trials = 3;
  const auto tpe = internal::MakeTpeSampler(options);
  std::vector<Observation> history;
  for (int i = 0; i < 12; ++i) {
    Observation obs;
    obs.params = {{"lr", i % 2 ? 5.0 : 1e-3},
                  {"layers", std::string("many")},
                  {"batch", i % 3 ? 1e6 : 64.0},
                  {"width", 100.0},
                  {"optimizer", std::string(i % 2 ? "rmsprop" : "adam")},
                  {"removed", 1.0}};
    obs.objective = i;
    history.push_back(obs);
  }
  for (std::int64_t i = 12; i < 40; ++i) {
    EXPECT_TRUE(InSpace(space, tpe->Suggest(space, history, i)));
  }
}

TEST(TpeSampler, SamplesFromThePriorWithNoStartupAndNoHistory) {
  SamplerOptions options;
  options.startup_trials = 0;
  const auto tpe = internal::MakeTpeSampler(options);
  const SearchSpace space = MixedSpace();
  for (std::int64_t i = 0; i < 20; ++i) EXPECT_TRUE(InSpace(space, tpe->Suggest(space, {}, i)));
}

TEST(TpeSampler, ReturnsSingleValuedParametersAsTheyAre) {
  const SearchSpace space = {Double("fixed", 0.5, 0.5), Int("one", 4, 4), Discrete("d", {3}),
                             Categorical("c", {"only"}), Double("x", 0, 1)};
  SamplerOptions options;
  options.startup_trials = 2;
  const auto tpe = internal::MakeTpeSampler(options);
  const std::vector<Observation> history = RunTrials(
      *tpe, space, [](const Assignment& a) { return Num(a, "x"); }, 10);
  const Assignment a = tpe->Suggest(space, history, 10);
  EXPECT_EQ(Num(a, "fixed"), 0.5);
  EXPECT_EQ(Num(a, "one"), 4.0);
  EXPECT_EQ(Num(a, "d"), 3.0);
  EXPECT_EQ(Str(a, "c"), "only");
}

TEST(TpeSampler, FavoursTheBestCategoryIntAndDiscreteValue) {
  const SearchSpace space = {Categorical("opt", {"sgd", "adam", "adamw", "lion"}),
                             Int("layers", 1, 16), Discrete("width", {32, 64, 128, 256, 512})};
  auto objective = [](const Assignment& a) {
    const double layers = Num(a, "layers") - 11;
    const double width = std::log2(Num(a, "width")) - 7;
    return (Str(a, "opt") == "adamw" ? 0.0 : 4.0) + 0.1 * layers * layers + width * width;
  };
  SamplerOptions options;
  options.seed = 2;
  const auto tpe = internal::MakeTpeSampler(options);
  const std::vector<Observation> history = RunTrials(*tpe, space, objective, 80);
  int best_opt = 0, near_layers = 0, best_width = 0;
  for (std::size_t i = 40; i < history.size(); ++i) {
    const Assignment& a = history[i].params;
    best_opt += Str(a, "opt") == "adamw";
    near_layers += std::fabs(Num(a, "layers") - 11) <= 2;
    best_width += Num(a, "width") == 128;
  }
  // At random these would be 1/4, 5/16 and 1/5 of the 40 trials.
  EXPECT_GE(best_opt, 24);
  EXPECT_GE(near_layers, 24);
  EXPECT_GE(best_width, 20);
}

// The median over 10 seeds of the best Branin value in 60 trials.
double MedianBestOnBranin(
    const std::function<std::unique_ptr<Sampler>(const SamplerOptions&)>& make) {
  const SearchSpace space = {Double("x1", -5, 10), Double("x2", 0, 15)};
  std::vector<double> best;
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    SamplerOptions options;
    options.seed = seed;
    best.push_back(BestObjective(RunTrials(*make(options), space, BraninOf, 60)));
  }
  return Median(best);
}

TEST(TpeSampler, BeatsRandomOnBranin) {
  const double tpe =
      MedianBestOnBranin([](const SamplerOptions& o) { return internal::MakeTpeSampler(o); });
  const double random = MedianBestOnBranin(internal::MakeRandomSampler);
  RecordProperty("tpe_median_best", std::to_string(tpe));
  RecordProperty("random_median_best", std::to_string(random));
  EXPECT_LT(tpe, random) << "TPE median best " << tpe << ", random " << random;
  EXPECT_LT(tpe, 1.0);  // the optimum is 0.398
}

TEST(TpeSampler, MultivariateBeatsRandomOnBraninAndStaysInSpace) {
  const double tpe = MedianBestOnBranin(
      [](const SamplerOptions& o) { return internal::MakeTpeSampler(o, /*multivariate=*/true); });
  EXPECT_LT(tpe, MedianBestOnBranin(internal::MakeRandomSampler));
  EXPECT_LT(tpe, 1.0);
  // Mixed types (ints, discrete values, categories, log scales) and failures.
  SamplerOptions options;
  options.seed = 9;
  const auto mv = internal::MakeTpeSampler(options, true);
  RunTrials(*mv, MixedSpace(), MixedObjective, 60, /*fail_every=*/7, /*prune_every=*/5);
}

TEST(TpeSampler, TpeIsIndependentAndTpeMultivariateIsJoint) {
  SamplerOptions options;
  options.seed = 4;
  auto by_name = MakeSampler("tpe", options);
  ASSERT_TRUE(by_name.ok());
  const SearchSpace space = MixedSpace();
  const std::vector<Observation> history = RunTrials(**by_name, space, MixedObjective, 25);
  EXPECT_EQ((*by_name)->Suggest(space, history, 25),
            internal::MakeTpeSampler(options, false)->Suggest(space, history, 25));
  auto joint = MakeSampler("tpe-multivariate", options);
  ASSERT_TRUE(joint.ok());
  EXPECT_EQ((*joint)->Suggest(space, history, 25),
            internal::MakeTpeSampler(options, true)->Suggest(space, history, 25));
  EXPECT_NE((*joint)->Suggest(space, history, 25), (*by_name)->Suggest(space, history, 25));
}

// Constant liar: a running trial counts as worse than every finished one, so
// a trial suggested while it runs is not drawn to the same spot.
TEST(TpeSampler, ARunningTrialPushesTheNextSuggestionAway) {
  const SearchSpace space = {Double("x", 0, 1)};
  auto objective = [](const Assignment& a) { return std::fabs(Num(a, "x") - 0.3); };
  for (bool multivariate : {false, true}) {
    SamplerOptions options;
    options.seed = 11;
    const auto tpe = internal::MakeTpeSampler(options, multivariate);
    std::vector<Observation> history = RunTrials(*tpe, space, objective, 30);
    const Assignment alone = tpe->Suggest(space, history, 30);
    // Four trials already running at that very point.
    for (int i = 0; i < 4; ++i) {
      Observation running;
      running.params = alone;
      running.outcome = TrialOutcome::kRunning;
      history.push_back(running);
    }
    const Assignment beside = tpe->Suggest(space, history, 30);
    EXPECT_NE(Num(beside, "x"), Num(alone, "x")) << "multivariate " << multivariate;
    EXPECT_TRUE(InSpace(space, beside));
  }
}

TEST(TpeSampler, RunningTrialsAreNotStartupTrials) {
  const SearchSpace space = {Double("x", -1, 1)};
  SamplerOptions options;
  options.startup_trials = 4;
  const auto random = internal::MakeRandomSampler(options);
  const auto tpe = internal::MakeTpeSampler(options, true);
  std::vector<Observation> history = RunTrials(
      *random, space, [](const Assignment& a) { return Num(a, "x"); }, 3);
  Observation running;
  running.params = {{"x", 0.5}};
  running.outcome = TrialOutcome::kRunning;
  history.push_back(running);
  EXPECT_EQ(tpe->Suggest(space, history, 4), random->Suggest(space, history, 4));
}

}  // namespace
}  // namespace headway::hpo
