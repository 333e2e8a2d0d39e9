// Terminal output for the CLI: aligned tables, ages, YAML.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/time.h"

namespace headway::cli {

// Columns padded to their widest cell, separated by three spaces, like kubectl.
std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);
// "5s", "3m", "2h", "4d": how long ago `rfc3339` was at `now` ("<unknown>" if unparsable).
std::string Age(const std::string& rfc3339, Time now);
std::string ToYaml(const nlohmann::json& value);

}  // namespace headway::cli
