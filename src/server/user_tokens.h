// The server's TokenService: user tokens kept (hashed) in the Store, with an
// in-memory index by hash so authenticating a request reads nothing.
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "api/token_service.h"
#include "core/time.h"
#include "store/store.h"

namespace headway {

class UserTokens final : public api::TokenService {
 public:
  static constexpr Duration kDefaultSessionTtl = std::chrono::hours(12);

  // `store` and `clock` must outlive this. Sessions (CreateSession) last
  // `session_ttl`.
  UserTokens(Store& store, const Clock& clock, Duration session_ttl = kDefaultSessionTtl)
      : store_(store), clock_(clock), session_ttl_(session_ttl) {}

  // Reads the tokens from the store, dropping expired sessions; call once
  // before use.
  Status Load();

  // The first start with authentication on has no token to use it with: when
  // no admin token is active, creates one named "admin" (or "admin-N") and
  // writes its secret to `path` (mode 0600), replacing what was there.
  // Returns the name of the token created, or "" when an admin token exists.
  Result<std::string> EnsureAdminToken(const std::string& path);

  Result<UserToken> Authenticate(std::string_view secret) override;
  Result<std::string> CreateToken(const std::string& name, const std::string& team, Role role,
                                  std::optional<Duration> ttl = {}) override;
  Result<std::pair<UserToken, std::string>> CreateSession(const UserToken& owner) override;
  // The start-up link's secret: a session of `owner` that lasts `ttl`
  // (minutes: the link lands in logs and terminals) and works once, to be
  // traded for a session (the dashboard does at once).
  Result<std::string> CreateSignInLink(const UserToken& owner, Duration ttl);
  static constexpr Duration kSignInLinkTtl = std::chrono::minutes(10);
  Result<std::vector<UserToken>> ListTokens() override;
  // Revoking a token also revokes the sessions made from it.
  Status RevokeToken(std::string_view name) override;

 private:
  Store& store_;
  const Clock& clock_;
  const Duration session_ttl_;
  std::mutex mu_;
  std::map<std::string, UserToken> active_by_hash_;  // guarded by mu_
  Result<std::pair<UserToken, std::string>> NewSession(const UserToken& owner, std::string prefix,
                                                       Duration ttl);
};

}  // namespace headway
