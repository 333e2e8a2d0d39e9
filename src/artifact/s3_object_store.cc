#include "artifact/s3_object_store.h"

#include "artifact/sigv4.h"

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

  std::optional<std::string> LocalPath(const std::string&) const override { return std::nullopt; }

  Status Delete(const std::string& key) override {
    return client_->DeleteObject(options_.bucket, Key(key));
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

 private:
  std::string Key(const std::string& key) const { return options_.prefix + key; }

  std::optional<PresignedRequest> Presigned(const std::string& method, const std::string& key,
                                            std::chrono::seconds ttl, const HttpFields& headers) {
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
