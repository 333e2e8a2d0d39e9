#include "artifact/s3/s3_object_store.h"

#include "artifact/s3/sigv4.h"

namespace headway {
namespace {

constexpr std::uint64_t kMaxSinglePut = 5ull << 30;

class S3ObjectStore final : public ObjectStore {
 public:
  S3ObjectStore(S3ObjectStoreOptions options, std::unique_ptr<S3Client> client, const Clock& clock)
      : options_(std::move(options)), client_(std::move(client)), clock_(clock) {}

  std::string Describe() const override {
    return "s3 " + options_.client.endpoint + "/" + options_.bucket +
           (options_.prefix.empty() ? "" : "/" + options_.prefix);
  }

  Result<std::optional<ObjectInfo>> Head(const std::string& key) override {
    auto info = client_->HeadObject(options_.bucket, Key(key));
    if (!info.ok()) {
      if (info.status().code() == StatusCode::kNotFound) return std::optional<ObjectInfo>();
      return info.status();
    }
    return std::optional<ObjectInfo>(ObjectInfo{info->size});
  }

  Status PutFile(const std::string& key, const std::string& path) override {
    auto sent = client_->Upload(path, options_.bucket, Key(key));
    return sent.ok() ? Status::Ok() : sent.status();
  }

  Status GetFile(const std::string& key, const std::string& path) override {
    auto got = client_->GetObject(options_.bucket, Key(key), path);
    return got.ok() ? Status::Ok() : got.status();
  }

  std::optional<std::string> LocalPath(const std::string&) const override { return std::nullopt; }

  Status Delete(const std::string& key) override {
    return client_->DeleteObject(options_.bucket, Key(key));
  }

  Result<std::vector<StoredObject>> List() override {
    auto listed = client_->ListAllObjects(options_.bucket, options_.prefix);
    if (!listed.ok()) return listed.status();
    std::vector<StoredObject> out;
    out.reserve(listed->size());
    for (S3Object& o : *listed) {
      if (o.key.compare(0, options_.prefix.size(), options_.prefix) != 0) continue;
      out.push_back({o.key.substr(options_.prefix.size()), o.size, ParseRfc3339(o.last_modified)});
    }
    return out;
  }

  std::optional<PresignedRequest> PresignPut(const std::string& key, std::uint64_t size,
                                             const std::string& content_md5,
                                             std::chrono::seconds ttl) override {
    if (size > kMaxSinglePut) return std::nullopt;
    HttpFields headers = {{"Content-Length", std::to_string(size)}};
    if (!content_md5.empty()) headers.emplace_back("Content-MD5", content_md5);
    return Presigned("PUT", key, ttl, headers);
  }

  std::optional<PresignedRequest> PresignGet(const std::string& key,
                                             std::chrono::seconds ttl) override {
    return Presigned("GET", key, ttl, {});
  }

  Result<std::optional<std::string>> OpenMultipart(const std::string& key) override {
    auto uploads = client_->ListMultipartUploads(options_.bucket, Key(key));
    if (!uploads.ok()) return uploads.status();
    for (auto it = uploads->rbegin(); it != uploads->rend(); ++it) {
      if (it->key == Key(key)) return std::optional<std::string>(it->upload_id);
    }
    auto created = client_->CreateMultipartUpload(options_.bucket, Key(key));
    if (!created.ok()) return created.status();
    return std::optional<std::string>(std::move(created.value()));
  }

  std::optional<PresignedRequest> PresignPart(const std::string& key, const std::string& upload_id,
                                              int number, std::uint64_t size,
                                              const std::string& content_md5,
                                              std::chrono::seconds ttl) override {
    if (size > kMaxSinglePut || content_md5.empty()) return std::nullopt;
    HttpFields headers = {{"Content-Length", std::to_string(size)}, {"Content-MD5", content_md5}};
    return Presigned("PUT", key, ttl, headers,
                     {{"partNumber", std::to_string(number)}, {"uploadId", upload_id}});
  }

  Result<std::vector<UploadedPart>> ListParts(const std::string& key,
                                              const std::string& upload_id) override {
    auto parts = client_->ListParts(options_.bucket, Key(key), upload_id);
    if (!parts.ok()) return parts.status();
    std::vector<UploadedPart> out;
    out.reserve(parts->size());
    for (S3Part& p : *parts) out.push_back({p.number, p.size, std::move(p.etag)});
    return out;
  }

  Result<std::string> CompleteMultipart(const std::string& key, const std::string& upload_id,
                                        const std::vector<UploadedPart>& parts) override {
    std::vector<S3Part> s3_parts;
    s3_parts.reserve(parts.size());
    for (const UploadedPart& p : parts) s3_parts.push_back({p.number, p.size, p.etag});
    return client_->CompleteMultipartUpload(options_.bucket, Key(key), upload_id, s3_parts);
  }

  Status AbortMultiparts(const std::string& key) override {
    auto uploads = client_->ListMultipartUploads(options_.bucket, Key(key));
    if (!uploads.ok()) return uploads.status();
    Status first = Status::Ok();
    for (const S3Upload& u : *uploads) {
      if (u.key != Key(key)) continue;
      Status s = client_->AbortMultipartUpload(options_.bucket, u.key, u.upload_id);
      if (!s.ok() && s.code() != StatusCode::kNotFound && first.ok()) first = s;
    }
    return first;
  }

 private:
  std::string Key(const std::string& key) const { return options_.prefix + key; }

  std::optional<PresignedRequest> Presigned(const std::string& method, const std::string& key,
                                            std::chrono::seconds ttl, const HttpFields& headers,
                                            HttpFields query = {}) {
    const std::string& endpoint =
        options_.public_endpoint.empty() ? options_.client.endpoint : options_.public_endpoint;
    auto url = ParseHttpUrl(endpoint);
    if (!url.ok()) return std::nullopt;
    if (options_.client.virtual_host_style) {
      url->host = options_.bucket + "." + url->host;
      url->path = "/" + Key(key);
    } else {
      url->path = "/" + options_.bucket + "/" + Key(key);
    }
    url->query = std::move(query);
    auto signed_url = Presign(method, *url, options_.client.credentials, options_.client.region,
                              clock_.Now(), ttl.count(), headers);
    if (!signed_url.ok()) return std::nullopt;
    PresignedRequest out;
    out.method = method;
    out.url = *signed_url;
    for (const auto& [name, value] : headers) out.headers.emplace_back(name, value);
    return out;
  }

  S3ObjectStoreOptions options_;
  std::unique_ptr<S3Client> client_;
  const Clock& clock_;
};

}  // namespace

Result<std::unique_ptr<ObjectStore>> OpenS3ObjectStore(S3ObjectStoreOptions options,
                                                       const Clock& clock) {
  if (options.bucket.empty()) return InvalidArgument("the S3 bucket is not set (--s3-bucket)");
  auto client = S3Client::Create(options.client, clock);
  if (!client.ok()) return client.status();
  Status created = (*client)->CreateBucket(options.bucket);
  if (!created.ok() && created.code() != StatusCode::kConflict) {
    return Unavailable("cannot use bucket '" + options.bucket + "' at " + options.client.endpoint +
                       ": " + created.message());
  }
  return std::unique_ptr<ObjectStore>(
      std::make_unique<S3ObjectStore>(std::move(options), std::move(client.value()), clock));
}

}  // namespace headway
