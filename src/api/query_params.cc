#include "api/query_params.h"

#include <exception>

namespace headway::api {

Result<int> ParseNonNegativeInt(const std::string& name, const std::string& text) {
  try {
    std::size_t used = 0;
    int v = std::stoi(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  return InvalidArgument("query parameter '" + name + "' must be a non-negative integer");
}

Result<std::uint64_t> ParseCount(const std::string& name, const std::string& text) {
  bool digits = !text.empty() && text.size() <= 18 &&
                text.find_first_not_of("0123456789") == std::string::npos;
  if (digits) return static_cast<std::uint64_t>(std::stoull(text));
  return InvalidArgument("query parameter '" + name + "' must be a non-negative integer");
}

Result<bool> ParseSwitch(const std::string& name, const std::string& text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  return InvalidArgument("query parameter '" + name + "' must be true or false").WithField(name);
}

}  // namespace headway::api
