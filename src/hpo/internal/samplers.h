// Constructors of the concrete samplers, for MakeSampler (sampler.cc) and
// tests. Not part of the module's public interface.
#pragma once

#include <limits>
#include <memory>

#include "hpo/sampler.h"

namespace headway::hpo::internal {

std::unique_ptr<Sampler> MakeRandomSampler(const SamplerOptions& options);  // random_sampler.cc
std::unique_ptr<Sampler> MakeGridSampler(const SamplerOptions& options);    // grid_sampler.cc
// multivariate: one joint model of all parameters (Optuna multivariate=True).
std::unique_ptr<Sampler> MakeTpeSampler(const SamplerOptions& options,
                                        bool multivariate = false);     // tpe_sampler.cc
std::unique_ptr<Sampler> MakeGpSampler(const SamplerOptions& options);  // gp_sampler.cc

// Shared by the samplers: a deterministic generator for (seed, trial_index,
// stream), and one uniform draw of a parameter (log-uniform where `log`).
std::uint64_t MixSeed(std::uint64_t seed, std::int64_t trial_index, std::uint64_t stream);
ParamValue DrawUniform(const ParamSpec& param, std::uint64_t& state);  // advances `state`
double NextUnit(std::uint64_t& state);  // uniform in [0, 1), splitmix64-based

// Constants of the normal distribution's helpers in the TPE and GP samplers.
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kLogSqrt2Pi = 0.91893853320467274178;
inline constexpr double kSqrtHalf = 0.70710678118654752440;

}  // namespace headway::hpo::internal
