// The version of Headway this binary was built as: the CMake project version
// ("0.1.0"), the same for the server, the CLI and GET /api/v1/version.
#pragma once

namespace headway {

const char* Version();

}  // namespace headway
