#include "artifact/s3/s3_client.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "artifact/file_digest.h"
#include "artifact/s3/multipart.h"
#include "core/ascii.h"

namespace headway {
namespace internal {
namespace {

constexpr std::size_t kMaxResponseBody = 16u << 20;  // listings, multipart bookkeeping
constexpr std::size_t kMaxErrorBody = 64u << 10;

bool IsMd5Hex(std::string_view s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_;
};

Status ErrnoStatus(const std::string& what, int err) {
  std::string m = what + ": " + std::strerror(err);
  return err == ENOENT ? NotFound(m) : Unavailable(m);
}

bool ValidBucket(const std::string& b) {
  if (b.size() < 3 || b.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(b.front()) || !alnum(b.back())) return false;
  return std::all_of(b.begin(), b.end(), [&](char c) { return alnum(c) || c == '-' || c == '.'; });
}

// What one HTTP exchange sends and where its body goes.
struct Call {
  std::string operation;  // "PUT bucket/key", for messages
  std::string method;
  HttpUrl url;
  HttpFields headers;
  std::string payload_sha256 = std::string(kEmptyPayloadSha256);
  // Request body: a file range, or text.
  int body_fd = -1;
  std::uint64_t body_offset = 0;
  std::uint64_t body_length = 0;
  const std::string* body_text = nullptr;
  // Response body of a 2xx answer: into this file (with an MD5), or memory.
  int sink_fd = -1;
  bool long_transfer = false;
};

struct Response {
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // memory bodies, and error documents
  std::uint64_t sunk = 0;                      // bytes written to sink_fd
  // With want_md5: the MD5 of the body received (2xx GET) or sent (upload);
  // empty when an upload was not read front to back once.
  std::string md5_hex;
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

struct Transfer {
  const Call* call = nullptr;
  CURL* curl = nullptr;
  Response* response = nullptr;
  std::uint64_t sent = 0;
  int sink_errno = 0;
  bool body_too_large = false;
  EVP_MD_CTX* md5 = nullptr;
  std::uint64_t md5_upto = 0;  // bytes of an upload hashed so far
};

size_t OnHeader(char* p, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  std::string_view line(p, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.rfind("HTTP/", 0) == 0) {
    t->response->headers.clear();  // a new response (after 100 Continue)
    return size * n;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return size * n;
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  t->response->headers[AsciiLower(line.substr(0, colon))] = std::string(value);
  return size * n;
}

size_t OnWrite(char* p, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  const size_t len = size * n;
  long code = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
  if (t->call->sink_fd >= 0 && code >= 200 && code < 300) {
    size_t done = 0;
    while (done < len) {
      ssize_t w = ::write(t->call->sink_fd, p + done, len - done);
      if (w < 0) {
        if (errno == EINTR) continue;
        t->sink_errno = errno;
        return 0;
      }
      done += static_cast<size_t>(w);
    }
    if (t->md5 != nullptr) EVP_DigestUpdate(t->md5, p, len);
    t->response->sunk += len;
    return len;
  }
  const bool ok = code >= 200 && code < 300;
  const size_t limit = ok ? kMaxResponseBody : kMaxErrorBody;
  if (t->response->body.size() + len > limit) {
    if (ok) {
      t->body_too_large = true;
      return 0;
    }
    t->response->body.append(p, limit - t->response->body.size());
    return len;  // the rest of an oversized error document is dropped
  }
  t->response->body.append(p, len);
  return len;
}

size_t OnRead(char* buf, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  const Call& c = *t->call;
  const std::uint64_t total = c.body_text != nullptr ? c.body_text->size() : c.body_length;
  const size_t want = static_cast<size_t>(std::min<std::uint64_t>(size * n, total - t->sent));
  if (want == 0) return 0;
  if (c.body_text != nullptr) {
    std::memcpy(buf, c.body_text->data() + t->sent, want);
    t->sent += want;
    return want;
  }
  for (;;) {
    ssize_t r = ::pread(c.body_fd, buf, want, static_cast<off_t>(c.body_offset + t->sent));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return CURL_READFUNC_ABORT;             // a read error, or the file shrank
    if (t->md5 != nullptr && t->sent == t->md5_upto) {  // not bytes resent after a rewind
      EVP_DigestUpdate(t->md5, buf, static_cast<size_t>(r));
      t->md5_upto += static_cast<std::uint64_t>(r);
    }
    t->sent += static_cast<std::uint64_t>(r);
    return static_cast<size_t>(r);
  }
}

int OnSeek(void* ud, curl_off_t offset, int origin) {
  auto* t = static_cast<Transfer*>(ud);
  if (origin != SEEK_SET || offset < 0) return CURL_SEEKFUNC_CANTSEEK;
  t->sent = static_cast<std::uint64_t>(offset);
  return CURL_SEEKFUNC_OK;
}

std::string Redact(std::string text, const AwsCredentials& creds) {
  for (const std::string* secret : {&creds.secret_access_key, &creds.session_token}) {
    if (secret->empty()) continue;
    for (size_t pos; (pos = text.find(*secret)) != std::string::npos;)
      text.replace(pos, secret->size(), "<redacted>");
  }
  return text;
}

}  // namespace
}  // namespace internal

using namespace internal;  // NOLINT: this file's own helpers

Status S3ErrorStatus(std::string_view operation, long http_status, std::string_view body) {
  S3ErrorBody e = ParseS3Error(body);
  if (e.code.empty()) {
    switch (http_status) {
      case 400:
        e.code = "BadRequest";
        break;
      case 403:
        e.code = "Forbidden";
        break;
      case 404:
        e.code = "NotFound";
        break;
      case 409:
        e.code = "Conflict";
        break;
      case 412:
        e.code = "PreconditionFailed";
        break;
      case 416:
        e.code = "InvalidRange";
        break;
      default:
        e.code = "HTTP" + std::to_string(http_status);
    }
  }
  std::string message = std::string(operation) + ": " + e.code;
  if (!e.message.empty()) message += ": " + e.message.substr(0, 512);
  message += " (HTTP " + std::to_string(http_status) + ")";
  for (char& c : message)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  StatusCode code = StatusCode::kInternal;
  if (e.code == "SignatureDoesNotMatch" || e.code == "InvalidAccessKeyId" ||
      e.code == "InvalidToken" || e.code == "ExpiredToken" || http_status == 401) {
    code = StatusCode::kUnauthenticated;
  } else if (http_status == 403) {
    code = StatusCode::kPermissionDenied;
  } else if (http_status == 404) {
    code = StatusCode::kNotFound;
  } else if (http_status == 409 || http_status == 412) {
    code = StatusCode::kConflict;
  } else if (http_status == 413) {
    code = StatusCode::kPayloadTooLarge;
  } else if (http_status == 429) {
    code = StatusCode::kResourceExhausted;
  } else if (http_status >= 500 || e.code == "SlowDown" || e.code == "RequestTimeout") {
    code = StatusCode::kUnavailable;
  } else if (http_status >= 400) {
    code = StatusCode::kInvalidArgument;
  }
  return Status(code, message);
}

Result<HttpUrl> S3ObjectUrl(const S3ClientOptions& options, const std::string& bucket,
                            const std::string& key, HttpFields query) {
  auto url = ParseHttpUrl(options.endpoint);
  if (!url.ok()) return InvalidArgument("endpoint: " + url.status().message());
  if (url->path != "/" || !url->query.empty())
    return InvalidArgument("endpoint: must be scheme://host[:port] without a path or query");
  if (!ValidBucket(bucket))
    return InvalidArgument("bucket: '" + bucket +
                           "' must be 3-63 characters of a-z, 0-9, '.', '-', starting and ending "
                           "with a letter or digit");
  if (key.size() > 1024) return InvalidArgument("key: over 1024 bytes");
  if (options.virtual_host_style) {
    url->host = bucket + "." + url->host;
    url->path = "/" + key;
  } else {
    url->path = "/" + bucket + (key.empty() ? "" : "/" + key);
  }
  url->query = std::move(query);
  return std::move(*url);
}

struct S3Client::Impl {
  CURLSH* share = nullptr;
  std::array<std::mutex, CURL_LOCK_DATA_LAST> locks;

