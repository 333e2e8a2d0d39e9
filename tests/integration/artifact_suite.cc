#include "artifact_suite.h"

#include <gmock/gmock.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace headway::testing {

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

std::size_t FilesUnder(const std::string& dir) {
  std::size_t n = 0;
  std::error_code error;
  for (fs::recursive_directory_iterator it(dir, error), end; !error && it != end;
       it.increment(error)) {
    if (it->is_regular_file()) ++n;
  }
  return n;
}

namespace {

const std::string kSdkEnv = "env: {PYTHONPATH: \"" HEADWAY_SOURCE_DIR "/sdk/python\"}\n";

TEST_P(ArtifactStoreTest, PutGetListDescribeAndRemoveThroughTheCli) {
  auto [server, stored_objects] = Start();
  const std::string file = server->work_dir() + "/model.bin";
  // Over the server's 1 MiB limit for request bodies held in memory.
  const std::string bytes = RandomFile(file, 3 << 20, 1);
  CommandResult put = server->Cli({"artifacts", "put", file, "--name", "mnist-model", "--kind",
                                   "model", "--metric", "eval_loss=0.41", "--label", "fw=jax"});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  EXPECT_THAT(put.out, HasSubstr("artifact/mnist-model:1 uploaded"));
  // The same bytes again: a new version, nothing sent, one object kept.
  CommandResult again =
      server->Cli({"artifacts", "put", file, "--name", "mnist-model", "--kind", "model"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("artifact/mnist-model:2 stored (its bytes were there already)"));
  EXPECT_EQ(stored_objects(), 1u);
  CommandResult listed = server->Cli({"artifacts", "ls"});
  EXPECT_THAT(listed.out, HasSubstr("mnist-model:1   model   Ready   3.0 MiB"));
  EXPECT_THAT(listed.out, HasSubstr("mnist-model:2"));
  const std::string out = server->work_dir() + "/out.bin";
  CommandResult got = server->Cli({"artifacts", "get", "mnist-model:1", out});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  EXPECT_EQ(ReadFile(out), bytes);
  json described =
      json::parse(server->Cli({"artifacts", "describe", "mnist-model:1", "-o", "json"}).out);
  EXPECT_EQ(described["metrics"]["eval_loss"], 0.41);
  EXPECT_EQ(described["labels"]["fw"], "jax");
  EXPECT_EQ(described["digest"].get<std::string>().substr(0, 7), "sha256:");
  // "NAME" is its newest ready version.
  EXPECT_EQ(json::parse(
                server->Cli({"artifacts", "describe", "mnist-model", "-o", "json"}).out)["version"],
            2);
  // The bytes go with the last version that holds them.
  EXPECT_EQ(server->Cli({"artifacts", "rm", "mnist-model:1"}).exit_code, 0);
  EXPECT_EQ(stored_objects(), 1u);
  EXPECT_EQ(server->Cli({"artifacts", "rm", "mnist-model:2"}).exit_code, 0);
  EXPECT_EQ(stored_objects(), 0u);
  CommandResult gone = server->Cli({"artifacts", "get", "mnist-model:2", out});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, HasSubstr("not found"));
  // Versions are never given out twice.
  ASSERT_EQ(server->Cli({"artifacts", "put", file, "--name", "mnist-model"}).exit_code, 0);
  EXPECT_THAT(server->Cli({"artifacts", "ls", "-o", "name"}).out, HasSubstr("mnist-model:3"));
  EXPECT_EQ(FilesUnder(server->data_dir() + "/uploads"), 0u) << "upload files are not left behind";
}

TEST_P(ArtifactStoreTest, AJobSavesACheckpointAnotherLoadsItAndLineageShowsBoth) {
  auto [server, stored_objects] = Start();
  const std::string dir = server->work_dir();
  server->Submit("name: producer\n" + kSdkEnv +
                 "labels: {lr: '0.01'}\n"
                 "command: [/usr/bin/python3, -c, \"import headway, os; "
                 "open('ckpt.pt','wb').write(os.urandom(200000)); "
                 "print(headway.save_artifact('ckpt.pt', name='mnist-ckpt', step=40, "
                 "metrics={'eval_loss': 0.5})['ref'])\"]\n"
                 "working_dir: " +
                 dir + "\n");
  ASSERT_TRUE(server->WaitForState("producer", "Succeeded"))
      << server->Cli({"logs", "producer"}).out;
  EXPECT_EQ(server->Cli({"logs", "producer"}).out, "mnist-ckpt:1\n");
  server->Submit("name: consumer\n" + kSdkEnv +
                 "command: [/usr/bin/python3, -c, \"import headway; r = "
                 "headway.load_artifact('mnist-ckpt', 'got.pt'); "
                 "print(r['ref'], len(open('got.pt','rb').read()))\"]\n"
                 "working_dir: " +
                 dir + "\n");
  ASSERT_TRUE(server->WaitForState("consumer", "Succeeded"))
      << server->Cli({"logs", "consumer"}).out;
  EXPECT_EQ(server->Cli({"logs", "consumer"}).out, "mnist-ckpt:1 200000\n");
  EXPECT_EQ(ReadFile(dir + "/got.pt"), ReadFile(dir + "/ckpt.pt"));
  // Which job made it, with what, and who used it.
  json a = json::parse(server->Cli({"artifacts", "describe", "mnist-ckpt:1", "-o", "json"}).out);
  EXPECT_EQ(a["producer"]["job"], "producer");
  EXPECT_EQ(a["producer"]["attempt"], 0);
  EXPECT_EQ(a["producer"]["step"], 40);
  EXPECT_EQ(a["created_by"], "job/producer");
  EXPECT_EQ(a["lineage"]["producer"]["labels"]["lr"], "0.01");
  ASSERT_EQ(a["lineage"]["used_by"].size(), 1u);
  EXPECT_EQ(a["lineage"]["used_by"][0]["job"], "consumer");
  CommandResult lineage = server->Cli({"artifacts", "lineage", "mnist-ckpt"});
  EXPECT_THAT(lineage.out, HasSubstr("Produced by: job/producer@40 (Succeeded)"));
  EXPECT_THAT(lineage.out, HasSubstr("job/consumer"));
  // And from the jobs' side.
  Answer consumer = Call(*server, server->admin_token(), "GET", "/api/v1/jobs/consumer/artifacts");
  ASSERT_EQ(consumer.body["used"].size(), 1u);
  EXPECT_EQ(consumer.body["used"][0]["artifact"], "mnist-ckpt:1");
  EXPECT_EQ(Call(*server, server->admin_token(), "GET", "/api/v1/jobs/producer/artifacts")
                .body["produced"][0]["ref"],
            "mnist-ckpt:1");
  // A job's token works only for itself, and only while it runs.
  Answer stale =
      Call(*server, "not-a-token", "GET", "/api/v1/artifacts", "", {{"X-Headway-Job", "producer"}});
  EXPECT_EQ(stale.status / 100, 4);
}

TEST_P(ArtifactStoreTest, TeamsSeeTheirOwnAndStayWithinTheirQuota) {
  auto [server, stored_objects] = Start(0, {"--artifact-quota", "vision=1Mi"});
  const std::string vision = CreateToken(*server, "ann", "vision", "member");
  const std::string nlp = CreateToken(*server, "bob", "nlp", "member");
  const std::string small = server->work_dir() + "/small.bin";
  RandomFile(small, 600 << 10, 3);
  server->UseToken(vision);
  ASSERT_EQ(server->Cli({"artifacts", "put", small, "--name", "vision-data"}).exit_code, 0);
  CommandResult over = server->Cli({"artifacts", "put", small, "--name", "vision-data-2"});
  EXPECT_EQ(over.exit_code, 1);
  EXPECT_THAT(over.err, HasSubstr("over its quota of 1048576"));
  server->UseToken(nlp);
  // Another team's artifact is not visible, listed, or writable under its name.
  EXPECT_THAT(server->Cli({"artifacts", "get", "vision-data", server->work_dir() + "/x"}).err,
              HasSubstr("sees team 'nlp' only"));
  EXPECT_THAT(server->Cli({"artifacts", "ls"}).err, HasSubstr("No artifacts found"));
  CommandResult taken = server->Cli({"artifacts", "put", small, "--name", "vision-data"});
  EXPECT_EQ(taken.exit_code, 1);
  EXPECT_THAT(taken.err, HasSubstr("belongs to team 'vision'"));
  CommandResult foreign =
      server->Cli({"artifacts", "put", small, "--name", "mine", "--team", "vision"});
  EXPECT_EQ(foreign.exit_code, 1);
  EXPECT_THAT(foreign.err, HasSubstr("may not change team 'vision'"));
  // The same bytes in another team are another object: teams never share bytes.
  ASSERT_EQ(server->Cli({"artifacts", "put", small, "--name", "nlp-data"}).exit_code, 0);
  EXPECT_EQ(stored_objects(), 2u);
}

// A job saves a checkpoint, fails, and its next attempt (which finds its
// checkpoint directory empty, as on another node) resumes from the store.
TEST_P(ArtifactStoreTest, ARestartedJobGetsItsCheckpointBackFromTheStore) {
  auto [server, stored_objects] = Start();
  server->Submit("name: resumer\n" + kSdkEnv +
                 "restart_policy: {max_restarts: 1}\n"
                 "command: [/usr/bin/python3, -c, \"import headway, os, sys\\n"
                 "d = os.environ['HEADWAY_CHECKPOINT_DIR']\\n"
                 "step = headway.restore_checkpoint()\\n"
                 "if step is None:\\n"
                 "  open(os.path.join(d, 'model.pt'), 'w').write('weights at 5')\\n"
                 "  headway.save_checkpoint(step=5, metrics={'loss': 0.5})\\n"
                 "  [os.remove(os.path.join(d, f)) for f in os.listdir(d)]\\n"
                 "  sys.exit(1)\\n"
                 "print('resumed at', step, open(os.path.join(d, 'model.pt')).read())\\n\"]\n");
  ASSERT_TRUE(server->WaitForState("resumer", "Succeeded"))
      << server->Cli({"logs", "resumer", "--attempt", "0"}).out;
  EXPECT_EQ(server->Job("resumer")["restarts"], 1);
  EXPECT_EQ(server->Cli({"logs", "resumer"}).out, "resumed at 5 weights at 5\n");
  json a =
      json::parse(server->Cli({"artifacts", "describe", "resumer.checkpoint", "-o", "json"}).out);
  EXPECT_EQ(a["kind"], "checkpoint");
  EXPECT_EQ(a["producer"]["attempt"], 0);
  EXPECT_EQ(a["lineage"]["used_by"][0]["attempt"], 1);
  EXPECT_EQ(stored_objects(), 1u);
}

// Preempted by a higher-priority job, a job saves its checkpoint to the store
// on the warning; its next attempt finds an empty checkpoint directory (as
// on another node) and resumes from the store at the step it left.
TEST_P(ArtifactStoreTest, APreemptedJobResumesFromTheStoreWithItsLocalCheckpointGone) {
  auto [server, stored_objects] = Start(2);
  server->Submit(
      "name: low\npriority: 0\n" + kSdkEnv +
      "resources: {gpus_per_process: 2}\ncheckpoint_warning: 30s\ntermination_grace: 2s\n"
      "command: [/usr/bin/python3, -u, -c, \"import headway, os, sys, time\\n"
      "d = os.environ['HEADWAY_CHECKPOINT_DIR']\\n"
      "start = headway.restore_checkpoint() or 0\\n"
      "if start:\\n"
      "  print('resumed at', start, open(os.path.join(d, 'state')).read())\\n"
      "for step in range(start + 1, 101):\\n"
      "  time.sleep(0.05)\\n"
      "  headway.report(step, total_steps=100)\\n"
      "  if headway.should_checkpoint():\\n"
      "    open(os.path.join(d, 'state'), 'w').write('weights at %d' % step)\\n"
      "    headway.save_checkpoint(step=step)\\n"
      "    [os.remove(os.path.join(d, f)) for f in os.listdir(d)]\\n"
      "    print('checkpointed at', step)\\n"
      "    headway.flush()\\n"
      "    sys.exit(0)\\n"
      "headway.flush()\\n"
      "print('done')\\n\"]\n");
  ASSERT_TRUE(WaitFor([&] {
    json low = server->Job("low");
    return low["progress"]["step"].is_number() && low["progress"]["step"].get<int>() >= 10;
  }));
  server->Submit(
      "name: urgent\npriority: 10\ncommand: \"echo urgent ran\"\n"
      "resources: {gpus_per_process: 2}\n");
  ASSERT_TRUE(server->WaitForState("urgent", "Succeeded", std::chrono::seconds(60)))
      << server->Cli({"logs", "low", "--attempt", "0"}).out;
  ASSERT_TRUE(server->WaitForState("low", "Succeeded", std::chrono::seconds(60)))
      << server->Cli({"logs", "low", "--attempt", "1"}).out;
  json low = server->Job("low");
  EXPECT_EQ(low["preemptions"], 1);
  EXPECT_EQ(low["restarts"], 0);
  const std::string first = server->Cli({"logs", "low", "--attempt", "0"}).out;
  ASSERT_THAT(first, HasSubstr("checkpointed at "));
  const std::string step = first.substr(
      first.find("checkpointed at ") + 16,
      first.find('\n', first.find("checkpointed at ")) - first.find("checkpointed at ") - 16);
  EXPECT_EQ(server->Cli({"logs", "low", "--attempt", "1"}).out,
            "resumed at " + step + " weights at " + step + "\ndone\n");
  json a = json::parse(server->Cli({"artifacts", "describe", "low.checkpoint", "-o", "json"}).out);
  EXPECT_EQ(a["producer"]["attempt"], 0);
  EXPECT_EQ(a["producer"]["step"].dump(), step);
  ASSERT_EQ(a["lineage"]["used_by"].size(), 1u);
  EXPECT_EQ(a["lineage"]["used_by"][0]["attempt"], 1);
  EXPECT_EQ(stored_objects(), 1u);
}

TEST_P(ArtifactStoreTest, RetentionKeepsTheNewestAndTheBestCheckpointsAndDropsTheRest) {
  auto [server, stored_objects] = Start();
  // Five checkpoints with these eval losses; keep the 2 newest and the best.
  server->Submit(
      "name: keeper\n" + kSdkEnv +
      "command: [/usr/bin/python3, -c, \"import headway, os\\n"
      "d = os.environ['HEADWAY_CHECKPOINT_DIR']\\n"
      "for step, loss in enumerate([0.9, 0.3, 0.8, 0.7, 0.6]):\\n"
      "  open(os.path.join(d, 'w'), 'w').write(str(step))\\n"
      "  headway.save_checkpoint(step=step, metrics={'eval_loss': loss}, keep_latest=2,\\n"
      "                          keep_best=1, best_metric='eval_loss')\\n\"]\n");
  ASSERT_TRUE(server->WaitForState("keeper", "Succeeded")) << server->Cli({"logs", "keeper"}).out;
  EXPECT_EQ(server->Cli({"artifacts", "ls", "keeper.checkpoint", "-o", "name"}).out,
            "keeper.checkpoint:2\nkeeper.checkpoint:4\nkeeper.checkpoint:5\n");
  EXPECT_EQ(stored_objects(), 3u) << "the bytes of released versions are gone too";
}

}  // namespace
}  // namespace headway::testing
