// Kubeflow manifests submitted unchanged to a real server: a TrainJob runs
// real torchrun workers (PyTorch, gloo on CPU) and a Katib Experiment's
// trials report through `name=value` lines, as under Katib's StdOut collector.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "api/http_client.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(Manifests, ATrainJobRunsTorchrunWorkersAsKubeflowWould) {
  TestServer server(2);
  WriteText(server.work_dir() + "/ddp.py",
            "import os, torch, torch.distributed as dist\n"
            "dist.init_process_group('gloo')\n"
            "t = torch.ones(1) * (dist.get_rank() + 1)\n"
            "dist.all_reduce(t)\n"
            "print(f\"rank {dist.get_rank()} of {dist.get_world_size()} sum {int(t.item())} \"\n"
            "      f\"nnodes {os.environ['PET_NNODES']}\", flush=True)\n"
            "dist.destroy_process_group()\n");
  CommandResult submitted =
      server.Cli({"submit", "-f", "-"}, R"(apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: tj-ddp
spec:
  runtimeRef:
    name: torch-distributed
  trainer:
    image: docker.io/kubeflow/pytorch-mnist:v1
    command: ["torchrun", ")" + server.work_dir() +
                                            R"(/ddp.py"]
    numProcPerNode: 2
    env:
      # Debian's torchrun (PyTorch 1.13 on Python 3.11) fails reading its
      # default --redirects 0; these ask for the same output another way.
      - {name: PET_REDIRECTS, value: "1"}
      - {name: PET_TEE, value: "1"}
    resourcesPerNode:
      limits: {nvidia.com/gpu: 2}
)");
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  EXPECT_EQ(submitted.out, "job/tj-ddp submitted\n");
  ASSERT_TRUE(server.WaitForState("tj-ddp", "Succeeded", std::chrono::seconds(120)))
      << server.Cli({"logs", "tj-ddp"}).out;
  std::string logs = server.Cli({"logs", "tj-ddp"}).out;
  EXPECT_THAT(logs, HasSubstr("rank 0 of 2 sum 3 nnodes 1"));
  EXPECT_THAT(logs, HasSubstr("rank 1 of 2 sum 3 nnodes 1"));
  json job = server.Job("tj-ddp");
  EXPECT_EQ(job["spec"]["labels"]["trainer.kubeflow.org/image"],
            "docker.io/kubeflow/pytorch-mnist:v1");
  EXPECT_EQ(job["spec"]["resources"]["gpus_per_process"], 2);
}

TEST(Manifests, AKatibExperimentRunsItsTrialsAndReadsTheirStdoutMetrics) {
  TestServer server(2);
  CommandResult created = server.Cli({"submit", "-f", "-"}, R"(apiVersion: kubeflow.org/v1beta1
kind: Experiment
metadata:
  name: katib-grid
spec:
  objective:
    type: minimize
    objectiveMetricName: loss
    additionalMetricNames: [accuracy]
  algorithm:
    algorithmName: grid
  parallelTrialCount: 2
  maxTrialCount: 3
  parameters:
    - name: lr
      parameterType: discrete
      feasibleSpace:
        list: ["0.5", "0.25", "0.125"]
  trialTemplate:
    primaryContainerName: training-container
    trialParameters:
      - name: learningRate
        reference: lr
    trialSpec:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          spec:
            containers:
              - name: training-container
                image: docker.io/kubeflowkatib/mxnet-mnist:latest
                command:
                  - "/bin/sh"
                  - "-c"
                  - "echo epoch 1: loss=1.5 accuracy=0.2; echo epoch 2: loss=${trialParameters.learningRate} accuracy=0.9"
            restartPolicy: Never
)");
  ASSERT_EQ(created.exit_code, 0) << created.err;
  EXPECT_EQ(created.out, "experiment/katib-grid created\n");
  api::HttpClient http = server.Http();
  json e;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto resp = http.Request("GET", "/api/v1/experiments/katib-grid");
        if (!resp.ok()) return false;
        e = json::parse(resp->body, nullptr, false);
        return e.is_object() && e["state"] == "Succeeded";
      },
      std::chrono::seconds(60)))
      << e.dump();
  ASSERT_EQ(e["trials"].size(), 3u) << e.dump();
  for (const json& t : e["trials"]) {
    // The trial's best loss is the one its second line printed: its lr.
    ASSERT_TRUE(t["objective"].is_number() && t["params"]["lr"].is_number()) << e.dump();
    EXPECT_DOUBLE_EQ(t["objective"].get<double>(), t["params"]["lr"].get<double>()) << t.dump();
  }
  ASSERT_TRUE(e["best_trial"].is_object()) << e.dump();
  EXPECT_DOUBLE_EQ(e["best_trial"]["objective"].get<double>(), 0.125) << e["best_trial"].dump();
  // The additional metric was stored too, one observation per line.
  std::string trial = e["trials"][0]["job"].get<std::string>();
  EXPECT_EQ(server.Job(trial)["progress"]["step"], 2);
}

