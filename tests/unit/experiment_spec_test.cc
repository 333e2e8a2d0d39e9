#include "hpo/experiment_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace headway::hpo {
namespace {

using ::testing::HasSubstr;

const char* kSpec = R"(
name: lr-sweep
objective: {metric: eval_loss, direction: maximize, goal: 0.9}
algorithm: {name: tpe, seed: 42, startup_trials: 5}
parameters:
  - {name: lr, type: double, min: 1.0e-5, max: 0.1, log: true}
  - {name: layers, type: int, min: 1, max: 4}
  - {name: batch, type: discrete, values: [64, 16, 32]}
  - {name: optimizer, type: categorical, values: [adam, sgd]}
max_trials: 20
parallel_trials: 3
max_failed_trials: 2
early_stopping: {rule: asha, min_resource: 10, reduction_factor: 3}
trial_template:
  team: research
  command: ["python3", "train.py"]
  args: ["--lr", "${params.lr}", "--opt=${params.optimizer}"]
  env: {LAYERS: "${params.layers}", BATCH: "${params.batch}"}
  resources: {gpus_per_process: 1}
)";

TEST(ExperimentSpec, ReadsEveryField) {
  auto spec = ParseExperimentSpec(kSpec);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "lr-sweep");
  EXPECT_EQ(spec->objective.metric, "eval_loss");
  EXPECT_EQ(spec->objective.direction, Direction::kMaximize);
  EXPECT_EQ(spec->objective.goal, 0.9);
  EXPECT_EQ(spec->algorithm, "tpe");
  EXPECT_EQ(spec->sampler.seed, 42u);
  EXPECT_EQ(spec->sampler.startup_trials, 5);
  ASSERT_EQ(spec->parameters.size(), 4u);
  EXPECT_TRUE(spec->parameters[0].log);
  EXPECT_EQ(spec->parameters[1].type, ParamType::kInt);
  EXPECT_EQ(spec->parameters[2].values, (std::vector<double>{16, 32, 64}));  // ordered
  EXPECT_EQ(spec->parameters[3].categories, (std::vector<std::string>{"adam", "sgd"}));
  EXPECT_EQ(spec->parallel_trials, 3);
  EXPECT_EQ(spec->early_stopping.rule, StoppingRule::kAsha);
  EXPECT_EQ(spec->early_stopping.min_resource, 10);
  // Trials that diverge or overfit stop unless the spec says otherwise.
  EXPECT_EQ(spec->early_stopping.stop_on_health,
            (std::vector<Health>{Health::kDiverging, Health::kOverfitting}));
  auto none = ParseExperimentSpec(std::string(kSpec).replace(
      std::string(kSpec).find("reduction_factor: 3}"), 20, "reduction_factor: 3, health: []}"));
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->early_stopping.stop_on_health.empty());
  EXPECT_EQ(spec->trial_template.team, "research");
  EXPECT_TRUE(spec->objective.Reached(0.95));
  EXPECT_EQ(spec->objective.Minimised(0.5), -0.5);
}

TEST(ExperimentSpec, CanonicalJsonRoundTrips) {
  auto spec = ParseExperimentSpec(kSpec);
  ASSERT_TRUE(spec.ok());
  auto again = ParseExperimentSpec(ExperimentSpecToJson(*spec).dump());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ExperimentSpecToJson(*again), ExperimentSpecToJson(*spec));
}

TEST(ExperimentSpec, TrialJobsGetTheirParameters) {
  auto spec = ParseExperimentSpec(kSpec);
  ASSERT_TRUE(spec.ok());
  Assignment params = {
      {"lr", 0.001}, {"layers", 3.0}, {"batch", 32.0}, {"optimizer", std::string("sgd")}};
  JobSpec job = TrialJobSpec(*spec, 7, params);
  EXPECT_EQ(job.name, "lr-sweep-7");
  EXPECT_EQ(job.args, (std::vector<std::string>{"--lr", "0.001", "--opt=sgd"}));
  EXPECT_EQ(job.env.at("LAYERS"), "3");
  EXPECT_EQ(job.env.at("BATCH"), "32");
  EXPECT_EQ(job.labels.at("experiment"), "lr-sweep");
  EXPECT_EQ(job.labels.at("trial"), "7");
  EXPECT_EQ(job.resources.gpus(), 1);
}

struct Bad {
  std::string from, to, field, message;
};

class ExperimentSpecRejects : public ::testing::TestWithParam<Bad> {};

TEST_P(ExperimentSpecRejects, NamingTheField) {
  std::string doc = kSpec;
  const Bad& bad = GetParam();
  auto at = doc.find(bad.from);
  ASSERT_NE(at, std::string::npos) << bad.from;
  doc.replace(at, bad.from.size(), bad.to);
  auto spec = ParseExperimentSpec(doc);
  ASSERT_FALSE(spec.ok()) << bad.to;
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.status().ToString(), HasSubstr(bad.field));
  EXPECT_THAT(spec.status().ToString(), HasSubstr(bad.message));
}

