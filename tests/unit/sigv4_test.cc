// SigV4 against AWS's published S3 examples and against botocore.
#include "artifact/s3/sigv4.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace headway {
namespace {

using ::testing::HasSubstr;

// The credentials, region and time of the examples in the S3 API reference,
// "Signature Calculations for the Authorization Header: Transferring Payload
// in a Single Chunk" and "Authenticating Requests: Using Query Parameters".
const AwsCredentials kExampleCredentials{"AKIAIOSFODNN7EXAMPLE",
                                         "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
const Time kExampleTime = FromUnixMillis(1369353600000);  // 20130524T000000Z

HttpUrl ExampleUrl(std::string path, HttpFields query = {}) {
  HttpUrl url = {};
  url.host = "examplebucket.s3.amazonaws.com";
  url.path = std::move(path);
  url.query = std::move(query);
  return url;
}

std::string Header(const SigV4Signed& s, std::string_view name) {
  for (const auto& [k, v] : s.headers)
    if (k == name) return v;
  return "<missing>";
}

TEST(SigV4, AwsExampleGetObjectWithRange) {
  SigV4Request r;
  r.method = "GET";
  r.url = ExampleUrl("/test.txt");
  r.headers = {{"Range", "bytes=0-9"}};
  auto s = SignRequest(r, kExampleCredentials, "us-east-1", kExampleTime);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(
      s->canonical_request,
      "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
      "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
      "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(s->string_to_sign,
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(s->signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(Header(*s, "Authorization"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(Header(*s, "x-amz-date"), "20130524T000000Z");
  EXPECT_EQ(Header(*s, "x-amz-content-sha256"), kEmptyPayloadSha256);
}

TEST(SigV4, AwsExamplePutObject) {
  SigV4Request r;
  r.method = "PUT";
  r.url = ExampleUrl("/test$file.text");  // '$' is encoded once, as %24
  r.headers = {{"Date", "Fri, 24 May 2013 00:00:00 GMT"},
               {"x-amz-storage-class", "REDUCED_REDUNDANCY"}};
  r.payload_sha256 = Sha256Hex("Welcome to Amazon S3.");
  EXPECT_EQ(r.payload_sha256, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  auto s = SignRequest(r, kExampleCredentials, "us-east-1", kExampleTime);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_THAT(s->canonical_request, HasSubstr("PUT\n/test%24file.text\n\n"));
  EXPECT_THAT(
      Header(*s, "Authorization"),
      HasSubstr("SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,"));
  EXPECT_EQ(s->signature, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(SigV4, AwsExampleGetBucketLifecycle) {
  SigV4Request r;
  r.url = ExampleUrl("/", {{"lifecycle", ""}});
  auto s = SignRequest(r, kExampleCredentials, "us-east-1", kExampleTime);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_THAT(s->canonical_request, HasSubstr("GET\n/\nlifecycle=\nhost:"));
  EXPECT_EQ(s->signature, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST(SigV4, AwsExampleListObjectsSortsTheQuery) {
  SigV4Request r;
  r.url = ExampleUrl("/", {{"prefix", "J"}, {"max-keys", "2"}});  // unsorted on purpose
  auto s = SignRequest(r, kExampleCredentials, "us-east-1", kExampleTime);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_THAT(s->canonical_request, HasSubstr("\nmax-keys=2&prefix=J\n"));
  EXPECT_EQ(s->signature, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(SigV4, AwsExamplePresignedUrl) {
  auto url = Presign("GET", ExampleUrl("/test.txt"), kExampleCredentials, "us-east-1", kExampleTime,
                     86400);
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(*url,
            "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
            "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
            "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
}

TEST(SigV4, EncodesThePathOnceKeepingSlashes) {
  EXPECT_EQ(UriEncode("a b/ü+~=%.txt", true), "a%20b/%C3%BC%2B~%3D%25.txt");
  EXPECT_EQ(UriEncode("a/b", false), "a%2Fb");
  HttpUrl url = ExampleUrl("/dir//a b/./%41");
  url.port = 9000;
  url.scheme = "http";
  EXPECT_EQ(CanonicalPath(url), "/dir//a%20b/./%2541");  // no normalisation, no decoding
  EXPECT_EQ(HostHeaderValue(url), "examplebucket.s3.amazonaws.com:9000");
  url.port = 80;
  EXPECT_EQ(HostHeaderValue(url), "examplebucket.s3.amazonaws.com");
}

TEST(SigV4, SortsQueryByEncodedKeyThenValue) {
  EXPECT_EQ(CanonicalQuery({{"tag", "z"}, {"tag", "a"}, {"empty", ""}, {"k y", "1/2+3=="}}),
            "empty=&k%20y=1%2F2%2B3%3D%3D&tag=a&tag=z");
}

TEST(SigV4, TrimsAndCollapsesHeaderValuesAndJoinsRepeats) {
  SigV4Request r;
  r.url = ExampleUrl("/k");
  r.headers = {{"X-Amz-Meta-Note", "  two   spaces\t here  "},
               {"x-amz-meta-dup", "b"},
               {"X-AMZ-META-DUP", " a "}};
  auto s = SignRequest(r, kExampleCredentials, "us-east-1", kExampleTime);
  ASSERT_TRUE(s.ok());
  EXPECT_THAT(s->canonical_request,
              HasSubstr("x-amz-meta-dup:b,a\nx-amz-meta-note:two spaces here\n"));
  EXPECT_THAT(Header(*s, "Authorization"),
              HasSubstr("SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-meta-dup;"
                        "x-amz-meta-note,"));
}

TEST(SigV4, SessionTokenIsSentAndSigned) {
  AwsCredentials c = kExampleCredentials;
  c.session_token = "tok/en+=";
  auto s = SignRequest(SigV4Request{"GET", ExampleUrl("/k"), {}, std::string(kUnsignedPayload)}, c,
                       "us-east-1", kExampleTime);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Header(*s, "x-amz-security-token"), "tok/en+=");
  EXPECT_EQ(Header(*s, "x-amz-content-sha256"), "UNSIGNED-PAYLOAD");
  EXPECT_THAT(s->canonical_request, HasSubstr("x-amz-security-token:tok/en+=\n"));
  auto url = Presign("GET", ExampleUrl("/k"), c, "us-east-1", kExampleTime, 60);
  ASSERT_TRUE(url.ok());
  EXPECT_THAT(*url, HasSubstr("&X-Amz-Security-Token=tok%2Fen%2B%3D&"));
}

TEST(SigV4, PresignSignsTheHeadersItIsGivenAndCanBindTheBody) {
  auto url = Presign(
      "PUT", ExampleUrl("/k"), kExampleCredentials, "us-east-1", kExampleTime, 60,
      {{"X-Amz-Content-SHA256", std::string(kEmptyPayloadSha256)}, {"Content-Type", "text/plain"}});
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_THAT(*url, HasSubstr("&X-Amz-SignedHeaders=content-type%3Bhost%3Bx-amz-content-sha256&"));
  auto bad = Presign("PUT", ExampleUrl("/k"), kExampleCredentials, "us-east-1", kExampleTime, 60,
                     {{"x-amz-content-sha256", "nothex"}});
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(Presign("GET", ExampleUrl("/k"), kExampleCredentials, "us-east-1", kExampleTime, 60,
                       {{"Host", "other"}})
                   .ok());
}

TEST(SigV4, RejectsBadInputWithoutEchoingTheSecret) {
  SigV4Request r;
  r.url = ExampleUrl("/k");
  r.payload_sha256 = "abc";
  auto s = SignRequest(r, kExampleCredentials, "us-east-1", kExampleTime);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  r.payload_sha256 = std::string(kEmptyPayloadSha256);
  r.headers = {{"Host", "evil"}};
  EXPECT_THAT(SignRequest(r, kExampleCredentials, "us-east-1", kExampleTime).status().message(),
              HasSubstr("set by the signer"));
  r.headers = {{"x-amz-meta-a", "x\r\nInjected: 1"}};
  EXPECT_FALSE(SignRequest(r, kExampleCredentials, "us-east-1", kExampleTime).ok());
  r.headers = {{"bad name", "x"}};
  EXPECT_FALSE(SignRequest(r, kExampleCredentials, "us-east-1", kExampleTime).ok());
  r.headers = {};
  EXPECT_FALSE(SignRequest(r, kExampleCredentials, "", kExampleTime).ok());
  EXPECT_FALSE(SignRequest(r, AwsCredentials{"AKID", "", ""}, "us-east-1", kExampleTime).ok());
  for (std::int64_t bad : {0, -1, 604801}) {
    auto url =
        Presign("GET", ExampleUrl("/k"), kExampleCredentials, "us-east-1", kExampleTime, bad);
    ASSERT_FALSE(url.ok());
    EXPECT_THAT(url.status().message(), HasSubstr("expires"));
    EXPECT_THAT(url.status().message(), Not(HasSubstr(kExampleCredentials.secret_access_key)));
  }
  EXPECT_TRUE(
      Presign("GET", ExampleUrl("/k"), kExampleCredentials, "us-east-1", kExampleTime, 604800)
          .ok());
}

TEST(SigV4, ParsesUrls) {
  auto u = ParseHttpUrl("http://127.0.0.1:9000/bucket/a%20b/%C3%BC?uploads&partNumber=2&x=a%2Bb+c");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->scheme, "http");
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 9000);
  EXPECT_EQ(u->path, "/bucket/a b/\xC3\xBC");
  EXPECT_EQ(u->query, (HttpFields{{"uploads", ""}, {"partNumber", "2"}, {"x", "a+b+c"}}));
  EXPECT_EQ(UrlString(*u),
            "http://127.0.0.1:9000/bucket/a%20b/%C3%BC?partNumber=2&uploads=&x=a%2Bb%2Bc");
  auto v6 = ParseHttpUrl("https://[::1]:443");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "[::1]");
  EXPECT_EQ(v6->port, 0);
  EXPECT_EQ(v6->path, "/");
  EXPECT_FALSE(ParseHttpUrl("ftp://x/").ok());
  EXPECT_FALSE(ParseHttpUrl("http://u:p@x/").ok());
  EXPECT_FALSE(ParseHttpUrl("http://x:99999/").ok());
  EXPECT_FALSE(ParseHttpUrl("http://x/%zz").ok());
  EXPECT_FALSE(ParseHttpUrl("http:///path").ok());
}

// ---- Cross-check with botocore, the signer of the AWS CLI and boto3 ----

struct Case {
  std::string kind = "header";  // or "presign"
  std::string method = "GET";
  HttpUrl url = {};
  HttpFields headers = {};
  std::string body = "";
  bool unsigned_payload = false;
  AwsCredentials creds = kExampleCredentials;
  std::string region = "us-east-1";
  std::int64_t expires = 3600;
  Time time = FromUnixMillis(1764763200000);  // 2025-12-03T12:00:00Z
};

HttpUrl Url(std::string scheme, std::string host, int port, std::string path, HttpFields q = {}) {
  return HttpUrl{std::move(scheme), std::move(host), port, std::move(path), std::move(q)};
}

std::vector<Case> AwkwardCases() {
  std::vector<Case> cases;
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  add({.url = Url("http", "127.0.0.1", 9000, "/bucket/my folder/file name.txt")});
  add({.method = "PUT",
       .url = Url("http", "localhost", 8080, "/bucket/données/ü €.bin"),
       .headers = {{"Content-Type", "application/octet-stream"}},
       .body = "payload bytes"});
  add({.method = "PUT",
       .url = Url("https", "s3.example.com", 443, "/bucket/a+b~c=d&e.txt"),
       .body = "x",
       .unsigned_payload = true});
  add({.url = Url("http", "127.0.0.1", 9000, "/bucket",
                  {{"list-type", "2"},
                   {"prefix", "a b/"},
                   {"marker", ""},
                   {"tag", "z"},
                   {"tag", "a"},
                   {"continuation-token", "1/2+3=="},
                   {"delimiter", "/"}})});
  add({.method = "POST", .url = Url("http", "10.0.0.5", 7480, "/bucket/key", {{"uploads", ""}})});
  add({.method = "PUT",
       .url = Url("http", "127.0.0.1", 9000, "/bucket/big.bin",
                  {{"partNumber", "10000"}, {"uploadId", "2~abc/def+ghi=="}}),
       .headers = {{"Content-MD5", "XrY7u+Ae7tCTyyK7j1rNww=="}},
       .body = "hello world"});
  add({.url = Url("http", "127.0.0.1", 9000, "/bucket/k"),
       .headers = {{"Range", "bytes=0-99"},
                   {"X-Amz-Meta-Note", "  two   spaces here "},
                   {"x-amz-meta-dup", "b"},
                   {"x-amz-meta-dup", "a"}}});
  add({.url = Url("https", "bucket.s3.eu-west-3.amazonaws.com", 0, "/100%?#x//./y"),
       .creds = {"ASIAEXAMPLE", "secret/with+chars=", "FQoGZXIvYXdzE//token+="},
       .region = "eu-west-3"});
  add({.method = "HEAD", .url = Url("http", "[::1]", 9000, "/b/k")});
  add({.method = "DELETE",
       .url = Url("http", "127.0.0.1", 80, "/b/k", {{"uploadId", "abc"}, {"versionId", "null"}})});
  // Presigned URLs.
  add({.kind = "presign", .url = Url("http", "127.0.0.1", 9000, "/bucket/données/a b+c.txt")});
  add({.kind = "presign",
       .method = "PUT",
       .url = Url("http", "127.0.0.1", 9000, "/bucket/k",
                  {{"partNumber", "3"}, {"uploadId", "x/y=="}}),
       .expires = 604800});
  add({.kind = "presign",
       .url = Url("https", "s3.example.com", 0, "/b/~k="),
       .creds = {"ASIAEXAMPLE", "s", "session/token+="},
       .region = "eu-central-1",
       .expires = 1});
  add({.kind = "presign",
       .method = "PUT",
       .url = Url("http", "127.0.0.1", 9000, "/b/up load"),
       .headers = {{"Content-Type", "text/plain"}, {"Content-Length", "5"}}});
  add({.kind = "presign",
       .url = Url("https", "s3.example.com", 0, "/b/k"),
       .headers = {{"Range", "bytes=0-9"}}});
  return cases;
}

std::string RunCommand(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (pclose(p) != 0) out = "FAILED: " + out;
  return out;
}

TEST(SigV4, MatchesBotocoreOnAwkwardRequests) {
  if (system("/usr/bin/python3 -c 'import botocore' 2>/dev/null") != 0)
    GTEST_SKIP() << "botocore is not installed for /usr/bin/python3 (apt install python3-botocore)";
  std::vector<Case> cases = AwkwardCases();
  nlohmann::json input = nlohmann::json::array();
  for (const Case& c : cases) {
    nlohmann::json q = nlohmann::json::array();
    for (const auto& [k, v] : c.url.query) q.push_back({k, v});
    nlohmann::json h = nlohmann::json::array();
    for (const auto& [k, v] : c.headers) h.push_back({k, v});
    input.push_back({{"kind", c.kind},
                     {"method", c.method},
                     {"scheme", c.url.scheme},
                     {"host", c.url.host},
                     {"port", c.url.port},
                     {"path", c.url.path},
                     {"query", q},
                     {"headers", h},
                     {"body", c.body},
                     {"unsigned", c.unsigned_payload},
                     {"access_key", c.creds.access_key_id},
                     {"secret_key", c.creds.secret_access_key},
                     {"token", c.creds.session_token},
                     {"region", c.region},
                     {"expires", c.expires},
                     {"time", ToUnixMillis(c.time) / 1000}});
  }
  char dir[] = "/tmp/sigv4_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string in_path = std::string(dir) + "/cases.json";
  std::ofstream(in_path) << input.dump();
  const std::string out =
      RunCommand("/usr/bin/python3 " HEADWAY_SIGV4_BOTOCORE_SCRIPT " < " + in_path);
  std::filesystem::remove_all(dir);
  auto answers = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(answers.is_array()) << out;
  ASSERT_EQ(answers.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE("case " + std::to_string(i) + ": " + c.method + " " + UrlString(c.url));
    if (c.kind == "header") {
      SigV4Request r{c.method, c.url, c.headers,
                     c.unsigned_payload ? std::string(kUnsignedPayload) : Sha256Hex(c.body)};
      auto s = SignRequest(r, c.creds, c.region, c.time);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      EXPECT_EQ(Header(*s, "Authorization"), answers[i]["authorization"].get<std::string>())
          << s->canonical_request;
      EXPECT_EQ(Header(*s, "x-amz-date"), answers[i]["x-amz-date"].get<std::string>());
      EXPECT_EQ(Header(*s, "x-amz-content-sha256"),
                answers[i]["x-amz-content-sha256"].get<std::string>());
    } else {
      auto url = Presign(c.method, c.url, c.creds, c.region, c.time, c.expires, c.headers);
      ASSERT_TRUE(url.ok()) << url.status().ToString();
      // botocore orders the query differently; the same parameters and the
      // same signature are what matter.
      auto mine = ParseHttpUrl(*url);
      auto theirs = ParseHttpUrl(answers[i]["url"].get<std::string>());
      ASSERT_TRUE(mine.ok() && theirs.ok());
      EXPECT_EQ(UrlString(*mine), UrlString(*theirs));
    }
  }
}

}  // namespace
}  // namespace headway
