// ETA and percent-complete estimation over a job's step/time series.
//
// Pure functions: no I/O, no threads, no clocks (`now_s` is a parameter, on the
// same epoch as the samples). All are thread-safe (no shared state) and throw
// nothing but std::bad_alloc; malformed input (unsorted samples, time going backwards, NaN times)
// yields a defined, conservative answer, never UB.
//
// ## The Headway estimator (EstimateEta)
//
// Remaining time = R x u + P: R = total_steps - last step, u = the current
// seconds per step of *training* (pauses excluded), P = the time the remaining
// steps will spend in pauses (eval, checkpointing). Computed from the tail:
//
//  1. Tail. Only the last `max_samples` samples are read. Samples sharing a
//     timestamp (one report batch) are merged into their last step; samples
//     whose step or time does not advance, or whose time is not finite, are
//     skipped. Each pair of kept neighbours is an interval, with a per-step
//     time dt/ds.
//  2. Pauses. The intervals are cut into blocks of `block_size`; an interval
//     slower than `gap_factor` x its block's median per-step time is a pause,
//     and its excess over that median is the pause's length. The median is
//     local, not global, so a lasting change of speed is a new regime, not a
//     run of pauses; and a median, so the pauses do not move it.
//  3. Warm-up. The leading run of intervals slower than `warmup_factor` x the
//     median of the block medians (compile, data-loader spin-up) is dropped
//     from both the rate and the pause statistics: it will not recur.
//  4. Rate. u = sum(dt) / sum(ds) over the last `rate_window` non-pause
//     intervals (default: the whole tail, which averages out jitter and slow
//     wander). The window is cut at a change of speed: the best split into an
//     older and a newer segment (scanned in one pass over prefix sums, on a
//     geometric grid of newer-segment sizes from `min_change_segment`) counts
//     if the segments' means differ by at least `change_ratio`, by more than
//     `change_z` standard errors, and by more than `change_wander_factor` x
//     the spread of the older segment's block means (so the job's usual slow
//     wander in throughput is not a change). Then only the newer segment is
//     used: a 2x change is followed within about `min_change_segment` reports.
//     Last, the newest 4, 8, 16, ... intervals are tried against that window
//     on the series itself: from origins 1/16 to 1/2 of the window back, which
//     rate would have foretold the time actually taken to the last report? A
//     newer window whose error is under `backtest_margin` x the window's
//     replaces it. A speed that settles over many reports (a long warm-up) or
//     shifts by less than a detectable change is so followed on coarse
//     series (10-100 reports), where a change needs too many reports to show.
//  5. Pause term. With >= 2 pauses at regular spacing (coefficient of
//     variation <= 0.25), or one pause in a series that starts at the run's
//     start (its step is then the period), and the next pause not overdue
//     (phase <= 1.5 periods): P = the number of pause positions that fall in
//     (last step, total_steps] x the mean pause. Otherwise P is amortised:
//     R x (pause seconds / steps spanned). Either way a periodic pause is
//     neither extrapolated as the new speed (tqdm's EMA jumps on it) nor
//     smeared into the rate (the average).
//  6. Now. Of the time elapsed since the last kept sample, at most one typical
//     report interval is subtracted: the ETA counts down between reports but
//     does not fall to zero while a job is silent (a stall is the health
//     classifier's business, see health.h).
//
// Complexity: O(min(n, max_samples)) time and memory per call, independent of
// the length of the full series: a few linear passes, an nth_element per
// block, ~32 ln(k) change-point candidates. About 10-15 ns per tail sample:
// 45-60 us for the default 4096, 6-9 us for 512, whatever the span's length
// (bench/eta_bench.cc, on a shared 2-core box). Nothing is cached between
// calls: the caller passes its most recent samples each time. Keep at least a
// few pause periods in the tail (4096 reports covers an eval every 1000 steps
// at one report per step) or the pause term degrades to the amortised form.

#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace headway::progress {

// One report of progress: `step` reached at `time_s` (seconds on any fixed
// epoch). Series are sorted by step ascending with unique steps.
struct StepSample {
  std::int64_t step;
  double time_s;
};

