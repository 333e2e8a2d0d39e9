// Who may do what through the API when authentication is on: people and
// programs hold user tokens, each with a team and a role. (Jobs report with
// their own per-job tokens, which are not user tokens.)
//
//   viewer  reads its team's jobs and experiments, changes nothing
//   member  also submits and stops its own team's jobs and experiments
//   admin   everything, including creating and revoking tokens and stopping
//           a job at once without its grace (force stop)
//
// A viewer of team "*" reads every team's (for dashboards and Prometheus).
// The pool's queues and nodes are visible to every token, but a token that
// sees one team sees only that team's job names in them (counts stay whole).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/time.h"

namespace headway {

enum class Role { kViewer, kMember, kAdmin };

std::string_view RoleName(Role role);
std::optional<Role> ParseRole(std::string_view name);

struct UserToken {
  std::string name;  // unique, same rules as job names
  std::string team;  // empty for an admin that belongs to no team; "*": a viewer of all
  Role role = Role::kViewer;
  std::string hash;  // SHA-256 of the secret, hex; the secret itself is never stored
  Time created_at{};
  std::optional<Time> revoked_at;
  // Unset: the token never expires. From then on it authenticates nothing.
  std::optional<Time> expires_at;
  // For a session (a short-lived token the dashboard trades a token for):
  // the name of the token it was made from, which it acts for (same team and
  // role) and dies with when that one is revoked. Empty for other tokens.
  std::string parent;
};

// Whether `who` may change what belongs to `team` (submit into it, stop its jobs).
bool MayModify(const UserToken& who, std::string_view team);

// Whether `who` may stop `team`'s jobs at once, skipping their termination
// grace (SIGKILL): admins only, since the grace is what lets a job save its work.
bool MayForceStop(const UserToken& who, std::string_view team);

}  // namespace headway
