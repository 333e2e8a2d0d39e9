// ETA and percent-complete estimation over a job's step/time series.
//
// Pure functions: no I/O, no threads, no clocks (`now_s` is a parameter, on the
// same epoch as the samples). Every function here is thread-safe (no shared
// state) and never throws; malformed input (unsorted samples, time going
// backwards, NaN times) yields a defined, conservative answer, never UB.
//
// ## The Headway estimator (EstimateEta)
//
// Remaining time = R * u + P, where R = total_steps - last step, u = the
// current seconds-per-step of *training* (pauses excluded) and P = the time the
// remaining steps will spend in pauses (eval, checkpointing). Steps:
//
//  1. Tail. Only the last `max_samples` samples are read. Samples sharing a
//     timestamp (one report batch) are merged; samples whose time goes
//     backwards are skipped. Each pair of kept neighbours is an interval with a
//     per-step time dt/ds.
//  2. Pauses. The intervals are cut into blocks of `block_size`; an interval
//     slower than `gap_factor` x its block's median per-step time is a pause.
//     A local (block) median, not a global one, so that a sustained change of
//     speed is a new regime, not a run of pauses. Its excess over the block
//     median is the pause time.
//  3. Warm-up. The leading run of intervals slower than `warmup_factor` x the
//     tail's median (compile, data-loader spin-up) is dropped from both the
//     rate and the pause statistics: it will not recur.
//  4. Rate. u = sum(dt)/sum(ds) over the last `rate_window` non-pause
//     intervals. If those split into an older and a newer segment whose means
//     differ by more than `change_ratio` with high confidence (a two-sample
//     z-score above `change_z`, best split found in one pass with prefix sums),
//     only the newer segment is used: a speed change is followed within about
//     `min_change_segment` samples instead of `rate_window`.
//  5. Pause term. With >= 2 pauses at regular spacing (coefficient of
//     variation of the spacing <= 0.25) and the next one not overdue, P = the
//     number of pause positions that fall in (last step, total_steps] times the
//     mean pause; otherwise P = R x (pause time / steps spanned), amortised.
//     Either way a periodic pause is spread over the remaining steps, never
//     extrapolated as the new speed (the average is pulled up by it, the EMA
//     jumps on it).
//  6. Now. From the last sample's time, up to one typical report interval of
//     the time elapsed since (now_s - last time) is subtracted, so the ETA
//     counts down between reports but does not fall to zero while a job is
//     silent (a stall is the health classifier's business, see health.h).
//
// Complexity: O(min(n, max_samples)) time and memory per call, independent of
// the length of the full series (about 10-20 us for the default 4096-sample
// tail; see bench/eta_bench.cc). The server passes the most recent samples it
// keeps in memory; nothing is cached between calls.

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
EtaEstimate EstimateEta(std::span<const StepSample> samples,
                        std::int64_t total_steps, double now_s,
                        const EtaOptions& options = {});

// Baseline: the average step time since the first sample in `samples`
// (remaining = R x (t_last - t_first) / (s_last - s_first)). O(1).
EtaEstimate EstimateEtaAverage(std::span<const StepSample> samples,
                               std::int64_t total_steps, double now_s);

// Baseline: tqdm's estimator, an exponential moving average of the rate with
// `smoothing` in [0, 1] (0.3 like tqdm; 0 = average, 1 = last interval only),
// bias-corrected like tqdm's EMA and fed each interval in `samples` in order.
// O(n) in samples.size(); a live caller would keep the EMA state instead.
EtaEstimate EstimateEtaEma(std::span<const StepSample> samples,
                           std::int64_t total_steps, double now_s,
                           double smoothing = 0.3);

// All three estimators share the "now" rule: eta = max(0, remaining from the
// last sample - time since the last sample), except that EstimateEta caps
// the credited time (point 6 above).

// Percent complete in [0, 100], from the first source that is usable:
//   1. 100 x step / total_steps        if step and total_steps > 0 are set,
//   2. 100 x epoch / total_epochs      if epoch and total_epochs > 0 are set,
//   3. 100 x elapsed_s / time_limit_s  if elapsed_s and time_limit_s > 0 are set,
// else nullopt. Non-finite values count as not set. The result is clamped.
std::optional<double> PercentComplete(std::optional<std::int64_t> step,
                                      std::optional<std::int64_t> total_steps,
                                      std::optional<double> epoch,
                                      std::optional<double> total_epochs,
                                      std::optional<double> elapsed_s,
                                      std::optional<double> time_limit_s);

}  // namespace headway::progress
