// User tokens for the API (see core/access.h). The server implements it over
// the Store; the REST API uses it to authenticate requests when
// authentication is on.
//
// Thread safety: implementations must allow concurrent calls.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/access.h"
#include "core/status.h"

namespace headway::api {

class TokenService {
 public:
  virtual ~TokenService() = default;
  // The active token whose secret this is; Unauthenticated otherwise
  // (unknown, revoked or malformed).
  virtual Result<UserToken> Authenticate(std::string_view secret) = 0;
  // Creates a token and returns its secret, which is not stored and cannot be
  // shown again. InvalidArgument for a bad name or team, Conflict for a taken name.
  virtual Result<std::string> CreateToken(const std::string& name, const std::string& team,
                                          Role role) = 0;
  virtual Result<std::vector<UserToken>> ListTokens() = 0;
  // Takes effect for the next request. NotFound for an unknown or revoked token.
  virtual Status RevokeToken(std::string_view name) = 0;
};

}  // namespace headway::api
