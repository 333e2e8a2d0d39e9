// Kubeflow TrainJob manifests submitted unchanged: what each field becomes,
// and the fields Headway cannot honour refused by name and line.
#include "core/kubeflow_manifest.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/job_spec_parser.h"

namespace headway {
namespace {

using ::testing::HasSubstr;

// As the Kubeflow Trainer documentation writes one, with a GPU per node.
constexpr const char* kTrainJob = R"(apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: pytorch-mnist
  namespace: vision
  labels:
    kueue.x-k8s.io/queue-name: research
spec:
  runtimeRef:
    name: torch-distributed
  trainer:
    image: docker.io/kubeflow/pytorch-mnist:v1
    command: ["torchrun", "train.py"]
    args: ["--epochs", "3"]
    env:
      - name: LR
        value: "0.01"
    numNodes: 2
    numProcPerNode: 4
    resourcesPerNode:
      requests: {cpu: "2", memory: 8Gi}
      limits: {nvidia.com/gpu: 4, cpu: 500m}
  activeDeadlineSeconds: 3600
)";

TEST(TrainJobManifest, EveryFieldBecomesTheJobHeadwayRuns) {
  EXPECT_TRUE(IsTrainJobManifest(kTrainJob));
  auto spec = ParseJobSpec(kTrainJob);  // what POST /api/v1/jobs reads
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "pytorch-mnist");
  EXPECT_EQ(spec->team, "vision");
  EXPECT_EQ(spec->queue, "research");
  EXPECT_EQ(spec->Argv(), (std::vector<std::string>{"torchrun", "train.py", "--epochs", "3"}));
  EXPECT_EQ(spec->env.at("LR"), "0.01");
  // One process per node: torchrun starts numProcPerNode workers, as on Kubeflow.
  EXPECT_EQ(spec->resources.nodes, 2);
  EXPECT_EQ(spec->resources.processes_per_node, 1);
  EXPECT_EQ(spec->resources.gpus_per_process, 4);
  EXPECT_EQ(spec->env.at("PET_NNODES"), "2");
  EXPECT_EQ(spec->env.at("PET_NPROC_PER_NODE"), "4");
  EXPECT_DOUBLE_EQ(spec->resources.cpus, 0.5);  // limits win over requests
  EXPECT_EQ(spec->resources.memory_bytes, 8LL << 30);
  ASSERT_TRUE(spec->time_limit.has_value());
  EXPECT_EQ(*spec->time_limit, std::chrono::seconds(3600));
  EXPECT_EQ(spec->labels.at("trainer.kubeflow.org/image"), "docker.io/kubeflow/pytorch-mnist:v1");
  EXPECT_EQ(spec->labels.at("trainer.kubeflow.org/runtime"), "torch-distributed");
}

TEST(TrainJobManifest, DefaultsAreKubeflows) {
  auto spec = ParseTrainJobManifest(R"(apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: tiny}
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {command: [python3, train.py]}
)");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->team, "default");  // the default namespace
  EXPECT_EQ(spec->resources.nodes, 1);
  EXPECT_EQ(spec->resources.gpus(), 0);
  EXPECT_EQ(spec->env.at("PET_NPROC_PER_NODE"), "auto");
  EXPECT_FALSE(spec->time_limit.has_value());
}

TEST(TrainJobManifest, PetNnodesAsARangeMakesAnElasticJob) {
  auto spec = ParseTrainJobManifest(R"(apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: stretchy}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    command: [torchrun, train.py]
    env: [{name: PET_NNODES, value: "1:3"}]
)");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_TRUE(spec->elastic.has_value());
  EXPECT_EQ(spec->elastic->min_nodes, 1);
  EXPECT_EQ(spec->elastic->max_nodes, 3);
  EXPECT_EQ(spec->resources.nodes, 1);
  EXPECT_EQ(spec->env.at("PET_NNODES"), "1:3");

  auto outside = ParseTrainJobManifest(R"(apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: stretchy}
spec:
  trainer:
    command: [torchrun, train.py]
    numNodes: 5
    env: [{name: PET_NNODES, value: "1:3"}]
)");
  ASSERT_FALSE(outside.ok());
  EXPECT_THAT(outside.status().ToString(), HasSubstr("must be within PET_NNODES=1:3"));
  auto fixed = ParseTrainJobManifest(R"(apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: stretchy}
spec:
  trainer:
    command: [torchrun, train.py]
    env: [{name: PET_NNODES, value: "3"}]
)");
  ASSERT_FALSE(fixed.ok());  // a fixed count is numNodes' to give
  EXPECT_THAT(fixed.status().ToString(), HasSubstr("is set by the torch runtime"));
}

