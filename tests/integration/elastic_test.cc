// Elastic jobs end to end: a real PyTorch DDP job (gloo, on CPUs) whose rank
// groups are torchrun elastic agents on a c10d rendezvous, sized by the
// server's decisions around the scheduler: it grows into idle GPUs, gives
// them back when another team's job waits, and grows again once it ended,
// resuming each time from its checkpoint.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "test_server.h"

namespace headway::testing {
namespace {

using ::testing::HasSubstr;

// A fixed global batch of 48 samples per step, split among the ranks: more
// ranks make shorter steps, as in data-parallel training. Rank 0 saves a
// checkpoint after every step and reports it; every worker resumes from it.
// A SIGTERM (torchrun stopping its workers for a new size) that comes while
// rank 0 saves and reports waits until both are done, as a careful elastic
// script does: a step saved is a step reported.
constexpr const char* kTrainScript = R"(import json, os, signal, time
import torch, torch.distributed as dist
saving, stopping = [False], [False]
def die():
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
def on_term(*_):
    if saving[0]:
        stopping[0] = True
    else:
        die()
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
path = os.path.join(os.environ["HEADWAY_CHECKPOINT_DIR"], "state.pt")
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
step = 0
if os.path.exists(path):
    state = torch.load(path)
    model.load_state_dict(state["model"])
    step = state["step"]
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
truth = torch.randn(8, 1, generator=torch.Generator().manual_seed(1))
signal.signal(signal.SIGTERM, on_term)
while step < 100000:
    n = 48 // world
    x = torch.randn(n, 8)
    loss = ((ddp(x) - x @ truth) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.008 * n)
    step += 1
    if rank == 0:
        saving[0] = True
        torch.save({"model": model.state_dict(), "step": step}, path + ".tmp")
        os.replace(path + ".tmp", path)
        print("HEADWAY " + json.dumps({"step": step, "loss": loss.item(), "world": world}), flush=True)
        saving[0] = False
        if stopping[0]:
            die()
)";

// The "world" metric by step, in step order.
std::vector<std::pair<std::int64_t, int>> WorldByStep(const TestServer& server,
                                                      const std::string& job) {
  std::vector<std::pair<std::int64_t, int>> out;
  nlohmann::json series = Get(server, "/api/v1/jobs/" + job + "/metrics/world");
  if (!series.is_object() || !series.contains("points")) return out;
  for (const auto& p : series["points"]) {
    out.emplace_back(p["step"].get<std::int64_t>(), static_cast<int>(p["value"].get<double>()));
  }
  return out;
}

int LatestWorld(const TestServer& server, const std::string& job) {
  nlohmann::json j = server.Job(job);
  const auto& metrics = j["progress"]["metrics"];
  if (!metrics.is_object() || !metrics.contains("world")) return 0;
  return static_cast<int>(metrics["world"].get<double>());
}

// The training script, where the job's account can read it; empty without
// Debian's torch and its elastic agent.
std::string WriteTrainScript() {
  if (::access("/usr/lib/python3/dist-packages/torch/distributed/run.py", R_OK) != 0) return {};
  const std::string dir = MakeTempDir("elastic");
  ::chmod(dir.c_str(), 0755);
  const std::string script = dir + "/train.py";
  std::ofstream(script) << kTrainScript;
  ::chmod(script.c_str(), 0644);
  return script;
}

TEST(Elastic, ATorchrunJobGrowsIntoIdleGpusShrinksForAWaitingJobAndGrowsBack) {
  const std::string script = WriteTrainScript();
  ASSERT_FALSE(script.empty()) << "needs Debian's python3-torch (scripts/setup --test installs it)";

  // Three logical GPUs; a job may resize once per 4 of its measured restarts.
  TestServer server(3, {"--elastic-interval", "1"});
  server.Submit(
      "name: stretchy\nteam: nlp\ncommand: [/usr/bin/python3, -m, torch.distributed.run, " +
      script +
      "]\nresources: {gpus_per_process: 1}\nelastic: {min_ranks: 1, max_ranks: 3}\n"
      "termination_grace: 5s\n");
  ASSERT_TRUE(server.WaitForState("stretchy", "Running", std::chrono::seconds(30)));

  // Idle GPUs: it grows to its maximum once its speed at one rank group is measured.
  ASSERT_TRUE(
      WaitFor([&] { return server.HasEvent("stretchy", "Resized", "grew to 3 rank groups"); },
              std::chrono::seconds(180)))
      << server.Cli({"describe", "job", "stretchy"}).out << server.Cli({"logs", "stretchy"}).out;
  EXPECT_TRUE(server.HasEvent("stretchy", "Resized", "2 GPUs idle and no job waiting for them"));
  ASSERT_TRUE(
      WaitFor([&] { return LatestWorld(server, "stretchy") == 3; }, std::chrono::seconds(120)))
      << server.Cli({"logs", "stretchy"}).out;
  EXPECT_EQ(server.Job("stretchy")["gpu_ids"].size(), 3u) << server.Job("stretchy").dump();
  EXPECT_EQ(server.Job("stretchy")["gpus"], 3);
  EXPECT_THAT(server.Cli({"describe", "job", "stretchy"}).out,
              HasSubstr("3 now, of 1-3 rank groups"));
  // What it measured before growing: its speed at one rank group, and how
  // long its start took to its first report.
  const nlohmann::json measured = server.Job("stretchy")["elastic"];
  ASSERT_TRUE(measured["steps_per_second"].contains("1")) << measured.dump();
  EXPECT_GT(measured["steps_per_second"]["1"].get<double>(), 0) << measured.dump();
  EXPECT_GT(measured["restart_seconds"].get<double>(), 0) << measured.dump();
  EXPECT_THAT(server.Cli({"describe", "job", "stretchy"}).out, HasSubstr("Measured:"));
  api::HttpClient http = server.Http();
  auto metrics = http.Request("GET", "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_THAT(
      metrics->body,
      HasSubstr(
          "headway_job_elastic_steps_per_second{job_name=\"stretchy\",team=\"nlp\",size=\"1\"}"));

  // Another team's job needs two GPUs: the elastic job gives them back
  // instead of anyone being preempted.
  server.Submit(
      "name: evaluate\nteam: vision\ncommand: [sleep, '3']\n"
      "resources: {gpus_per_process: 2}\n");
  ASSERT_TRUE(WaitFor(
      [&] {
        return server.HasEvent(
            "stretchy", "Resized",
            "shrank to 1 rank group to make room for a waiting job of team vision");
      },
      std::chrono::seconds(30)));
  EXPECT_FALSE(server.HasEvent("stretchy", "Preempting"));
  ASSERT_TRUE(server.WaitForState("evaluate", "Succeeded", std::chrono::seconds(90)))
      << server.Cli({"describe", "job", "evaluate"}).out;
  ASSERT_TRUE(
      WaitFor([&] { return LatestWorld(server, "stretchy") == 1; }, std::chrono::seconds(60)));

  // The GPUs are idle again: it grows back.
  ASSERT_TRUE(WaitFor(
      [&] {
        int grew = 0;
        for (const auto& e : server.Events("stretchy")) {
          if (e["type"] == "Resized" &&
              e["message"].get<std::string>().find("grew to 3") != std::string::npos) {
            ++grew;
          }
        }
        return grew >= 2;
      },
      std::chrono::seconds(180)))
      << server.Cli({"describe", "job", "stretchy"}).out;
  ASSERT_TRUE(
      WaitFor([&] { return LatestWorld(server, "stretchy") == 3; }, std::chrono::seconds(120)))
      << server.Cli({"logs", "stretchy"}).out;
  EXPECT_EQ(server.State("stretchy"), "Running") << "it was never restarted as a new attempt";

  // The run went on across every resize: each step reported once, in
  // order, from the checkpoint on (a restart from scratch would report
  // step 1 again, at world 1, over the earlier steps), at 1, 3, 1 and 3
  // rank groups.
  ASSERT_EQ(server.Cli({"stop", "stretchy"}).exit_code, 0);
  ASSERT_TRUE(server.WaitForState("stretchy", "Stopped", std::chrono::seconds(60)));
  auto by_step = WorldByStep(server, "stretchy");
  ASSERT_FALSE(by_step.empty());
  std::vector<int> sizes;
  std::string gaps;  // each step missing or repeated, with the world it was reported at
  for (std::size_t i = 0; i < by_step.size(); ++i) {
    const std::int64_t expected = i == 0 ? 1 : by_step[i - 1].first + 1;
    if (by_step[i].first != expected) {
      gaps += " step " + std::to_string(by_step[i].first) + " (world " +
              std::to_string(by_step[i].second) + ") after " +
              (i == 0 ? std::string("none")
                      : std::to_string(by_step[i - 1].first) + " (world " +
                            std::to_string(by_step[i - 1].second) + ")") +
              ";";
    }
    if (sizes.empty() || sizes.back() != by_step[i].second) sizes.push_back(by_step[i].second);
  }
  EXPECT_EQ(gaps, "") << "steps missing or repeated of " << by_step.size() << "\n"
                      << server.Cli({"logs", "stretchy"}).out.substr(0, 20000);
  EXPECT_EQ(sizes, (std::vector<int>{1, 3, 1, 3}));
  nlohmann::json loss = Get(server, "/api/v1/jobs/stretchy/metrics/loss");
  ASSERT_GT(loss["points"].size(), 10u);
  EXPECT_LT(loss["points"].back()["value"].get<double>(),
            loss["points"][0]["value"].get<double>() / 10)
      << "the model kept learning across the resizes";
}

// Fault injection: the server dies (as with kill -9) after storing a growth
// and before handing it to the job's supervisor. The restarted server hands
// the stored grant over, so the job does grow.
TEST(Elastic, AGrowthStoredJustBeforeACrashIsHandedOverAfterTheRestart) {
  const std::string script = WriteTrainScript();
  ASSERT_FALSE(script.empty()) << "needs Debian's python3-torch (scripts/setup --test installs it)";
  ::setenv("HEADWAY_TEST_CRASH_AT", "resize:stored", 1);
  TestServer server(3, {"--elastic-interval", "1"});
  ::unsetenv("HEADWAY_TEST_CRASH_AT");
  server.Submit(
      "name: stretchy\nteam: nlp\ncommand: [/usr/bin/python3, -m, torch.distributed.run, " +
      script +
      "]\nresources: {gpus_per_process: 1}\nelastic: {min_ranks: 1, max_ranks: 3}\n"
      "termination_grace: 5s\n");
  ASSERT_TRUE(WaitFor([&] { return !server.Running(); }, std::chrono::seconds(180)))
      << "the server never reached its crash point";
  server.Restart();
  EXPECT_TRUE(server.HasEvent("stretchy", "Resized", "grew to 3 rank groups"));
  ASSERT_TRUE(
      WaitFor([&] { return LatestWorld(server, "stretchy") == 3; }, std::chrono::seconds(120)))
      << server.Cli({"logs", "stretchy"}).out;
  ASSERT_EQ(server.Cli({"stop", "stretchy"}).exit_code, 0);
  EXPECT_TRUE(server.WaitForState("stretchy", "Stopped", std::chrono::seconds(60)));
}

TEST(Elastic, ElasticSpecsTheExecutorCannotHonourAreRefusedAtSubmit) {
  TestServer server(2);
  CommandResult nodes = server.Cli({"submit", "-f", "-"},
                                   "name: wide\ncommand: [torchrun, t.py]\n"
                                   "resources: {gpus_per_process: 1}\n"
                                   "elastic: {min_nodes: 1, max_nodes: 2}\n");
  EXPECT_NE(nodes.exit_code, 0);
  EXPECT_THAT(nodes.err, HasSubstr("let the job grow in ranks"));
}

}  // namespace
}  // namespace headway::testing
