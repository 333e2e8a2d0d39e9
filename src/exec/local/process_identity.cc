#include "exec/local/process_identity.h"

#include <fstream>
#include <sstream>
#include <string>

namespace headway::internal {

std::optional<std::uint64_t> ProcessStartTime(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return std::nullopt;
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) may contain spaces and parentheses: skip past the last ')'.
  auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(stat.substr(close + 1));
  std::string state;
  rest >> state;  // field 3
  if (state == "Z" || state == "X") return std::nullopt;
  std::string field;
  for (int i = 4; i < 22; ++i) rest >> field;
  std::uint64_t start = 0;
  if (!(rest >> start)) return std::nullopt;
  return start;
}

}  // namespace headway::internal
