// The S3 client against a real S3 server (OpenStack Swift with s3api, see
// s3_server.h): objects with awkward keys up and down, ranges, listings in
// pages, multipart uploads resumed after an interruption, S3's errors, and a
// presigned URL fetched by curl. Prints the throughput it measured.
#include "artifact/s3/s3_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "artifact/s3/multipart.h"
#include "s3_server.h"

namespace headway {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::S3TestServer;

std::string RandomBytes(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t v = rng();
    for (std::size_t j = 0; j < 8 && i + j < n; ++j) s[i + j] = static_cast<char>(v >> (8 * j));
  }
  return s;
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

class S3ClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new S3TestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(server_->ok()) << server_->error();
    dir_ = server_->dir();
    client_ = MakeClient(server_->secret_key());
    bucket_ = "hw-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++);
    ASSERT_TRUE(client_->CreateBucket(bucket_).ok());
  }

  std::unique_ptr<S3Client> MakeClient(const std::string& secret,
                                       std::uint64_t threshold = 64ull << 20,
                                       std::uint64_t part_size = 16ull << 20) {
    S3ClientOptions o;
    o.endpoint = server_->endpoint();
    o.region = server_->region();
    o.credentials = {server_->access_key(), secret, ""};
    o.multipart_threshold = threshold;
    o.part_size = part_size;
    auto c = S3Client::Create(o, clock_);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  static S3TestServer* server_;
  static int counter_;
  SystemClock clock_;
  std::string dir_;
  std::string bucket_;
  std::unique_ptr<S3Client> client_;
};
S3TestServer* S3ClientTest::server_ = nullptr;
int S3ClientTest::counter_ = 0;

// Needs no S3 server: a socket that accepts connections (the kernel does, into
// the backlog) and never answers, and a port nobody listens on.
TEST(S3ClientTimeouts, ASilentServerTimesOutAndARefusedConnectionFails) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 8), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  SystemClock clock;
  S3ClientOptions o;
  o.endpoint = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  o.credentials = {"AKID", "a-secret-that-must-not-show", ""};
  o.request_timeout = std::chrono::milliseconds(300);
  o.max_attempts = 1;
  auto client = S3Client::Create(o, clock);
  ASSERT_TRUE(client.ok());
  auto t0 = std::chrono::steady_clock::now();
  auto head = (*client)->HeadObject("bucket", "k");
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(head.status().code(), StatusCode::kUnavailable) << head.status().ToString();
  EXPECT_THAT(head.status().message(), HasSubstr("HeadObject bucket/k"));
  EXPECT_THAT(head.status().message(), Not(HasSubstr("a-secret")));
  EXPECT_LT(waited, 5.0);
  ::close(listener);  // now nothing listens there
  auto refused = (*client)->HeadObject("bucket", "k");
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().ToString();
}

// A server that answers every request with 503 SlowDown and counts them.
class SlowDownServer {
 public:
  SlowDownServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        std::string request;
        char buf[4096];
        while (request.find("\r\n\r\n") == std::string::npos) {
          ssize_t n = ::recv(c, buf, sizeof buf, 0);
          if (n <= 0) break;
          request.append(buf, static_cast<std::size_t>(n));
        }
        ++requests_;
        const std::string body =
            "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>"
            "</Error>";
        const std::string answer =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Length: " + std::to_string(body.size()) +
            "\r\nConnection: close\r\n\r\n" + body;
        (void)!::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
        ::close(c);
      }
    });
  }
  ~SlowDownServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  int requests() const { return requests_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> requests_{0};
  std::thread thread_;
};