  static void Lock(CURL*, curl_lock_data data, curl_lock_access, void* ud) {
    static_cast<Impl*>(ud)->locks[static_cast<size_t>(data)].lock();
  }
  static void Unlock(CURL*, curl_lock_data data, void* ud) {
    static_cast<Impl*>(ud)->locks[static_cast<size_t>(data)].unlock();
  }
};

namespace {

// One attempt. *transport_error: the exchange failed below HTTP (connect,
// timeout, reset), not on our side (a local write).
Status PerformOnce(const S3ClientOptions& o, S3Client::Impl& impl, Time now, const Call& call,
                   Response& response, bool want_md5, bool* transport_error) {
  *transport_error = false;
  SigV4Request request{call.method, call.url, call.headers, call.payload_sha256};
  auto signed_request = SignRequest(request, o.credentials, o.region, now);
  if (!signed_request.ok()) return signed_request.status();

  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return Internal(call.operation + ": curl_easy_init failed");
  CURL* h = curl.get();
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> list(nullptr, curl_slist_free_all);
  auto add = [&](const std::string& line) {
    list.reset(curl_slist_append(list.release(), line.c_str()));
  };
  bool has_content_type = false;
  for (const auto& [k, v] : call.headers) {
    add(k + ": " + v);
    if (AsciiLower(k) == "content-type") has_content_type = true;
  }
  for (const auto& [k, v] : signed_request->headers) add(k + ": " + v);
  if (!has_content_type) add("Content-Type:");  // no form type from curl on POST

  Transfer t;
  t.call = &call;
  t.curl = h;
  t.response = &response;
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> md5(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (want_md5) {
    EVP_DigestInit_ex(md5.get(), EVP_md5(), nullptr);
    t.md5 = md5.get();
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  const std::string url = UrlString(call.url);
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);  // keys with "./" or "//" stay as signed
  curl_easy_setopt(h, CURLOPT_SHARE, impl.share);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list.get());
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.connect_timeout.count()));
  if (call.long_transfer) {
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, o.low_speed_bytes_per_second);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(o.low_speed_time.count()));
  } else {
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(o.request_timeout.count()));
  }
  if (!o.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, o.ca_file.c_str());
  if (!o.verify_tls) {
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnWrite);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(h, CURLOPT_READFUNCTION, OnRead);
  curl_easy_setopt(h, CURLOPT_READDATA, &t);
  curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, OnSeek);
  curl_easy_setopt(h, CURLOPT_SEEKDATA, &t);
  const curl_off_t body_size = static_cast<curl_off_t>(
      call.body_text != nullptr ? call.body_text->size() : call.body_length);
  if (call.method == "PUT") {
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, body_size);
  } else if (call.method == "POST") {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, body_size);
  } else if (call.method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (call.method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, call.method.c_str());
  }

  CURLcode rc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response.status);
  if (t.sink_errno != 0)
    return Unavailable(call.operation + ": writing the download: " + std::strerror(t.sink_errno));
  if (t.body_too_large) return Unavailable(call.operation + ": response body over 16 MiB");
  if (rc != CURLE_OK) {
    *transport_error = true;
    std::string detail = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc);
    return Unavailable(Redact(call.operation + ": " + detail, o.credentials));
  }
  if (want_md5) {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(md5.get(), d, &len);
    response.md5_hex = LowerHex(d, len);
    if (call.body_fd >= 0 && t.md5_upto != call.body_length) response.md5_hex.clear();
  }
  if (response.status < 200 || response.status >= 300) {
    Status s = S3ErrorStatus(call.operation, response.status, response.body);
    return Status(s.code(), Redact(s.message(), o.credentials));
  }
  return Status::Ok();
}

