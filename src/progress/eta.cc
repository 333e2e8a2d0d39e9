#include "progress/eta.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "progress/lower_median.h"

namespace headway::progress {
namespace {

// A pair of consecutive (merged) samples.
struct Interval {
  double steps;         // > 0
  double seconds;       // > 0
  double per_step;      // seconds / steps
  double end_step;      // the step that closed the interval
  double end_time;      // and its time
  double local_median;  // median per-step time of its block
  bool pause;
};

using internal::LowerMedian;

// Merges samples that share a timestamp (one report batch: the group's last
// step is kept), skips samples whose step or time does not advance or is not
// finite, and returns the intervals between what is left.
std::vector<Interval> MakeIntervals(std::span<const StepSample> tail) {
  std::vector<Interval> out;
  out.reserve(tail.size());
  std::size_t i = 0;
  while (i < tail.size() && !std::isfinite(tail[i].time_s)) {
    ++i;
  }
  if (i == tail.size()) {
    return out;
  }
  double prev_step = static_cast<double>(tail[i].step);
  double prev_time = tail[i].time_s;
  // The kept point that ends the last interval (or the first point).
  double cur_step = prev_step;
  double cur_time = prev_time;
  bool have_interval = false;
  for (++i; i < tail.size(); ++i) {
    double step = static_cast<double>(tail[i].step);
    double time = tail[i].time_s;
    if (!std::isfinite(time) || step <= cur_step || time < cur_time) {
      continue;
    }
    if (time == cur_time) {
      // Same report batch as the current point: the point moves forward.
      cur_step = step;
      if (have_interval) {
        Interval& last = out.back();
        last.steps = cur_step - prev_step;
        last.end_step = cur_step;  // the time is the same
        last.per_step = last.seconds / last.steps;
      } else {
        prev_step = cur_step;
      }
      continue;
    }
    prev_step = cur_step;
    prev_time = cur_time;
    cur_step = step;
    cur_time = time;
    double steps = cur_step - prev_step;
    double seconds = cur_time - prev_time;
    out.push_back({steps, seconds, seconds / steps, cur_step, cur_time, 0, false});
    have_interval = true;
  }
  return out;
}

// Blocks of `block` intervals aligned on the newest one (so the newest block
// is full); a short oldest block joins its neighbour. Sets local_median and
// pause on every interval; appends each block's median to `medians`.
void MarkPauses(std::vector<Interval>& iv, std::size_t block, double gap_factor,
                std::vector<double>& scratch, std::vector<double>& medians) {
  block = std::max<std::size_t>(block, 4);
  std::size_t end = iv.size();
  while (end > 0) {
    std::size_t begin = end >= block ? end - block : 0;
    if (begin > 0 && begin < block / 2) {
      begin = 0;  // fold a short oldest block in
    }
    scratch.clear();
    for (std::size_t j = begin; j < end; ++j) {
      scratch.push_back(iv[j].per_step);
    }
    double median = LowerMedian(scratch);
    medians.push_back(median);
    for (std::size_t j = begin; j < end; ++j) {
      iv[j].local_median = median;
      iv[j].pause = iv[j].per_step > gap_factor * median;
    }
    end = begin;
  }
}

// The z-test above assumes independent intervals; real throughput also
// wanders slowly (shared nodes, I/O), which it would read as changes. A shift
// at `split` counts only if its size (in log) exceeds `factor` x the spread of
// the older segment's block means (blocks of `block` intervals): a speed the
// job has not been wandering around before. With fewer than 3 blocks there is
// nothing to compare against and the shift counts.
bool ShiftBeyondWander(const std::vector<double>& u, std::size_t split, std::size_t block,
                       double factor) {
  block = std::max<std::size_t>(block, 4);
  const std::size_t blocks = split / block;
  if (blocks < 3 || factor <= 0) {
    return true;
  }
  double sum_log = 0, sum_sq_log = 0;
  for (std::size_t b = 0; b < blocks; ++b) {
    // Blocks end at the split: the newest part of the old regime.
    std::size_t end = split - b * block;
    double mean = 0;
    for (std::size_t i = end - block; i < end; ++i) {
      mean += u[i];
    }
    double l = std::log(mean / static_cast<double>(block));
    sum_log += l;
    sum_sq_log += l * l;
  }
  const double n = static_cast<double>(blocks);
  const double sd = std::sqrt(std::max(0.0, (sum_sq_log - sum_log * sum_log / n) / (n - 1)));
  double left = 0, right = 0;
  for (std::size_t i = 0; i < split; ++i) {
    left += u[i];
  }
  for (std::size_t i = split; i < u.size(); ++i) {
    right += u[i];
  }
  left /= static_cast<double>(split);
  right /= static_cast<double>(u.size() - split);
  return std::abs(std::log(right / left)) > factor * sd;
}

// Seconds per step over the rate window, with change-of-speed detection.
// `u`, `dt`, `ds`: the window's non-pause intervals in chronological order.
double RateSecondsPerStep(const std::vector<double>& u, const std::vector<double>& dt,
                          const std::vector<double>& ds, const EtaOptions& options) {
  const std::size_t k = u.size();
  std::size_t from = 0;
  const std::size_t min_seg = std::max<std::size_t>(options.min_change_segment, 2);
  if (k >= 2 * min_seg && k >= 4) {
    std::vector<double> sum(k + 1, 0.0), sum_sq(k + 1, 0.0);
    for (std::size_t i = 0; i < k; ++i) {
      sum[i + 1] = sum[i] + u[i];
      sum_sq[i + 1] = sum_sq[i] + u[i] * u[i];
    }
    // Compared squared: z^2 = (hi - lo)^2 / (var * (1/n_left + 1/n_right)).
    double best_z2 = 0;
    std::size_t best_split = 0;
    const double ratio = options.change_ratio;
    const double dof = static_cast<double>(k - 2);
    // Candidate splits by the size m of the newer segment, on a geometric grid
    // (resolution m / 32): fine for recent changes, which matter most, and
    // about 32 ln(k / min_seg) candidates in all.
    for (std::size_t m = min_seg; m + min_seg <= k; m += std::max<std::size_t>(1, m / 32)) {
      const std::size_t split = k - m;
      double n_left = static_cast<double>(split);
      double n_right = static_cast<double>(k - split);
      double mean_left = sum[split] / n_left;
      double mean_right = (sum[k] - sum[split]) / n_right;
      double lo = std::min(mean_left, mean_right);
      double hi = std::max(mean_left, mean_right);
      if (!(lo > 0) || hi < ratio * lo) {
        continue;
      }
      double sse = (sum_sq[split] - n_left * mean_left * mean_left) +
                   (sum_sq[k] - sum_sq[split] - n_right * mean_right * mean_right);
      double denom = std::max(sse, 0.0) / dof * (1 / n_left + 1 / n_right);
      double diff2 = (hi - lo) * (hi - lo);
      double z2 = denom > 0 ? diff2 / denom : INFINITY;
      if (z2 > best_z2) {
        best_z2 = z2;
        best_split = split;
      }
    }
    const double best_z = std::sqrt(best_z2);
    if (best_z > options.change_z &&
        ShiftBeyondWander(u, best_split, options.block_size, options.change_wander_factor)) {
      from = best_split;
    }
  }
  // A newer window where the series itself says it predicts better: each
  // candidate (the window above, and the newest 2, 4, 8, ... intervals) is
  // scored by how well its rate at a past origin would have foretold the
  // time actually taken from there to the end. A speed that settles slowly (a long warm-up) or
  // shifts by less than a detectable change is then followed within a few reports of a coarse
  // series, while a noisy steady one keeps its long window, which foretells best there.
  std::vector<double> cdt(k + 1, 0.0), cds(k + 1, 0.0);
  for (std::size_t i = 0; i < k; ++i) {
    cdt[i + 1] = cdt[i] + dt[i];
    cds[i + 1] = cds[i] + ds[i];
  }
  const std::size_t span = k - from;
  std::size_t best_from = from;
  // Origins from 1/16 to 1/2 of the window back (at least 4 intervals):
  // an ETA foretells a long stretch, and the last few intervals alone would
  // reward windows that chase noise.
  constexpr std::size_t kMinHorizon = 4, kHorizonDivisor = 16;
  if (options.backtest_margin > 0 && span >= 8) {
    auto error_of = [&](std::size_t window) {  // 0: since `from`
      double error = 0;
      int origins = 0;
      for (std::size_t h = std::max(kMinHorizon, span / kHorizonDivisor); 2 * h <= span; h *= 2) {
        const std::size_t origin = k - h;
        std::size_t start = window == 0 ? from : (origin >= from + window ? origin - window : from);
        const double steps = cds[origin] - cds[start];
        const double after = cds[k] - cds[origin];
        const double actual = cdt[k] - cdt[origin];
        if (!(steps > 0) || !(after > 0) || !(actual > 0)) continue;
        const double predicted = (cdt[origin] - cdt[start]) / steps * after;
        error += std::abs(std::log(predicted / actual));
        ++origins;
      }
      return origins > 0 ? error / origins : INFINITY;
    };
    const double long_error = error_of(0);
    double best_error = long_error;
    for (std::size_t window = kMinHorizon; 2 * window <= span; window *= 2) {
      const double error = error_of(window);
      if (error < options.backtest_margin * long_error && error < best_error) {
        best_error = error;
        best_from = k - window;
      }
    }
  }
  const double steps = cds[k] - cds[best_from];
  return steps > 0 ? (cdt[k] - cdt[best_from]) / steps : 0;
}

struct PauseModel {
  bool periodic = false;
  double period_steps = 0;   // periodic: spacing of pause positions
  double last_position = 0;  // periodic: step that closed the newest pause
  double mean_excess_s = 0;  // time a pause adds
  double per_step_s = 0;     // amortised: pause seconds per training step
};

// `iv`: the intervals after warm-up. `series_start`: the first sample's step;
// `series_is_run_start`: whether that is where the run began (not a tail cut
// out of a longer series, not a resumed run).
PauseModel FitPauses(std::span<const Interval> iv, double window_start, double series_start,
                     bool series_is_run_start, double last_step, std::size_t min_lead) {
  PauseModel m;
  std::vector<double> positions;
  double excess = 0;
  for (const Interval& x : iv) {
    if (!x.pause) {
      continue;
    }
    positions.push_back(x.end_step);
    excess += x.seconds - x.steps * x.local_median;
  }
  if (positions.empty()) {
    return m;
  }
  const double n = static_cast<double>(positions.size());
  m.mean_excess_s = excess / n;
  double span = last_step - window_start;
  if (span > 0) {
    m.per_step_s = excess / span;
  }
  double phase = last_step - positions.back();
  if (positions.size() >= 2) {
    double period = (positions.back() - positions.front()) / (n - 1);
    double var = 0;
    for (std::size_t j = 1; j < positions.size(); ++j) {
      double d = positions[j] - positions[j - 1] - period;
      var += d * d;
    }
    double cv = period > 0 ? std::sqrt(var / (n - 1)) / period : INFINITY;
    if (cv <= 0.25 && phase <= 1.5 * period) {
      m.periodic = true;
      m.period_steps = period;
      m.last_position = positions.back();
    }
  } else {
    // One pause in a tail that starts at the start of the run: take the steps
    // before it as its period (an eval every N steps), unless it came too
    // early to tell or the next one is overdue.
    std::size_t lead = 0;
    for (const Interval& x : iv) {
      if (x.pause) {
        break;
      }
      ++lead;
    }
    double period = positions.front() - series_start;
    if (series_is_run_start && lead >= min_lead && period > 0 && phase <= 1.5 * period) {
      m.periodic = true;
      m.period_steps = period;
      m.last_position = positions.front();
    }
  }
  return m;
}

// Pause seconds expected over (last_step, total_steps].
double PauseSeconds(const PauseModel& m, double last_step, double total_steps) {
  if (m.periodic) {
    // Pause positions last_position + j * period, j >= 1, inside the range.
    const double eps = 1e-9;
    double upto_total = std::floor((total_steps - m.last_position) / m.period_steps + eps);
    double upto_last = std::floor((last_step - m.last_position) / m.period_steps + eps);
    return std::max(0.0, upto_total - upto_last) * m.mean_excess_s;
  }
  return (total_steps - last_step) * m.per_step_s;
}

EtaEstimate FromRate(double seconds_per_step, std::int64_t total_steps, std::int64_t last_step,
                     double since_last_s) {
  EtaEstimate e;
  if (!(seconds_per_step > 0) || !std::isfinite(seconds_per_step)) {
    return e;
  }
  e.steps_per_second = 1.0 / seconds_per_step;
  if (total_steps <= 0) {
    return e;
  }
  double remaining = static_cast<double>(std::max<std::int64_t>(0, total_steps - last_step));
  e.eta_seconds = std::max(0.0, remaining * seconds_per_step - std::max(0.0, since_last_s));
  return e;
}

}  // namespace

EtaEstimate EstimateEta(std::span<const StepSample> all, std::int64_t total_steps, double now_s,
                        const EtaOptions& options) {
  if (all.size() < 2) {
    return {};
  }
  const std::size_t max_samples = std::max<std::size_t>(options.max_samples, 2);
  std::span<const StepSample> tail =
      all.size() > max_samples ? all.subspan(all.size() - max_samples) : all;

  std::vector<Interval> iv = MakeIntervals(tail);
  if (iv.empty()) {
    return {};  // no movement
  }
  std::vector<double> scratch, medians;
  scratch.reserve(std::min(iv.size(), std::max<std::size_t>(options.block_size, 4) * 2));
  MarkPauses(iv, options.block_size, options.gap_factor, scratch, medians);

  // Warm-up: the leading run of intervals well above the typical per-step
  // time (the median of the block medians: robust, and O(n / block)).
  const double median = LowerMedian(medians);
  std::size_t warm = 0;
  while (warm < iv.size() && iv[warm].per_step > options.warmup_factor * median) {
    ++warm;
  }
  const std::span<const Interval> steady = std::span<const Interval>(iv).subspan(warm);
  if (steady.empty()) {
    return {};
  }

  // Rate window: the newest `rate_window` non-pause intervals, chronological.
  const std::size_t window = std::max<std::size_t>(options.rate_window, 1);
  std::size_t first = steady.size(), count = 0;
  while (first > 0 && count < window) {
    if (!steady[--first].pause) {
      ++count;
    }
  }
  std::vector<double> u, dt, ds;
  u.reserve(count);
  dt.reserve(count);
  ds.reserve(count);
  // If nothing but pauses is left (a degenerate tail), they are the speed.
  const bool skip_pauses = count > 0;
  for (std::size_t j = first; j < steady.size(); ++j) {
    if (skip_pauses && steady[j].pause) {
      continue;
    }
    u.push_back(steady[j].per_step);
    dt.push_back(steady[j].seconds);
    ds.push_back(steady[j].steps);
  }
  double seconds_per_step = u.empty() ? 0 : RateSecondsPerStep(u, dt, ds, options);
  if (!(seconds_per_step > 0)) {
    return {};
  }

  EtaEstimate e;
  e.steps_per_second = 1.0 / seconds_per_step;
  if (total_steps <= 0) {
    return e;
  }

  const double last_step = iv.back().end_step;
  const double reported_last = static_cast<double>(tail.back().step);
  const double total = static_cast<double>(total_steps);
  if (reported_last >= total) {
    e.eta_seconds = 0.0;
    return e;
  }
  const double window_start = steady.front().end_step - steady.front().steps;
  // The series starts the run if its first step is within two report
  // intervals of step 0 (reporters differ on whether they send step 0).
  const double series_start = static_cast<double>(tail.front().step);
  const bool run_start = series_start <= 2 * iv.front().steps;
  PauseModel pauses =
      FitPauses(steady, window_start, series_start, run_start, last_step, options.block_size);
  double from_last =
      (total - last_step) * seconds_per_step + PauseSeconds(pauses, last_step, total);

  // Time since the last report counts down the ETA by at most one typical
  // report interval: beyond that the job is late, and the ETA holds.
  double mean_steps = 0;
  for (double x : ds) {
    mean_steps += x;
  }
  mean_steps /= static_cast<double>(ds.size());
  const double credit = mean_steps * seconds_per_step;
  const double since = std::clamp(now_s - iv.back().end_time, 0.0, credit);
  e.eta_seconds = std::max(0.0, from_last - (std::isfinite(since) ? since : 0.0));
  return e;
}

EtaEstimate EstimateEtaAverage(std::span<const StepSample> samples, std::int64_t total_steps,
                               double now_s) {
  if (samples.size() < 2) {
    return {};
  }
  double steps = static_cast<double>(samples.back().step - samples.front().step);
  double seconds = samples.back().time_s - samples.front().time_s;
  if (!(steps > 0) || !(seconds > 0)) {
    return {};
  }
  return FromRate(seconds / steps, total_steps, samples.back().step, now_s - samples.back().time_s);
}

EtaEstimate EstimateEtaEma(std::span<const StepSample> samples, std::int64_t total_steps,
                           double now_s, double smoothing) {
  if (samples.size() < 2) {
    return {};
  }
  // tqdm: separate EMAs of the step delta and the time delta, each
  // ema = a * x + (1 - a) * ema, debiased by 1 - (1 - a)^calls; rate = dn / dt.
  const double a = std::clamp(smoothing, 0.0, 1.0);
  double ema_dn = 0, ema_dt = 0, sum_dn = 0, sum_dt = 0;
  for (std::size_t i = 1; i < samples.size(); ++i) {
    double dn = static_cast<double>(samples[i].step - samples[i - 1].step);
    double dt = samples[i].time_s - samples[i - 1].time_s;
    if (!(dn > 0) || !(dt >= 0)) {
      continue;
    }
    ema_dn = a * dn + (1 - a) * ema_dn;
    ema_dt = a * dt + (1 - a) * ema_dt;
    sum_dn += dn;
    sum_dt += dt;
  }
  // The debiasing factor is common to both EMAs and cancels in the ratio;
  // smoothing 0 is tqdm's plain average.
  if (a == 0) {
    ema_dn = sum_dn;
    ema_dt = sum_dt;
  }
  if (!(ema_dn > 0) || !(ema_dt > 0)) {
    return {};
  }
  return FromRate(ema_dt / ema_dn, total_steps, samples.back().step, now_s - samples.back().time_s);
}

std::optional<double> PercentComplete(std::optional<std::int64_t> step,
                                      std::optional<std::int64_t> total_steps,
                                      std::optional<double> epoch,
                                      std::optional<double> total_epochs) {
  auto set = [](const std::optional<double>& v) { return v && std::isfinite(*v); };
  auto clamp = [](double v) { return std::clamp(v, 0.0, 100.0); };
  if (step && total_steps && *total_steps > 0) {
    return clamp(100.0 * static_cast<double>(*step) / static_cast<double>(*total_steps));
  }
  if (set(epoch) && set(total_epochs) && *total_epochs > 0) {
    return clamp(100.0 * *epoch / *total_epochs);
  }
  return std::nullopt;
}

std::optional<double> ChooseEta(std::optional<double> own, std::size_t own_samples,
                                std::optional<double> reported_s, double reported_at_s,
                                double now_s, std::size_t min_samples) {
  if (own && own_samples >= min_samples) return own;
  if (reported_s && std::isfinite(*reported_s) && std::isfinite(reported_at_s)) {
    return std::max(0.0, *reported_s - std::max(0.0, now_s - reported_at_s));
  }
  return own;
}

}  // namespace headway::progress
