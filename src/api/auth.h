// Bearer tokens: random, shown once, stored only as a hash.
#pragma once

#include <string>
#include <string_view>

namespace headway::api {

// 32 random bytes from the OS, hex-encoded, prefixed "hwj_" for job tokens.
std::string NewJobToken();
// The same, prefixed "hwu_", for user tokens.
std::string NewUserToken();
// SHA-256, hex-encoded.
std::string HashToken(std::string_view token);
// HMAC-SHA-256 of `data` under `key`, hex-encoded (webhook signatures).
std::string HmacSha256(std::string_view key, std::string_view data);
// 32 random bytes from the OS, hex-encoded, unprefixed (shared secrets).
std::string NewSecret();
// Constant-time comparison of two hashes.
bool SameHash(std::string_view a, std::string_view b);
// The token of an "Authorization: Bearer <token>" header; empty if absent.
std::string BearerToken(std::string_view authorization_header);

}  // namespace headway::api
