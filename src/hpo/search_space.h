// What an experiment searches over, and the values a trial gets. Plain
// values, no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace headway::hpo {

enum class ParamType {
  kDouble,       // [min, max], uniform or log-uniform
  kInt,          // integers in [min, max] (step 1), uniform or log-uniform
  kDiscrete,     // one of `values` (numbers, ordered)
  kCategorical,  // one of `categories` (unordered strings)
};

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::kDouble;
  double min = 0;                       // kDouble, kInt
  double max = 1;                       // kDouble, kInt
  bool log = false;                     // kDouble, kInt: sample log(x) uniformly; needs min > 0
  std::vector<double> values;           // kDiscrete, ascending
  std::vector<std::string> categories;  // kCategorical
};

using SearchSpace = std::vector<ParamSpec>;

// A number for kDouble/kInt/kDiscrete (an integral double for kInt), a string
// for kCategorical.
using ParamValue = std::variant<double, std::string>;
using Assignment = std::map<std::string, ParamValue>;

// How a value is written into a trial's args and env: integers without a
// decimal point, doubles with enough digits to round-trip.
std::string FormatValue(const ParamValue& value);

// Whether `a` assigns every parameter of `space` a value inside its bounds.
bool InSpace(const SearchSpace& space, const Assignment& a);

enum class TrialOutcome {
  kCompleted,  // ran to its end; `objective` is its result
  kPruned,     // stopped early by the early-stopping rule; `objective` is its last value
  kFailed,     // failed or reported no objective; ignored by model-based samplers
  // Still running, its objective unknown. TPE counts it as worse than every
  // finished trial (Optuna's constant liar), so trials suggested while others
  // run spread out instead of piling onto one promising point. Not counted
  // among the startup trials; ignored by the other samplers.
  kRunning,
};

// One finished trial as samplers see it. `objective` is always to be
// minimised (a maximised metric is negated before it gets here).
struct Observation {
  Assignment params;
  TrialOutcome outcome = TrialOutcome::kCompleted;
  std::optional<double> objective;
};

}  // namespace headway::hpo
