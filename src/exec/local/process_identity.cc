#include "exec/local/process_identity.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
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

std::vector<std::uint64_t> ListeningSocketInodes(const std::string& table, int port) {
  std::vector<std::uint64_t> inodes;
  std::istringstream lines(table);
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
    std::uint64_t inode = 0;
    if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode)) {
      continue;
    }
    const auto colon = local.rfind(':');
    if (state != "0A" || colon == std::string::npos) continue;  // 0A: TCP_LISTEN
    char* end = nullptr;
    const long local_port = std::strtol(local.c_str() + colon + 1, &end, 16);
    if (end != nullptr && *end == '\0' && local_port == port && inode != 0) {
      inodes.push_back(inode);
    }
  }
  return inodes;
}

bool AnyListensOn(const std::vector<pid_t>& pids, int port) {
  std::set<std::string> wanted;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::stringstream text;
    text << in.rdbuf();
    for (std::uint64_t inode : ListeningSocketInodes(text.str(), port)) {
      wanted.insert("socket:[" + std::to_string(inode) + "]");
    }
  }
  if (wanted.empty()) return false;
  for (pid_t pid : pids) {
    std::error_code ec;
    for (const auto& fd :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
      char target[64];
      const ssize_t n = ::readlink(fd.path().c_str(), target, sizeof target - 1);
      if (n > 0 && wanted.count(std::string(target, static_cast<std::size_t>(n))) > 0) return true;
    }
  }
  return false;
}

}  // namespace headway::internal
