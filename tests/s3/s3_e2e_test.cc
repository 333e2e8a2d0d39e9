// The S3 test server is a faithful S3: the reference clients (awscli,
// s3cmd, curl with a presigned URL) work against it, and it refuses what
// S3 refuses (a tampered presigned signature, a request signed with the
// wrong secret). Artifact tests rely on this.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "s3_server.h"
#include "test_server.h"

namespace headway::testing {
namespace {

class S3Smoke : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new S3TestServer();
    if (!server_->ok()) return;
    std::cout << "S3 server (Swift + s3api) up in " << server_->startup_seconds() << " s at "
              << server_->endpoint() << "\n";
    const std::string& dir = server_->dir();
    // The clients read only these files: never ~/.aws, never the environment's keys.
    WriteFile(dir + "/aws-config", "[default]\nregion = " + server_->region() +
                                       "\ns3 =\n  signature_version = s3v4\n"
                                       "[profile wrong]\nregion = " +
                                       server_->region() + "\ns3 =\n  signature_version = s3v4\n");
    WriteFile(dir + "/aws-credentials",
              "[default]\naws_access_key_id = " + server_->access_key() +
                  "\naws_secret_access_key = " + server_->secret_key() +
                  "\n[wrong]\naws_access_key_id = " + server_->access_key() +
                  "\naws_secret_access_key = not-" + server_->secret_key() + "\n");
    std::string host = server_->endpoint().substr(server_->endpoint().find("://") + 3);
    WriteFile(dir + "/s3cfg",
              "[default]\naccess_key = " + server_->access_key() + "\nsecret_key = " +
                  server_->secret_key() + "\nhost_base = " + host + "\nhost_bucket = " + host +
                  "\nuse_https = False\nbucket_location = " + server_->region() + "\n");
    setenv("AWS_CONFIG_FILE", (dir + "/aws-config").c_str(), 1);
    setenv("AWS_SHARED_CREDENTIALS_FILE", (dir + "/aws-credentials").c_str(), 1);
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
    setenv("AWS_PAGER", "", 1);
    for (const char* name : {"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID",
                             "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                             "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_CA_BUNDLE"}) {
      unsetenv(name);
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    for (const char* client : {"/usr/bin/aws", "/usr/bin/s3cmd", "/usr/bin/curl"}) {
      ASSERT_EQ(::access(client, X_OK), 0)
          << client << " is missing: apt-get install awscli python3-botocore s3cmd curl "
          << "(scripts/setup --test installs them)";
    }
    ASSERT_TRUE(server_->ok()) << server_->error();
  }

  static CommandResult Aws(std::vector<std::string> args) {
    std::vector<std::string> argv = {"/usr/bin/aws", "--endpoint-url", server_->endpoint()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }
  static std::string Show(const CommandResult& r) {
    return "exit " + std::to_string(r.exit_code) + "\nstdout: " + r.out + "\nstderr: " + r.err +
           "\nserver logs:\n" + server_->Logs();
  }
  static std::string Curl(const std::string& url, const std::string& out_path) {
    CommandResult r = RunCommand(
        {"/usr/bin/curl", "-s", "-o", out_path, "-w", "%{http_code}", "--max-time", "30", url});
    return r.out;
  }

  static S3TestServer* server_;
};

S3TestServer* S3Smoke::server_ = nullptr;

std::string RandomPayload(size_t size, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::string data(size, '\0');
  for (size_t i = 0; i < size; i += 8) {
    std::uint64_t v = rng();
    for (size_t j = 0; j < 8 && i + j < size; ++j) data[i + j] = static_cast<char>(v >> (8 * j));
  }
  return data;
}

TEST_F(S3Smoke, MultipartUploadAndDownloadAreByteEqualAndListed) {
  const std::string bucket = server_->bucket_hint();
  CommandResult made = Aws({"s3api", "create-bucket", "--bucket", bucket});
  ASSERT_EQ(made.exit_code, 0) << Show(made);

  // 12 MiB: more than awscli's 8 MiB multipart threshold, so two parts.
  const std::string data = RandomPayload(12 << 20, 7);
  const std::string up = server_->dir() + "/up.bin", down = server_->dir() + "/down.bin";
  WriteFile(up, data);
  CommandResult put = Aws({"s3", "cp", up, "s3://" + bucket + "/ckpt/model.bin"});
  ASSERT_EQ(put.exit_code, 0) << Show(put);
  CommandResult head = Aws({"s3api", "head-object", "--bucket", bucket, "--key", "ckpt/model.bin"});
  ASSERT_EQ(head.exit_code, 0) << Show(head);
  EXPECT_NE(head.out.find("-2\\\""), std::string::npos) << "not a two-part upload: " << head.out;
  EXPECT_NE(head.out.find("12582912"), std::string::npos) << head.out;

  CommandResult get = Aws({"s3", "cp", "s3://" + bucket + "/ckpt/model.bin", down});
  ASSERT_EQ(get.exit_code, 0) << Show(get);
  std::string back = ReadFile(down);
  EXPECT_EQ(back.size(), data.size());
  EXPECT_TRUE(back == data) << "downloaded bytes differ from the uploaded ones";

  CommandResult ls = Aws({"s3", "ls", "s3://" + bucket + "/ckpt/"});
  ASSERT_EQ(ls.exit_code, 0) << Show(ls);
  EXPECT_NE(ls.out.find("12582912 model.bin"), std::string::npos) << ls.out;
  CommandResult buckets = Aws({"s3", "ls"});
  ASSERT_EQ(buckets.exit_code, 0) << Show(buckets);
  EXPECT_NE(buckets.out.find(bucket), std::string::npos) << buckets.out;

  // Another reference client sees the same object.
  CommandResult s3cmd = RunCommand(
      {"/usr/bin/s3cmd", "-c", server_->dir() + "/s3cfg", "ls", "s3://" + bucket + "/ckpt/"});
  ASSERT_EQ(s3cmd.exit_code, 0) << Show(s3cmd);
  EXPECT_NE(s3cmd.out.find("12582912"), std::string::npos) << s3cmd.out;
}

TEST_F(S3Smoke, PresignedGetWorksAndATamperedSignatureIsRefused) {
  const std::string bucket = "smoke-presign";
  ASSERT_EQ(Aws({"s3api", "create-bucket", "--bucket", bucket}).exit_code, 0);
  const std::string file = server_->dir() + "/presign.txt";
  WriteFile(file, "weights v1\n");
  CommandResult put = Aws({"s3", "cp", file, "s3://" + bucket + "/w.txt"});
  ASSERT_EQ(put.exit_code, 0) << Show(put);

  CommandResult url = Aws({"s3", "presign", "s3://" + bucket + "/w.txt", "--expires-in", "300"});
  ASSERT_EQ(url.exit_code, 0) << Show(url);
  std::string signed_url = url.out.substr(0, url.out.find_last_not_of("\r\n") + 1);
  ASSERT_NE(signed_url.find("X-Amz-Algorithm=AWS4-HMAC-SHA256"), std::string::npos)
      << "not a Signature V4 URL: " << signed_url;
  const std::string got = server_->dir() + "/presign.out";
  EXPECT_EQ(Curl(signed_url, got), "200");
  EXPECT_EQ(ReadFile(got), "weights v1\n");

  // One hex digit of the signature changed.
  size_t at = signed_url.find("X-Amz-Signature=");
  ASSERT_NE(at, std::string::npos);
  at += std::string("X-Amz-Signature=").size();
  std::string tampered = signed_url;
  tampered[at] = tampered[at] == '0' ? '1' : '0';
  EXPECT_EQ(Curl(tampered, got), "403");
  EXPECT_NE(ReadFile(got).find("SignatureDoesNotMatch"), std::string::npos) << ReadFile(got);
}

TEST_F(S3Smoke, ARequestSignedWithTheWrongSecretIsRefused) {
  CommandResult ok = Aws({"s3api", "list-buckets"});
  ASSERT_EQ(ok.exit_code, 0) << Show(ok);
  CommandResult wrong = Aws({"--profile", "wrong", "s3api", "list-buckets"});
  EXPECT_NE(wrong.exit_code, 0) << Show(wrong);
  EXPECT_NE(wrong.err.find("SignatureDoesNotMatch"), std::string::npos) << Show(wrong);
}

}  // namespace
}  // namespace headway::testing