TEST(TrainJobManifest, OpenShiftAiProgressionAnnotationsTurnOnPullMode) {
  auto spec = ParseTrainJobManifest(R"(apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: hf
  annotations:
    trainer.opendatahub.io/progression-tracking: "true"
    trainer.opendatahub.io/metrics-port: "28090"
    trainer.opendatahub.io/metrics-poll-interval: "2"
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {command: [python3, train.py]}
)");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_TRUE(spec->progress_endpoint.has_value());
  EXPECT_EQ(spec->progress_endpoint->port, 28090);
  EXPECT_EQ(spec->progress_endpoint->path, "/metrics");
  // Kept within OpenShift AI's bounds (5-300 s).
  EXPECT_EQ(spec->progress_endpoint->interval, std::chrono::seconds(5));
  auto off = ParseTrainJobManifest(
      "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: hf}\n"
      "spec: {runtimeRef: {name: t}, trainer: {command: [x]}}\n");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->progress_endpoint.has_value());
}

TEST(ProgressEndpoint, IsReadAndCheckedInANativeSpec) {
  auto spec = ParseJobSpec(
      "name: p\ncommand: [x]\nprogress_endpoint: {port: 28080, path: /progress, interval: 10s}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->progress_endpoint->path, "/progress");
  EXPECT_EQ(spec->progress_endpoint->interval, std::chrono::seconds(10));
  for (const std::string bad :
       {"{port: 80}", "{port: 28080, path: metrics}", "{port: 28080, interval: 0s}",
        "{port: 28080, path: \"/a b\"}", "{host: x}"}) {
    auto refused = ParseJobSpec("name: p\ncommand: [x]\nprogress_endpoint: " + bad + "\n");
    EXPECT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().line(), 3) << bad;
  }
}

TEST(TrainJobManifest, GenerateNameLeavesTheNameToTheServer) {
  auto spec = ParseJobSpec(R"(apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {generateName: sweep-}
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {command: [x]}
)");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "");
  EXPECT_EQ(spec->generate_name, "sweep-");
  auto bad = ParseJobSpec(
      "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {generateName: Bad_}\n"
      "spec: {runtimeRef: {name: t}, trainer: {command: [x]}}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "metadata.generateName");
}

struct Refused {
  std::string patch;  // replaces the trainer block
  std::string field;
  std::string says;
};

TEST(TrainJobManifest, FieldsHeadwayCannotHonourAreRefusedByName) {
  const std::vector<Refused> cases = {
      {"  trainer:\n    command: [x]\n    env:\n      - name: TOKEN\n        valueFrom: "
       "{secretKeyRef: {name: s, key: k}}\n",
       "spec.trainer.env[0].valueFrom", "--job-env"},
      {"  trainer:\n    command: [x]\n    env: [{name: PET_NNODES, value: \"3\"}]\n",
       "spec.trainer.env[0].name", "set by the torch runtime"},
      {"  trainer:\n    command: [x]\n    resourcesPerNode: {limits: {amd.com/gpu: 1}}\n",
       "spec.trainer.resourcesPerNode.limits.amd.com/gpu", "nvidia.com/gpu, cpu and memory"},
      {"  trainer:\n    command: [x]\n    numProcPerNode: lots\n", "spec.trainer.numProcPerNode",
       "[auto cpu gpu]"},
      {"  trainer:\n    command: [x]\n    replicas: 2\n", "spec.trainer.replicas", "unknown field"},
      {"  trainer:\n    command: [x]\n  initializer: {dataset: {storageUri: hf://x}}\n",
       "spec.initializer", "not supported"},
      {"  trainer:\n    command: [x]\n  suspend: true\n", "spec.suspend", "not supported"},
      {"  trainer:\n    image: pytorch\n", "spec.trainer.command", "no training runtime images"},
  };
  for (const Refused& c : cases) {
    SCOPED_TRACE(c.patch);
    auto spec = ParseJobSpec(
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: bad}\nspec:\n"
        "  runtimeRef: {name: torch-distributed}\n" +
        c.patch);
    ASSERT_FALSE(spec.ok());
    EXPECT_EQ(spec.status().field(), c.field) << spec.status().ToString();
    EXPECT_THAT(spec.status().ToString(), HasSubstr(c.says));
  }
}

TEST(TrainJobManifest, ErrorsNameTheManifestsLine) {
  auto spec = ParseJobSpec(R"(apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: Not_A_Name
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {command: [x]}
)");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().field(), "metadata.name");
  EXPECT_EQ(spec.status().line(), 4);
}

TEST(TrainJobManifest, AKatibExperimentSubmittedAsAJobSaysWhereItGoes) {
  auto spec =
      ParseJobSpec("apiVersion: kubeflow.org/v1beta1\nkind: Experiment\nmetadata: {name: e}\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().ToString(), HasSubstr("headway exp create"));
}

}  // namespace
}  // namespace headway
