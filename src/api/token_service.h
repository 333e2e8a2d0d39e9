// User tokens for the API (see core/access.h). The server implements it over
// the Store; the REST API uses it to authenticate requests when
// authentication is on.
//
// Thread safety: implementations must allow concurrent calls.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/access.h"
#include "core/status.h"
#include "core/time.h"

namespace headway::api {

class TokenService {
 public:
  virtual ~TokenService() = default;
  // The active token whose secret this is; Unauthenticated otherwise
  // (unknown, revoked or malformed; "token expired" once past its expiry).
  virtual Result<UserToken> Authenticate(std::string_view secret) = 0;
  // Creates a token and returns its secret, which is not stored and cannot be
  // shown again. With a `ttl` it stops working that long from now.
  // InvalidArgument for a bad name, team or ttl, Conflict for a taken name.
  virtual Result<std::string> CreateToken(const std::string& name, const std::string& team,
                                          Role role, std::optional<Duration> ttl = {}) = 0;
  // A session: a new token acting for `owner` (same team and role) that
  // expires after the server's session lifetime, or with `owner` if that is
  // sooner, and is revoked with it. The dashboard trades the token it is
  // given for one, so only a short-lived secret stays in the browser.
  // Returns the session (its `name` and `expires_at`) and its secret.
  // A session traded from a sign-in link (CreateSignInLink) lasts the full
  // session lifetime, capped by the link's own token, and uses up the link.
  virtual Result<std::pair<UserToken, std::string>> CreateSession(const UserToken& owner) = 0;
  virtual Result<std::vector<UserToken>> ListTokens() = 0;
  // Takes effect for the next request. NotFound for an unknown or revoked token.
  virtual Status RevokeToken(std::string_view name) = 0;
};

}  // namespace headway::api
