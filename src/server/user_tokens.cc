#include "server/user_tokens.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

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
  auto all = store_.ListUserTokens();
  if (!all.ok()) return all.status();
  std::lock_guard lock(mu_);
  active_by_hash_.clear();
  for (UserToken& t : *all) {
    if (!t.revoked_at) active_by_hash_.emplace(t.hash, std::move(t));
  }
  return Status::Ok();
}

Result<std::string> UserTokens::EnsureAdminToken(const std::string& path) {
  std::set<std::string> taken;
  {
    auto all = store_.ListUserTokens();
    if (!all.ok()) return all.status();
    for (const UserToken& t : *all) {
      if (t.role == Role::kAdmin && !t.revoked_at) return std::string();
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
  return it->second;
}

Result<std::string> UserTokens::CreateToken(const std::string& name, const std::string& team,
                                            Role role) {
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
  UserToken token;
  token.name = name;
  token.team = team;
  token.role = role;
  std::string secret = api::NewUserToken();
  token.hash = api::HashToken(secret);
  token.created_at = clock_.Now();
  HEADWAY_RETURN_IF_ERROR(store_.CreateUserToken(token));
  std::lock_guard lock(mu_);
  active_by_hash_.emplace(token.hash, std::move(token));
  return secret;
}

Result<std::vector<UserToken>> UserTokens::ListTokens() { return store_.ListUserTokens(); }

Status UserTokens::RevokeToken(std::string_view name) {
  HEADWAY_RETURN_IF_ERROR(store_.RevokeUserToken(name, clock_.Now()));
  std::lock_guard lock(mu_);
  for (auto it = active_by_hash_.begin(); it != active_by_hash_.end(); ++it) {
    if (it->second.name == name) {
      active_by_hash_.erase(it);
      break;
    }
  }
  return Status::Ok();
}

}  // namespace headway
