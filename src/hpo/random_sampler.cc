#include <cstdint>
#include <memory>

#include "hpo/internal/samplers.h"

namespace headway::hpo::internal {
namespace {

class RandomSampler final : public Sampler {
 public:
  explicit RandomSampler(const SamplerOptions& options) : seed_(options.seed) {}

  Assignment Suggest(const SearchSpace& space, std::span<const Observation> /*history*/,
                     std::int64_t trial_index) const override {
    Assignment a;
    for (std::size_t k = 0; k < space.size(); ++k) {
      // One stream per parameter position, so adding a parameter at the end of
      // a space leaves the draws of the others unchanged.
      std::uint64_t state = MixSeed(seed_, trial_index, k);
      a[space[k].name] = DrawUniform(space[k], state);
    }
    return a;
  }

 private:
  std::uint64_t seed_;
};

}  // namespace

std::unique_ptr<Sampler> MakeRandomSampler(const SamplerOptions& options) {
  return std::make_unique<RandomSampler>(options);
}

}  // namespace headway::hpo::internal
