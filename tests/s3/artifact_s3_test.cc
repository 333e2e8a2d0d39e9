// Artifacts kept in a real S3-compatible store (OpenStack Swift with s3api,
// which checks signatures): the shared suite (artifact_suite.h), and what
// only this store does: the CLI moves the bytes with presigned URLs, in parts
// when large, and the server never holds them; a local job, whose network
// reaches only the server, sends them through the server, which puts them in
// the same parts; and what Headway writes the reference S3 client (awscli)
// reads, and the reverse.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <thread>

#include "../integration/artifact_suite.h"
#include "../integration/test_server.h"
#include "artifact/file_digest.h"
#include "artifact/s3/multipart.h"
#include "artifact/s3/s3_client.h"
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

// One Swift for every test of this file, started by the first that needs
// it and stopped when the tests end.
S3TestServer& SharedS3() {
  static S3TestServer* s3 = nullptr;
  if (s3 == nullptr) {
    s3 = new S3TestServer();
    struct StopAtEnd : ::testing::Environment {
      explicit StopAtEnd(S3TestServer* server) : server(server) {}
      void TearDown() override { delete server; }
      S3TestServer* server;
    };
    ::testing::AddGlobalTestEnvironment(new StopAtEnd(s3));
  }
  return *s3;
}

// A Headway server keeping artifacts in `bucket`; its S3 credentials come
// from its environment, as in production.
std::unique_ptr<TestServer> StartWithBucket(const std::string& bucket, int gpus,
                                            const std::vector<std::string>& more) {
  S3TestServer& s3 = SharedS3();
  ::setenv("AWS_ACCESS_KEY_ID", s3.access_key().c_str(), 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key().c_str(), 1);
  std::vector<std::string> flags = {"--artifact-store", "s3",   "--s3-endpoint", s3.endpoint(),
                                    "--s3-bucket",      bucket, "--s3-region",   s3.region()};
  // Small, so that what the CLI sends visibly cannot go through the server.
  if (std::find(more.begin(), more.end(), "--max-upload-bytes") == more.end()) {
    flags.insert(flags.end(), {"--max-upload-bytes", "1Mi"});
  }
  flags.insert(flags.end(), more.begin(), more.end());
  auto server = std::make_unique<TestServer>(gpus, flags);
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  return server;
}

// The objects in `bucket`, as S3 lists them.
std::size_t ObjectsIn(const std::string& bucket) {
  S3TestServer& s3 = SharedS3();
  S3ClientOptions options;
  options.endpoint = s3.endpoint();
  options.region = s3.region();
  options.credentials = {s3.access_key(), s3.secret_key(), ""};
  static SystemClock clock;
  auto client = S3Client::Create(options, clock);
  if (!client.ok()) return 999999;
  auto listed = (*client)->ListAllObjects(bucket, "");
  return listed.ok() ? listed->size() : 999999;
}

ArtifactStoreKind S3Store() {
  return {"S3", [](int gpus, const std::vector<std::string>& flags) {
            static int buckets = 0;
            const std::string bucket = "headway-suite-" + std::to_string(++buckets);
            ServerWithStore s;
            EXPECT_TRUE(SharedS3().ok()) << SharedS3().error();
            s.server = StartWithBucket(bucket, gpus, flags);
            s.stored_objects = [bucket] { return ObjectsIn(bucket); };
            return s;
          }};
}

INSTANTIATE_TEST_SUITE_P(S3, ArtifactStoreTest, ::testing::Values(S3Store()),
                         [](const auto& info) { return info.param.name; });

class ArtifactsOnS3 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { s3_ = &SharedS3(); }
  void SetUp() override { ASSERT_TRUE(s3_->ok()) << s3_->error(); }

  std::unique_ptr<TestServer> Server(const std::string& bucket,
                                     const std::vector<std::string>& more = {}) {
    return StartWithBucket(bucket, 0, more);
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
                                     "aws",
                                     "--endpoint-url",
                                     s3_->endpoint()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }

  static S3TestServer* s3_;
};

