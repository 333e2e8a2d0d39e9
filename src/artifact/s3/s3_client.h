// A client for S3 and S3-compatible object stores (MinIO, Ceph RGW, OpenStack
// Swift's s3api), over libcurl, signing every request itself with SigV4
// (artifact/s3/sigv4.h).
//
// Bodies stream between files and the network: nothing holds a whole object
// in memory. By default every upload's payload is signed: the file range is
// read once to compute its SHA-256 and MD5, then sent with
// x-amz-content-sha256 and Content-MD5, so the server rejects bytes that
// changed on disk or on the way (BadDigest, XAmzContentSHA256Mismatch), over
// plain HTTP too. SigV4 puts the hash in the headers, before the body, and
// the streaming (aws-chunked) form that would avoid the first read is not
// implemented by Swift's s3api (501); the first read hashes at about
// 390 MiB/s on one core (SHA-256 with SHA-NI, plus MD5). Over https,
// options.sign_payload = false sends in one read instead.
// Each part's and each multipart object's ETag is compared with the MD5s
// computed here (options.verify_etag), and a full-object download is
// compared with its ETag when that is a plain MD5.
//
// Errors come back as Status: the S3 error document's Code and Message
// ("NoSuchKey: The specified key does not exist.") with the operation and
// HTTP status, mapped onto StatusCode (SignatureDoesNotMatch,
// InvalidAccessKeyId and bad tokens -> kUnauthenticated, other 403 ->
// kPermissionDenied, 404 -> kNotFound, 409/412 -> kConflict, 429 ->
// kResourceExhausted, 5xx, SlowDown and network failures -> kUnavailable,
// other 4xx -> kInvalidArgument). Idempotent requests are retried first
// (options.max_attempts). No message contains the secret key or the session
// token; the client writes no log lines.
//
// Thread safety: an S3Client may be used from several threads at once; calls
// share connections (and DNS and TLS sessions) through one curl share handle.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "artifact/s3/s3_xml.h"
#include "artifact/s3/sigv4.h"
#include "core/status.h"
#include "core/time.h"

