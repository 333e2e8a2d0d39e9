#include "server/user_tokens.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <set>
#include <vector>

#include "api/auth.h"
#include "core/job.h"

namespace headway {
namespace {

Status WriteSecretFile(const std::string& path, const std::string& secret) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Unavailable("cannot write " + tmp + ": " + std::strerror(errno));
  std::string line = secret + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
            ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    return Unavailable("cannot write " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

Status UserTokens::Load() {
  HEADWAY_RETURN_IF_ERROR(store_.DeleteExpiredSessions(clock_.Now()));
  auto all = store_.ListUserTokens();
  if (!all.ok()) return all.status();
  std::set<std::string> active_names;
  for (const UserToken& t : *all) {
    if (!t.revoked_at && t.parent.empty()) active_names.insert(t.name);
  }
  std::lock_guard lock(mu_);
  active_by_hash_.clear();
  for (UserToken& t : *all) {
    // A session whose token was revoked went with it.
    if (t.revoked_at || (!t.parent.empty() && !active_names.count(t.parent))) continue;
    active_by_hash_.emplace(t.hash, std::move(t));
  }
  return Status::Ok();
}

Result<std::string> UserTokens::EnsureAdminToken(const std::string& path) {
  std::set<std::string> taken;
  {
    auto all = store_.ListUserTokens();
    if (!all.ok()) return all.status();
    for (const UserToken& t : *all) {
      // Sessions and expired tokens do not count: they cannot make more tokens for long.
      bool expired = t.expires_at && *t.expires_at <= clock_.Now();
      if (t.role == Role::kAdmin && !t.revoked_at && !expired && t.parent.empty()) {
        return std::string();
      }
      taken.insert(t.name);
    }
  }
  std::string name = "admin";
  for (int n = 2; taken.count(name); ++n) name = "admin-" + std::to_string(n);
  auto secret = CreateToken(name, "", Role::kAdmin);
  if (!secret.ok()) return secret.status();
  HEADWAY_RETURN_IF_ERROR(WriteSecretFile(path, *secret));
  return name;
}

Result<UserToken> UserTokens::Authenticate(std::string_view secret) {
  if (secret.rfind("hwu_", 0) != 0) {
    return Unauthenticated("not a user token (user tokens start with hwu_)");
  }
  std::string hash = api::HashToken(secret);
  std::lock_guard lock(mu_);
  // The map lookup compares hashes of the secret, not the secret itself, so
  // its timing tells an attacker nothing they can use.
  auto it = active_by_hash_.find(hash);
  if (it == active_by_hash_.end()) return Unauthenticated("unknown or revoked token");
  if (it->second.expires_at && clock_.Now() >= *it->second.expires_at) {
    return Unauthenticated("token expired");
  }
  return it->second;
}

namespace {
constexpr std::string_view kSignInPrefix = "signin-";
}  // namespace

Result<std::pair<UserToken, std::string>> UserTokens::CreateSession(const UserToken& owner) {
  if (owner.name.rfind(kSignInPrefix, 0) != 0) return NewSession(owner, "session-", session_ttl_);
  // Traded from a sign-in link: as long as a session made from the token the
  // link was made from, and the link is used up.
  UserToken parent = owner;
  {
    std::lock_guard lock(mu_);
    // Used up here, under the lock: two trades of one link make one session.
    if (active_by_hash_.erase(owner.hash) == 0) {
      return Unauthenticated("this sign-in link was used already: sign in with a token");
    }
    for (const auto& [hash, token] : active_by_hash_) {
      if (token.name == owner.parent) parent = token;
    }
  }
  HEADWAY_RETURN_IF_ERROR(store_.RevokeUserToken(owner.name, clock_.Now()));
  return NewSession(parent, "session-", session_ttl_);
}

Result<std::string> UserTokens::CreateSignInLink(const UserToken& owner, Duration ttl) {
  auto link = NewSession(owner, std::string(kSignInPrefix), ttl);
  if (!link.ok()) return link.status();
  return std::move(link->second);
}

Result<std::pair<UserToken, std::string>> UserTokens::NewSession(const UserToken& owner,
                                                                 std::string prefix, Duration ttl) {
  Time now = clock_.Now();
  UserToken session;
  // 48 random bits: names are not secrets, they only need to be distinct.
  session.name = prefix + api::NewUserToken().substr(4, 12);
  session.team = owner.team;
  session.role = owner.role;
  session.parent = owner.parent.empty() ? owner.name : owner.parent;
  session.created_at = now;
  session.expires_at = now + ttl;
  // A session never outlives what it was made from.
  if (owner.expires_at && *owner.expires_at < *session.expires_at) {
    session.expires_at = owner.expires_at;
  }
  std::string secret = api::NewUserToken();
  session.hash = api::HashToken(secret);
  // Sessions pile up, one per sign-in: drop the expired ones as new ones come.
  HEADWAY_RETURN_IF_ERROR(store_.DeleteExpiredSessions(now));
  HEADWAY_RETURN_IF_ERROR(store_.CreateUserToken(session));
  std::lock_guard lock(mu_);
  for (auto it = active_by_hash_.begin(); it != active_by_hash_.end();) {
    bool expired =
        !it->second.parent.empty() && it->second.expires_at && *it->second.expires_at <= now;
    it = expired ? active_by_hash_.erase(it) : std::next(it);
  }
  active_by_hash_.emplace(session.hash, session);
  return std::make_pair(std::move(session), std::move(secret));
}

Result<std::string> UserTokens::CreateToken(const std::string& name, const std::string& team,
                                            Role role, std::optional<Duration> ttl) {
  if (!IsValidJobName(name)) {
    return Status(InvalidArgument("must be lowercase letters, digits and '-', 1-63 characters")
                      .WithField("name"));
  }
  if (team == "*" && role != Role::kViewer) {
    return Status(InvalidArgument("only viewer tokens may see every team ('*')").WithField("team"));
  }
  if (team.size() > 63 || (role != Role::kAdmin && team.empty())) {
    return Status(InvalidArgument(role == Role::kAdmin ? "must be at most 63 characters"
                                                       : "is required for viewer and member tokens")
                      .WithField("team"));
  }
  if (ttl && ttl->count() <= 0) {
    return Status(InvalidArgument("must be a positive duration").WithField("ttl"));
  }
  UserToken token;
  token.name = name;
  token.team = team;
  token.role = role;
  std::string secret = api::NewUserToken();
  token.hash = api::HashToken(secret);
  token.created_at = clock_.Now();
  if (ttl) token.expires_at = token.created_at + *ttl;
  HEADWAY_RETURN_IF_ERROR(store_.CreateUserToken(token));
  std::lock_guard lock(mu_);
  active_by_hash_.emplace(token.hash, std::move(token));
  return secret;
}

Result<std::vector<UserToken>> UserTokens::ListTokens() { return store_.ListUserTokens(); }

Status UserTokens::RevokeToken(std::string_view name) {
  Time now = clock_.Now();
  HEADWAY_RETURN_IF_ERROR(store_.RevokeUserToken(name, now));
  std::vector<std::string> sessions;
  {
    std::lock_guard lock(mu_);
    for (auto it = active_by_hash_.begin(); it != active_by_hash_.end();) {
      bool gone = it->second.name == name || it->second.parent == name;
      if (gone && it->second.name != name) sessions.push_back(it->second.name);
      it = gone ? active_by_hash_.erase(it) : std::next(it);
    }
  }
  // Also in the store, so listings say so; Load() skips them either way.
  for (const std::string& session : sessions) {
    Status s = store_.RevokeUserToken(session, now);
    if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
  }
  return Status::Ok();
}

}  // namespace headway