S3TestServer* ArtifactsOnS3::s3_ = nullptr;

// The ETag S3 gives `path` uploaded in parts of `part_size`.
std::string ExpectedMultipartEtag(const std::string& path, std::uint64_t size,
                                  std::uint64_t part_size) {
  auto plan = PlanParts(size, part_size);
  if (!plan.ok()) return plan.status().ToString();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  std::vector<std::string> md5s;
  for (int n = 1; n <= plan->part_count; ++n) {
    auto d = DigestRange(fd, path, plan->Offset(n), plan->Length(n));
    md5s.push_back(d.ok() ? d->md5_hex : d.status().ToString());
  }
  ::close(fd);
  return MultipartEtag(md5s);
}

// `headway ARGS...` in the background, its output to `log`.
pid_t StartCli(const TestServer& server, const std::vector<std::string>& args,
               const std::string& log) {
  std::vector<std::string> argv = {"/usr/bin/env", "HEADWAY_API_TOKEN=" + server.admin_token(),
                                   HEADWAY_BIN, "--server", server.url()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> c_argv;
  for (std::string& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  if (posix_spawn(&pid, c_argv[0], &actions, nullptr, c_argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

// The hex and base64 MD5 of bytes [offset, offset + length) of `path`.
RangeDigest PartDigest(const std::string& path, std::uint64_t offset, std::uint64_t length) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  auto d = DigestRange(fd, path, offset, length);
  ::close(fd);
  return d.ok() ? *d : RangeDigest{};
}

TEST_F(ArtifactsOnS3, TheCliMovesBytesWithPresignedUrlsAndAwsReadsThem) {
  auto server = Server("headway-cli");
  const std::string file = server->work_dir() + "/model.bin";
  // Larger than --max-upload-bytes: it cannot be going through the server.
  const std::string bytes = RandomBytes(3 << 20, 7);
  std::ofstream(file, std::ios::binary) << bytes;
  CommandResult put =
      server->Cli({"artifacts", "put", file, "--name", "resnet", "--kind", "model"});
  ASSERT_EQ(put.exit_code, 0) << put.err << server->ServerLog();
  EXPECT_THAT(put.out, HasSubstr("artifact/resnet:1 uploaded"));
  json a = json::parse(server->Cli({"artifacts", "describe", "resnet:1", "-o", "json"}).out);
  EXPECT_EQ(a["state"], "Ready");
  // The object is where the key scheme says, and awscli reads the same bytes.
  const std::string key = "default/sha256/" + a["digest"].get<std::string>().substr(7, 2) + "/" +
                          a["digest"].get<std::string>().substr(7);
  CommandResult fetched =
      Aws({"s3", "cp", "s3://headway-cli/" + key, server->work_dir() + "/aws.bin"});
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
  CommandResult digest =
      RunCommand({"/usr/bin/python3", "-c",
                  "import hashlib, base64, sys; b = open(sys.argv[1], 'rb').read(); "
                  "print('sha256:' + hashlib.sha256(b).hexdigest(), "
                  "base64.b64encode(hashlib.md5(b).digest()).decode())",
                  file});
  std::istringstream fields(digest.out);
  std::string sha, md5;
  fields >> sha >> md5;
  Answer created = Call(*server, server->admin_token(), "POST", "/api/v1/artifacts",
                        json{{"name", "data"},
                             {"kind", "dataset"},
                             {"size", 100000},
                             {"digest", sha},
                             {"content_md5", md5}}
                            .dump());
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
  Answer commit =
      Call(*server, server->admin_token(), "POST", "/api/v1/artifacts/data/versions/1/commit");
  EXPECT_EQ(commit.status, 409) << commit.raw;
  auto accepted = store.SendFile("PUT", url.substr(s3_->endpoint().size()), file, headers);
  ASSERT_TRUE(accepted.ok());
  EXPECT_EQ(accepted->status, 200) << accepted->body;
  commit = Call(*server, server->admin_token(), "POST", "/api/v1/artifacts/data/versions/1/commit");
  EXPECT_EQ(commit.status, 200) << commit.raw;
  EXPECT_EQ(commit.body["state"], "Ready");
}

// A presigned upload is bound to the MD5 its uploader declares, not to the
// SHA-256 the record names: a member who declares one file's digest and
// another's MD5 gets the other's bytes accepted by the store, and they would
// stand for the first file for the whole team. The commit reads them back.
TEST_F(ArtifactsOnS3, ACommitChecksTheDigestOfWhatArrived) {
  auto server = Server("headway-digest");
  const std::string file = server->work_dir() + "/real.bin";
  const std::string other = server->work_dir() + "/other.bin";
  std::ofstream(file, std::ios::binary) << RandomBytes(100000, 21);
  std::ofstream(other, std::ios::binary) << RandomBytes(100000, 22);
  auto real = DigestFile(file), fake = DigestFile(other);
  ASSERT_TRUE(real.ok() && fake.ok());
  api::HttpClient store(s3_->endpoint());
  auto draft = [&](const std::string& name, const std::string& md5) {
    return Call(*server, server->admin_token(), "POST", "/api/v1/artifacts",
                json{{"name", name},
                     {"kind", "dataset"},
                     {"size", 100000},
                     {"digest", real->digest},
                     {"content_md5", md5}}
                    .dump());
  };
  Answer created = draft("poisoned", fake->content_md5);
  ASSERT_EQ(created.status, 201) << created.raw;
  std::string url = created.body["upload"]["url"];
  // Valid for --presign-ttl (10 minutes), not for an hour.
  EXPECT_THAT(url, HasSubstr("X-Amz-Expires=600"));
  auto sent = store.SendFile("PUT", url.substr(s3_->endpoint().size()), other,
                             {{"Content-MD5", fake->content_md5}});
  ASSERT_TRUE(sent.ok());
  ASSERT_EQ(sent->status, 200) << "the store took the bytes their MD5 was declared for";
  Answer commit =
      Call(*server, server->admin_token(), "POST", "/api/v1/artifacts/poisoned/versions/1/commit");
  EXPECT_EQ(commit.status, 400) << commit.raw;
  EXPECT_THAT(commit.raw, HasSubstr("do not have the digest its record names"));
  const std::string hex = real->digest.substr(7);
  CommandResult head = Aws({"s3api", "head-object", "--bucket", "headway-digest", "--key",
                            "default/sha256/" + hex.substr(0, 2) + "/" + hex});
  EXPECT_NE(head.exit_code, 0) << "the wrong bytes were left in the bucket";
  // The real file's next upload is not taken for the wrong bytes.
  Answer honest = draft("honest", real->content_md5);
  ASSERT_EQ(honest.status, 201) << honest.raw;
  ASSERT_TRUE(honest.body["upload"].is_object()) << honest.raw;
  url = honest.body["upload"]["url"];
  sent = store.SendFile("PUT", url.substr(s3_->endpoint().size()), file,
                        {{"Content-MD5", real->content_md5}});
  ASSERT_TRUE(sent.ok() && sent->status == 200);
  commit =
      Call(*server, server->admin_token(), "POST", "/api/v1/artifacts/honest/versions/1/commit");
  EXPECT_EQ(commit.status, 200) << commit.raw;
  CommandResult got = server->Cli({"artifacts", "get", "honest", server->work_dir() + "/back.bin"});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  EXPECT_TRUE(ReadFile(server->work_dir() + "/back.bin") == ReadFile(file));
}

TEST_F(ArtifactsOnS3, ALargeUploadGoesUpInPresignedPartsAndResumesWhereItStopped) {
  auto server = Server("headway-parts", {"--s3-part-size", "5Mi"});
  const std::string file = server->work_dir() + "/big.bin";
  const std::uint64_t size = (12 << 20) + 1234;  // parts of 5, 5 and 2 MiB
  std::ofstream(file, std::ios::binary) << RandomBytes(size, 11);
  auto whole = DigestFile(file);
  ASSERT_TRUE(whole.ok());
  const std::string admin = server->admin_token();
  Answer created = Call(*server, admin, "POST", "/api/v1/artifacts",
                        json{{"name", "big"},
                             {"kind", "checkpoint"},
                             {"size", size},
                             {"digest", whole->digest},
                             {"content_md5", whole->content_md5},
                             {"multipart", true}}
                            .dump());
  ASSERT_EQ(created.status, 201) << created.raw;
  const json plan = created.body["upload"]["multipart"];
  ASSERT_TRUE(plan.is_object()) << created.raw;
  EXPECT_EQ(plan["part_size"], 5 << 20);
  EXPECT_EQ(plan["part_count"], 3);
  const std::string id = plan["upload_id"];
  const std::string parts_path = "/api/v1/artifacts/big/versions/1/parts";

  // Parts the plan does not have, or without a real MD5, are refused by name.
  RangeDigest part2 = PartDigest(file, 5 << 20, 5 << 20);
  Answer beyond =
      Call(*server, admin, "POST", parts_path,
           json{{"upload_id", id}, {"parts", {{{"number", 4}, {"content_md5", part2.md5_base64}}}}}
               .dump());
  EXPECT_EQ(beyond.status, 400) << beyond.raw;
  EXPECT_THAT(beyond.raw, HasSubstr("not one of the 3 parts"));
  Answer no_md5 =
      Call(*server, admin, "POST", parts_path,
           json{{"upload_id", id}, {"parts", {{{"number", 2}, {"content_md5", "x"}}}}}.dump());
  EXPECT_EQ(no_md5.status, 400) << no_md5.raw;
  EXPECT_THAT(no_md5.raw, HasSubstr("parts[0].content_md5"));

  // Part 2 goes up by hand, with the request the server presigned for it;
  // other bytes of the same size are refused by the store.
  Answer presigned =
      Call(*server, admin, "POST", parts_path,
           json{{"upload_id", id}, {"parts", {{{"number", 2}, {"content_md5", part2.md5_base64}}}}}
               .dump());
  ASSERT_EQ(presigned.status, 200) << presigned.raw;
  const std::string url = presigned.body["parts"][0]["url"];
  ASSERT_EQ(url.rfind(s3_->endpoint(), 0), 0u) << url;
  api::HttpClient store(s3_->endpoint());
  const std::vector<std::pair<std::string, std::string>> headers = {
      {"Content-MD5", part2.md5_base64}};
  auto wrong =
      store.SendFileRange("PUT", url.substr(s3_->endpoint().size()), file, 0, 5 << 20, headers);
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(wrong->status, 400) << wrong->body;
  auto sent = store.SendFileRange("PUT", url.substr(s3_->endpoint().size()), file, 5 << 20, 5 << 20,
                                  headers);
  ASSERT_TRUE(sent.ok());
  ASSERT_EQ(sent->status, 200) << sent->body;

  // Committed now, it would miss parts 1 and 3: refused, saying which.
  Answer early = Call(*server, admin, "POST", "/api/v1/artifacts/big/versions/1/commit",
                      json{{"upload_id", id}}.dump());
  EXPECT_EQ(early.status, 409) << early.raw;
  EXPECT_THAT(early.raw, HasSubstr("part 1 of 3"));
  Answer listed = Call(*server, admin, "GET", parts_path + "?upload_id=" + id);
  ASSERT_EQ(listed.status, 200) << listed.raw;
  ASSERT_EQ(listed.body["parts"].size(), 1u) << listed.raw;
  EXPECT_EQ(listed.body["parts"][0]["number"], 2);
  EXPECT_EQ(listed.body["parts"][0]["etag"], part2.md5_hex);

  // `put` of the same file picks that upload up and sends parts 1 and 3 only.
  CommandResult put =
      server->Cli({"artifacts", "put", file, "--name", "big", "--kind", "checkpoint"});
  ASSERT_EQ(put.exit_code, 0) << put.err << server->ServerLog();
  EXPECT_THAT(put.out, HasSubstr("artifact/big:2 uploaded"));
  EXPECT_THAT(put.out, HasSubstr("in 3 parts, 1 of them stored already"));
  // The first version holds the same bytes: its commit finds them there.
  Answer late = Call(*server, admin, "POST", "/api/v1/artifacts/big/versions/1/commit",
                     json{{"upload_id", id}}.dump());
  EXPECT_EQ(late.status, 200) << late.raw;
  EXPECT_EQ(late.body["state"], "Ready");

  // awscli sees one object assembled from the three parts, with the bytes sent.
  const std::string digest = whole->digest.substr(7);
  const std::string key = "default/sha256/" + digest.substr(0, 2) + "/" + digest;
  CommandResult head = Aws({"s3api", "head-object", "--bucket", "headway-parts", "--key", key});
  ASSERT_EQ(head.exit_code, 0) << head.err;
  EXPECT_THAT(head.out, HasSubstr(ExpectedMultipartEtag(file, size, 5 << 20)));
  CommandResult fetched =
      Aws({"s3", "cp", "s3://headway-parts/" + key, server->work_dir() + "/aws.bin"});
  ASSERT_EQ(fetched.exit_code, 0) << fetched.err;
  EXPECT_TRUE(ReadFile(server->work_dir() + "/aws.bin") == ReadFile(file));
  CommandResult uploads = Aws({"s3api", "list-multipart-uploads", "--bucket", "headway-parts"});
  ASSERT_EQ(uploads.exit_code, 0) << uploads.err;
  EXPECT_THAT(uploads.out, ::testing::Not(HasSubstr("UploadId"))) << uploads.out;
}

// The SDK sends a large file in parts too, and reads it back.
TEST_F(ArtifactsOnS3, AJobSavesALargeFileInPartsThroughTheSdk) {
  // A local job's network reaches only the server: its bytes go through it.
  auto server =
      Server("headway-sdk-parts", {"--s3-part-size", "5Mi", "--max-upload-bytes", "64Mi"});
  const std::string dir = server->work_dir();
  const std::string file = dir + "/weights.bin";
  std::ofstream(file, std::ios::binary) << RandomBytes((11 << 20) + 77, 15);
  const std::string sdk = "env: {PYTHONPATH: \"" HEADWAY_SOURCE_DIR
                          "/sdk/python\"}\n"
                          "working_dir: " +
                          dir + "\n";
  server->Submit(
      "name: saver\n" + sdk +
      "command: [/usr/bin/python3, -c, \"import headway; "
      "print(headway.save_artifact('weights.bin', name='weights', kind='model')['state'])\"]\n");
  ASSERT_TRUE(server->WaitForState("saver", "Succeeded")) << server->Cli({"logs", "saver"}).out;
  EXPECT_EQ(server->Cli({"logs", "saver"}).out, "Ready\n");
  server->Submit("name: loader\n" + sdk +
                 "command: [/usr/bin/python3, -c, \"import headway; "
                 "headway.load_artifact('weights', 'back.bin')\"]\n");
  ASSERT_TRUE(server->WaitForState("loader", "Succeeded")) << server->Cli({"logs", "loader"}).out;
  EXPECT_TRUE(ReadFile(dir + "/back.bin") == ReadFile(file));
  auto whole = DigestFile(file);
  ASSERT_TRUE(whole.ok());
  const std::string digest = whole->digest.substr(7);
  CommandResult head = Aws({"s3api", "head-object", "--bucket", "headway-sdk-parts", "--key",
                            "default/sha256/" + digest.substr(0, 2) + "/" + digest});
  ASSERT_EQ(head.exit_code, 0) << head.err;
  EXPECT_THAT(head.out, HasSubstr(ExpectedMultipartEtag(file, (11 << 20) + 77, 5 << 20)));
}

// The reverse of the tests above: what awscli wrote (in two parts, as it
// sends 12 MiB) under a version's key is what Headway serves for it; bytes
// that are not the version's are refused by the reader.
TEST_F(ArtifactsOnS3, BytesAwscliWroteAreServedAndOnesThatDoNotMatchAreRefused) {
  auto server = Server("headway-aws-wrote");
  const std::string file = server->work_dir() + "/dataset.bin";
  std::ofstream(file, std::ios::binary) << RandomBytes(12 << 20, 13);
  auto whole = DigestFile(file);
  ASSERT_TRUE(whole.ok());
  const std::string digest = whole->digest.substr(7);
  const std::string key = "default/sha256/" + digest.substr(0, 2) + "/" + digest;
  CommandResult copied = Aws({"s3", "cp", file, "s3://headway-aws-wrote/" + key});
  ASSERT_EQ(copied.exit_code, 0) << copied.err;
  CommandResult head = Aws({"s3api", "head-object", "--bucket", "headway-aws-wrote", "--key", key});
  EXPECT_THAT(head.out, HasSubstr("-2\\\"")) << "awscli did not send it in two parts: " << head.out;

  CommandResult put =
      server->Cli({"artifacts", "put", file, "--name", "seeded", "--kind", "dataset"});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  EXPECT_THAT(put.out, HasSubstr("artifact/seeded:1 stored (its bytes were there already)"));
  CommandResult got = server->Cli({"artifacts", "get", "seeded", server->work_dir() + "/back.bin"});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  EXPECT_TRUE(ReadFile(server->work_dir() + "/back.bin") == ReadFile(file));

  // Other bytes of the same size put there by hand: the download checks the
  // SHA-256 and writes nothing.
  const std::string other = server->work_dir() + "/other.bin";
  std::ofstream(other, std::ios::binary) << RandomBytes(12 << 20, 14);
  ASSERT_EQ(Aws({"s3", "cp", other, "s3://headway-aws-wrote/" + key}).exit_code, 0);
  CommandResult refused =
      server->Cli({"artifacts", "get", "seeded", server->work_dir() + "/bad.bin"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("do not match its digest"));
  EXPECT_FALSE(std::filesystem::exists(server->work_dir() + "/bad.bin"));
}

// Objects no version holds are swept from the bucket at start (here at
// once: --artifact-orphan-age 0s); what another tool keeps there is not.
TEST_F(ArtifactsOnS3, TheSweepDeletesObjectsNoVersionHoldsAndNothingElse) {
  const std::string bucket = "headway-sweep";
  ASSERT_EQ(Aws({"s3api", "create-bucket", "--bucket", bucket}).exit_code, 0);
  const std::string dir = MakeTempDir("headway-sweep");
  std::ofstream(dir + "/x") << "left behind";
  const std::string orphan = "default/sha256/ab/ab" + std::string(62, '2');
  const std::string foreign = "datasets/imagenet/train-0001.tar";
  ASSERT_EQ(Aws({"s3", "cp", dir + "/x", "s3://" + bucket + "/" + orphan}).exit_code, 0);
  ASSERT_EQ(Aws({"s3", "cp", dir + "/x", "s3://" + bucket + "/" + foreign}).exit_code, 0);
  auto server = Server(bucket, {"--artifact-orphan-age", "0s"});
  EXPECT_TRUE(WaitFor(
      [&] {
        return Aws({"s3api", "head-object", "--bucket", bucket, "--key", orphan}).exit_code != 0;
      },
      std::chrono::seconds(30)))
      << server->ServerLog();
  EXPECT_EQ(Aws({"s3api", "head-object", "--bucket", bucket, "--key", foreign}).exit_code, 0);
  std::filesystem::remove_all(dir);
}

// A 2 GiB upload killed halfway: the next try sends only the parts the
// store does not hold.
TEST_F(ArtifactsOnS3, ATwoGibUploadKilledHalfwayResumesWithoutResendingFinishedParts) {
  auto server = Server("headway-2gib");  // parts of 64 MiB: 32 of them
  const std::string file = server->work_dir() + "/2gib.bin";
  const std::uint64_t size = 2ull << 30;
  {
    std::string block = RandomBytes(1 << 20, 12);
    std::ofstream out(file, std::ios::binary);
    for (std::uint64_t i = 0; i < (size >> 20); ++i) {
      std::memcpy(block.data(), &i, sizeof i);  // every MiB differs
      out.write(block.data(), static_cast<std::streamsize>(block.size()));
    }
  }
  const std::string log = server->work_dir() + "/first-try.log";
  pid_t first = StartCli(*server, {"artifacts", "put", file, "--name", "two-gib"}, log);
  ASSERT_GT(first, 0);
  // The upload's id, as the reference client lists it.
  std::string id;
  ASSERT_TRUE(WaitFor(
      [&] {
        CommandResult u = Aws({"s3api", "list-multipart-uploads", "--bucket", "headway-2gib"});
        json listed = json::parse(u.out, nullptr, false);
        if (!listed.is_object() || !listed.contains("Uploads") || listed["Uploads"].empty())
          return false;
        id = listed["Uploads"][0]["UploadId"];
        return true;
      },
      std::chrono::seconds(120)))
      << ReadFile(log);
  const std::string parts_path = "/api/v1/artifacts/two-gib/versions/1/parts?upload_id=" + id;
  auto stored_parts = [&] {
    Answer a = Call(*server, server->admin_token(), "GET", parts_path);
    return a.status == 200 ? a.body["parts"].size() : 0u;
  };
  ASSERT_TRUE(WaitFor([&] { return stored_parts() >= 16; }, std::chrono::seconds(300)))
      << ReadFile(log);
  ::kill(first, SIGKILL);
  int status = 0;
  ::waitpid(first, &status, 0);
  // A part whose bytes were all sent before the kill may still be committed
  // by the store: count once the listing has stopped changing.
  std::size_t before = stored_parts();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    const std::size_t now = stored_parts();
    if (now == before) break;
    before = now;
  }
  ASSERT_LT(before, 32u) << "the first try finished before it was killed";

  CommandResult put = server->Cli({"artifacts", "put", file, "--name", "two-gib"});
  ASSERT_EQ(put.exit_code, 0) << put.err << server->ServerLog();
  EXPECT_THAT(put.out, HasSubstr("artifact/two-gib:2 uploaded (2.0 GiB"));
  EXPECT_THAT(put.out,
              HasSubstr("in 32 parts, " + std::to_string(before) + " of them stored already"));
  json a = json::parse(server->Cli({"artifacts", "describe", "two-gib:2", "-o", "json"}).out);
  EXPECT_EQ(a["state"], "Ready");
  // The store's ETag is the MD5 of the parts' MD5s: every byte arrived intact.
  const std::string digest = a["digest"].get<std::string>().substr(7);
  CommandResult head = Aws({"s3api", "head-object", "--bucket", "headway-2gib", "--key",
                            "default/sha256/" + digest.substr(0, 2) + "/" + digest});
  ASSERT_EQ(head.exit_code, 0) << head.err;
  EXPECT_THAT(head.out, HasSubstr(ExpectedMultipartEtag(file, size, 64 << 20)));
  EXPECT_THAT(head.out, HasSubstr("2147483648"));
  std::filesystem::remove(file);
  EXPECT_EQ(server->Cli({"artifacts", "rm", "two-gib:2"}).exit_code, 0);
}

// An S3 endpoint over HTTPS with a private CA: the server checks the store's
// certificate against --s3-ca-file, the CLI against --cacert and jobs
// against AWS_CA_BUNDLE (as botocore); without the CA each refuses the store.
TEST(ArtifactsOnTlsS3, EveryClientChecksTheStoresCertificate) {
  S3TestServer s3(/*tls=*/true);
  ASSERT_TRUE(s3.ok()) << s3.error();
  ASSERT_EQ(s3.endpoint().rfind("https://", 0), 0u) << s3.endpoint();
  ::setenv("AWS_ACCESS_KEY_ID", s3.access_key().c_str(), 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key().c_str(), 1);
  const std::vector<std::string> store = {"--artifact-store", "s3",          "--s3-endpoint",
                                          s3.endpoint(),      "--s3-bucket", "headway-tls",
                                          "--s3-region",      s3.region()};
  // Not trusting the store's CA, the server does not start.
  std::vector<std::string> untrusting = {
      "/usr/bin/timeout", "30",          HEADWAY_BIN,  "server",
      "--listen",         "127.0.0.1:0", "--data-dir", s3.dir() + "/untrusting"};
  untrusting.insert(untrusting.end(), store.begin(), store.end());
  CommandResult refused = RunCommand(untrusting);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.exit_code, 124) << "it started without checking the certificate";
  EXPECT_THAT(refused.err + refused.out, HasSubstr("certificate"));

  std::vector<std::string> flags = store;
  for (const char* more : {"--s3-ca-file", "", "--s3-part-size", "5Mi"}) flags.push_back(more);
  flags[flags.size() - 3] = s3.ca_file();
  TestServer server(0, flags);
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  const std::string dir = server.work_dir();
  const std::string file = dir + "/model.bin";
  const std::string bytes = RandomBytes((11 << 20) + 5, 16);
  std::ofstream(file, std::ios::binary) << bytes;
  CommandResult untrusted = server.Cli({"artifacts", "put", file, "--name", "model"});
  EXPECT_NE(untrusted.exit_code, 0);
  EXPECT_THAT(untrusted.err, HasSubstr("certificate")) << untrusted.err;
  CommandResult put =
      server.Cli({"--cacert", s3.ca_file(), "artifacts", "put", file, "--name", "model"});
  ASSERT_EQ(put.exit_code, 0) << put.err << server.ServerLog();
  EXPECT_THAT(put.out, HasSubstr("in 3 parts"));
  CommandResult got =
      server.Cli({"--cacert", s3.ca_file(), "artifacts", "get", "model", dir + "/back.bin"});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  EXPECT_TRUE(ReadFile(dir + "/back.bin") == bytes);

  // Jobs run as their team's account: the CA must be where they can read it.
  std::filesystem::copy_file(s3.ca_file(), dir + "/ca.pem");
  std::filesystem::permissions(dir + "/ca.pem", std::filesystem::perms::owner_read |
                                                    std::filesystem::perms::group_read |
                                                    std::filesystem::perms::others_read);
  server.Submit("name: tls-job\nworking_dir: " + dir +
                "\n"
                "env: {PYTHONPATH: \"" HEADWAY_SOURCE_DIR "/sdk/python\", AWS_CA_BUNDLE: \"" +
                dir +
                "/ca.pem\"}\n"
                "command: [/usr/bin/python3, -c, \"import headway; headway.load_artifact('model', "
                "'job.bin'); "
                "print(headway.save_artifact('job.bin', name='copy')['state'])\"]\n");
  ASSERT_TRUE(server.WaitForState("tls-job", "Succeeded")) << server.Cli({"logs", "tls-job"}).out;
  EXPECT_EQ(server.Cli({"logs", "tls-job"}).out, "Ready\n");
  EXPECT_TRUE(ReadFile(dir + "/job.bin") == bytes);
}

}  // namespace
}  // namespace headway::testing
