// Which Unix account a job's processes run as. Slurm's rule: a job runs as a
// real, unprivileged account, never as the control plane's. A server run by
// an ordinary user can only run jobs as that user (isolated from the server
// by namespaces, see exec/local); a server run as root runs each team's jobs
// as the account an admin mapped to the team, else as the shared job user.
// Whether the account turns out to be root (uid 0) is checked where accounts
// are looked up (the executor), since names are not uids.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace headway {

struct RunAsPolicy {
  // Only a root server can switch accounts.
  bool server_is_root = false;
  // `--run-as TEAM=USER`; the team "*" is the fallback for every team.
  std::map<std::string, std::string> by_team;
  // `--job-user`: the account for teams without a mapping (root server only).
  std::string job_user = "nobody";
};

// "TEAM=USER" flags to a policy; InvalidArgument naming the bad one, or a
// mapping given to a server that cannot switch accounts.
Result<RunAsPolicy> ParseRunAs(const std::vector<std::string>& mappings, bool server_is_root,
                               std::string job_user);

// The account for a team's jobs; empty: the server's own account.
std::string RunAsAccount(const RunAsPolicy& policy, const std::string& team);

}  // namespace headway
