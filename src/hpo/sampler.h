// Samplers propose the next trial's parameters from the trials so far.
//
// Every sampler is deterministic and stateless between calls: Suggest()
// depends only on (seed, trial_index, space, history), so an experiment
// resumed after a server restart proposes exactly what it would have, and
// two experiments with the same seed and results agree.
//
//   random   independent uniform (log-uniform where `log`) draws.
//   grid     the Cartesian product in a fixed order; doubles and ints are
//            split into `grid_points` values each (ints dedup'd); trial i
//            gets point i (wrapping around when the grid is exhausted).
//   tpe      Tree-structured Parzen Estimator (Bergstra et al. 2011) with
//            Optuna's defaults: `startup_trials` random trials first, then
//            the best gamma(n) = min(ceil(0.1 n), 25) observations form
//            l(x), the rest g(x); 24 candidates are drawn from l(x) and the
//            one maximising l(x)/g(x) wins. Independent per parameter;
//            Parzen windows with Optuna's magic-clip bandwidths and a prior.
//            Running trials (TrialOutcome::kRunning) count as worse than
//            every result (constant liar), so parallel trials spread out.
//   tpe-multivariate  the same with one joint mixture over all parameters
//            (Optuna's multivariate=True; Scott's-rule bandwidths).
//   gp       Gaussian process (Matern 5/2 on the unit cube, categorical
//            one-hot) with expected improvement, optimised over random
//            candidates plus local perturbations of the best points.
//
// Pruned trials count with their last objective for tpe/gp; failed ones are
// ignored. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "core/status.h"
#include "hpo/search_space.h"

namespace headway::hpo {

struct SamplerOptions {
  std::uint64_t seed = 0;
  int startup_trials = 10;  // tpe, gp: random trials before the model is used
  int grid_points = 5;      // grid: values per double/int parameter
};

class Sampler {
 public:
  virtual ~Sampler() = default;
  // The parameters for trial `trial_index` (0-based), given every finished
  // trial so far, in trial order (TPE weighs recent trials more). Always
  // returns an assignment InSpace() for a valid space (ParseExperimentSpec
  // validates one).
  virtual Assignment Suggest(const SearchSpace& space, std::span<const Observation> history,
                             std::int64_t trial_index) const = 0;
};

// "random", "grid", "tpe", "tpe-multivariate" or "gp"; InvalidArgument for another name.
Result<std::unique_ptr<Sampler>> MakeSampler(std::string_view name, const SamplerOptions& options);

// Number of distinct points the grid sampler visits for `space`.
std::int64_t GridSize(const SearchSpace& space, int grid_points);

}  // namespace headway::hpo
