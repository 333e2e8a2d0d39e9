#include "artifact/s3/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <ctime>

#include "core/ascii.h"

namespace headway {
namespace internal {
namespace {

constexpr char kHexUpper[] = "0123456789ABCDEF";

std::string Hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

bool IsUnreserved(unsigned char c) {
  return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~';
}

// RFC 7230 token characters, for methods and header names.
bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (std::isalnum(c) != 0) continue;
    if (std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) == std::string_view::npos)
      return false;
  }
  return true;
}

// Trims blanks and collapses inner runs of spaces/tabs to one space.
std::string CanonicalValue(std::string_view v) {
  std::string out;
  bool blank = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      blank = true;
      continue;
    }
    if (blank && !out.empty()) out.push_back(' ');
    blank = false;
    out.push_back(c);
  }
  return out;
}

bool IsSha256Hex(std::string_view s) {
  if (s.size() != 64) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::string> PercentDecode(std::string_view s, std::string_view what) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    int hi = i + 2 < s.size() ? HexValue(s[i + 1]) : -1;
    int lo = i + 2 < s.size() ? HexValue(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) return InvalidArgument(std::string(what) + ": bad percent-escape");
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

struct Stamp {
  std::string date;      // 20130524
  std::string datetime;  // 20130524T000000Z
};

Stamp StampFor(Time now) {
  std::time_t secs = static_cast<std::time_t>(
      std::chrono::floor<std::chrono::seconds>(now.time_since_epoch()).count());
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  Stamp s;
  s.datetime = buf;
  s.date = s.datetime.substr(0, 8);
  return s;
}

Status CheckCommon(std::string_view method, const HttpUrl& url, const AwsCredentials& creds,
                   std::string_view region, std::string_view service) {
  if (!IsToken(method)) return InvalidArgument("method: not an HTTP method token");
  if (url.scheme != "http" && url.scheme != "https")
    return InvalidArgument("url.scheme: must be http or https");
  if (url.host.empty()) return InvalidArgument("url.host: empty");
  for (char c : url.host) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '/' || c == '?' || c == '#' || c == '@')
      return InvalidArgument("url.host: invalid character");
  }
  if (url.port < 0 || url.port > 65535) return InvalidArgument("url.port: out of range");
  if (url.path.empty() || url.path[0] != '/')
    return InvalidArgument("url.path: must start with '/'");
  if (creds.access_key_id.empty()) return InvalidArgument("credentials: access key id is empty");
  if (creds.secret_access_key.empty()) return InvalidArgument("credentials: secret key is empty");
  for (char c : creds.access_key_id) {
    if (c == '/' || std::isspace(static_cast<unsigned char>(c)) || c == ',')
      return InvalidArgument("credentials: access key id has an invalid character");
  }
  if (creds.session_token.find_first_of("\r\n") != std::string::npos)
    return InvalidArgument("credentials: session token has a line break");
  auto scope_part = [](std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
    });
  };
  if (!scope_part(region)) return InvalidArgument("region: must be non-empty [A-Za-z0-9_-]");
  if (!scope_part(service)) return InvalidArgument("service: must be non-empty [A-Za-z0-9_-]");
  return Status::Ok();
}

std::string SigningSignature(const AwsCredentials& creds, const Stamp& stamp,
                             std::string_view region, std::string_view service,
                             std::string_view string_to_sign) {
  std::string k = Hmac("AWS4" + creds.secret_access_key, stamp.date);
  k = Hmac(k, region);
  k = Hmac(k, service);
  k = Hmac(k, "aws4_request");
  std::string sig = Hmac(k, string_to_sign);
  return LowerHex(reinterpret_cast<const unsigned char*>(sig.data()), sig.size());
}

std::string Scope(const Stamp& stamp, std::string_view region, std::string_view service) {
  return stamp.date + "/" + std::string(region) + "/" + std::string(service) + "/aws4_request";
}

std::string StringToSign(const Stamp& stamp, const std::string& scope,
                         const std::string& canonical_request) {
  return "AWS4-HMAC-SHA256\n" + stamp.datetime + "\n" + scope + "\n" + Sha256Hex(canonical_request);
}

// Validates the caller's headers and returns them lower-cased with canonical
// values. x-amz-content-sha256 is the caller's only when presigning.
Result<std::vector<std::pair<std::string, std::string>>> CallerHeaders(const HttpFields& headers,
                                                                       bool presign) {
  std::vector<std::pair<std::string, std::string>> fields;
  for (const auto& [name, value] : headers) {
    if (!IsToken(name)) return InvalidArgument("headers: invalid header name '" + name + "'");
    if (value.find_first_of("\r\n") != std::string::npos || value.find('\0') != std::string::npos)
      return InvalidArgument("headers." + name + ": line break in value");
    std::string lower = AsciiLower(name);
    if (lower == "host" || lower == "authorization" || lower == "x-amz-date" ||
        (lower == "x-amz-content-sha256" && !presign) || lower == "x-amz-security-token")
      return InvalidArgument("headers." + name + ": set by the signer, not the caller");
    fields.emplace_back(std::move(lower), CanonicalValue(value));
  }
  return fields;
}

