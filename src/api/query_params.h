// Query parameters as the routes read them, each with an error that names it.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace headway::api {

// 0 up to INT_MAX.
Result<int> ParseNonNegativeInt(const std::string& name, const std::string& text);
// Decimal digits only, up to 18 of them.
Result<std::uint64_t> ParseCount(const std::string& name, const std::string& text);
// A switch: true/1 or false/0, nothing else.
Result<bool> ParseSwitch(const std::string& name, const std::string& text);

}  // namespace headway::api
