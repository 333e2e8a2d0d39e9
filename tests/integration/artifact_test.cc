// Artifacts on the server's local content-addressed store: the shared
// suite (artifact_suite.h), and what only this store does: uploads go
// through the server, which checks them against their record and bounds
// their size.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "artifact_suite.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::size_t StoredObjects(const TestServer& server) {
  return FilesUnder(server.data_dir() + "/artifacts");
}

ArtifactStoreKind LocalStore() {
  return {"Local", [](int gpus, const std::vector<std::string>& flags) {
            ServerWithStore s;
            s.server = std::make_unique<TestServer>(gpus, flags);
            const TestServer* server = s.server.get();
            s.stored_objects = [server] { return StoredObjects(*server); };
            return s;
          }};
}

INSTANTIATE_TEST_SUITE_P(Local, ArtifactStoreTest, ::testing::Values(LocalStore()),
                         [](const auto& info) { return info.param.name; });

TEST(Artifacts, AnUploadThatDoesNotMatchItsRecordStoresNothing) {
  TestServer server(0);
  const std::string file = server.work_dir() + "/data.bin";
  RandomFile(file, 4096, 2);
  const std::string sha_of_other = "sha256:" + std::string(64, 'a');
  Answer created = Call(
      server, server.admin_token(), "POST", "/api/v1/artifacts",
      json{{"name", "data"}, {"kind", "dataset"}, {"size", 4096}, {"digest", sha_of_other}}.dump());
  ASSERT_EQ(created.status, 201) << created.raw;
  EXPECT_EQ(created.body["upload"]["url"], "/api/v1/artifacts/data/versions/1/content");
  api::HttpClient http(server.url(), server.admin_token());
  auto sent = http.SendFile("PUT", "/api/v1/artifacts/data/versions/1/content", file);
  ASSERT_TRUE(sent.ok());
  EXPECT_EQ(sent->status, 400);
  EXPECT_THAT(sent->body, HasSubstr("digest"));
  EXPECT_THAT(sent->body, HasSubstr("nothing was stored"));
  EXPECT_EQ(StoredObjects(server), 0u);
  EXPECT_EQ(
      Call(server, server.admin_token(), "GET", "/api/v1/artifacts/data/versions/1").body["state"],
      "Pending");
  EXPECT_EQ(
      Call(server, server.admin_token(), "GET", "/api/v1/artifacts/data/versions/1/content").status,
      409);
  // Bad records are refused by field.
  for (auto [body, field] : std::vector<std::pair<json, std::string>>{
           {{{"name", "../x"}, {"kind", "model"}, {"size", 1}, {"digest", sha_of_other}}, "name"},
           {{{"name", "x"}, {"kind", "weights"}, {"size", 1}, {"digest", sha_of_other}}, "kind"},
           {{{"name", "x"}, {"kind", "model"}, {"size", -1}, {"digest", sha_of_other}}, "size"},
           {{{"name", "x"}, {"kind", "model"}, {"size", 1}, {"digest", "md5:1"}}, "digest"},
           {{{"name", "x"},
             {"kind", "model"},
             {"size", 1},
             {"digest", sha_of_other},
             {"colour", 1}},
            "colour"}}) {
    Answer bad = Call(server, server.admin_token(), "POST", "/api/v1/artifacts", body.dump());
    EXPECT_EQ(bad.status, 400) << body.dump();
    EXPECT_EQ(bad.body["error"]["field"], field) << bad.raw;
  }
}

TEST(Artifacts, AnUploadOverMaxUploadBytesIsRefusedBeforeItIsStored) {
  TestServer server(0, {"--max-upload-bytes", "2Mi"});
  const std::string big = server.work_dir() + "/big.bin";
  RandomFile(big, 3 << 20, 4);
  CommandResult too_big = server.Cli({"artifacts", "put", big, "--name", "big"});
  EXPECT_EQ(too_big.exit_code, 1);
  EXPECT_THAT(too_big.err, HasSubstr("exceeds 2097152 bytes"));
  EXPECT_EQ(StoredObjects(server), 0u);
  EXPECT_EQ(FilesUnder(server.data_dir() + "/uploads"), 0u);
}

}  // namespace
}  // namespace headway::testing
