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
  // `store` and `clock` must outlive this.
  UserTokens(Store& store, const Clock& clock) : store_(store), clock_(clock) {}

  // Reads the tokens from the store; call once before use.
  Status Load();

  // The first start with authentication on has no token to use it with: when
  // no admin token is active, creates one named "admin" (or "admin-N") and
  // writes its secret to `path` (mode 0600), replacing what was there.
  // Returns the name of the token created, or "" when an admin token exists.
  Result<std::string> EnsureAdminToken(const std::string& path);

  Result<UserToken> Authenticate(std::string_view secret) override;
  Result<std::string> CreateToken(const std::string& name, const std::string& team,
                                  Role role) override;
  Result<std::vector<UserToken>> ListTokens() override;
  Status RevokeToken(std::string_view name) override;

 private:
  Store& store_;
  const Clock& clock_;
  std::mutex mu_;
  std::map<std::string, UserToken> active_by_hash_;  // guarded by mu_
};

}  // namespace headway
