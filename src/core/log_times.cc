#include "core/log_times.h"

#include <charconv>

namespace headway {
namespace {

template <typename T>
bool ParseNumber(std::string_view text, T& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string LogTimesPath(const std::string& log_path) { return log_path + ".times"; }

std::string LogTimesHeader(std::uint64_t inode) { return "# ino " + std::to_string(inode) + "\n"; }

std::string LogTimesLine(const LogTimeMark& mark) {
  return std::to_string(mark.offset) + " " + std::to_string(mark.unix_ms) + "\n";
}

std::optional<LogTimesEntry> ParseLogTimesLine(std::string_view line) {
  LogTimesEntry entry;
  if (line.rfind("# ino ", 0) == 0) {
    std::uint64_t inode = 0;
    if (!ParseNumber(line.substr(6), inode)) return std::nullopt;
    entry.inode = inode;
    return entry;
  }
  std::size_t space = line.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  LogTimeMark mark;
  if (!ParseNumber(line.substr(0, space), mark.offset) ||
      !ParseNumber(line.substr(space + 1), mark.unix_ms) || mark.unix_ms < 0) {
    return std::nullopt;
  }
  entry.mark = mark;
  return entry;
}

}  // namespace headway
