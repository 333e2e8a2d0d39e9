#include "hpo/search_space.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <system_error>

namespace headway::hpo {
namespace {

// Integral doubles below this magnitude print exactly as integers; above it a
// double no longer holds every integer, so the shortest form is the honest one.
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

std::string FormatDouble(double v) {
  if (std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < kMaxExactInteger) {
    // to_chars' shortest form would write 1000000 as "1e+06", which reads badly
    // as an int parameter on a command line.
    return std::to_string(static_cast<std::int64_t>(v));
  }
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), v);
  if (ec != std::errc()) return "nan";  // cannot happen with 64 bytes; keeps the output defined
  return std::string(buffer, end);
}

bool ValueInParam(const ParamSpec& param, const ParamValue& value) {
  if (param.type == ParamType::kCategorical) {
    const auto* s = std::get_if<std::string>(&value);
    return s != nullptr && std::find(param.categories.begin(), param.categories.end(), *s) !=
                               param.categories.end();
  }
  const auto* v = std::get_if<double>(&value);
  if (v == nullptr || std::isnan(*v)) return false;
  switch (param.type) {
    case ParamType::kDouble:
      return *v >= param.min && *v <= param.max;
    case ParamType::kInt:
      return *v == std::trunc(*v) && *v >= param.min && *v <= param.max;
    case ParamType::kDiscrete:
      return std::find(param.values.begin(), param.values.end(), *v) != param.values.end();
    case ParamType::kCategorical:
      break;  // handled above
  }
  return false;
}

}  // namespace

std::string FormatValue(const ParamValue& value) {
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  return FormatDouble(std::get<double>(value));
}

bool InSpace(const SearchSpace& space, const Assignment& a) {
  for (const ParamSpec& param : space) {
    auto it = a.find(param.name);
    if (it == a.end() || !ValueInParam(param, it->second)) return false;
  }
  return true;
}

}  // namespace headway::hpo
