// A real S3-compatible server for tests: OpenStack Swift with its s3api and
// tempauth middleware (tests/s3/swift_s3), on a free loopback port, with a
// fresh data directory that goes away with the server. It checks AWS
// Signature V4 as S3 does (SignatureDoesNotMatch, expired and tampered
// presigned URLs, clock skew), so a client that passes against it signs
// correctly. Path-style addressing only (http://127.0.0.1:PORT/BUCKET/KEY).
// Sign for region() (another region gets 400 AuthorizationHeaderMalformed);
// awscli needs `s3 = signature_version = s3v4` in its config, or its
// presigned URLs for us-east-1 are Signature V2 (which Swift also accepts).
//
// What Swift 2.30's s3api does not do, so a client must not depend on it:
// aws-chunked uploads (STREAMING-AWS4-HMAC-SHA256-PAYLOAD and trailer
// checksums: 501 NotImplemented; sign the whole payload or send
// UNSIGNED-PAYLOAD), x-amz-checksum-* headers (ignored: neither checked nor
// returned; Content-MD5 and x-amz-content-sha256 are checked), conditional
// PUT (If-None-Match: *), object tagging and lifecycle rules.
//
// Missing packages are not a reason to skip: ok() is false and error() says
// what to install, so a test that ASSERTs ok() fails with that message.
// Not thread-safe; one instance per suite is enough (startup takes seconds).
#pragma once

#include <sys/types.h>

#include <string>

namespace headway::testing {

class S3TestServer {
 public:
  // Starts the server and waits (up to 90 s) until a signed S3 request
  // succeeds. `tls`: HTTPS only, with a certificate from a CA made for the
  // run (ca_file()).
  explicit S3TestServer(bool tls = false);
  // Stops every daemon it started (SIGTERM, then SIGKILL after 15 s) and
  // removes its directory.
  ~S3TestServer();
  S3TestServer(const S3TestServer&) = delete;
  S3TestServer& operator=(const S3TestServer&) = delete;

  bool ok() const { return error_.empty(); }
  // Why it did not start, with the tail of the launcher's log.
  const std::string& error() const { return error_; }

  const std::string& endpoint() const { return endpoint_; }      // "http://127.0.0.1:PORT"
  const std::string& ca_file() const { return ca_file_; }        // with tls: the CA's PEM
  const std::string& region() const { return region_; }          // "us-east-1"
  const std::string& access_key() const { return access_key_; }  // "test:tester"
  const std::string& secret_key() const { return secret_key_; }
  // A bucket name nobody has created yet, for a test to create.
  const std::string& bucket_hint() const { return bucket_hint_; }
  // Seconds from starting the launcher to the first signed answer.
  double startup_seconds() const { return startup_seconds_; }
  // A directory of the test's own, removed with the server.
  const std::string& dir() const { return dir_; }
  // The launcher's and Swift's logs (for a failing test's message).
  std::string Logs() const;

 private:
  std::string Start(bool tls);
  std::string dir_, ca_file_, endpoint_, region_, access_key_, secret_key_, bucket_hint_, error_;
  double startup_seconds_ = 0;
  pid_t pid_ = -1;
};

}  // namespace headway::testing
