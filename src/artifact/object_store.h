// Where artifact bytes live: objects under keys, written whole and read
// back, in a local directory or an S3-compatible bucket. Keys are what
// core/artifact.h's ContentKey() gives, so an object's key names its content.
//
// Thread safety: implementations allow concurrent calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace headway {

struct ObjectInfo {
  std::uint64_t size = 0;
};

// An object as a listing gives it.
struct StoredObject {
  std::string key;
  std::uint64_t size = 0;
  std::optional<Time> modified;  // nullopt when the store did not say
};

// A URL a client uses directly, without the bytes passing the server.
struct PresignedRequest {
  std::string method;  // "PUT" or "GET"
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;  // to send with it
};

// A part of an unfinished multipart upload, as the store holds it.
struct UploadedPart {
  int number = 0;  // 1..10000
  std::uint64_t size = 0;
  std::string etag;  // the part's MD5, hex, as S3 gives it
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;
  // For logs and `headway version`: "local /var/lib/headway/artifacts", "s3 http://host/bucket".
  virtual std::string Describe() const = 0;
  // nullopt when there is no object under `key`.
  virtual Result<std::optional<ObjectInfo>> Head(const std::string& key) = 0;
  // Stores the file at `path` under `key` (replacing any object there). The
  // file may be moved rather than copied when it is on the store's disk.
  virtual Status PutFile(const std::string& key, const std::string& path) = 0;
  // Copies the object into the file `path` (replaced only once complete).
  virtual Status GetFile(const std::string& key, const std::string& path) = 0;
  // A local path the object can be read from, when the store is on this
  // machine; nullopt for a remote store (use PresignGet).
  virtual std::optional<std::string> LocalPath(const std::string& key) const = 0;
  virtual Status Delete(const std::string& key) = 0;
  // Every object of the store (under its prefix), keys as Put takes them.
  virtual Result<std::vector<StoredObject>> List() = 0;
  // For a remote store: a request that uploads `key` with a body of `size`
  // bytes (bound to them by `content_md5`, base64, when given), valid for
  // `ttl`; and one that downloads it. nullopt: the store has none (bytes go
  // through the server).
  virtual std::optional<PresignedRequest> PresignPut(const std::string& key, std::uint64_t size,
                                                     const std::string& content_md5,
                                                     std::chrono::seconds ttl) = 0;
  virtual std::optional<PresignedRequest> PresignGet(const std::string& key,
                                                     std::chrono::seconds ttl) = 0;

  // Multipart uploads a client drives itself, one presigned request per
  // part, and can resume: for stores that have them (S3). The defaults are
  // a store without (the local one).
  //
  // The id of an unfinished upload to `key` (the newest, when several), or
  // of a new one; nullopt: the store has no multipart uploads.
  virtual Result<std::optional<std::string>> OpenMultipart(const std::string& /*key*/) {
    return std::optional<std::string>();
  }
  // A request that sends part `number` of `upload_id` with a body of `size`
  // bytes, bound to them by `content_md5` (base64).
  virtual std::optional<PresignedRequest> PresignPart(const std::string& /*key*/,
                                                      const std::string& /*upload_id*/,
                                                      int /*number*/, std::uint64_t /*size*/,
                                                      const std::string& /*content_md5*/,
                                                      std::chrono::seconds /*ttl*/) {
    return std::nullopt;
  }
  // The parts of `upload_id` the store holds; NotFound when the upload is gone.
  virtual Result<std::vector<UploadedPart>> ListParts(const std::string& /*key*/,
                                                      const std::string& /*upload_id*/) {
    return InvalidArgument("this object store has no multipart uploads");
  }
  // Assembles the object under `key` from `parts` (ascending); returns its ETag.
  virtual Result<std::string> CompleteMultipart(const std::string& /*key*/,
                                                const std::string& /*upload_id*/,
                                                const std::vector<UploadedPart>& /*parts*/) {
    return InvalidArgument("this object store has no multipart uploads");
  }
  // Drops every unfinished upload to `key`, and the parts they hold.
  virtual Status AbortMultiparts(const std::string& /*key*/) { return Status::Ok(); }
};

}  // namespace headway