TEST(S3ClientRetries, IdempotentRequestsAreRetriedPostsAreNot) {
  SlowDownServer server;
  SystemClock clock;
  S3ClientOptions o;
  o.endpoint = "http://127.0.0.1:" + std::to_string(server.port());
  o.credentials = {"AKID", "secret", ""};
  o.max_attempts = 3;
  o.retry_base_delay = std::chrono::milliseconds(5);
  auto client = S3Client::Create(o, clock);
  ASSERT_TRUE(client.ok());
  char dir[] = "/tmp/s3-retry-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/out.bin";
  auto got = (*client)->GetObject("bucket", "k", path);
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(got.status().message(), HasSubstr("SlowDown"));
  EXPECT_EQ(server.requests(), 3);
  EXPECT_FALSE(Exists(path));
  EXPECT_FALSE(Exists(path + ".partial"));
  auto created = (*client)->CreateMultipartUpload("bucket", "k");
  EXPECT_EQ(created.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(server.requests(), 4);  // one more: a POST is tried once
  ::rmdir(dir);
}

TEST_F(S3ClientTest, ObjectRoundTripWithAwkwardKeyRangeListAndDelete) {
  const std::string key = "ck/données/a b+c=d~e&f%20.bin";
  const std::string data = RandomBytes((1 << 20) + 17, 1);
  WriteFile(dir_ + "/up.bin", data);
  auto put = client_->PutObject(bucket_, key, dir_ + "/up.bin", "application/octet-stream");
  ASSERT_TRUE(put.ok()) << put.status().ToString();

  auto head = client_->HeadObject(bucket_, key);
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->size, data.size());
  EXPECT_EQ(head->etag, put->etag);

  auto got = client_->GetObject(bucket_, key, dir_ + "/down.bin");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size, data.size());
  EXPECT_TRUE(ReadFile(dir_ + "/down.bin") == data);
  EXPECT_FALSE(Exists(dir_ + "/down.bin.partial"));

  auto range = client_->GetObject(bucket_, key, dir_ + "/range.bin", ByteRange{100, 1099});
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  EXPECT_TRUE(ReadFile(dir_ + "/range.bin") == data.substr(100, 1000));
  auto tail = client_->GetObject(bucket_, key, dir_ + "/tail.bin", ByteRange{data.size() - 5, {}});
  ASSERT_TRUE(tail.ok()) << tail.status().ToString();
  EXPECT_TRUE(ReadFile(dir_ + "/tail.bin") == data.substr(data.size() - 5));

  auto listed = client_->ListAllObjects(bucket_, "ck/");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].key, key);
  EXPECT_EQ((*listed)[0].size, data.size());

  ASSERT_TRUE(client_->DeleteObject(bucket_, key).ok());
  EXPECT_EQ(client_->HeadObject(bucket_, key).status().code(), StatusCode::kNotFound);
  auto missing = client_->GetObject(bucket_, key, dir_ + "/missing.bin");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("NoSuchKey"));
  EXPECT_FALSE(Exists(dir_ + "/missing.bin"));
  EXPECT_FALSE(Exists(dir_ + "/missing.bin.partial"));
  EXPECT_TRUE(client_->DeleteObject(bucket_, key).ok());  // deleting twice is fine
}

TEST_F(S3ClientTest, ListsInPagesWithContinuationTokens) {
  WriteFile(dir_ + "/small.txt", "x");
  for (const char* k : {"p/1", "p/2", "p/3 three", "p/4", "p/5", "q/other"})
    ASSERT_TRUE(client_->PutObject(bucket_, k, dir_ + "/small.txt").ok()) << k;
  auto first = client_->ListObjectsV2(bucket_, "p/", "", 2);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->objects.size(), 2u);
  EXPECT_TRUE(first->truncated);
  EXPECT_FALSE(first->next_continuation_token.empty());
  auto second = client_->ListObjectsV2(bucket_, "p/", first->next_continuation_token, 2);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_FALSE(second->objects.empty());
  EXPECT_EQ(second->objects[0].key, "p/3 three");
  auto all = client_->ListAllObjects(bucket_, "p/");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 5u);
  auto dirs = client_->ListObjectsV2(bucket_, "", "", 1000, "/");
  ASSERT_TRUE(dirs.ok()) << dirs.status().ToString();
  EXPECT_EQ(dirs->common_prefixes, (std::vector<std::string>{"p/", "q/"}));
}