bool Retryable(const Call& call, const Response& r, bool transport_error) {
  if (call.method == "POST") return false;  // creating or completing an upload is not idempotent
  if (transport_error) return true;
  if (r.status == 500 || r.status == 502 || r.status == 503 || r.status == 504) return true;
  const std::string code = ParseS3Error(r.body).code;
  return code == "SlowDown" || code == "RequestTimeout" || code == "InternalError";
}

// Up to options.max_attempts attempts, each signed afresh, with
// retry_base_delay doubling between them. A download's file starts over.
Status Perform(const S3ClientOptions& o, S3Client::Impl& impl, const Clock& clock, const Call& call,
               Response& response, bool want_md5 = false) {
  auto delay = o.retry_base_delay;
  for (int attempt = 1;; ++attempt) {
    response = Response();
    bool transport_error = false;
    Status s = PerformOnce(o, impl, clock.Now(), call, response, want_md5, &transport_error);
    if (s.ok() || attempt >= o.max_attempts || !Retryable(call, response, transport_error))
      return s;
    if (call.sink_fd >= 0 &&
        (::ftruncate(call.sink_fd, 0) != 0 || ::lseek(call.sink_fd, 0, SEEK_SET) != 0))
      return s;
    std::this_thread::sleep_for(delay);
    delay *= 2;
  }
}

