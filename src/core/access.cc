#include "core/access.h"

namespace headway {

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kMember:
      return "member";
    case Role::kAdmin:
      return "admin";
  }
  return "viewer";
}

std::optional<Role> ParseRole(std::string_view name) {
  if (name == "viewer") return Role::kViewer;
  if (name == "member") return Role::kMember;
  if (name == "admin") return Role::kAdmin;
  return std::nullopt;
}

bool MayModify(const UserToken& who, std::string_view team) {
  if (who.revoked_at) return false;
  switch (who.role) {
    case Role::kAdmin:
      return true;
    case Role::kMember:
      return who.team == team;
    case Role::kViewer:
      return false;
  }
  return false;
}

bool MayForceStop(const UserToken& who, std::string_view team) {
  return who.role == Role::kAdmin && MayModify(who, team);
}

}  // namespace headway