struct EtaEstimate {
  // Seconds from `now_s` until the last step; nullopt when it cannot be
  // estimated yet: fewer than 2 samples, total_steps <= 0, or no movement
  // (all samples at one time). 0 once the last step >= total_steps.
  std::optional<double> eta_seconds;
  // The training rate the estimator believes, in steps per second, pauses
  // excluded (what a user compares with "it/s"). 0 when unknown.
  double steps_per_second = 0;
};

// Tuning for EstimateEta. The defaults are what the server uses; they are
// plain values read on each call (change them between calls freely).
struct EtaOptions {
  // Only the last `max_samples` samples are looked at (the cost bound). Large
  // enough to see several periodic pauses when reports come every step.
  std::size_t max_samples = 4096;
  // Most recent non-pause intervals the rate is averaged over: by default all
  // of the tail, since change detection (below) follows real speed changes
  // and a long window averages out noise and slow wander.
  std::size_t rate_window = 4096;
  // A detected change of speed may shorten the rate window down to this many
  // intervals (the newer segment must have at least this many).
  std::size_t min_change_segment = 12;
  // Segments' mean per-step times must differ by this ratio...
  double change_ratio = 1.15;
  // ...and by this many standard errors to count as a change of speed...
  double change_z = 6.0;
  // ...and by this many times the spread of the older segment's block means
  // (log scale): the job's usual slow wander in throughput is not a change.
  double change_wander_factor = 3.0;
  // A newer window replaces the rate window when, tested on the series
  // itself, it foretold the time from past origins to the last report with
  // less than this fraction of the rate window's error (0: never).
  double backtest_margin = 0.6;
  // Intervals per block whose median is the local reference for pauses.
  std::size_t block_size = 32;
  // An interval slower than gap_factor x its local median is a pause.
  double gap_factor = 3.0;
  // Leading intervals slower than warmup_factor x the median are warm-up.
  double warmup_factor = 1.5;
};

// Headway's estimator (see the file comment). `samples` is the most recent
// part of the series (it may be the whole series); only its last
// options.max_samples elements are read.
EtaEstimate EstimateEta(std::span<const StepSample> samples, std::int64_t total_steps, double now_s,
                        const EtaOptions& options = {});

// Baseline: the average step time since the first sample in `samples`
// (remaining = R x (t_last - t_first) / (s_last - s_first)). O(1).
EtaEstimate EstimateEtaAverage(std::span<const StepSample> samples, std::int64_t total_steps,
                               double now_s);

// Baseline: tqdm's estimator. Exponential moving averages of the step delta
// and of the time delta of each interval in `samples`, in order, with
// `smoothing` in [0, 1] (0.3 like tqdm; 0 = the plain average, 1 = the last
// interval only); rate = EMA(steps) / EMA(seconds), as tqdm's `rate`.
// O(n) in samples.size(); a live caller would keep the EMA state instead.
EtaEstimate EstimateEtaEma(std::span<const StepSample> samples, std::int64_t total_steps,
                           double now_s, double smoothing = 0.3);

// All three estimators share the "now" rule: eta = max(0, remaining from the
// last sample - time since the last sample), except that EstimateEta caps
// the credited time (point 6 above).

// The ETA to show, given Headway's own estimate (`own`, from `own_samples`
// reports of the current attempt) and the job's own (`reported_s` seconds
// remaining as of `reported_at_s`, e.g. Kubeflow's estimatedRemainingSeconds):
// Headway's once it rests on at least `min_samples` reports, before that the
// job's, counted down since it arrived (never below 0); whichever exists
// when only one does.
inline constexpr std::size_t kMinOwnEtaSamples = 10;
std::optional<double> ChooseEta(std::optional<double> own, std::size_t own_samples,
                                std::optional<double> reported_s, double reported_at_s,
                                double now_s, std::size_t min_samples = kMinOwnEtaSamples);

// Percent complete in [0, 100], from what the job reported, the first
// source that is usable:
//   1. 100 x step / total_steps        if step and total_steps > 0 are set,
//   2. 100 x epoch / total_epochs      if epoch and total_epochs > 0 are set,
// else nullopt. Never from elapsed time over a time limit: that is a
// deadline, not progress. Non-finite values count as not set. Clamped.
std::optional<double> PercentComplete(std::optional<std::int64_t> step,
                                      std::optional<std::int64_t> total_steps,
                                      std::optional<double> epoch,
                                      std::optional<double> total_epochs);

}  // namespace headway::progress
