// Search spaces, objectives and a sequential experiment loop shared by the
// sampler suites (hpo_sampler_test.cc, hpo_gp_sampler_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "hpo/sampler.h"
#include "hpo/search_space.h"

namespace headway::hpo::test_helpers {

using ObjectiveFunction = std::function<double(const Assignment&)>;

inline ParamSpec Double(std::string name, double min, double max, bool log = false) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = ParamType::kDouble;
  p.min = min;
  p.max = max;
  p.log = log;
  return p;
}

inline ParamSpec Int(std::string name, double min, double max, bool log = false) {
  ParamSpec p = Double(std::move(name), min, max, log);
  p.type = ParamType::kInt;
  return p;
}

inline ParamSpec Discrete(std::string name, std::vector<double> values) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = ParamType::kDiscrete;
  p.values = std::move(values);
  return p;
}

inline ParamSpec Categorical(std::string name, std::vector<std::string> categories) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = ParamType::kCategorical;
  p.categories = std::move(categories);
  return p;
}

inline SearchSpace MixedSpace() {
  return {Double("lr", 1e-5, 1e-1, /*log=*/true),
          Double("dropout", 0, 0.5),
          Int("layers", 1, 8),
          Int("batch", 16, 1024, /*log=*/true),
          Discrete("width", {64, 128, 256, 512}),
          Categorical("optimizer", {"sgd", "adam", "adamw"})};
}

inline double Num(const Assignment& a, const std::string& name) {
  return std::get<double>(a.at(name));
}
inline const std::string& Str(const Assignment& a, const std::string& name) {
  return std::get<std::string>(a.at(name));
}

inline double MixedObjective(const Assignment& a) {
  const double lr = std::log10(Num(a, "lr")) + 3;
  const double dropout = Num(a, "dropout") - 0.1;
  const double layers = (Num(a, "layers") - 4) / 4;
  const double batch = std::log2(Num(a, "batch")) - 7;
  const double width = Num(a, "width") == 256 ? 0 : 0.5;
  const double opt = Str(a, "optimizer") == "adam" ? 0 : 0.5;
  return lr * lr + dropout * dropout + layers * layers + 0.1 * batch * batch + width + opt;
}

// Branin on [-5, 10] x [0, 15]; global minimum 0.397887.
inline double Branin(double x1, double x2) {
  const double pi = std::numbers::pi;
  const double b = 5.1 / (4 * pi * pi);
  const double c = 5 / pi;
  const double t = 1 / (8 * pi);
  const double u = x2 - b * x1 * x1 + c * x1 - 6;
  return u * u + 10 * (1 - t) * std::cos(x1) + 10;
}

inline double BraninOf(const Assignment& a) { return Branin(Num(a, "x1"), Num(a, "x2")); }

inline SearchSpace BraninSpace() { return {Double("x1", -5, 10), Double("x2", 0, 15)}; }

// Runs an experiment sequentially, as the controller would: suggest,
// evaluate, record. Every `fail_every`-th trial fails and every
// `prune_every`-th is pruned (0: never), so the sampler sees all outcomes.
inline std::vector<Observation> RunTrials(const Sampler& sampler, const SearchSpace& space,
                                          const ObjectiveFunction& objective, int n_trials,
                                          int fail_every = 0, int prune_every = 0) {
  std::vector<Observation> history;
  for (int i = 0; i < n_trials; ++i) {
    Observation obs;
    obs.params = sampler.Suggest(space, history, i);
    EXPECT_TRUE(InSpace(space, obs.params)) << "trial " << i;
    if (fail_every > 0 && i % fail_every == fail_every - 1) {
      obs.outcome = TrialOutcome::kFailed;
    } else {
      obs.outcome = prune_every > 0 && i % prune_every == prune_every - 1
                        ? TrialOutcome::kPruned
                        : TrialOutcome::kCompleted;
      obs.objective = objective(obs.params);
    }
    history.push_back(std::move(obs));
  }
  return history;
}

inline double BestObjective(const std::vector<Observation>& history) {
  double best = std::numeric_limits<double>::infinity();
  for (const Observation& obs : history) {
    if (obs.objective) best = std::min(best, *obs.objective);
  }
  return best;
}

inline double Median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  const std::size_t n = xs.size();
  return n % 2 == 1 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

}  // namespace headway::hpo::test_helpers