// Sends bytes [offset, offset+length) of fd as the call's body and returns
// their MD5 (hex). Signed payload: a first read for SHA-256 and MD5, then the
// request with x-amz-content-sha256 and Content-MD5, which the server checks.
// Unsigned (options.sign_payload off): one read, UNSIGNED-PAYLOAD, the MD5
// taken on the way for the caller to compare with the ETag.
Result<std::string> SendFileRange(const S3ClientOptions& o, S3Client::Impl& impl,
                                  const Clock& clock, Call& c, int fd, const std::string& path,
                                  std::uint64_t offset, std::uint64_t length, Response& r) {
  c.body_fd = fd;
  c.body_offset = offset;
  c.body_length = length;
  c.long_transfer = true;
  if (!o.sign_payload) {
    c.payload_sha256 = std::string(kUnsignedPayload);
    HEADWAY_RETURN_IF_ERROR(Perform(o, impl, clock, c, r, /*want_md5=*/true));
    if (r.md5_hex.empty()) return Unavailable(c.operation + ": the body was not read in one pass");
    return r.md5_hex;
  }
  auto digests = DigestRange(fd, path, offset, length);
  if (!digests.ok()) return digests.status();
  c.headers.emplace_back("Content-MD5", digests->md5_base64);
  c.payload_sha256 = digests->sha256_hex;
  HEADWAY_RETURN_IF_ERROR(Perform(o, impl, clock, c, r));
  return digests->md5_hex;
}

std::uint64_t ParseSize(const std::string& s) {
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return 0;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

S3ObjectInfo InfoFrom(const Response& r) {
  S3ObjectInfo info;
  info.size = ParseSize(r.Header("content-length"));
  info.etag = UnquoteEtag(r.Header("etag"));
  info.content_type = r.Header("content-type");
  info.last_modified = r.Header("last-modified");
  return info;
}

}  // namespace

