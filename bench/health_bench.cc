// Health verdicts on real, labelled training runs: each run replayed report
// by report through the current classifier (with its confirmation), the one
// before it and a plain baseline, side by side.
//
//   health_bench [--runs] [DIR ...]
//
// DIR holds labels.csv and curves/ (bench/data/loss-curves/README.md); by
// default the tuning set bench/data/loss-curves and the sets gathered after
// it, bench/data/loss-curves/added and .../holdout, each scored on its own.
// --runs also prints each run's verdicts.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "health/replay.h"

namespace {

using headway::bench::Classifier;

std::string Pct(int n, int of) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d/%d (%.0f%%)", n, of, of > 0 ? 100.0 * n / of : 0.0);
  return buf;
}

std::string Median(std::vector<double> v) {
  if (v.empty()) return "-";
  std::sort(v.begin(), v.end());
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", v[(v.size() - 1) / 2]);
  return buf;
}

std::string StepOr(const std::optional<std::int64_t>& s) {
  return s ? std::to_string(*s) : std::string("-");
}

void Report(const std::string& dir, bool per_run) {
  const auto runs = headway::bench::LoadRuns(dir);
  const Classifier classifiers[] = {Classifier::kCurrent, Classifier::kLegacy,
                                    Classifier::kBaseline};
  std::vector<headway::bench::Summary> sums;
  std::vector<std::vector<headway::bench::RunScore>> all;
  std::vector<double> us_per_report;
  std::size_t reports = 0;
  for (const auto& run : runs) reports += run.rows.size();
  for (Classifier c : classifiers) {
    std::vector<headway::bench::RunScore> scores;
    const auto start = std::chrono::steady_clock::now();
    std::vector<headway::bench::Verdicts> verdicts;
    for (const auto& run : runs) verdicts.push_back(Replay(run, c));
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    us_per_report.push_back(took.count() / static_cast<double>(std::max<std::size_t>(1, reports)));
    for (std::size_t i = 0; i < runs.size(); ++i) scores.push_back(Score(runs[i], verdicts[i]));
    sums.push_back(Summarize(runs, scores));
    all.push_back(std::move(scores));
  }
  const auto& first = sums.front();
  std::printf("\n%s: %zu runs (%d healthy, %d diverged, %d plateaued)\n", dir.c_str(), runs.size(),
              first.healthy, first.diverged, first.plateaued);
  std::printf("%-44s", "");
  for (Classifier c : classifiers) std::printf(" %18s", headway::bench::ClassifierName(c));
  std::printf("\n");
  auto row = [&](const char* what, auto cell) {
    std::printf("%-44s", what);
    for (const auto& s : sums) std::printf(" %18s", cell(s).c_str());
    std::printf("\n");
  };
  using S = headway::bench::Summary;
  row("healthy runs ever Diverging",
      [](const S& s) { return Pct(s.healthy_ever_diverging, s.healthy); });
  row("verdict flips per healthy run", [](const S& s) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f", s.healthy_flips);
    return std::string(b);
  });
  row("healthy Plateaued before the last fifth",
      [](const S& s) { return Pct(s.healthy_early_plateau, s.healthy); });
  row("healthy runs Overfitting (eval_loss)",
      [](const S& s) { return Pct(s.healthy_overfitting, s.healthy); });
  row("diverged runs caught", [](const S& s) { return Pct(s.diverged_caught, s.diverged); });
  row("  ... within 5% of the run after onset",
      [](const S& s) { return Pct(s.diverged_caught_in_5pct, s.diverged); });
  row("  median delay, % of the run", [](const S& s) { return Median(s.delay_pct); });
  row("diverged runs Diverging before onset",
      [](const S& s) { return Pct(s.diverged_false_early, s.diverged); });
  row("plateaued runs Plateaued", [](const S& s) { return Pct(s.plateaued_caught, s.plateaued); });
  std::printf("%-44s", "us per report (replay and verdict)");
  for (double us : us_per_report) std::printf(" %18.2f", us);
  std::printf("\n");
  if (!per_run) return;
  std::printf("\n%-32s %-9s %7s | %-28s | %-28s | %-28s\n", "run", "label", "onset",
              "current: div/plat/ovf/flips", "before", "plain");
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::printf("%-32s %-9s %7s", runs[i].name.c_str(), runs[i].label.c_str(),
                StepOr(runs[i].onset_step).c_str());
    for (const auto& scores : all) {
      const auto& s = scores[i];
      std::string div = s.first_diverging_step ? StepOr(s.first_diverging_step)
                        : s.ever_diverging     ? "early"
                                               : "-";
      std::printf(" | %7s %6s %6s %5d", div.c_str(), StepOr(s.first_plateau_step).c_str(),
                  StepOr(s.first_overfit_step).c_str(), s.flips);
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool per_run = false;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs") {
      per_run = true;
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: health_bench [--runs] [DIR ...]\n");
      return 0;
    } else {
      dirs.push_back(a);
    }
  }
  if (dirs.empty()) {
    const std::string base = HEADWAY_SOURCE_DIR "/bench/data/loss-curves";
    dirs.push_back(base);
    for (const char* set : {"/added", "/holdout"}) {
      if (std::filesystem::exists(base + set + "/labels.csv")) dirs.push_back(base + set);
    }
  }
  std::printf("Health verdicts replayed report by report (current: with its confirmation)\n");
  for (const std::string& dir : dirs) {
    try {
      Report(dir, per_run);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "health_bench: %s\n", e.what());
      return 1;
    }
  }
  return 0;
}