// Sorts by name; repeated names are joined with ','. Fills the canonical
// header block ("name:value\n"...) and the SignedHeaders list.
void CanonicalHeaders(std::vector<std::pair<std::string, std::string>> fields,
                      std::string& canonical, std::string& signed_names) {
  std::stable_sort(fields.begin(), fields.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0 && fields[i].first == fields[i - 1].first) {
      canonical.back() = ',';
      canonical += fields[i].second + "\n";
      continue;
    }
    if (!signed_names.empty()) signed_names.push_back(';');
    signed_names += fields[i].first;
    canonical += fields[i].first + ":" + fields[i].second + "\n";
  }
}
}  // namespace
}  // namespace internal

using namespace internal;  // NOLINT: this file's own helpers

Result<HttpUrl> ParseHttpUrl(std::string_view text) {
  HttpUrl url;
  size_t colon = text.find("://");
  if (colon == std::string_view::npos) return InvalidArgument("url: missing scheme://");
  url.scheme = AsciiLower(text.substr(0, colon));
  if (url.scheme != "http" && url.scheme != "https")
    return InvalidArgument("url: scheme must be http or https");
  std::string_view rest = text.substr(colon + 3);
  size_t fragment = rest.find('#');
  if (fragment != std::string_view::npos) rest = rest.substr(0, fragment);
  size_t end = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, end);
  rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  if (authority.find('@') != std::string_view::npos)
    return InvalidArgument("url: user information is not allowed");
  std::string_view port;
  if (!authority.empty() && authority[0] == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return InvalidArgument("url: unterminated IPv6 host");
    url.host = std::string(authority.substr(0, close + 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return InvalidArgument("url: junk after IPv6 host");
      port = after.substr(1);
    }
  } else {
    size_t c = authority.rfind(':');
    url.host = AsciiLower(authority.substr(0, c));
    if (c != std::string_view::npos) port = authority.substr(c + 1);
  }
  if (url.host.empty()) return InvalidArgument("url: empty host");
  if (!port.empty()) {
    int p = 0;
    for (char ch : port) {
      if (ch < '0' || ch > '9' || p > 65535) return InvalidArgument("url: bad port");
      p = p * 10 + (ch - '0');
    }
    if (p < 1 || p > 65535) return InvalidArgument("url: bad port");
    url.port = p;
    if ((url.scheme == "http" && p == 80) || (url.scheme == "https" && p == 443)) url.port = 0;
  }
  size_t q = rest.find('?');
  std::string_view path = rest.substr(0, q);
  auto decoded_path = PercentDecode(path.empty() ? "/" : path, "url path");
  if (!decoded_path.ok()) return decoded_path.status();
  url.path = std::move(*decoded_path);
  if (q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    while (!query.empty()) {
      size_t amp = query.find('&');
      std::string_view item = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
      if (item.empty()) continue;
      size_t eq = item.find('=');
      auto key = PercentDecode(item.substr(0, eq), "url query");
      if (!key.ok()) return key.status();
      std::string value;
      if (eq != std::string_view::npos) {
        auto v = PercentDecode(item.substr(eq + 1), "url query");
        if (!v.ok()) return v.status();
        value = std::move(*v);
      }
      url.query.emplace_back(std::move(*key), std::move(value));
    }
  }
  return url;
}

std::string UriEncode(std::string_view text, bool keep_slash) {
  std::string out;
  out.reserve(text.size() * 3);
  for (unsigned char c : text) {
    if (IsUnreserved(c) || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHexUpper[c >> 4]);
      out.push_back(kHexUpper[c & 0xf]);
    }
  }
  return out;
}

std::string HostHeaderValue(const HttpUrl& url) {
  bool default_port = url.port == 0 || (url.scheme == "http" && url.port == 80) ||
                      (url.scheme == "https" && url.port == 443);
  return default_port ? url.host : url.host + ":" + std::to_string(url.port);
}

std::string CanonicalPath(const HttpUrl& url) {
  return UriEncode(url.path.empty() ? "/" : url.path, /*keep_slash=*/true);
}

std::string CanonicalQuery(const HttpFields& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [k, v] : query) encoded.emplace_back(UriEncode(k, false), UriEncode(v, false));
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [k, v] : encoded) {
    if (!out.empty()) out.push_back('&');
    out += k;
    out.push_back('=');
    out += v;
  }
  return out;
}

std::string UrlString(const HttpUrl& url) {
  std::string out = url.scheme + "://" + HostHeaderValue(url) + CanonicalPath(url);
  std::string query = CanonicalQuery(url.query);
  if (!query.empty()) out += "?" + query;
  return out;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out, &len, EVP_sha256(), nullptr);
  return LowerHex(out, len);
}

