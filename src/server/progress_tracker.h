// The in-memory view of every job's progress: a bounded recent tail of its
// step and loss series plus the latest value of each metric, from which
// percent, ETA and health are computed on demand. Fed only with reports that
// are already durable (IngestWriter), and rebuilt from the Store on first use
// after a restart, so it never knows more than the database.
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/progress_report.h"
#include "progress/eta.h"
#include "progress/health.h"
#include "store/store.h"

namespace headway {

class ProgressTracker {
 public:
  // `plateau_window`: a job with total_steps is Plateaued when its objective
  // did not improve over this fraction of them (0: never).
  ProgressTracker(Store& store, progress::HealthOptions health_options = {},
                  double plateau_window = 0.25);

  void Apply(const ProgressBatch& batch);
  // For reports nobody can be told "no" (stdout markers): removes the values
  // of series that would take `job` past `max_series`, keeping the first new
  // ones that fit. Returns the names of the series dropped.
  std::set<std::string> DropSeriesOverLimit(const std::string& job,
                                            std::vector<ProgressReport>& reports,
                                            std::size_t max_series);
  // InvalidArgument when `reports` would give `job` more than `max_series`
  // metric series. Checked before writing, so a refused request stores nothing.
  Status AdmitSeries(const std::string& job, const std::vector<ProgressReport>& reports,
                     std::size_t max_series);
  ProgressView View(const Job& job, Time now);

 private:
  struct State {
    std::vector<StepPoint> steps;                     // ascending, at most kStepTail * 9/8
    std::vector<progress::MetricSample> loss;         // ascending, at most kLossTail * 9/8
    std::vector<progress::MetricSample> objective;    // eval_loss if reported, else loss
    bool objective_is_eval = false;
    std::map<std::string, MetricPoint> latest;        // by metric name: highest step
    std::optional<std::int64_t> total_steps;
    std::optional<double> epoch, total_epochs;
    std::optional<double> first_loss, min_loss;
    std::optional<Time> last_report_at;
  };
  // The ETA estimator reads up to 4096 steps: periodic eval pauses and noisy
  // throughput are estimated markedly better than from 512 (bench/eta_bench).
  // About 300 KiB per running job (64-byte steps, trimmed in batches of 1/8);
  // a finished job keeps only its last step.
  static constexpr std::size_t kStepTail = 4096;
  static constexpr std::size_t kLossTail = 512;

  State& Load(const std::string& job);  // requires mu_
  static void AddStep(State& s, const StepPoint& p);
  static void AddMetric(State& s, const std::string& name, const MetricPoint& p);

  Store& store_;
  const progress::HealthOptions health_options_;
  const double plateau_window_;
  std::mutex mu_;
  std::map<std::string, State> jobs_;  // guarded by mu_
};

}  // namespace headway
