// Katib `Experiment` manifests (kubeflow.org/v1beta1) translated to
// Headway's experiment document, which the experiment parser then reads as
// if it had been written natively. Internal to the parser (yaml-cpp types).
#pragma once

#include <yaml-cpp/yaml.h>

#include "core/status.h"

namespace headway::hpo::internal {

bool IsKatibExperiment(const YAML::Node& root);

// The native document: name, objective, algorithm, parameters, limits,
// early_stopping and trial_template. Fields Headway cannot honour are
// refused by their Katib path and line.
Result<YAML::Node> KatibToNative(const YAML::Node& root);

}  // namespace headway::hpo::internal
