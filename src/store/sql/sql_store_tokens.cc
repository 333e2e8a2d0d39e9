// The SQL store's user tokens and login sessions. The class is in
// sql_store_internal.h.
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/sql/sql_store_internal.h"

namespace headway::sql_internal {

Status SqlStore::CreateUserToken(const UserToken& t) {
  std::lock_guard lock(mu_);
  Statement q(*db_,
              "INSERT INTO user_tokens (name, team, role, hash, created_at, revoked_at, "
              "expires_at, parent) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  q.Bind(1, t.name);
  q.Bind(2, t.team);
  q.Bind(3, std::string(RoleName(t.role)));
  q.Bind(4, t.hash);
  q.Bind(5, ToUnixMillis(t.created_at));
  if (t.revoked_at) q.Bind(6, ToUnixMillis(*t.revoked_at));
  if (t.expires_at) q.Bind(7, ToUnixMillis(*t.expires_at));
  q.Bind(8, t.parent);
  if (!q.Run()) {
    if (q.broken_constraint() == Constraint::kUnique) {
      return Conflict("token '" + t.name + "' already exists");
    }
    return Unavailable("create token: " + LastError());
  }
  return Status::Ok();
}

Result<std::vector<UserToken>> SqlStore::ListUserTokens() {
  std::lock_guard lock(mu_);
  Statement q(*db_,
              "SELECT name, team, role, hash, created_at, revoked_at, expires_at, parent "
              "FROM user_tokens ORDER BY seq");
  std::vector<UserToken> tokens;
  while (q.Step()) {
    UserToken t;
    t.name = q.ColumnText(0);
    t.team = q.ColumnText(1);
    t.role = ParseRole(q.ColumnText(2)).value_or(Role::kViewer);
    t.hash = q.ColumnText(3);
    t.created_at = FromUnixMillis(q.ColumnInt64(4));
    if (!q.IsNull(5)) t.revoked_at = FromUnixMillis(q.ColumnInt64(5));
    if (!q.IsNull(6)) t.expires_at = FromUnixMillis(q.ColumnInt64(6));
    t.parent = q.ColumnText(7);
    tokens.push_back(std::move(t));
  }
  if (q.failed()) return Unavailable("list tokens: " + LastError());
  return tokens;
}

Status SqlStore::RevokeUserToken(std::string_view name, Time when) {
  std::lock_guard lock(mu_);
  Statement q(*db_, "UPDATE user_tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL");
  q.Bind(1, ToUnixMillis(when));
  q.Bind(2, std::string(name));
  if (!q.Run()) return Unavailable("revoke token: " + LastError());
  if (q.changes() == 0) {
    return NotFound("no active token named '" + std::string(name) + "'");
  }
  return Status::Ok();
}

Status SqlStore::DeleteExpiredSessions(Time now) {
  std::lock_guard lock(mu_);
  Statement q(*db_,
              "DELETE FROM user_tokens WHERE parent != '' AND expires_at IS NOT NULL "
              "AND expires_at <= ?");
  q.Bind(1, ToUnixMillis(now));
  if (!q.Run()) return Unavailable("delete expired sessions: " + LastError());
  return Status::Ok();
}

}  // namespace headway::sql_internal
