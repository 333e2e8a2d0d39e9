// Katib Experiment manifests created unchanged: what each field becomes, and
// the fields Headway cannot honour refused by their Katib path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hpo/experiment_spec.h"

namespace headway::hpo {
namespace {

using ::testing::HasSubstr;

// Katib's random-search example (examples/v1beta1/hp-tuning/random.yaml).
constexpr const char* kRandom = R"(apiVersion: kubeflow.org/v1beta1
kind: Experiment
metadata:
  namespace: kubeflow
  name: random
spec:
  objective:
    type: minimize
    goal: 0.001
    objectiveMetricName: loss
    additionalMetricNames: [accuracy]
  algorithm:
    algorithmName: random
    algorithmSettings:
      - name: random_state
        value: "10"
  parallelTrialCount: 3
  maxTrialCount: 12
  maxFailedTrialCount: 3
  parameters:
    - name: lr
      parameterType: double
      feasibleSpace:
        min: "0.01"
        max: "0.05"
        distribution: logUniform
    - name: momentum
      parameterType: double
      feasibleSpace: {min: "0.5", max: "0.9"}
    - name: optimizer
      parameterType: categorical
      feasibleSpace: {list: [sgd, adam]}
  earlyStopping:
    algorithmName: medianstop
    algorithmSettings:
      - {name: min_trials_required, value: "2"}
      - {name: start_step, value: "4"}
  trialTemplate:
    primaryContainerName: training-container
    trialParameters:
      - name: learningRate
        description: Learning rate for the training model
        reference: lr
      - name: momentum
        reference: momentum
      - name: optimizer
        reference: optimizer
    trialSpec:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          spec:
            containers:
              - name: training-container
                image: docker.io/kubeflowkatib/pytorch-mnist-cpu:latest
                command:
                  - "python3"
                  - "/opt/pytorch-mnist/mnist.py"
                  - "--epochs=1"
                  - "--lr=${trialParameters.learningRate}"
                  - "--momentum=${trialParameters.momentum}"
                  - "--optimizer=${trialParameters.optimizer}"
                resources:
                  limits: {memory: "1Gi", cpu: "0.5"}
            restartPolicy: Never
)";

TEST(KatibExperiment, EveryFieldBecomesTheExperimentHeadwayRuns) {
  auto spec = ParseExperimentSpec(kRandom);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "random");
  EXPECT_EQ(spec->objective.metric, "loss");
  EXPECT_EQ(spec->objective.direction, Direction::kMinimize);
  EXPECT_EQ(spec->objective.goal, 0.001);
  EXPECT_EQ(spec->algorithm, "random");
  EXPECT_EQ(spec->sampler.seed, 10u);
  EXPECT_EQ(spec->max_trials, 12);
  EXPECT_EQ(spec->parallel_trials, 3);
  EXPECT_EQ(spec->max_failed_trials, 3);
  ASSERT_EQ(spec->parameters.size(), 3u);
  EXPECT_EQ(spec->parameters[0].name, "lr");
  EXPECT_TRUE(spec->parameters[0].log);
  EXPECT_EQ(spec->early_stopping.rule, StoppingRule::kMedian);
  EXPECT_EQ(spec->early_stopping.min_trials, 2);
  EXPECT_EQ(spec->early_stopping.start_step, 4);
  const JobSpec& t = spec->trial_template;
  EXPECT_EQ(t.team, "kubeflow");
  EXPECT_EQ(t.resources.memory_bytes, 1LL << 30);
  EXPECT_DOUBLE_EQ(t.resources.cpus, 0.5);
  // Katib's default collector reads `name=value` lines for these metrics.
  EXPECT_EQ(t.labels.at("headway.dev/stdout-metrics"), "loss,accuracy");
  // ${trialParameters.X} became the parameter it refers to.
  JobSpec trial =
      TrialJobSpec(*spec, 0, {{"lr", 0.02}, {"momentum", 0.6}, {"optimizer", std::string("adam")}});
  EXPECT_EQ(trial.name, "random-0");
  EXPECT_EQ(trial.Argv(),
            (std::vector<std::string>{"python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1",
                                      "--lr=0.02", "--momentum=0.6", "--optimizer=adam"}));
}