S3Client::S3Client(S3ClientOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock), impl_(std::make_unique<Impl>()) {
  impl_->share = curl_share_init();
  curl_share_setopt(impl_->share, CURLSHOPT_LOCKFUNC, &Impl::Lock);
  curl_share_setopt(impl_->share, CURLSHOPT_UNLOCKFUNC, &Impl::Unlock);
  curl_share_setopt(impl_->share, CURLSHOPT_USERDATA, impl_.get());
  curl_share_setopt(impl_->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  curl_share_setopt(impl_->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  curl_share_setopt(impl_->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
}

S3Client::~S3Client() { curl_share_cleanup(impl_->share); }

Result<std::unique_ptr<S3Client>> S3Client::Create(S3ClientOptions options, const Clock& clock) {
  static std::once_flag curl_once;
  std::call_once(curl_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  auto url = S3ObjectUrl(options, "bucket", "");
  if (!url.ok()) return url.status();
  if (options.credentials.access_key_id.empty() || options.credentials.secret_access_key.empty())
    return InvalidArgument("credentials: access key id and secret key are required");
  if (options.region.empty()) return InvalidArgument("region: empty");
  if (options.part_size > kS3MaxPartSize) return InvalidArgument("part_size: over 5 GiB");
  if (options.multipart_threshold > kS3MaxPartSize)
    return InvalidArgument("multipart_threshold: over 5 GiB, the largest single PutObject");
  if (options.max_attempts < 1) return InvalidArgument("max_attempts: must be >= 1");
  if (options.upload_concurrency < 1 || options.upload_concurrency > 64)
    return InvalidArgument("upload_concurrency: must be 1..64");
  if (options.retry_base_delay.count() < 0) return InvalidArgument("retry_base_delay: negative");
  if (options.connect_timeout.count() <= 0 || options.request_timeout.count() <= 0)
    return InvalidArgument("timeouts: must be positive");
  return std::unique_ptr<S3Client>(new S3Client(std::move(options), clock));
}

Status S3Client::CreateBucket(const std::string& bucket) {
  auto url = S3ObjectUrl(options_, bucket, "");
  if (!url.ok()) return url.status();
  std::string body;
  if (options_.region != "us-east-1") {
    body =
        "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<LocationConstraint>" +
        options_.region +
        "</LocationConstraint>"
        "</CreateBucketConfiguration>";
  }
  Call c;
  c.operation = "CreateBucket " + bucket;
  c.method = "PUT";
  c.url = std::move(*url);
  c.body_text = &body;
  c.payload_sha256 = Sha256Hex(body);
  Response r;
  return Perform(options_, *impl_, clock_, c, r);
}

Result<S3ObjectInfo> S3Client::PutObject(const std::string& bucket, const std::string& key,
                                         const std::string& path, const std::string& content_type) {
  if (key.empty()) return InvalidArgument("key: empty");
  auto url = S3ObjectUrl(options_, bucket, key);
  if (!url.ok()) return url.status();
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus("opening " + path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat " + path, errno);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > kS3MaxPartSize)
    return InvalidArgument(path + ": over 5 GiB, too large for one PutObject; use Upload");
  Call c;
  c.operation = "PutObject " + bucket + "/" + key;
  c.method = "PUT";
  c.url = std::move(*url);
  if (!content_type.empty()) c.headers.emplace_back("Content-Type", content_type);
  Response r;
  auto md5 = SendFileRange(options_, *impl_, clock_, c, fd.get(), path, 0, size, r);
  if (!md5.ok()) return md5.status();
  S3ObjectInfo info = InfoFrom(r);
  info.size = size;
  if (options_.verify_etag && info.etag != *md5)
    return Unavailable(c.operation + ": the server's ETag " + info.etag +
                       " is not the MD5 of what was sent (" + *md5 + ")");
  return info;
}

Result<S3ObjectInfo> S3Client::GetObject(const std::string& bucket, const std::string& key,
                                         const std::string& path, std::optional<ByteRange> range) {
  if (key.empty()) return InvalidArgument("key: empty");
  auto url = S3ObjectUrl(options_, bucket, key);
  if (!url.ok()) return url.status();
  Call c;
  c.operation = "GetObject " + bucket + "/" + key;
  c.method = "GET";
  c.url = std::move(*url);
  if (range) {
    if (range->last && *range->last < range->first)
      return InvalidArgument("range: last byte before first");
    c.headers.emplace_back("Range", "bytes=" + std::to_string(range->first) + "-" +
                                        (range->last ? std::to_string(*range->last) : ""));
  }
  const std::string partial = path + ".partial";
  Fd fd(::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return ErrnoStatus("creating " + partial, errno);
  c.sink_fd = fd.get();
  c.long_transfer = true;
  Response r;
  Status s = Perform(options_, *impl_, clock_, c, r, /*want_md5=*/!range.has_value());
  S3ObjectInfo info = InfoFrom(r);
  info.size = r.sunk;
  if (s.ok() && !range && options_.verify_etag && IsMd5Hex(info.etag) && info.etag != r.md5_hex) {
    s = Unavailable(c.operation + ": the received bytes' MD5 " + r.md5_hex +
                    " is not the object's ETag " + info.etag);
  }
  if (s.ok() && ::fsync(fd.get()) != 0) s = ErrnoStatus("writing " + partial, errno);
  if (s.ok() && ::close(fd.release()) != 0) s = ErrnoStatus("writing " + partial, errno);
  if (s.ok() && ::rename(partial.c_str(), path.c_str()) != 0)
    s = ErrnoStatus("renaming " + partial, errno);
  if (!s.ok()) {
    ::unlink(partial.c_str());
    return s;
  }
  return info;
}

Result<S3ObjectInfo> S3Client::HeadObject(const std::string& bucket, const std::string& key) {
  if (key.empty()) return InvalidArgument("key: empty");
  auto url = S3ObjectUrl(options_, bucket, key);
  if (!url.ok()) return url.status();
  Call c;
  c.operation = "HeadObject " + bucket + "/" + key;
  c.method = "HEAD";
  c.url = std::move(*url);
  Response r;
  Status s = Perform(options_, *impl_, clock_, c, r);
  if (!s.ok() && r.status == 404)
    return NotFound(c.operation + ": NoSuchKey (HTTP 404)");  // HEAD answers carry no body
  HEADWAY_RETURN_IF_ERROR(s);
  return InfoFrom(r);
}

Status S3Client::DeleteObject(const std::string& bucket, const std::string& key) {
  if (key.empty()) return InvalidArgument("key: empty");
  auto url = S3ObjectUrl(options_, bucket, key);
  if (!url.ok()) return url.status();
  Call c;
  c.operation = "DeleteObject " + bucket + "/" + key;
  c.method = "DELETE";
  c.url = std::move(*url);
  Response r;
  Status s = Perform(options_, *impl_, clock_, c, r);
  if (!s.ok() && r.status == 404 && ParseS3Error(r.body).code == "NoSuchKey") return Status::Ok();
  return s;
}

Result<ListObjectsPage> S3Client::ListObjectsV2(const std::string& bucket,
                                                const std::string& prefix,
                                                const std::string& continuation_token, int max_keys,
                                                const std::string& delimiter) {
  if (max_keys < 1 || max_keys > 1000) return InvalidArgument("max_keys: must be 1..1000");
  HttpFields q{{"list-type", "2"}, {"max-keys", std::to_string(max_keys)}};
  if (!prefix.empty()) q.emplace_back("prefix", prefix);
  if (!delimiter.empty()) q.emplace_back("delimiter", delimiter);
  if (!continuation_token.empty()) q.emplace_back("continuation-token", continuation_token);
  auto url = S3ObjectUrl(options_, bucket, "", std::move(q));
  if (!url.ok()) return url.status();
  Call c;
  c.operation = "ListObjectsV2 " + bucket;
  c.method = "GET";
  c.url = std::move(*url);
  Response r;
  HEADWAY_RETURN_IF_ERROR(Perform(options_, *impl_, clock_, c, r));
  auto page = ParseListObjectsV2(r.body);
  if (!page.ok()) return Unavailable(c.operation + ": " + page.status().message());
  return page;
}

Result<std::vector<S3Object>> S3Client::ListAllObjects(const std::string& bucket,
                                                       const std::string& prefix) {
  std::vector<S3Object> all;
  std::string token;
  for (int pages = 0;; ++pages) {
    auto page = ListObjectsV2(bucket, prefix, token);
    if (!page.ok()) return page.status();
    for (S3Object& o : page->objects) all.push_back(std::move(o));
    if (!page->truncated) return all;
    if (page->next_continuation_token == token || pages > 1'000'000)
      return Unavailable("ListObjectsV2 " + bucket + ": the continuation token does not advance");
    token = page->next_continuation_token;
  }
}

Result<std::string> S3Client::CreateMultipartUpload(const std::string& bucket,
                                                    const std::string& key,
                                                    const std::string& content_type) {
  if (key.empty()) return InvalidArgument("key: empty");
  auto url = S3ObjectUrl(options_, bucket, key, {{"uploads", ""}});
  if (!url.ok()) return url.status();
  Call c;
  c.operation = "CreateMultipartUpload " + bucket + "/" + key;
  c.method = "POST";
  c.url = std::move(*url);
  if (!content_type.empty()) c.headers.emplace_back("Content-Type", content_type);
  const std::string empty;
  c.body_text = &empty;
  Response r;
  HEADWAY_RETURN_IF_ERROR(Perform(options_, *impl_, clock_, c, r));
  auto id = ParseInitiateMultipartUpload(r.body);
  if (!id.ok()) return Unavailable(c.operation + ": " + id.status().message());
  return id;
}

Result<S3Part> S3Client::UploadPart(const std::string& bucket, const std::string& key,
                                    const std::string& upload_id, int part_number,
                                    const std::string& path, std::uint64_t offset,
                                    std::uint64_t length) {
  if (part_number < 1 || part_number > kS3MaxParts)
    return InvalidArgument("part_number: must be 1..10000");
  if (length > kS3MaxPartSize) return InvalidArgument("part length: over 5 GiB");
  if (upload_id.empty()) return InvalidArgument("upload_id: empty");
  if (key.empty()) return InvalidArgument("key: empty");
  auto url = S3ObjectUrl(options_, bucket, key,
                         {{"partNumber", std::to_string(part_number)}, {"uploadId", upload_id}});
  if (!url.ok()) return url.status();
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus("opening " + path, errno);
  Call c;
  c.operation = "UploadPart " + bucket + "/" + key + " part " + std::to_string(part_number);
  c.method = "PUT";
  c.url = std::move(*url);
  Response r;
  auto md5 = SendFileRange(options_, *impl_, clock_, c, fd.get(), path, offset, length, r);
  if (!md5.ok()) return md5.status();
  S3Part part{part_number, length, UnquoteEtag(r.Header("etag"))};
  if (part.etag.empty()) return Unavailable(c.operation + ": no ETag in the response");
  if (options_.verify_etag && part.etag != *md5)
    return Unavailable(c.operation + ": the server's ETag " + part.etag +
                       " is not the MD5 of what was sent (" + *md5 + ")");
  return part;
}

Result<std::vector<S3Part>> S3Client::ListParts(const std::string& bucket, const std::string& key,
                                                const std::string& upload_id) {
  if (upload_id.empty()) return InvalidArgument("upload_id: empty");
  if (key.empty()) return InvalidArgument("key: empty");
  std::vector<S3Part> all;
  int marker = 0;
  for (;;) {
    HttpFields q{{"uploadId", upload_id}};
    if (marker > 0) q.emplace_back("part-number-marker", std::to_string(marker));
    auto url = S3ObjectUrl(options_, bucket, key, std::move(q));
    if (!url.ok()) return url.status();
    Call c;
    c.operation = "ListParts " + bucket + "/" + key;
    c.method = "GET";
    c.url = std::move(*url);
    Response r;
    HEADWAY_RETURN_IF_ERROR(Perform(options_, *impl_, clock_, c, r));
    auto page = ParseListParts(r.body);
    if (!page.ok()) return Unavailable(c.operation + ": " + page.status().message());
    for (S3Part& p : page->parts) all.push_back(std::move(p));
    if (!page->truncated) break;
    if (page->next_part_number_marker <= marker)
      return Unavailable(c.operation + ": the part number marker does not advance");
    marker = page->next_part_number_marker;
  }
  return all;
}

Result<std::string> S3Client::CompleteMultipartUpload(const std::string& bucket,
                                                      const std::string& key,
                                                      const std::string& upload_id,
                                                      const std::vector<S3Part>& parts) {
  if (upload_id.empty()) return InvalidArgument("upload_id: empty");
  if (key.empty()) return InvalidArgument("key: empty");
  if (parts.empty() || parts.size() > static_cast<size_t>(kS3MaxParts))
    return InvalidArgument("parts: must be 1..10000");
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i].number <= parts[i - 1].number)
      return InvalidArgument("parts: part numbers must ascend");
  }
  auto url = S3ObjectUrl(options_, bucket, key, {{"uploadId", upload_id}});
  if (!url.ok()) return url.status();
  const std::string body = CompleteMultipartUploadXml(parts);
  Call c;
  c.operation = "CompleteMultipartUpload " + bucket + "/" + key;
  c.method = "POST";
  c.url = std::move(*url);
  c.headers.emplace_back("Content-Type", "application/xml");
  c.body_text = &body;
  c.payload_sha256 = Sha256Hex(body);
  c.long_transfer = true;  // the server may take long to assemble a large object
  Response r;
  HEADWAY_RETURN_IF_ERROR(Perform(options_, *impl_, clock_, c, r));
  // A 200 whose body is an <Error>: the upload failed after all.
  S3ErrorBody e = ParseS3Error(r.body);
  if (!e.code.empty()) {
    Status s = S3ErrorStatus(c.operation, 500, r.body);
    return Status(s.code(), Redact(s.message(), options_.credentials));
  }
  auto etag = ParseCompleteMultipartUpload(r.body);
  if (!etag.ok()) return Unavailable(c.operation + ": " + etag.status().message());
  return etag;
}

Status S3Client::AbortMultipartUpload(const std::string& bucket, const std::string& key,
                                      const std::string& upload_id) {
  if (upload_id.empty()) return InvalidArgument("upload_id: empty");
  if (key.empty()) return InvalidArgument("key: empty");
  auto url = S3ObjectUrl(options_, bucket, key, {{"uploadId", upload_id}});
  if (!url.ok()) return url.status();
  Call c;
  c.operation = "AbortMultipartUpload " + bucket + "/" + key;
  c.method = "DELETE";
  c.url = std::move(*url);
  Response r;
  return Perform(options_, *impl_, clock_, c, r);
}

Result<std::vector<S3Upload>> S3Client::ListMultipartUploads(const std::string& bucket,
                                                             const std::string& prefix) {
  std::vector<S3Upload> all;
  std::string key_marker, upload_id_marker;
  for (;;) {
    HttpFields q{{"uploads", ""}};
    if (!prefix.empty()) q.emplace_back("prefix", prefix);
    if (!key_marker.empty()) q.emplace_back("key-marker", key_marker);
    if (!upload_id_marker.empty()) q.emplace_back("upload-id-marker", upload_id_marker);
    auto url = S3ObjectUrl(options_, bucket, "", std::move(q));
    if (!url.ok()) return url.status();
    Call c;
    c.operation = "ListMultipartUploads " + bucket + "/" + prefix;
    c.method = "GET";
    c.url = std::move(*url);
    Response r;
    HEADWAY_RETURN_IF_ERROR(Perform(options_, *impl_, clock_, c, r));
    auto page = ParseListMultipartUploads(r.body);
    if (!page.ok()) return Unavailable(c.operation + ": " + page.status().message());
    for (S3Upload& u : page->uploads) all.push_back(std::move(u));
    if (!page->truncated) break;
    if (page->next_key_marker == key_marker && page->next_upload_id_marker == upload_id_marker)
      return Unavailable(c.operation + ": the key marker does not advance");
    key_marker = page->next_key_marker;
    upload_id_marker = page->next_upload_id_marker;
  }
  return all;
}

Result<UploadResult> S3Client::Upload(const std::string& path, const std::string& bucket,
                                      const std::string& key, std::string* upload_id) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat " + path, errno);
  if (!S_ISREG(st.st_mode)) return InvalidArgument(path + ": not a regular file");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const bool resume = upload_id != nullptr && !upload_id->empty();
  UploadResult result;
  if (!resume && size <= options_.multipart_threshold) {
    auto info = PutObject(bucket, key, path);
    if (!info.ok()) return info.status();
    result.etag = info->etag;
    result.parts_sent = 1;
    return result;
  }
  auto plan = PlanParts(size, options_.part_size);
  if (!plan.ok()) return plan.status();
  result.multipart = true;

  std::map<int, S3Part> uploaded;
  std::string id;
  if (resume) {
    id = *upload_id;
    auto parts = ListParts(bucket, key, id);
    if (!parts.ok()) return parts.status();
    for (S3Part& p : *parts) uploaded[p.number] = std::move(p);
  } else {
    auto created = CreateMultipartUpload(bucket, key);
    if (!created.ok()) return created.status();
    id = std::move(*created);
    if (upload_id != nullptr) *upload_id = id;
  }

  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus("opening " + path, errno);
  // Workers take part numbers in order; the first error stops them all.
  const int count = plan->part_count;
  std::vector<S3Part> parts(static_cast<std::size_t>(count));
  std::vector<std::string> md5s(static_cast<std::size_t>(count));
  std::atomic<int> next{1}, sent{0}, reused{0};
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  Status first_error;
  auto fail = [&](Status s) {
    std::lock_guard<std::mutex> lock(error_mu);
    if (first_error.ok()) first_error = std::move(s);
    failed = true;
  };
  auto work = [&] {
    for (int n; !failed && (n = next++) <= count;) {
      const std::uint64_t offset = plan->Offset(n), length = plan->Length(n);
      const auto i = static_cast<std::size_t>(n - 1);
      auto found = uploaded.find(n);
      if (found != uploaded.end() && found->second.size == length) {
        auto digests = DigestRange(fd.get(), path, offset, length);
        if (!digests.ok()) return fail(digests.status());
        if (found->second.etag == digests->md5_hex) {
          parts[i] = S3Part{n, length, found->second.etag};
          md5s[i] = digests->md5_hex;
          ++reused;
          continue;
        }
      }
      auto part = UploadPart(bucket, key, id, n, path, offset, length);
      if (!part.ok()) return fail(part.status());
      md5s[i] = part->etag;
      parts[i] = std::move(*part);
      ++sent;
    }
  };
  std::vector<std::thread> workers;
  const int concurrency = std::min(options_.upload_concurrency, count);
  for (int w = 1; w < concurrency; ++w) workers.emplace_back(work);
  work();
  for (std::thread& t : workers) t.join();
  result.parts_sent = sent;
  result.parts_reused = reused;
  if (!first_error.ok()) return first_error;
  auto etag = CompleteMultipartUpload(bucket, key, id, parts);
  if (!etag.ok()) return etag.status();
  const std::string expected = MultipartEtag(md5s);
  if (options_.verify_etag && etag->find('-') != std::string::npos && *etag != expected)
    return Unavailable("CompleteMultipartUpload " + bucket + "/" + key + ": the server's ETag " +
                       *etag + " is not the one of the parts sent (" + expected + ")");
  result.etag = std::move(*etag);
  return result;
}

}  // namespace headway
