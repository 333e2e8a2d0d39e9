// What manifest.cc (parsing) and manifest_validation.cc (checks) share.
// Internal to the workflow module.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace headway::workflow::internal {

// "path[i]": the field of a list's item, as errors name it.
inline std::string Index(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

// Headway's keys in labels or annotations that must be numbers or names:
// the field (relative to the metadata) and what is wrong, or nullopt.
std::optional<std::pair<std::string, std::string>> BadHeadwayKey(
    const std::map<std::string, std::string>& labels,
    const std::map<std::string, std::string>& annotations);

}  // namespace headway::workflow::internal
