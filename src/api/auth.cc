#include "api/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cassert>
#include <cctype>
#include <stdexcept>

#include "core/ascii.h"

namespace headway::api {
namespace {

std::string RandomToken(const char* prefix) {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    // No entropy means no safe token; this is not recoverable.
    throw std::runtime_error("RAND_bytes failed");
  }
  return prefix + LowerHex(bytes, sizeof bytes);
}

}  // namespace

std::string NewJobToken() { return RandomToken("hwj_"); }
std::string NewUserToken() { return RandomToken("hwu_"); }

std::string HashToken(std::string_view token) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  int ok = EVP_Digest(token.data(), token.size(), digest, &length, EVP_sha256(), nullptr);
  assert(ok == 1);
  (void)ok;
  return LowerHex(digest, length);
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  unsigned char* ok =
      HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest, &length);
  assert(ok != nullptr);
  (void)ok;
  return LowerHex(digest, length);
}

std::string NewSecret() { return RandomToken(""); }

bool SameHash(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string BearerToken(std::string_view header) {
  constexpr std::string_view kPrefix = "Bearer ";
  if (header.size() <= kPrefix.size()) return {};
  for (std::size_t i = 0; i < kPrefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) !=
        std::tolower(static_cast<unsigned char>(kPrefix[i]))) {
      return {};
    }
  }
  std::string_view token = header.substr(kPrefix.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\r')) token.remove_suffix(1);
  return std::string(token);
}

}  // namespace headway::api
