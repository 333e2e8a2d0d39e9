// libFuzzer entry point; HEADWAY_FUZZ_TARGET names the function of
// fuzz_targets.h this binary fuzzes.
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  headway::fuzz::HEADWAY_FUZZ_TARGET(data, size);
  return 0;
}
