// An experiment: a search over hyperparameters, each trial a job made from a
// template. Parsed from YAML or JSON; every error names the field and line.
//
//   name: lr-sweep                      # 1-56 chars; trials are lr-sweep-0, lr-sweep-1, ...
//   objective: {metric: eval_loss, direction: minimize, goal: 0.05}
//   algorithm: {name: tpe, seed: 1, startup_trials: 10}   # random | grid | tpe | gp
//   parameters:
//     - {name: lr, type: double, min: 1.0e-5, max: 0.1, log: true}
//     - {name: layers, type: int, min: 1, max: 4}
//     - {name: batch, type: discrete, values: [16, 32, 64]}
//     - {name: optimizer, type: categorical, values: [adam, sgd]}
//   max_trials: 20
//   parallel_trials: 2
//   max_failed_trials: 3
//   early_stopping: {rule: median, min_trials: 3, start_step: 10}   # or asha / none
//   trial_template:                     # a job spec without a name
//     command: ["python3", "train.py"]
//     args: ["--lr", "${params.lr}"]
//     env: {LAYERS: "${params.layers}"}
//
// `${params.NAME}` may appear in command, args and env values; an unknown
// NAME is an error at parse time. Where the command is a shell script (a
// command string runs under /bin/sh -c; so does `[bash, -c, ...]`), each value
// is shell-quoted for where it stands, so a categorical value like
// `x; touch /tmp/pwned` or `$(id)` stays data: write `${params.NAME}` bare,
// Headway adds the quotes. In argv elements and env values, which no shell
// parses, values are substituted as they are. Categorical values must be
// printable text. A trial's objective is the best value
// (lowest, or highest when maximising) its job reported for the metric.
//
// A trial may be a whole pipeline instead: `trial_workflow` is an Argo
// Workflow (apiVersion and kind may be left out; no metadata.name, trials
// are named like jobs), and `objective.step` names the DAG task or step
// whose job reports the metric:
//
//   objective: {metric: eval_loss, direction: minimize, step: train}
//   trial_workflow:
//     metadata: {labels: {headway.dev/team: vision}}
//     spec:
//       entrypoint: main
//       templates:
//         - name: main
//           dag: {tasks: [{name: prep, template: prep}, {name: train, template: train,
//           dependencies: [prep]}]}
//         - name: train
//           script: {image: python, command: [python3], source: "... {{workflow.parameters.lr}}
//           ..."}
//
// Each parameter reaches the workflow as a workflow argument of its name
// (`{{workflow.parameters.lr}}`), declared for it when the workflow does
// not declare it, and set to the trial's value. Argo substitutes as text, so
// a categorical value a script reads should be read from an env var or an
// input parameter, not pasted into shell source. The workflow is validated
// with the experiment, and when the step's job ends early the rule stops the
// trial's whole workflow.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/job.h"
#include "core/status.h"
#include "hpo/early_stopping.h"
#include "hpo/sampler.h"
#include "hpo/search_space.h"
#include "workflow/workflow.h"

namespace headway::hpo {

enum class Direction { kMinimize, kMaximize };

struct Objective {
  std::string metric;
  Direction direction = Direction::kMinimize;
  std::optional<double> goal;  // the experiment succeeds early once a trial reaches it
  // Trial workflows only: the DAG task or step whose job reports `metric`.
  std::string step;

  // Objectives as samplers and stopping rules see them: to be minimised.
  double Minimised(double value) const {
    return direction == Direction::kMaximize ? -value : value;
  }
  bool Reached(double value) const {
    return goal && (direction == Direction::kMinimize ? value <= *goal : value >= *goal);
  }
};

struct ExperimentSpec {
  std::string name;
  Objective objective;
  std::string algorithm = "tpe";
  SamplerOptions sampler;
  SearchSpace parameters;
  int max_trials = 10;
  int parallel_trials = 1;
  int max_failed_trials = 3;
  EarlyStoppingOptions early_stopping;
  // name empty. With a trial workflow, only `team` is used: the team its
  // workflows run in (the workflow's headway.dev/team).
  JobSpec trial_template;
  // Set when each trial is a workflow (metadata.name empty).
  std::optional<workflow::Workflow> trial_workflow;
};

Result<ExperimentSpec> ParseExperimentSpec(std::string_view document);

// The canonical JSON form; ParseExperimentSpec reads it back unchanged.
nlohmann::json ExperimentSpecToJson(const ExperimentSpec& spec);

// The job of trial `index`: named "<experiment>-<index>", `${params.*}`
// replaced, labelled experiment=<name> and trial=<index>.
JobSpec TrialJobSpec(const ExperimentSpec& spec, std::int64_t index, const Assignment& params);

// The workflow of trial `index`: named "<experiment>-<index>", labelled
// experiment=<name> and trial=<index>, its arguments set to `params`.
workflow::Workflow TrialWorkflow(const ExperimentSpec& spec, std::int64_t index,
                                 const Assignment& params);

std::string_view DirectionName(Direction d);
std::string_view StoppingRuleName(StoppingRule r);

}  // namespace headway::hpo
