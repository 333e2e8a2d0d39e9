#include "hpo/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "hpo/internal/samplers.h"

namespace headway::hpo {
namespace internal {
namespace {

constexpr std::uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;

// splitmix64's output function: a bijection that spreads every input bit over
// the whole word, so nearby seeds and trial indices give unrelated streams.
std::uint64_t Mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A uniform index in [0, n); n > 0.
std::size_t DrawIndex(std::size_t n, std::uint64_t& state) {
  auto i = static_cast<std::size_t>(NextUnit(state) * static_cast<double>(n));
  return std::min(i, n - 1);  // guards the rounding of u * n up to n
}

}  // namespace

std::uint64_t MixSeed(std::uint64_t seed, std::int64_t trial_index, std::uint64_t stream) {
  // Each input goes through a full mixing round before the next is folded in,
  // so (seed, trial, stream) triples that differ anywhere give distinct states.
  std::uint64_t z = Mix64(seed + kGoldenGamma);
  z = Mix64(z ^ (static_cast<std::uint64_t>(trial_index) + kGoldenGamma));
  return Mix64(z ^ (stream + kGoldenGamma));
}

double NextUnit(std::uint64_t& state) {
  state += kGoldenGamma;
  // The top 53 bits fill a double's mantissa exactly: uniform in [0, 1).
  return static_cast<double>(Mix64(state) >> 11) * 0x1.0p-53;
}

ParamValue DrawUniform(const ParamSpec& param, std::uint64_t& state) {
  // A log scale needs positive bounds; a space that breaks that is drawn
  // uniformly rather than producing NaNs.
  const bool log = param.log && param.min > 0;
  switch (param.type) {
    case ParamType::kDouble: {
      if (!(param.min < param.max)) return param.min;  // one point, or an invalid range
      const double u = NextUnit(state);
      double v =
          log ? std::exp(std::log(param.min) + u * (std::log(param.max) - std::log(param.min)))
              : param.min + u * (param.max - param.min);
      return std::clamp(v, param.min, param.max);  // exp/log rounding can step outside
    }
    case ParamType::kInt: {
      const double lo = std::ceil(param.min);
      const double hi = std::floor(param.max);
      if (hi <= lo) return lo;
      const double u = NextUnit(state);
      double v;
      if (log) {
        // Each integer k owns [k - 0.5, k + 0.5], so the end points get their
        // fair share of log space instead of half of it.
        const double log_lo = std::log(lo - 0.5);
        const double log_hi = std::log(hi + 0.5);
        v = std::round(std::exp(log_lo + u * (log_hi - log_lo)));
      } else {
        v = lo + std::floor(u * (hi - lo + 1));
      }
      return std::clamp(v, lo, hi);
    }
    case ParamType::kDiscrete:
      if (param.values.empty()) return 0.0;  // invalid space: nothing InSpace exists
      return param.values[DrawIndex(param.values.size(), state)];
    case ParamType::kCategorical:
      if (param.categories.empty()) return std::string();  // invalid space, as above
      return param.categories[DrawIndex(param.categories.size(), state)];
  }
  return 0.0;
}

}  // namespace internal

Result<std::unique_ptr<Sampler>> MakeSampler(std::string_view name, const SamplerOptions& options) {
  if (name == "random") return internal::MakeRandomSampler(options);
  if (name == "grid") return internal::MakeGridSampler(options);
  if (name == "tpe") return internal::MakeTpeSampler(options, /*multivariate=*/false);
  if (name == "tpe-multivariate") return internal::MakeTpeSampler(options, /*multivariate=*/true);
  if (name == "gp") return internal::MakeGpSampler(options);
  return InvalidArgument("unknown sampler \"" + std::string(name) +
                         "\"; valid samplers: random, grid, tpe, tpe-multivariate, gp");
}

}  // namespace headway::hpo
