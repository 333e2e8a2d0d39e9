// Kubeflow manifests submitted unchanged to a real server: a TrainJob runs
// real torchrun workers (PyTorch, gloo on CPU) and a Katib Experiment's
// trials report through `name=value` lines, as under Katib's StdOut collector.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "api/http_client.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

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
  CommandResult submitted = server.Cli({"submit", "-f", "-"}, R"(apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: tj-ddp
spec:
  runtimeRef:
    name: torch-distributed
  trainer:
    image: docker.io/kubeflow/pytorch-mnist:v1
    command: ["torchrun", ")" + server.work_dir() + R"(/ddp.py"]
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
  EXPECT_EQ(job["spec"]["labels"]["trainer.kubeflow.org/image"], "docker.io/kubeflow/pytorch-mnist:v1");
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
  ASSERT_TRUE(WaitFor([&] {
    auto resp = http.Request("GET", "/api/v1/experiments/katib-grid");
    if (!resp.ok()) return false;
    e = json::parse(resp->body, nullptr, false);
    return e.is_object() && e["state"] == "Succeeded";
  }, std::chrono::seconds(60))) << e.dump();
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

}  // namespace
}  // namespace headway::testing