// What OpenShift AI's KubeflowProgressCallback serves, from the standard
// library alone: the step, the loss of each step, and an evaluation served
// again with every answer, as the callback keeps serving its last one.
constexpr const char* kServe = R"(import http.server, json, sys, threading, time
port, steps = int(sys.argv[1]), int(sys.argv[2])
state = {"currentStep": 0, "totalSteps": steps, "progressPercentage": 0,
         "currentEpoch": 0.0, "totalEpochs": 1, "trainMetrics": {}, "evalMetrics": {}}
lock = threading.Lock()
class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args): pass
    def do_GET(self):
        with lock: body = json.dumps(state).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)
server = http.server.HTTPServer(("127.0.0.1", port), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
for step in range(1, steps + 1):
    time.sleep(0.25)
    with lock:
        state.update(currentStep=step, progressPercentage=int(100 * step / steps),
                     currentEpoch=step / steps)
        state["trainMetrics"]["loss"] = 1.0 / step
        if step == 2: state["evalMetrics"]["eval_loss"] = 0.5
time.sleep(2.5)  # the server polls the final state once more
)";

TEST(Manifests, PullModeReadsWhatTheJobServesAndTakesAReServedEvaluationOnce) {
  TestServer server(1);
  WriteText(server.work_dir() + "/serve.py", kServe);
  const int port = UnusedLoopbackPort();
  server.Submit("name: pulled\ncommand: [/usr/bin/python3, " + server.work_dir() + "/serve.py, \"" +
                std::to_string(port) + "\", \"12\"]\nprogress_endpoint: {port: " +
                std::to_string(port) + ", interval: 1s}\n");
  ASSERT_TRUE(server.WaitForState("pulled", "Succeeded", std::chrono::seconds(60)));
  ASSERT_TRUE(WaitFor([&] { return server.Job("pulled")["progress"]["step"] == 12; }))
      << server.Job("pulled")["progress"].dump();
  EXPECT_EQ(server.Job("pulled")["progress"]["total_steps"], 12);
  api::HttpClient http = server.Http();
  auto eval = http.Request("GET", "/api/v1/jobs/pulled/metrics/eval_loss");
  ASSERT_TRUE(eval.ok());
  json points = json::parse(eval->body)["points"];
  EXPECT_EQ(points.size(), 1u) << points.dump();  // served a dozen times, one point
  auto loss = http.Request("GET", "/api/v1/jobs/pulled/metrics/loss");
  ASSERT_TRUE(loss.ok());
  EXPECT_GE(json::parse(loss->body)["points"].size(), 3u);
}

TEST(Manifests, AnEndpointThatNeverAnswersIsSaidOnce) {
  TestServer server(1);
  const int port = UnusedLoopbackPort();
  server.Submit(
      "name: silent\ncommand: \"sleep 30\"\ntermination_grace: 1s\n"
      "progress_endpoint: {port: " +
      std::to_string(port) + ", interval: 1s}\n");
  ASSERT_TRUE(WaitFor(
      [&] {
        return server.HasEvent("silent", "Warning",
                               "cannot read the job's progress from http://127.0.0.1:" +
                                   std::to_string(port) + "/metrics");
      },
      std::chrono::seconds(20)));
  std::this_thread::sleep_for(std::chrono::seconds(3));
  int warnings = 0;
  for (const json& e : server.Events("silent")) {
    warnings += e["message"].get<std::string>().find("progress_endpoint") != std::string::npos;
  }
  EXPECT_EQ(warnings, 1);
  server.Cli({"stop", "silent"});
}

}  // namespace
}  // namespace headway::testing
