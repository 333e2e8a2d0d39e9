// Artifacts against a real server and its local content-addressed store:
// the CLI, jobs saving and loading through the SDK with their own tokens,
// lineage both ways, teams, quotas and uploads that do not match.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "test_server.h"

namespace headway::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

std::string RandomFile(const std::string& path, std::size_t size, unsigned seed) {
  std::mt19937 random(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  std::ofstream(path, std::ios::binary) << bytes;
  return bytes;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::size_t StoredObjects(const TestServer& server) {
  std::size_t n = 0;
  for (const auto& entry : fs::recursive_directory_iterator(server.data_dir() + "/artifacts")) {
    if (entry.is_regular_file()) ++n;
  }
  return n;
}

// A job saves a checkpoint, fails, and its next attempt (which finds its
// checkpoint directory empty, as on another node) resumes from the store.
const char* kResumingJob =
    "restart_policy: {max_restarts: 1}\n"
    "command: [/usr/bin/python3, -c, \"import headway, os, sys\\n"
    "d = os.environ['HEADWAY_CHECKPOINT_DIR']\\n"
    "step = headway.restore_checkpoint()\\n"
    "if step is None:\\n"
    "  open(os.path.join(d, 'model.pt'), 'w').write('weights at 5')\\n"
    "  headway.save_checkpoint(step=5, metrics={'loss': 0.5})\\n"
    "  [os.remove(os.path.join(d, f)) for f in os.listdir(d)]\\n"
    "  sys.exit(1)\\n"
    "print('resumed at', step, open(os.path.join(d, 'model.pt')).read())\\n\"]\n";

TEST(Artifacts, PutGetListDescribeAndRemoveThroughTheCli) {
  TestServer server(0);
  const std::string file = server.work_dir() + "/model.bin";
  // Over the server's 1 MiB limit for request bodies held in memory.
  const std::string bytes = RandomFile(file, 3 << 20, 1);
  CommandResult put = server.Cli({"artifacts", "put", file, "--name", "mnist-model", "--kind",
                                  "model", "--metric", "eval_loss=0.41", "--label", "fw=jax"});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  EXPECT_THAT(put.out, HasSubstr("artifact/mnist-model:1 uploaded"));
  // The same bytes again: a new version, nothing sent, one object kept.
  CommandResult again = server.Cli({"artifacts", "put", file, "--name", "mnist-model", "--kind", "model"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("artifact/mnist-model:2 stored (its bytes were there already)"));
  EXPECT_EQ(StoredObjects(server), 1u);
  CommandResult listed = server.Cli({"artifacts", "ls"});
  EXPECT_THAT(listed.out, HasSubstr("mnist-model:1   model   Ready   3.0 MiB"));
  EXPECT_THAT(listed.out, HasSubstr("mnist-model:2"));
  const std::string out = server.work_dir() + "/out.bin";
  CommandResult got = server.Cli({"artifacts", "get", "mnist-model:1", out});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  EXPECT_EQ(ReadFile(out), bytes);
  json described = json::parse(server.Cli({"artifacts", "describe", "mnist-model:1", "-o", "json"}).out);
  EXPECT_EQ(described["metrics"]["eval_loss"], 0.41);
  EXPECT_EQ(described["labels"]["fw"], "jax");
  EXPECT_EQ(described["digest"].get<std::string>().substr(0, 7), "sha256:");
  // "NAME" is its newest ready version.
  EXPECT_EQ(json::parse(server.Cli({"artifacts", "describe", "mnist-model", "-o", "json"}).out)["version"], 2);
  // The bytes go with the last version that holds them.
  EXPECT_EQ(server.Cli({"artifacts", "rm", "mnist-model:1"}).exit_code, 0);
  EXPECT_EQ(StoredObjects(server), 1u);
  EXPECT_EQ(server.Cli({"artifacts", "rm", "mnist-model:2"}).exit_code, 0);
  EXPECT_EQ(StoredObjects(server), 0u);
  CommandResult gone = server.Cli({"artifacts", "get", "mnist-model:2", out});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, HasSubstr("not found"));
  // Versions are never given out twice.
  ASSERT_EQ(server.Cli({"artifacts", "put", file, "--name", "mnist-model"}).exit_code, 0);
  EXPECT_THAT(server.Cli({"artifacts", "ls", "-o", "name"}).out, HasSubstr("mnist-model:3"));
  EXPECT_TRUE(fs::is_empty(server.data_dir() + "/uploads")) << "upload files are not left behind";
}

TEST(Artifacts, AnUploadThatDoesNotMatchItsRecordStoresNothing) {
  TestServer server(0);
  const std::string file = server.work_dir() + "/data.bin";
  RandomFile(file, 4096, 2);
  const std::string sha_of_other = "sha256:" + std::string(64, 'a');
  Answer created = Call(server, server.admin_token(), "POST", "/api/v1/artifacts",
                        json{{"name", "data"}, {"kind", "dataset"}, {"size", 4096},
                             {"digest", sha_of_other}}.dump());
  ASSERT_EQ(created.status, 201) << created.raw;
  EXPECT_EQ(created.body["upload"]["url"], "/api/v1/artifacts/data/versions/1/content");
  api::HttpClient http(server.url(), server.admin_token());
  auto sent = http.SendFile("PUT", "/api/v1/artifacts/data/versions/1/content", file);
  ASSERT_TRUE(sent.ok());
  EXPECT_EQ(sent->status, 400);
  EXPECT_THAT(sent->body, HasSubstr("digest"));
  EXPECT_THAT(sent->body, HasSubstr("nothing was stored"));
  EXPECT_EQ(StoredObjects(server), 0u);
  EXPECT_EQ(Call(server, server.admin_token(), "GET", "/api/v1/artifacts/data/versions/1").body["state"],
            "Pending");
  EXPECT_EQ(Call(server, server.admin_token(), "GET", "/api/v1/artifacts/data/versions/1/content").status,
            409);
  // Bad records are refused by field.
  for (auto [body, field] : std::vector<std::pair<json, std::string>>{
           {{{"name", "../x"}, {"kind", "model"}, {"size", 1}, {"digest", sha_of_other}}, "name"},
           {{{"name", "x"}, {"kind", "weights"}, {"size", 1}, {"digest", sha_of_other}}, "kind"},
           {{{"name", "x"}, {"kind", "model"}, {"size", -1}, {"digest", sha_of_other}}, "size"},
           {{{"name", "x"}, {"kind", "model"}, {"size", 1}, {"digest", "md5:1"}}, "digest"},
           {{{"name", "x"}, {"kind", "model"}, {"size", 1}, {"digest", sha_of_other}, {"colour", 1}}, "colour"}}) {
    Answer bad = Call(server, server.admin_token(), "POST", "/api/v1/artifacts", body.dump());
    EXPECT_EQ(bad.status, 400) << body.dump();
    EXPECT_EQ(bad.body["error"]["field"], field) << bad.raw;
  }
}

TEST(Artifacts, AJobSavesACheckpointAnotherLoadsItAndLineageShowsBoth) {
  TestServer server(0);
  const std::string dir = server.work_dir();
  const std::string sdk = "env: {PYTHONPATH: \"" HEADWAY_SOURCE_DIR "/sdk/python\"}\n";
  server.Submit("name: producer\n" + sdk +
                "labels: {lr: '0.01'}\n"
                "command: [/usr/bin/python3, -c, \"import headway, os; open('ckpt.pt','wb').write(os.urandom(200000)); "
                "print(headway.save_artifact('ckpt.pt', name='mnist-ckpt', step=40, metrics={'eval_loss': 0.5})['ref'])\"]\n"
                "working_dir: " + dir + "\n");
  ASSERT_TRUE(server.WaitForState("producer", "Succeeded")) << server.Cli({"logs", "producer"}).out;
  EXPECT_EQ(server.Cli({"logs", "producer"}).out, "mnist-ckpt:1\n");
  server.Submit("name: consumer\n" + sdk +
                "command: [/usr/bin/python3, -c, \"import headway; r = headway.load_artifact('mnist-ckpt', 'got.pt'); "
                "print(r['ref'], len(open('got.pt','rb').read()))\"]\n"
                "working_dir: " + dir + "\n");
  ASSERT_TRUE(server.WaitForState("consumer", "Succeeded")) << server.Cli({"logs", "consumer"}).out;
  EXPECT_EQ(server.Cli({"logs", "consumer"}).out, "mnist-ckpt:1 200000\n");
  EXPECT_EQ(ReadFile(dir + "/got.pt"), ReadFile(dir + "/ckpt.pt"));
  // Which job made it, with what, and who used it.
  json a = json::parse(server.Cli({"artifacts", "describe", "mnist-ckpt:1", "-o", "json"}).out);
  EXPECT_EQ(a["producer"]["job"], "producer");
  EXPECT_EQ(a["producer"]["attempt"], 0);
  EXPECT_EQ(a["producer"]["step"], 40);
  EXPECT_EQ(a["created_by"], "job/producer");
  EXPECT_EQ(a["lineage"]["producer"]["labels"]["lr"], "0.01");
  ASSERT_EQ(a["lineage"]["used_by"].size(), 1u);
  EXPECT_EQ(a["lineage"]["used_by"][0]["job"], "consumer");
  CommandResult lineage = server.Cli({"artifacts", "lineage", "mnist-ckpt"});
  EXPECT_THAT(lineage.out, HasSubstr("Produced by: job/producer@40 (Succeeded)"));
  EXPECT_THAT(lineage.out, HasSubstr("job/consumer"));
  // And from the jobs' side.
  Answer consumer = Call(server, server.admin_token(), "GET", "/api/v1/jobs/consumer/artifacts");
  ASSERT_EQ(consumer.body["used"].size(), 1u);
  EXPECT_EQ(consumer.body["used"][0]["artifact"], "mnist-ckpt:1");
  EXPECT_EQ(Call(server, server.admin_token(), "GET", "/api/v1/jobs/producer/artifacts")
                .body["produced"][0]["ref"], "mnist-ckpt:1");
  // A job's token works only for itself, and only while it runs.
  Answer stale = Call(server, "not-a-token", "GET", "/api/v1/artifacts", "",
                      {{"X-Headway-Job", "producer"}});
  EXPECT_EQ(stale.status / 100, 4);
}

TEST(Artifacts, TeamsSeeTheirOwnAndStayWithinTheirQuota) {
  TestServer server(0, {"--artifact-quota", "vision=1Mi", "--max-upload-bytes", "2Mi"});
  const std::string vision = CreateToken(server, "ann", "vision", "member");
  const std::string nlp = CreateToken(server, "bob", "nlp", "member");
  const std::string small = server.work_dir() + "/small.bin";
  const std::string big = server.work_dir() + "/big.bin";
  RandomFile(small, 600 << 10, 3);
  RandomFile(big, 3 << 20, 4);
  server.UseToken(vision);
  ASSERT_EQ(server.Cli({"artifacts", "put", small, "--name", "vision-data"}).exit_code, 0);
  CommandResult over = server.Cli({"artifacts", "put", small, "--name", "vision-data-2"});
  EXPECT_EQ(over.exit_code, 1);
  EXPECT_THAT(over.err, HasSubstr("over its quota of 1048576"));
  server.UseToken(nlp);
  // Another team's artifact is not visible, listed, or writable under its name.
  EXPECT_THAT(server.Cli({"artifacts", "get", "vision-data", server.work_dir() + "/x"}).err,
              HasSubstr("sees team 'nlp' only"));
  EXPECT_THAT(server.Cli({"artifacts", "ls"}).err, HasSubstr("No artifacts found"));
  CommandResult taken = server.Cli({"artifacts", "put", small, "--name", "vision-data"});
  EXPECT_EQ(taken.exit_code, 1);
  EXPECT_THAT(taken.err, HasSubstr("belongs to team 'vision'"));
  CommandResult foreign = server.Cli({"artifacts", "put", small, "--name", "mine", "--team", "vision"});
  EXPECT_EQ(foreign.exit_code, 1);
  EXPECT_THAT(foreign.err, HasSubstr("may not change team 'vision'"));
  // An upload over --max-upload-bytes is refused before it is stored.
  CommandResult too_big = server.Cli({"artifacts", "put", big, "--name", "nlp-big"});
  EXPECT_EQ(too_big.exit_code, 1);
  EXPECT_THAT(too_big.err, HasSubstr("exceeds 2097152 bytes"));
}

TEST(Artifacts, ARestartedJobGetsItsCheckpointBackFromTheStore) {
  TestServer server(0);
  server.Submit("name: resumer\nenv: {PYTHONPATH: \"" HEADWAY_SOURCE_DIR "/sdk/python\"}\n" +
                std::string(kResumingJob));
  ASSERT_TRUE(server.WaitForState("resumer", "Succeeded")) << server.Cli({"logs", "resumer", "--attempt", "0"}).out;
  EXPECT_EQ(server.Job("resumer")["restarts"], 1);
  EXPECT_EQ(server.Cli({"logs", "resumer"}).out, "resumed at 5 weights at 5\n");
  json a = json::parse(server.Cli({"artifacts", "describe", "resumer.checkpoint", "-o", "json"}).out);
  EXPECT_EQ(a["kind"], "checkpoint");
  EXPECT_EQ(a["producer"]["attempt"], 0);
  EXPECT_EQ(a["lineage"]["used_by"][0]["attempt"], 1);
}

TEST(Artifacts, RetentionKeepsTheNewestAndTheBestCheckpointsAndDropsTheRest) {
  TestServer server(0);
  // Five checkpoints with these eval losses; keep the 2 newest and the best.
  server.Submit("name: keeper\nenv: {PYTHONPATH: \"" HEADWAY_SOURCE_DIR "/sdk/python\"}\n"
                "command: [/usr/bin/python3, -c, \"import headway, os\\n"
                "d = os.environ['HEADWAY_CHECKPOINT_DIR']\\n"
                "for step, loss in enumerate([0.9, 0.3, 0.8, 0.7, 0.6]):\\n"
                "  open(os.path.join(d, 'w'), 'w').write(str(step))\\n"
                "  headway.save_checkpoint(step=step, metrics={'eval_loss': loss}, keep_latest=2,\\n"
                "                          keep_best=1, best_metric='eval_loss')\\n\"]\n");
  ASSERT_TRUE(server.WaitForState("keeper", "Succeeded")) << server.Cli({"logs", "keeper"}).out;
  EXPECT_EQ(server.Cli({"artifacts", "ls", "keeper.checkpoint", "-o", "name"}).out,
            "keeper.checkpoint:2\nkeeper.checkpoint:4\nkeeper.checkpoint:5\n");
  EXPECT_EQ(StoredObjects(server), 3u) << "the bytes of released versions are gone too";
}

}  // namespace
}  // namespace headway::testing