INSTANTIATE_TEST_SUITE_P(
    ExperimentSpec, ExperimentSpecRejects,
    ::testing::Values(
        Bad{"${params.lr}", "${params.rate}", "trial_template.args[1]", "unknown parameter 'rate'"},
        Bad{"min: 1.0e-5", "min: 0", "parameters[0].min", "log"},
        Bad{"type: int, min: 1", "type: int, min: 1.5", "parameters[1]", "integer"},
        Bad{"max: 4}", "max: 1}", "parameters[1].max", "greater than min"},
        Bad{"values: [64, 16, 32]", "values: [16, 16]", "parameters[2].values", "twice"},
        Bad{"values: [adam, sgd]", "values: []", "parameters[3].values", "non-empty"},
        Bad{"name: tpe", "name: bayes", "algorithm.name", "random"},
        Bad{"direction: maximize", "direction: up", "objective.direction", "minimize or maximize"},
        Bad{"rule: asha", "rule: hyperband", "early_stopping.rule", "none, median or asha"},
        Bad{"reduction_factor: 3", "reduction_factor: 1", "early_stopping.reduction_factor", "> 1"},
        Bad{"reduction_factor: 3}", "reduction_factor: 3, health: [Progressing]}",
            "early_stopping.health", "Diverging, Overfitting, Plateaued or Stalled"},
        Bad{"reduction_factor: 3}", "reduction_factor: 3, health: Diverging}",
            "early_stopping.health", "a list"},
        Bad{"parallel_trials: 3", "parallel_trials: 0", "parallel_trials", "between"},
        Bad{"max_trials: 20", "max_trialz: 20", "max_trialz", "unknown field"},
        Bad{"  team: research", "  name: x", "trial_template.name", "must not be set"},
        Bad{"  resources: {gpus_per_process: 1}", "  resources: {gpus: 1}",
            "trial_template.resources.gpus", "unknown field"},
        Bad{"name: lr-sweep", "name: LR", "name", "lowercase"},
        Bad{"{name: lr,", "{name: 1lr,", "parameters[0].name", "letters"},
        Bad{"metric: eval_loss", "metric: \"eval loss\"", "objective.metric", "metric"}));

TEST(ExperimentSpec, MalformedYamlIsAnErrorWithALine) {
  auto spec = ParseExperimentSpec("name: [unclosed\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().ToString(), HasSubstr("line"));
}

}  // namespace
}  // namespace headway::hpo

namespace headway::hpo {
namespace {

const char* kWorkflowSpec = R"(
name: wf-sweep
objective: {metric: loss, direction: minimize, step: train}
algorithm: {name: random, seed: 1}
parameters:
  - {name: lr, type: double, min: 0.001, max: 0.1}
  - {name: depth, type: int, min: 1, max: 3}
max_trials: 4
trial_workflow:
  metadata: {labels: {headway.dev/team: vision}}
  spec:
    entrypoint: main
    arguments: {parameters: [{name: depth, value: "2"}]}
    templates:
      - name: main
        dag:
          tasks:
            - {name: prep, template: step}
            - {name: train, template: step, dependencies: [prep]}
      - name: step
        container: {image: python:3, command: [sh, -c, "echo {{workflow.parameters.lr}} {{workflow.parameters.depth}}"]}
)";

TEST(ExperimentSpec, ATrialWorkflowIsValidatedAndGetsItsParametersAsArguments) {
  auto spec = ParseExperimentSpec(kWorkflowSpec);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_TRUE(spec->trial_workflow.has_value());
  EXPECT_EQ(spec->objective.step, "train");
  EXPECT_EQ(spec->trial_template.team, "vision");  // the experiment's team
  Assignment params = {{"lr", 0.01}, {"depth", 3.0}};
  workflow::Workflow wf = TrialWorkflow(*spec, 2, params);
  EXPECT_EQ(wf.metadata.name, "wf-sweep-2");
  EXPECT_EQ(wf.metadata.labels.at("experiment"), "wf-sweep");
  EXPECT_EQ(wf.metadata.labels.at("trial"), "2");
  std::map<std::string, std::string> args;
  for (const workflow::Parameter& p : wf.spec.arguments.parameters)
    args[p.name] = p.value.value_or("");
  // The declared argument is overridden; the undeclared one was declared for it.
  EXPECT_EQ(args, (std::map<std::string, std::string>{{"depth", "3"}, {"lr", "0.01"}}));
  // The canonical form reads back the same.
  auto again = ParseExperimentSpec(ExperimentSpecToJson(*spec).dump());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ExperimentSpecToJson(*again), ExperimentSpecToJson(*spec));
  EXPECT_FALSE(ExperimentSpecToJson(*spec).contains("trial_template"));
}

TEST(ExperimentSpec, ATrialWorkflowErrorNamesTheFieldInsideIt) {
  struct Case {
    std::string from, to, field, message;
  };
  for (const Case& c : std::vector<Case>{
           {"step: train}", "step: evaluate}", "objective.step",
            "no DAG task or step named 'evaluate'"},
           {", step: train}", "}", "objective", "needs a step"},
           {"template: step, dependencies", "template: nope, dependencies",
            "trial_workflow.spec.templates[0].dag.tasks[1].template", ""},
           {"metadata: {labels", "metadata: {name: fixed, labels", "trial_workflow.metadata.name",
            "trials are named wf-sweep-0"},
           {"max_trials: 4\n", "max_trials: 4\ntrial_template: {command: [x]}\n", "trial_template",
            "not both"},
       }) {
    std::string text = kWorkflowSpec;
    ASSERT_NE(text.find(c.from), std::string::npos) << c.from;
    text.replace(text.find(c.from), c.from.size(), c.to);
    auto spec = ParseExperimentSpec(text);
    ASSERT_FALSE(spec.ok()) << c.to;
    EXPECT_EQ(spec.status().field(), c.field) << spec.status().ToString();
    EXPECT_THAT(spec.status().message(), HasSubstr(c.message)) << spec.status().ToString();
  }
  // A step names a job's metrics only in a trial workflow.
  auto job = ParseExperimentSpec(
      std::string(kSpec).replace(std::string(kSpec).find("goal: 0.9}"), 10, "goal: 0.9, step: x}"));
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().field(), "objective.step");
}

}  // namespace
}  // namespace headway::hpo
