#include "core/version.h"

// HEADWAY_VERSION is defined for this file only (src/core/CMakeLists.txt), so
// a new version recompiles one file.
namespace headway {

const char* Version() { return HEADWAY_VERSION; }

}  // namespace headway
