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

namespace headway::hpo {

enum class Direction { kMinimize, kMaximize };

struct Objective {
  std::string metric;
  Direction direction = Direction::kMinimize;
  std::optional<double> goal;  // the experiment succeeds early once a trial reaches it

  // Objectives as samplers and stopping rules see them: to be minimised.
  double Minimised(double value) const { return direction == Direction::kMaximize ? -value : value; }
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
  JobSpec trial_template;  // name empty
};

Result<ExperimentSpec> ParseExperimentSpec(std::string_view document);

// The canonical JSON form; ParseExperimentSpec reads it back unchanged.
nlohmann::json ExperimentSpecToJson(const ExperimentSpec& spec);

// The job of trial `index`: named "<experiment>-<index>", `${params.*}`
// replaced, labelled experiment=<name> and trial=<index>.
JobSpec TrialJobSpec(const ExperimentSpec& spec, std::int64_t index, const Assignment& params);

std::string_view DirectionName(Direction d);
std::string_view StoppingRuleName(StoppingRule r);

}  // namespace headway::hpo