TEST_F(S3ClientTest, UnsignedPayloadUploadsInOneReadAndStillChecksTheEtag) {
  S3ClientOptions o = MakeClient(server_->secret_key(), 5 * kMiB, 5 * kMiB)->options();
  o.sign_payload = false;
  auto client = S3Client::Create(o, clock_);
  ASSERT_TRUE(client.ok());
  const std::string data = RandomBytes(11 * kMiB + 5, 7);
  WriteFile(dir_ + "/u.bin", data);
  auto put = (*client)->PutObject(bucket_, "u/single", dir_ + "/u.bin");
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  auto multi = (*client)->Upload(dir_ + "/u.bin", bucket_, "u/multi");
  ASSERT_TRUE(multi.ok()) << multi.status().ToString();
  EXPECT_EQ(multi->parts_sent, 3);
  for (const char* key : {"u/single", "u/multi"}) {
    auto got = (*client)->GetObject(bucket_, key, dir_ + "/u.down");
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(ReadFile(dir_ + "/u.down") == data) << key;
  }
}

TEST_F(S3ClientTest, WrongSecretIsSignatureDoesNotMatchWithoutTheSecret) {
  auto bad = MakeClient("not-the-secret-0123456789");
  auto head = bad->ListObjectsV2(bucket_, "");
  ASSERT_FALSE(head.ok());
  EXPECT_EQ(head.status().code(), StatusCode::kUnauthenticated) << head.status().ToString();
  EXPECT_THAT(head.status().message(), HasSubstr("SignatureDoesNotMatch"));
  EXPECT_THAT(head.status().message(), Not(HasSubstr("not-the-secret")));
  EXPECT_THAT(head.status().message(), Not(HasSubstr(server_->secret_key())));
  auto nobucket = client_->ListObjectsV2("no-such-bucket-here", "");
  EXPECT_EQ(nobucket.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(nobucket.status().message(), HasSubstr("NoSuchBucket"));
}

TEST_F(S3ClientTest, MultipartUploadResumesWithoutResendingFinishedParts) {
  auto client = MakeClient(server_->secret_key(), 5 * kMiB, 5 * kMiB);
  const std::string data = RandomBytes(12 * kMiB + 123, 2);  // parts of 5, 5 and 2 MiB
  const std::string path = dir_ + "/big.bin";
  WriteFile(path, data);
  const std::string key = "models/run 1/weights.bin";

  // An upload interrupted after its first part.
  auto id = client->CreateMultipartUpload(bucket_, key);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto part1 = client->UploadPart(bucket_, key, *id, 1, path, 0, 5 * kMiB);
  ASSERT_TRUE(part1.ok()) << part1.status().ToString();
  auto listed = client->ListParts(bucket_, key, *id);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].etag, part1->etag);
  EXPECT_EQ((*listed)[0].size, 5 * kMiB);

  std::string upload_id = *id;
  auto done = client->Upload(path, bucket_, key, &upload_id);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_TRUE(done->multipart);
  EXPECT_EQ(done->parts_reused, 1);
  EXPECT_EQ(done->parts_sent, 2);
  EXPECT_THAT(done->etag, ::testing::EndsWith("-3"));

  auto got = client->GetObject(bucket_, key, dir_ + "/big.down");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(ReadFile(dir_ + "/big.down") == data);

  // A fresh upload of the same file: picks multipart itself.
  std::string fresh_id;
  auto fresh = client->Upload(path, bucket_, key + ".2", &fresh_id);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_FALSE(fresh_id.empty());
  EXPECT_EQ(fresh->parts_sent, 3);
  EXPECT_EQ(fresh->etag, done->etag);
}

TEST_F(S3ClientTest, AbortedUploadIsGone) {
  const std::string data = RandomBytes(5 * kMiB, 3);
  WriteFile(dir_ + "/part.bin", data);
  auto id = client_->CreateMultipartUpload(bucket_, "k");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_TRUE(client_->UploadPart(bucket_, "k", *id, 1, dir_ + "/part.bin", 0, data.size()).ok());
  ASSERT_TRUE(client_->AbortMultipartUpload(bucket_, "k", *id).ok());
  auto parts = client_->ListParts(bucket_, "k", *id);
  EXPECT_EQ(parts.status().code(), StatusCode::kNotFound) << parts.status().ToString();
  EXPECT_THAT(parts.status().message(), HasSubstr("NoSuchUpload"));
  std::string gone = *id;
  auto resumed = client_->Upload(dir_ + "/part.bin", bucket_, "k", &gone);
  EXPECT_EQ(resumed.status().code(), StatusCode::kNotFound) << resumed.status().ToString();
}