TEST(KatibExperiment, ATrainJobTrialAndTheBayesianAlgorithm) {
  auto spec = ParseExperimentSpec(R"(apiVersion: kubeflow.org/v1beta1
kind: Experiment
metadata: {name: bo}
spec:
  objective: {type: maximize, objectiveMetricName: accuracy}
  algorithm:
    algorithmName: bayesianoptimization
    algorithmSettings: [{name: n_initial_points, value: "4"}]
  metricsCollectorSpec: {collector: {kind: None}}
  parameters:
    - {name: layers, parameterType: int, feasibleSpace: {min: "1", max: "4"}}
  trialTemplate:
    trialParameters: [{name: layers, reference: layers}]
    trialSpec:
      apiVersion: trainer.kubeflow.org/v1alpha1
      kind: TrainJob
      spec:
        runtimeRef: {name: torch-distributed}
        trainer:
          command: [torchrun, train.py, "--layers", "${trialParameters.layers}"]
          resourcesPerNode: {limits: {nvidia.com/gpu: 1}}
)");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->algorithm, "gp");
  EXPECT_EQ(spec->sampler.startup_trials, 4);
  EXPECT_EQ(spec->objective.direction, Direction::kMaximize);
  EXPECT_EQ(spec->trial_template.resources.gpus(), 1);
  EXPECT_EQ(spec->trial_template.labels.count("headway.dev/stdout-metrics"), 0u);
  JobSpec trial = TrialJobSpec(*spec, 2, {{"layers", 3.0}});
  EXPECT_EQ(trial.Argv().back(), "3");
}

TEST(KatibExperiment, MultivariateTpeIsTheJointTpeSampler) {
  auto spec = ParseExperimentSpec(R"(apiVersion: kubeflow.org/v1beta1
kind: Experiment
metadata: {name: mv}
spec:
  objective: {type: minimize, objectiveMetricName: loss}
  algorithm:
    algorithmName: multivariate-tpe
    algorithmSettings: [{name: n_startup_trials, value: "6"}, {name: random_state, value: "3"}]
  metricsCollectorSpec: {collector: {kind: StdOut}}
  parameters:
    - {name: lr, parameterType: double, feasibleSpace: {min: "0.001", max: "0.1"}}
  trialTemplate:
    trialParameters: [{name: lr, reference: lr}]
    trialSpec:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          spec:
            containers: [{name: t, image: x, command: [python3, train.py, "--lr=${trialParameters.lr}"]}]
)");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->algorithm, "tpe-multivariate");
  EXPECT_EQ(spec->sampler.startup_trials, 6);
  EXPECT_EQ(spec->sampler.seed, 3u);
}

struct Refused {
  std::string from, to;  // a replacement in kRandom
  std::string field;
  std::string says;
};

TEST(KatibExperiment, FieldsHeadwayCannotHonourAreRefusedByTheirKatibPath) {
  const std::vector<Refused> cases = {
      {"algorithmName: random", "algorithmName: hyperband", "spec.algorithm.algorithmName",
       "hyperband"},
      {"distribution: logUniform", "distribution: normal",
       "spec.parameters[0].feasibleSpace.distribution", "uniform or logUniform"},
      {"  parallelTrialCount: 3",
       "  metricsCollectorSpec: {collector: {kind: File}}\n  parallelTrialCount: 3",
       "spec.metricsCollectorSpec.collector.kind", "StdOut"},
      {"--lr=${trialParameters.learningRate}", "--lr=${trialParameters.rate}",
       "spec.trialTemplate.trialSpec", "trialParameters.rate"},
      {"--epochs=1", "--name=${trialSpec.Name}", "spec.trialTemplate.trialSpec", "trialSpec"},
      {"      - name: random_state\n        value: \"10\"",
       "      - {name: acq_func, value: gp_hedge}", "spec.algorithm.algorithmSettings.acq_func",
       "no such setting"},
      {"  maxFailedTrialCount: 3", "  maxFailedTrialCount: 3\n  trialsPerHour: 2",
       "spec.trialsPerHour", "unknown field"},
      {"restartPolicy: Never", "nodeSelector: {gpu: a100}",
       "spec.trialTemplate.trialSpec.spec.template.spec.nodeSelector", "not as a pod"},
  };
  for (const Refused& c : cases) {
    SCOPED_TRACE(c.to);
    std::string doc = kRandom;
    auto at = doc.find(c.from);
    ASSERT_NE(at, std::string::npos);
    doc.replace(at, c.from.size(), c.to);
    auto spec = ParseExperimentSpec(doc);
    ASSERT_FALSE(spec.ok());
    EXPECT_EQ(spec.status().field(), c.field) << spec.status().ToString();
    EXPECT_THAT(spec.status().ToString(), HasSubstr(c.says));
  }
}

}  // namespace
}  // namespace headway::hpo
