#include "core/run_as.h"

namespace headway {
namespace {

// POSIX portable user names, as useradd accepts them.
bool IsValidAccountName(const std::string& name) {
  if (name.empty() || name.size() > 32 || name.front() == '-') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

Result<RunAsPolicy> ParseRunAs(const std::vector<std::string>& mappings, bool server_is_root,
                               std::string job_user) {
  RunAsPolicy policy;
  policy.server_is_root = server_is_root;
  policy.job_user = std::move(job_user);
  if (!IsValidAccountName(policy.job_user)) {
    return InvalidArgument("--job-user '" + policy.job_user + "' is not a valid account name");
  }
  for (const std::string& m : mappings) {
    auto eq = m.find('=');
    if (eq == std::string::npos || eq == 0 || !IsValidAccountName(m.substr(eq + 1))) {
      return InvalidArgument("--run-as '" + m + "' must be TEAM=USER (TEAM may be '*')");
    }
    std::string team = m.substr(0, eq);
    if (policy.by_team.count(team)) {
      return InvalidArgument("--run-as for team '" + team + "' given twice");
    }
    policy.by_team[team] = m.substr(eq + 1);
  }
  if (!server_is_root && !policy.by_team.empty()) {
    return InvalidArgument(
        "--run-as needs a server run as root: a server run by an ordinary user runs every job "
        "as that user");
  }
  return policy;
}

std::string RunAsAccount(const RunAsPolicy& policy, const std::string& team) {
  if (!policy.server_is_root) return "";
  if (auto it = policy.by_team.find(team); it != policy.by_team.end()) return it->second;
  if (auto it = policy.by_team.find("*"); it != policy.by_team.end()) return it->second;
  return policy.job_user;
}

}  // namespace headway
