// Artifacts kept in a real S3-compatible store (OpenStack Swift with s3api,
// which checks signatures): the CLI and jobs move the bytes with presigned
// URLs, the server never holds them, and what Headway writes the reference
// S3 client (awscli) reads.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include "../integration/test_server.h"
#include "s3_server.h"

namespace headway::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string RandomBytes(std::size_t size, unsigned seed) {
  std::mt19937 random(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  return bytes;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class ArtifactsOnS3 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { s3_ = new S3TestServer(); }
  static void TearDownTestSuite() {
    delete s3_;
    s3_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(s3_->ok()) << s3_->error(); }

  // A Headway server keeping artifacts in `bucket`; its S3 credentials come
  // from its environment, as in production.
  std::unique_ptr<TestServer> Server(const std::string& bucket) {
    ::setenv("AWS_ACCESS_KEY_ID", s3_->access_key().c_str(), 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", s3_->secret_key().c_str(), 1);
    auto server = std::make_unique<TestServer>(
        0, std::vector<std::string>{"--artifact-store", "s3", "--s3-endpoint", s3_->endpoint(),
                                    "--s3-bucket", bucket, "--s3-region", s3_->region(),
                                    "--max-upload-bytes", "1Mi"});
    ::unsetenv("AWS_ACCESS_KEY_ID");
    ::unsetenv("AWS_SECRET_ACCESS_KEY");
    return server;
  }

  // `aws s3api ARGS...` against the test server, as a user of the bucket would run it.
  CommandResult Aws(std::vector<std::string> args) {
    const std::string config = s3_->dir() + "/aws-config";
    std::ofstream(config) << "[default]\nregion = " << s3_->region()
                          << "\ns3 =\n  signature_version = s3v4\n";
    std::vector<std::string> argv = {"/usr/bin/env",
                                     "AWS_CONFIG_FILE=" + config,
                                     "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
                                     "AWS_ACCESS_KEY_ID=" + s3_->access_key(),
                                     "AWS_SECRET_ACCESS_KEY=" + s3_->secret_key(),
                                     "AWS_EC2_METADATA_DISABLED=true",
                                     "aws", "--endpoint-url", s3_->endpoint()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }

  static S3TestServer* s3_;
};

S3TestServer* ArtifactsOnS3::s3_ = nullptr;

TEST_F(ArtifactsOnS3, TheCliMovesBytesWithPresignedUrlsAndAwsReadsThem) {
  auto server = Server("headway-cli");
  const std::string file = server->work_dir() + "/model.bin";
  // Larger than --max-upload-bytes: it cannot be going through the server.
  const std::string bytes = RandomBytes(3 << 20, 7);
  std::ofstream(file, std::ios::binary) << bytes;
  CommandResult put = server->Cli({"artifacts", "put", file, "--name", "resnet", "--kind", "model"});
  ASSERT_EQ(put.exit_code, 0) << put.err << server->ServerLog();
  EXPECT_THAT(put.out, HasSubstr("artifact/resnet:1 uploaded"));
  json a = json::parse(server->Cli({"artifacts", "describe", "resnet:1", "-o", "json"}).out);
  EXPECT_EQ(a["state"], "Ready");
  // The object is where the key scheme says, and awscli reads the same bytes.
  const std::string key = "default/sha256/" + a["digest"].get<std::string>().substr(7, 2) + "/" +
                          a["digest"].get<std::string>().substr(7);
  CommandResult fetched = Aws({"s3", "cp", "s3://headway-cli/" + key, server->work_dir() + "/aws.bin"});
  ASSERT_EQ(fetched.exit_code, 0) << fetched.err;
  EXPECT_EQ(ReadFile(server->work_dir() + "/aws.bin"), bytes);
  // Downloads follow the server's redirect to the store, digest checked.
  CommandResult got = server->Cli({"artifacts", "get", "resnet", server->work_dir() + "/back.bin"});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  EXPECT_EQ(ReadFile(server->work_dir() + "/back.bin"), bytes);
  // Deleting the last version that holds the bytes removes the object.
  ASSERT_EQ(server->Cli({"artifacts", "rm", "resnet:1"}).exit_code, 0);
  CommandResult head = Aws({"s3api", "head-object", "--bucket", "headway-cli", "--key", key});
  EXPECT_NE(head.exit_code, 0);
  EXPECT_THAT(head.err, HasSubstr("404"));
}

TEST_F(ArtifactsOnS3, APresignedUploadTakesOnlyTheBytesItWasMadeFor) {
  auto server = Server("headway-bound");
  const std::string file = server->work_dir() + "/data.bin";
  std::ofstream(file, std::ios::binary) << RandomBytes(100000, 8);
  // Ask for an upload of file's bytes, then send other bytes of the same size.
  api::HttpClient http(server->url(), server->admin_token());
  const std::string other = server->work_dir() + "/other.bin";
  std::ofstream(other, std::ios::binary) << RandomBytes(100000, 9);
  CommandResult digest = RunCommand({"/usr/bin/python3", "-c",
                                     "import hashlib, base64, sys; b = open(sys.argv[1], 'rb').read(); "
                                     "print('sha256:' + hashlib.sha256(b).hexdigest(), "
                                     "base64.b64encode(hashlib.md5(b).digest()).decode())",
                                     file});
  std::istringstream fields(digest.out);
  std::string sha, md5;
  fields >> sha >> md5;
  Answer created = Call(*server, server->admin_token(), "POST", "/api/v1/artifacts",
                        json{{"name", "data"}, {"kind", "dataset"}, {"size", 100000},
                             {"digest", sha}, {"content_md5", md5}}.dump());
  ASSERT_EQ(created.status, 201) << created.raw;
  const json& upload = created.body["upload"];
  ASSERT_TRUE(upload.is_object());
  std::string url = upload["url"];
  ASSERT_EQ(url.rfind(s3_->endpoint(), 0), 0u) << url;
  api::HttpClient store(s3_->endpoint());
  std::vector<std::pair<std::string, std::string>> headers = {{"Content-MD5", md5}};
  auto refused = store.SendFile("PUT", url.substr(s3_->endpoint().size()), other, headers);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 400) << refused->body;
  // Nothing arrived, so the version cannot be committed.
  Answer commit = Call(*server, server->admin_token(), "POST", "/api/v1/artifacts/data/versions/1/commit");
  EXPECT_EQ(commit.status, 409) << commit.raw;
  auto accepted = store.SendFile("PUT", url.substr(s3_->endpoint().size()), file, headers);
  ASSERT_TRUE(accepted.ok());
  EXPECT_EQ(accepted->status, 200) << accepted->body;
  commit = Call(*server, server->admin_token(), "POST", "/api/v1/artifacts/data/versions/1/commit");
  EXPECT_EQ(commit.status, 200) << commit.raw;
  EXPECT_EQ(commit.body["state"], "Ready");
}

TEST_F(ArtifactsOnS3, AJobSavesAndAnotherLoadsThroughTheStore) {
  auto server = Server("headway-jobs");
  const std::string dir = server->work_dir();
  const std::string sdk = "env: {PYTHONPATH: \"" HEADWAY_SOURCE_DIR "/sdk/python\"}\n";
  server->Submit("name: saver\n" + sdk +
                 "command: [/usr/bin/python3, -c, \"import headway, os; open('c.pt','wb').write(os.urandom(2000000)); "
                 "print(headway.save_artifact('c.pt', name='ckpt', step=7)['state'])\"]\n"
                 "working_dir: " + dir + "\n");
  ASSERT_TRUE(server->WaitForState("saver", "Succeeded")) << server->Cli({"logs", "saver"}).out;
  EXPECT_EQ(server->Cli({"logs", "saver"}).out, "Ready\n");
  server->Submit("name: loader\n" + sdk +
                 "command: [/usr/bin/python3, -c, \"import headway; print(headway.load_artifact('ckpt', 'l.pt')['ref'])\"]\n"
                 "working_dir: " + dir + "\n");
  ASSERT_TRUE(server->WaitForState("loader", "Succeeded")) << server->Cli({"logs", "loader"}).out;
  EXPECT_EQ(server->Cli({"logs", "loader"}).out, "ckpt:1\n");
  EXPECT_EQ(ReadFile(dir + "/l.pt"), ReadFile(dir + "/c.pt"));
  json a = json::parse(server->Cli({"artifacts", "describe", "ckpt:1", "-o", "json"}).out);
  EXPECT_EQ(a["producer"]["job"], "saver");
  ASSERT_EQ(a["lineage"]["used_by"].size(), 1u);
  EXPECT_EQ(a["lineage"]["used_by"][0]["job"], "loader");
}

TEST_F(ArtifactsOnS3, ARestartedJobResumesFromItsCheckpointInTheBucket) {
  auto server = Server("headway-resume");
  server->Submit("name: resumer\nenv: {PYTHONPATH: \"" HEADWAY_SOURCE_DIR "/sdk/python\"}\n"
                 "restart_policy: {max_restarts: 1}\n"
                 "command: [/usr/bin/python3, -c, \"import headway, os, sys\\n"
                 "d = os.environ['HEADWAY_CHECKPOINT_DIR']\\n"
                 "step = headway.restore_checkpoint()\\n"
                 "if step is None:\\n"
                 "  open(os.path.join(d, 'model.pt'), 'w').write('weights at 5')\\n"
                 "  headway.save_checkpoint(step=5)\\n"
                 "  [os.remove(os.path.join(d, f)) for f in os.listdir(d)]\\n"
                 "  sys.exit(1)\\n"
                 "print('resumed at', step, open(os.path.join(d, 'model.pt')).read())\\n\"]\n");
  ASSERT_TRUE(server->WaitForState("resumer", "Succeeded"))
      << server->Cli({"logs", "resumer", "--attempt", "0"}).out;
  EXPECT_EQ(server->Cli({"logs", "resumer"}).out, "resumed at 5 weights at 5\n");
  CommandResult listed = Aws({"s3", "ls", "--recursive", "s3://headway-resume/"});
  EXPECT_THAT(listed.out, HasSubstr("default/sha256/")) << listed.err;
}

}  // namespace
}  // namespace headway::testing