namespace headway {

struct S3ClientOptions {
  // "http://127.0.0.1:8080" or "https://s3.eu-west-3.amazonaws.com"; no path.
  std::string endpoint;
  std::string region = "us-east-1";  // MinIO/Ceph/Swift: the region they are configured with
  AwsCredentials credentials;
  // Path style (https://host/bucket/key) by default, as MinIO, Ceph and Swift
  // need; virtual-host style (https://bucket.host/key) when true.
  bool virtual_host_style = false;
  std::chrono::milliseconds connect_timeout{10'000};
  // Whole-request limit for requests without a large body (HEAD, DELETE,
  // listings, CreateBucket, multipart bookkeeping).
  std::chrono::milliseconds request_timeout{60'000};
  // Transfers of object bodies have no overall limit; they fail when slower
  // than low_speed_bytes_per_second for low_speed_time.
  long low_speed_bytes_per_second = 1024;
  std::chrono::seconds low_speed_time{60};
  // Attempts per request, for idempotent ones (GET, HEAD, PUT, DELETE) that
  // fail in transit or with 500/502/503/504, SlowDown, RequestTimeout or
  // InternalError; the wait doubles from retry_base_delay. POSTs (creating
  // and completing multipart uploads) are tried once.
  int max_attempts = 3;
  std::chrono::milliseconds retry_base_delay{200};
  // Objects up to this size go up in one PutObject; larger ones in parts.
  std::uint64_t multipart_threshold = 64ull << 20;
  std::uint64_t part_size = 16ull << 20;  // raised as PlanParts needs
  // Parts of one Upload in flight at once (1..64); each holds a connection
  // and a 1 MiB read buffer.
  int upload_concurrency = 4;
  // Signed payloads (the default): each upload's bytes are read twice, first
  // for SHA-256 and MD5, and the server refuses a body that does not match
  // (XAmzContentSHA256Mismatch, BadDigest). Off: UNSIGNED-PAYLOAD without
  // Content-MD5, one read, the MD5 taken while sending and compared with the
  // ETag afterwards, so damage is reported but the damaged object was
  // stored; meant for https endpoints, where TLS guards the bytes in transit.
  bool sign_payload = true;
  // Compare returned ETags with the MD5s of what was sent or received. Turn
  // off for buckets with SSE-KMS or SSE-C, whose ETags are not MD5s.
  bool verify_etag = true;
  std::string ca_file;  // empty: the system's CA store
  bool verify_tls = true;
};

struct S3ObjectInfo {
  std::uint64_t size = 0;  // of the object (HEAD) or of what was written (GET)
  std::string etag;        // quotes removed
  std::string content_type;
  std::string last_modified;  // as the server sent it (RFC 1123)
};

struct ByteRange {
  std::uint64_t first = 0;
  std::optional<std::uint64_t> last;  // inclusive; none: to the end
};

struct UploadResult {
  std::string etag;
  bool multipart = false;
  int parts_sent = 0;    // parts uploaded by this call
  int parts_reused = 0;  // parts found already uploaded (resume)
};

class S3Client {
 public:
  // Validates the options (InvalidArgument naming the field).
  [[nodiscard]] static Result<std::unique_ptr<S3Client>> Create(S3ClientOptions options,
                                                                const Clock& clock);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  [[nodiscard]] Status CreateBucket(const std::string& bucket);

  // Streams the file up in one request (any size up to 5 GiB).
  [[nodiscard]] Result<S3ObjectInfo> PutObject(const std::string& bucket, const std::string& key,
                                               const std::string& path,
                                               const std::string& content_type = "");
  // Streams the object (or range) into path, through "path.partial" renamed
  // on success; an existing file at path is replaced only then.
  [[nodiscard]] Result<S3ObjectInfo> GetObject(const std::string& bucket, const std::string& key,
                                               const std::string& path,
                                               std::optional<ByteRange> range = std::nullopt);
  [[nodiscard]] Result<S3ObjectInfo> HeadObject(const std::string& bucket, const std::string& key);
  // Succeeds when the key does not exist, as S3 does.
  [[nodiscard]] Status DeleteObject(const std::string& bucket, const std::string& key);

  // One page (max_keys 1..1000); pass the page's next_continuation_token to
  // get the next one.
  [[nodiscard]] Result<ListObjectsPage> ListObjectsV2(const std::string& bucket,
                                                      const std::string& prefix,
                                                      const std::string& continuation_token = "",
                                                      int max_keys = 1000,
                                                      const std::string& delimiter = "");
  // Every page, concatenated.
  [[nodiscard]] Result<std::vector<S3Object>> ListAllObjects(const std::string& bucket,
                                                             const std::string& prefix);

  // Multipart uploads.
  [[nodiscard]] Result<std::string> CreateMultipartUpload(const std::string& bucket,
                                                          const std::string& key,
                                                          const std::string& content_type = "");
  // Sends bytes [offset, offset+length) of the file as part part_number
  // (1..10000); returns the part with its ETag, checked against its MD5.
  [[nodiscard]] Result<S3Part> UploadPart(const std::string& bucket, const std::string& key,
                                          const std::string& upload_id, int part_number,
                                          const std::string& path, std::uint64_t offset,
                                          std::uint64_t length);
  // Every part uploaded so far (all pages).
  [[nodiscard]] Result<std::vector<S3Part>> ListParts(const std::string& bucket,
                                                      const std::string& key,
                                                      const std::string& upload_id);
  [[nodiscard]] Result<std::string> CompleteMultipartUpload(const std::string& bucket,
                                                            const std::string& key,
                                                            const std::string& upload_id,
                                                            const std::vector<S3Part>& parts);
  [[nodiscard]] Status AbortMultipartUpload(const std::string& bucket, const std::string& key,
                                            const std::string& upload_id);
  // The unfinished multipart uploads of keys starting with `prefix` (all
  // pages), in key order and, for one key, in the order they were started.
  [[nodiscard]] Result<std::vector<S3Upload>> ListMultipartUploads(const std::string& bucket,
                                                                   const std::string& prefix);

  // Uploads a file: one PutObject up to options.multipart_threshold, parts
  // above. *upload_id (may be null) is in/out: in, a multipart upload to
  // resume, whose finished parts (same number, size and MD5) are not sent
  // again; out, the id of the multipart upload this call used, kept when it
  // fails so that a later call resumes it (or AbortMultipartUpload drops it).
  // Resuming an upload that is gone (completed or aborted) is NotFound
  // (NoSuchUpload). Parts go up options.upload_concurrency at a time.
  [[nodiscard]] Result<UploadResult> Upload(const std::string& path, const std::string& bucket,
                                            const std::string& key,
                                            std::string* upload_id = nullptr);

  const S3ClientOptions& options() const { return options_; }

  struct Impl;

 private:
  S3Client(S3ClientOptions options, const Clock& clock);
  S3ClientOptions options_;
  const Clock& clock_;
  std::unique_ptr<Impl> impl_;
};

// The URL of bucket/key (key may be empty: the bucket itself) under the
// options' endpoint and addressing style. Pure; exposed for tests.
[[nodiscard]] Result<HttpUrl> S3ObjectUrl(const S3ClientOptions& options, const std::string& bucket,
                                          const std::string& key, HttpFields query = {});

// The Status for a failed S3 response: the error document's Code and
// Message when there is one, else the HTTP status.
Status S3ErrorStatus(std::string_view operation, long http_status, std::string_view body);

}  // namespace headway