Result<SigV4Signed> SignRequest(const SigV4Request& request, const AwsCredentials& credentials,
                                std::string_view region, Time now, std::string_view service) {
  HEADWAY_RETURN_IF_ERROR(CheckCommon(request.method, request.url, credentials, region, service));
  if (request.payload_sha256 != kUnsignedPayload && !IsSha256Hex(request.payload_sha256))
    return InvalidArgument("payload_sha256: must be 64 lower-case hex digits or UNSIGNED-PAYLOAD");

  const Stamp stamp = StampFor(now);
  auto fields = CallerHeaders(request.headers, /*presign=*/false);
  if (!fields.ok()) return fields.status();
  SigV4Signed out;
  out.headers.emplace_back("x-amz-date", stamp.datetime);
  out.headers.emplace_back("x-amz-content-sha256", request.payload_sha256);
  if (!credentials.session_token.empty())
    out.headers.emplace_back("x-amz-security-token", credentials.session_token);
  fields->emplace_back("host", HostHeaderValue(request.url));
  for (const auto& [name, value] : out.headers) fields->emplace_back(name, value);
  std::string canonical_headers;
  std::string signed_headers;
  CanonicalHeaders(std::move(*fields), canonical_headers, signed_headers);

  out.canonical_request = request.method + "\n" + CanonicalPath(request.url) + "\n" +
                          CanonicalQuery(request.url.query) + "\n" + canonical_headers + "\n" +
                          signed_headers + "\n" + request.payload_sha256;
  const std::string scope = Scope(stamp, region, service);
  out.string_to_sign = StringToSign(stamp, scope, out.canonical_request);
  out.signature = SigningSignature(credentials, stamp, region, service, out.string_to_sign);
  out.headers.emplace_back(
      "Authorization", "AWS4-HMAC-SHA256 Credential=" + credentials.access_key_id + "/" + scope +
                           ", SignedHeaders=" + signed_headers + ", Signature=" + out.signature);
  return out;
}

Result<std::string> Presign(std::string_view method, const HttpUrl& url,
                            const AwsCredentials& credentials, std::string_view region, Time now,
                            std::int64_t expires_seconds, const HttpFields& headers,
                            std::string_view service) {
  HEADWAY_RETURN_IF_ERROR(CheckCommon(method, url, credentials, region, service));
  if (expires_seconds < 1 || expires_seconds > 604800)
    return InvalidArgument("expires: must be 1..604800 seconds (7 days)");
  for (const auto& [k, v] : url.query) {
    const std::string lower = AsciiLower(k);
    for (std::string_view own :
         {"x-amz-algorithm", "x-amz-credential", "x-amz-date", "x-amz-expires",
          "x-amz-signedheaders", "x-amz-signature", "x-amz-security-token"}) {
      if (lower == own)
        return InvalidArgument("url.query." + k + ": set by the signer, not the caller");
    }
  }
  auto fields = CallerHeaders(headers, /*presign=*/true);
  if (!fields.ok()) return fields.status();
  for (const auto& [name, value] : *fields) {
    if (name == "x-amz-content-sha256" && value != kUnsignedPayload && !IsSha256Hex(value))
      return InvalidArgument("headers.x-amz-content-sha256: must be 64 lower-case hex digits");
  }
  fields->emplace_back("host", HostHeaderValue(url));
  std::string canonical_headers;
  std::string signed_headers;
  CanonicalHeaders(std::move(*fields), canonical_headers, signed_headers);

  const Stamp stamp = StampFor(now);
  const std::string scope = Scope(stamp, region, service);
  HttpUrl signed_url = url;
  signed_url.query.emplace_back("X-Amz-Algorithm", "AWS4-HMAC-SHA256");
  signed_url.query.emplace_back("X-Amz-Credential", credentials.access_key_id + "/" + scope);
  signed_url.query.emplace_back("X-Amz-Date", stamp.datetime);
  signed_url.query.emplace_back("X-Amz-Expires", std::to_string(expires_seconds));
  if (!credentials.session_token.empty())
    signed_url.query.emplace_back("X-Amz-Security-Token", credentials.session_token);
  signed_url.query.emplace_back("X-Amz-SignedHeaders", signed_headers);
  const std::string canonical_request = std::string(method) + "\n" + CanonicalPath(signed_url) +
                                        "\n" + CanonicalQuery(signed_url.query) + "\n" +
                                        canonical_headers + "\n" + signed_headers + "\n" +
                                        std::string(kUnsignedPayload);
  const std::string signature = SigningSignature(credentials, stamp, region, service,
                                                 StringToSign(stamp, scope, canonical_request));
  return UrlString(signed_url) + "&X-Amz-Signature=" + signature;
}

}  // namespace headway
