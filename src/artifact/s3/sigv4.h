// AWS Signature Version 4 for S3 (and S3-compatible stores: MinIO, Ceph RGW,
// OpenStack Swift's s3api), as pure functions: no I/O, no clock (the signing
// time is a parameter), no global state. Safe to call from any thread.
//
// Two forms:
//   SignRequest: the headers to add to a request (Authorization, x-amz-date,
//     x-amz-content-sha256 and, with a session token, x-amz-security-token).
//   Presign: a URL that carries its own authorisation in the query string,
//     valid for 1 s .. 7 days, signing the Host header (and any headers the
//     caller names) and an unsigned payload unless the caller binds one.
//
// S3's canonical form, which differs from other AWS services: the path is
// URI-encoded exactly once (each byte outside RFC 3986's unreserved set
// becomes %XX, '/' is kept, "." and ".." and "//" are not normalised); query
// keys and values are encoded the same way ('/' included) and sorted by key,
// then value; header names are lowercased, values trimmed with inner runs of
// blanks collapsed to one space, repeated headers joined with ','; Host carries
// the port unless it is the scheme's default.
//
// Errors are InvalidArgument naming the offending input. No returned value or
// error message contains the secret key; the session token appears only where
// S3 requires it (its own header, or the presigned URL's query).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace headway {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty: long-term credentials, no token
};

using HttpFields = std::vector<std::pair<std::string, std::string>>;

// A request target, decoded: path and query hold the characters a user means
// (an object key "a b/ü.txt"), and are encoded once when signed or sent.
struct HttpUrl {
  std::string scheme = "https";  // "http" or "https"
  std::string host;              // DNS name, IPv4, or IPv6 in brackets; no port
  int port = 0;                  // 0: the scheme's default (80 / 443)
  std::string path = "/";        // starts with '/'
  HttpFields query;              // key/value pairs, any order; repeated keys allowed
};

// Parses "http[s]://host[:port][/path][?query]", percent-decoding the path and
// the query ('+' in a query stays '+', as S3 reads it). A query item without
// '=' has an empty value ("?uploads" is {"uploads", ""}).
[[nodiscard]] Result<HttpUrl> ParseHttpUrl(std::string_view url);

// RFC 3986 encoding as S3 wants it: A-Z a-z 0-9 - _ . ~ unchanged, every other
// byte as %XX (upper-case hex); '/' kept when keep_slash.
std::string UriEncode(std::string_view text, bool keep_slash);
// "host" or "host:port" when the port is not the scheme's default.
std::string HostHeaderValue(const HttpUrl& url);
// The path as sent and signed: UriEncode(path, keep_slash=true).
std::string CanonicalPath(const HttpUrl& url);
// "a=1&b=&b=x%20y": encoded pairs sorted by key, then value.
std::string CanonicalQuery(const HttpFields& query);
// scheme://host[:port]/encoded-path[?canonical-query]: the URL to request, in
// exactly the form that was signed.
std::string UrlString(const HttpUrl& url);

// Lower-case hex SHA-256 of the bytes; Sha256Hex("") is the empty-payload hash.
std::string Sha256Hex(std::string_view data);
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";
inline constexpr std::string_view kEmptyPayloadSha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

struct SigV4Request {
  std::string method = "GET";  // upper-case token
  HttpUrl url;
  // Headers to sign besides the ones the signer adds (Range, Content-MD5,
  // Content-Type, x-amz-meta-*...). Every header passed here must then be sent
  // unchanged. Host, Authorization and the x-amz-date / -content-sha256 /
  // -security-token headers are the signer's and are refused here.
  HttpFields headers;
  // Hex SHA-256 of the body (64 hex digits), or kUnsignedPayload.
  std::string payload_sha256 = std::string(kEmptyPayloadSha256);
};

struct SigV4Signed {
  // Headers to add, in this order: x-amz-date, x-amz-content-sha256,
  // [x-amz-security-token], Authorization.
  HttpFields headers;
  // For diagnosing SignatureDoesNotMatch: compare with the server's
  // CanonicalRequest. Neither contains the secret key.
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;  // 64 hex digits
};

// Signs a request with the Authorization header. region: e.g. "us-east-1"
// (MinIO, Ceph and Swift accept any fixed region they are configured with);
// service: "s3".
[[nodiscard]] Result<SigV4Signed> SignRequest(const SigV4Request& request,
                                              const AwsCredentials& credentials,
                                              std::string_view region, Time now,
                                              std::string_view service = "s3");

// A presigned URL for method on url, valid for expires_seconds (1..604800)
// from now. The url's own query (e.g. partNumber, uploadId) is signed too.
// headers: ones the URL's holder must send unchanged, signed besides Host
// (SignedHeaders lists them). To bind a PUT to its bytes, sign Content-MD5
// (always checked against the body) and Content-Length: a signed
// x-amz-content-sha256 binds only the header, Swift's s3api does not check
// the body against it on presigned requests. The canonical request's payload
// line stays UNSIGNED-PAYLOAD, as AWS documents and s3api computes (botocore
// differs: it puts a signed x-amz-content-sha256 value there).
[[nodiscard]] Result<std::string> Presign(std::string_view method, const HttpUrl& url,
                                          const AwsCredentials& credentials,
                                          std::string_view region, Time now,
                                          std::int64_t expires_seconds,
                                          const HttpFields& headers = {},
                                          std::string_view service = "s3");

}  // namespace headway
