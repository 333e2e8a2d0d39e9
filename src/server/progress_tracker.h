// The in-memory view of every job's progress: a bounded recent tail of its
// step and loss series plus the latest value of each metric, from which
// percent, ETA and health are computed on demand. Fed only with reports that
// are already durable (IngestWriter), and rebuilt from the Store on first use
// after a restart, so it never knows more than the database.
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/progress_report.h"
#include "progress/eta.h"
#include "progress/health.h"
#include "server/series_summaries.h"
#include "store/store.h"

namespace headway {

// What one job may store, the same for every way of reporting (HTTP,
// Kubeflow, stdout markers).
struct IngestLimits {
  std::size_t max_series = 1000;  // distinct metric names
  // Stored rows: one per step reported plus one per metric value. A report
  // of a step already stored (a retry, a log rescanned after a restart)
  // replaces the earlier one and costs nothing.
  std::uint64_t max_points = 1000000;
};

class ProgressTracker {
 public:
  // `plateau_window`: a job with total_steps is Plateaued when its objective
  // did not improve over this fraction of them (0: never).
  ProgressTracker(Store& store, progress::HealthOptions health_options = {},
                  double plateau_window = 0.25, progress::ConfirmationOptions confirmation = {});

  void Apply(const ProgressBatch& batch);
  // HTTP and Kubeflow reports, all or nothing: InvalidArgument (400) past
  // the series limit, PayloadTooLarge (413) past the points limit, before
  // anything is written. Admitted points are counted against the job at once.
  Status Admit(const std::string& job, const std::vector<ProgressReport>& reports,
               const IngestLimits& limits);
  // Stdout markers, which nobody can be told "no": drops the values of series
  // beyond the series limit, then whole reports beyond the points limit (the
  // first ones that fit are kept). Counts what it keeps against the job.
  void DropOverLimits(const std::string& job, std::vector<ProgressReport>& reports,
                      const IngestLimits& limits);
  // The Warning events `job` is owed: at most one per limit per job (series,
  // points), saying what was refused or dropped and the limit, and one when
  // its reports' clock is more than a minute off the server's.
  std::vector<std::string> TakeWarnings(const std::string& job, const IngestLimits& limits);
  // Percent comes from reports only (steps or epochs), never from the time
  // limit. A running job's health is the confirmed verdict as of `now`
  // (progress::HealthConfirmation over the classifier's), its staleness
  // measured by the server's clock from when the newest report arrived, and
  // a Stalled one has no ETA; an ended job shows the verdict it kept (Job::health).
  ProgressView View(const Job& job, Time now);
  // The confirmed verdict over the job's series as of its last report (or
  // as of `now` when it never reported), for the verdict an ended job keeps
  // (lifecycle::FinalHealth). Call before View sees the job ended: View
  // trims an ended job's tails.
  // `last_step`: the job's latest reported step, if any.
  progress::HealthVerdict FinalVerdict(const Job& job, Time now,
                                       std::optional<std::int64_t>* last_step = nullptr);
  // Drops what is kept of a deleted job, so a new job of the same name starts afresh.
  void Forget(const std::string& job);
  // The chart summaries of series, fed by Apply and dropped by Forget.
  SeriesSummaries& charts() { return charts_; }

 private:
  struct State {
    std::vector<StepPoint> steps;                   // ascending, at most kStepTail * 9/8
    std::vector<progress::MetricSample> loss;       // ascending, at most kLossTail * 9/8
    std::vector<progress::MetricSample> grad_norm;  // ascending, at most kLossTail * 9/8
    std::vector<progress::MetricSample> eval_loss;  // ascending, at most kLossTail * 9/8
    // The series the spec names as its objective (policies.objective), once known.
    std::string objective_metric;
    std::vector<progress::MetricSample> objective;
    progress::LossHistory loss_history;
    progress::HealthConfirmation confirmation;
    std::uint64_t reports = 0;  // applied since loaded: the confirmation's report count
    // A loss report that said NaN since the last verdict (ticks may fall
    // between it and the finite losses after it): announced at once.
    std::optional<std::int64_t> nan_at;
    std::map<std::string, MetricPoint> latest;  // by metric name: highest step
    std::optional<std::int64_t> total_steps;
    std::optional<double> epoch, total_epochs;
    // When the newest report reached the server, by its clock (after a
    // restart: the newest stored step's time, never later than the restart).
    std::optional<Time> last_report_at;
    // The most a report's own time was off the server's clock, once over a minute.
    std::optional<double> clock_skew_s;
    bool said_clock_skew = false;
    // The job's own latest percent, for a job that reports no total (Kubeflow).
    std::optional<double> reported_percent;
    // The job's own latest ETA (ProgressReport::remaining_seconds) and when it came.
    std::optional<double> reported_eta;
    Time reported_eta_at{};
    // Admission bookkeeping for IngestLimits.
    std::optional<std::uint64_t> points;  // stored or admitted; counted on first use
    std::uint64_t refused_points = 0, dropped_points = 0, dropped_reports = 0;
    std::set<std::string> dropped_series;
    std::size_t refused_series_requests = 0;
    bool said_points = false, said_series = false;
  };
  // The ETA estimator reads up to 4096 steps: periodic eval pauses and noisy
  // throughput are estimated markedly better than from 512 (bench/eta_bench).
  // About 300 KiB per running job (64-byte steps, trimmed in batches of 1/8);
  // a finished job keeps only its last step.
  static constexpr std::size_t kStepTail = 4096;
  static constexpr std::size_t kLossTail = 512;

  State& Load(const std::string& job);  // requires mu_
  // The confirmed verdict over `s` as of `now_s`; requires mu_. `ended`:
  // the run is over, so a verdict that its reports confirm needs no more time.
  progress::HealthVerdict Classify(const Job& job, State& s, double now_s, bool ended = false);
  // Follows the spec's objective: loads its tail once it is named; requires mu_.
  void FollowObjective(const Job& job, State& s);
  // The current attempt's step samples; requires mu_.
  static std::vector<progress::StepSample> Samples(const Job& job, const State& s);
  static void AddStep(State& s, const StepPoint& p);
  // Rows each report would add (see IngestLimits::max_points); requires mu_.
  std::vector<std::uint64_t> Costs(const std::string& job, const State& s,
                                   const std::vector<ProgressReport>& reports);
  std::uint64_t& Points(const std::string& job, State& s);  // requires mu_
  static void AddMetric(State& s, const std::string& name, const MetricPoint& p);
  // The objective series of `s` when the spec names none: eval_loss once reported, else loss.
  static const std::vector<progress::MetricSample>& DefaultObjective(const State& s);

  Store& store_;
  const progress::HealthOptions health_options_;
  const double plateau_window_;
  const progress::ConfirmationOptions confirmation_;
  std::mutex mu_;
  std::map<std::string, State> jobs_;  // guarded by mu_
  SeriesSummaries charts_;
};

}  // namespace headway