TEST_F(S3ClientTest, PresignedUrlWorksWithCurl) {
  WriteFile(dir_ + "/hello.txt", "hello, presigned");
  ASSERT_TRUE(client_->PutObject(bucket_, "shared/hello world.txt", dir_ + "/hello.txt").ok());
  auto url = S3ObjectUrl(client_->options(), bucket_, "shared/hello world.txt");
  ASSERT_TRUE(url.ok());
  auto presigned =
      Presign("GET", *url, client_->options().credentials, server_->region(), clock_.Now(), 300);
  ASSERT_TRUE(presigned.ok());
  const std::string out = dir_ + "/presigned.txt";
  const std::string cmd = "curl -sf -o " + out + " '" + *presigned + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(ReadFile(out), "hello, presigned");
}

// Swift's s3api, like S3, always checks a Content-MD5 header against the body,
// but checks x-amz-content-sha256 only on header-signed requests: a presigned
// PUT binds its body by signing Content-MD5 (and its size by Content-Length).
TEST_F(S3ClientTest, PresignedPutBoundToABodyRefusesAnother) {
  auto url = S3ObjectUrl(client_->options(), bucket_, "incoming/model.bin");
  ASSERT_TRUE(url.ok());
  const std::string body = "the bytes that were announced";
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  EVP_Digest(body.data(), body.size(), md, &md_len, EVP_md5(), nullptr);
  std::string md5_b64(32, '\0');
  md5_b64.resize(static_cast<std::size_t>(
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(md5_b64.data()), md, md_len)));
  auto presigned =
      Presign("PUT", *url, client_->options().credentials, server_->region(), clock_.Now(), 300,
              {{"Content-MD5", md5_b64}, {"Content-Length", std::to_string(body.size())}});
  ASSERT_TRUE(presigned.ok()) << presigned.status().ToString();
  WriteFile(dir_ + "/announced.bin", body);
  WriteFile(dir_ + "/other.bin", "the bytes that were NOT announced");
  WriteFile(dir_ + "/same-size.bin", "THE bytes that were announced");
  auto put = [&](const std::string& file) {
    const std::string cmd = "curl -sf -o /dev/null -X PUT -H 'Content-MD5: " + md5_b64 +
                            "' --data-binary @" + file + " '" + *presigned + "'";
    return std::system(cmd.c_str());
  };
  EXPECT_NE(put(dir_ + "/other.bin"), 0);      // another size: the signature fails
  EXPECT_NE(put(dir_ + "/same-size.bin"), 0);  // same size, other bytes: BadDigest
  EXPECT_EQ(client_->HeadObject(bucket_, "incoming/model.bin").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(put(dir_ + "/announced.bin"), 0);
  auto head = client_->HeadObject(bucket_, "incoming/model.bin");
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->size, body.size());
}

TEST_F(S3ClientTest, OneClientServesSeveralThreadsAtOnce) {
  constexpr int kThreads = 4;
  std::vector<std::string> data;
  for (int i = 0; i < kThreads; ++i) {
    data.push_back(RandomBytes(3 * kMiB + i, 10 + i));
    WriteFile(dir_ + "/c" + std::to_string(i), data.back());
  }
  std::vector<Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      const std::string n = std::to_string(i);
      for (int round = 0; round < 3 && results[i].ok(); ++round) {
        auto put = client_->PutObject(bucket_, "c/" + n, dir_ + "/c" + n);
        if (!put.ok()) results[i] = put.status();
        auto got = client_->GetObject(bucket_, "c/" + n, dir_ + "/c" + n + ".down");
        if (!got.ok()) results[i] = got.status();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_TRUE(results[i].ok()) << results[i].ToString();
    EXPECT_TRUE(ReadFile(dir_ + "/c" + std::to_string(i) + ".down") == data[i]);
  }
}

}  // namespace
}  // namespace headway
