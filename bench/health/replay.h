// Replays labelled real training runs (bench/data/loss-curves) report by
// report through a health classifier, as the server feeds it, and scores the
// verdicts against the labels. Shared by health_bench (which prints the
// table) and the unit test that holds the classifier to its goals.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "progress/health.h"

namespace headway::bench {

// One logged report of a run: an empty optional is "not in that report".
struct CurveRow {
  std::int64_t step = 0;
  double time_s = 0;
  std::optional<double> loss, eval_loss, grad_norm;
};

struct LabelledRun {
  std::string name, label, kind, notes;  // label: healthy, diverged or plateaued
  std::optional<std::int64_t> onset_step, total_steps;
  std::vector<CurveRow> rows;
  // The step count the run was meant to reach: total_steps, else its last logged step.
  std::int64_t Length() const;
};

// Reads `dir`/labels.csv and `dir`/curves/NAME.csv; throws std::runtime_error
// on a file it cannot read or parse.
std::vector<LabelledRun> LoadRuns(const std::string& dir);

// What a classifier said while a run was replayed: its verdict after each report.
struct Verdicts {
  std::vector<progress::Health> after;  // one per row
  std::vector<std::string> reasons;     // one per row
};

// The classifiers compared.
enum class Classifier {
  kCurrent,  // progress::ClassifyHealth + HealthConfirmation, fed as the server feeds them
  kLegacy,   // the classifier before the rebuild (bench/legacy)
  kBaseline  // plain: NaN, or an EMA(0.1) of the loss 2x its best EMA; Keras-style plateau
};
const char* ClassifierName(Classifier c);

// The plateau window is `plateau_window` x Length(), as the server sets it.
Verdicts Replay(const LabelledRun& run, Classifier classifier, double plateau_window = 0.25,
                const progress::HealthOptions& options = {});

// Scores for one run.
struct RunScore {
  bool ever_diverging = false;
  std::optional<std::int64_t> first_diverging_step;  // at or after the onset, if labelled
  bool diverging_before_onset = false;
  int flips = 0;  // changes of verdict after the first Progressing
  std::optional<std::int64_t> first_plateau_step, first_overfit_step;
};
RunScore Score(const LabelledRun& run, const Verdicts& verdicts);

// The table over a set of runs.
struct Summary {
  int healthy = 0, diverged = 0, plateaued = 0;
  int healthy_ever_diverging = 0;
  double healthy_flips = 0;       // mean
  int healthy_early_plateau = 0;  // Plateaued before the last fifth
  int healthy_overfitting = 0;
  int diverged_caught = 0, diverged_caught_in_5pct = 0, diverged_false_early = 0;
  std::vector<double> delay_pct;  // of the run, onset to verdict, for caught ones
  int plateaued_caught = 0;
};
Summary Summarize(const std::vector<LabelledRun>& runs, const std::vector<RunScore>& scores);

}  // namespace headway::bench
