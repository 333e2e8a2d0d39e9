#include "progress/health.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <vector>

#include "progress/lower_median.h"

namespace headway::progress {
namespace {

using internal::LowerMedian;

// "4.1s", "45s", "12m", "2h5m".
std::string Duration(double s) {
  char buf[48];
  if (!std::isfinite(s) || s < 0) {
    s = 0;
  }
  if (s < 10) {
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  } else if (s < 120) {
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  } else if (s < 7200) {
    std::snprintf(buf, sizeof buf, "%.0fm", std::floor(s / 60));
  } else {
    double minutes = std::floor(s / 60);
    std::snprintf(buf, sizeof buf, "%.0fh%.0fm", std::floor(minutes / 60), std::fmod(minutes, 60));
  }
  return buf;
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string NonFiniteName(double v) {
  if (std::isnan(v)) {
    return "NaN";
  }
  return v > 0 ? "inf" : "-inf";
}

// Finite values of a series with their steps, in step order; values of a
// maximised metric negated, so lower is always better.
struct Points {
  std::vector<double> value;
  std::vector<std::int64_t> step;
  std::size_t size() const { return value.size(); }
};

// The lowest level that `m` consecutive values all stayed at or below
// (the minimum over windows of the window's maximum), and the step of the
// newest value of that window. Needs size() >= m.
struct Held {
  double level = 0;
  std::int64_t step = 0;
};
std::optional<Held> HeldBest(const Points& p, std::size_t from, std::size_t to, int m) {
  const auto w = static_cast<std::size_t>(m);
  if (to < from + w) {
    return std::nullopt;
  }
  std::optional<Held> best;
  for (std::size_t end = from + w; end <= to; ++end) {
    double high = *std::max_element(p.value.begin() + static_cast<std::ptrdiff_t>(end - w),
                                    p.value.begin() + static_cast<std::ptrdiff_t>(end));
    if (!best || high < best->level) {
      best = Held{high, p.step[end - 1]};
    }
  }
  return best;
}

// The robust scale of single values: 1.4826 x the median absolute
// deviation of second differences (v[i+1] - 2 v[i] + v[i-1]), over sqrt(6).
// Differences, not values, so a trend or a smooth curve (a parabola of
// evaluations) does not count as noise. Over the newest `span` values; 0
// with fewer than `min_values` values (too few to say).
double Noise(const Points& p, std::size_t span = 128, std::size_t min_values = 10) {
  const std::size_t n = p.size();
  if (n < std::max<std::size_t>(min_values, 4)) {
    return 0;
  }
  const std::size_t first = n > span ? n - span : 0;
  std::vector<double> diffs;
  diffs.reserve(n - first);
  for (std::size_t i = first + 1; i + 1 < n; ++i) {
    diffs.push_back(p.value[i + 1] - 2 * p.value[i] + p.value[i - 1]);
  }
  std::vector<double> copy = diffs;
  const double center = LowerMedian(copy);
  for (double& d : diffs) {
    d = std::abs(d - center);
  }
  return 1.4826 * LowerMedian(diffs) / std::sqrt(6.0);
}

// Whether `series` holds a non-finite value at `step`.
bool NonFiniteAt(std::span<const MetricSample> series, std::int64_t step) {
  auto it = std::lower_bound(series.begin(), series.end(), step,
                             [](const MetricSample& s, std::int64_t k) { return s.step < k; });
  return it != series.end() && it->step == step && !std::isfinite(it->value);
}

bool IsNaNSignature(const MetricSample& loss, const HealthInput& in) {
  return LossSaysNaN(loss.value, NonFiniteAt(in.grad_norm, loss.step),
                     NonFiniteAt(in.eval_loss, loss.step));
}

std::optional<HealthVerdict> CheckNonFinite(const HealthInput& in, const HealthOptions& options) {
  if (in.loss.empty()) {
    if (in.any_non_finite_loss) {
      return HealthVerdict{Health::kDiverging, "loss was non-finite", true, std::nullopt};
    }
    // No loss: the objective stands in for it.
    if (!in.objective.empty() && !std::isfinite(in.objective.back().value)) {
      const MetricSample& newest = in.objective.back();
      return HealthVerdict{Health::kDiverging,
                           std::string(in.objective_name) + " is " + NonFiniteName(newest.value) +
                               " at step " + std::to_string(newest.step),
                           true, std::nullopt};
    }
  } else if (const MetricSample& newest = in.loss.back(); IsNaNSignature(newest, in)) {
    std::string what = std::isfinite(newest.value)
                           ? std::string(NonFiniteAt(in.grad_norm, newest.step)
                                             ? "loss 0 with a non-finite grad_norm"
                                             : "loss 0 with a non-finite eval_loss")
                           : "loss is " + NonFiniteName(newest.value);
    return HealthVerdict{Health::kDiverging, what + " at step " + std::to_string(newest.step), true,
                         std::nullopt};
  }
  const auto run = static_cast<std::size_t>(std::max(1, options.nan_grad_reports));
  if (in.grad_norm.size() >= run &&
      std::all_of(in.grad_norm.end() - static_cast<std::ptrdiff_t>(run), in.grad_norm.end(),
                  [](const MetricSample& s) { return !std::isfinite(s.value); })) {
    const MetricSample& since = *(in.grad_norm.end() - static_cast<std::ptrdiff_t>(run));
    return HealthVerdict{Health::kDiverging,
                         "grad_norm non-finite in each of the last " + std::to_string(run) +
                             " reports (since step " + std::to_string(since.step) + ")",
                         false, std::nullopt};
  }
  return std::nullopt;
}

// The series a sustained rise is looked for in: the training loss, or for
// a job that reports none, its objective the right way round.
struct Judged {
  std::span<const MetricSample> series;
  std::string_view name;
  Goal goal = Goal::kMinimize;
  bool is_loss = false;                  // NaN takes Hugging Face's shape too
  const LossHistory* history = nullptr;  // the whole run's, for the loss
};

// (c) of Diverging: a sustained rise of the judged series' level above its held best.
std::optional<HealthVerdict> CheckRise(const HealthInput& in, const HealthOptions& options,
                                       const Judged& judged) {
  const int m = std::max(1, options.sustain_reports);
  const double sign = judged.goal == Goal::kMaximize ? -1 : 1;
  Points loss;  // the judged values, signed so that lower is better
  // The finite values after the newest non-finite one (NaN signature
  // included), if it came among the newest m reports: they alone say
  // whether the run recovered, however few.
  std::size_t since_nan = 0;
  for (std::size_t i = 0; i < judged.series.size(); ++i) {
    const MetricSample& s = judged.series[i];
    if (judged.is_loss ? IsNaNSignature(s, in) : !std::isfinite(s.value)) {
      if (judged.series.size() - i <= static_cast<std::size_t>(m)) {
        since_nan = loss.size() + 1;  // one past: "some NaN is recent"
      }
      continue;
    }
    loss.value.push_back(sign * s.value);
    loss.step.push_back(s.step);
  }
  const std::size_t n = loss.size();
  std::size_t recent_from = n >= static_cast<std::size_t>(m) ? n - static_cast<std::size_t>(m) : 0;
  if (since_nan > 0) {
    recent_from = std::max(recent_from, since_nan - 1);
  } else if (n < static_cast<std::size_t>(m)) {
    return std::nullopt;
  }
  if (recent_from >= n) {
    return std::nullopt;
  }
  const double level = *std::min_element(
      loss.value.begin() + static_cast<std::ptrdiff_t>(recent_from), loss.value.end());
  std::optional<Held> best = HeldBest(loss, 0, n, m);
  const LossHistory* history = judged.history;
  if (history && history->best() && (!best || *history->best() < best->level)) {
    best = Held{*history->best(), history->best_step()};
  }
  if (!best) {
    return std::nullopt;
  }
  double start = 0;
  if (history && history->start()) {
    start = *history->start();
  } else {
    start = *std::max_element(
        loss.value.begin(),
        loss.value.begin() + std::min<std::ptrdiff_t>(m, static_cast<std::ptrdiff_t>(n)));
  }
  const double noise = Noise(loss);
  const double range = std::max(0.0, start - best->level);
  const double threshold = std::max({options.noise_margin * noise, options.range_margin * range,
                                     options.level_margin * std::abs(best->level), 1e-12});
  const double rise = level - best->level;
  if (!(rise > threshold)) {
    return std::nullopt;
  }
  const int held = static_cast<int>(n - recent_from);
  const std::string name(judged.name);
  std::string reason = name + " held " + Number(sign * level) + " over the last " +
                       std::to_string(held) + (held == 1 ? " report" : " reports");
  const char* worse = judged.goal == Goal::kMaximize ? " below" : " above";
  if (range > 0 && level >= start - 0.1 * range) {
    reason += std::string(", back at or") + worse + " its starting level " + Number(sign * start) +
              " after reaching " + Number(sign * best->level) + " at step " +
              std::to_string(best->step);
  } else {
    reason += ", " + Number(rise) + worse + " its held best " + Number(sign * best->level) +
              " at step " + std::to_string(best->step);
  }
  reason += " (noise " + Number(noise) + ", learned range " + Number(range) + ", margin " +
            Number(threshold) + ")";
  HealthEvidence evidence{name,      sign * level, sign * best->level, best->step, noise,
                          threshold, held};
  return HealthVerdict{Health::kDiverging, std::move(reason), false, std::move(evidence)};
}

std::optional<HealthVerdict> CheckStall(const HealthInput& in, const HealthOptions& options) {
  // Intervals between reports that moved forward in step and time.
  std::vector<double> gaps;
  gaps.reserve(in.steps.size());
  double longest = 0;
  const StepSample* prev = nullptr;
  for (const StepSample& s : in.steps) {
    if (!std::isfinite(s.time_s)) {
      continue;
    }
    if (prev && s.step > prev->step && s.time_s > prev->time_s) {
      double gap = s.time_s - prev->time_s;
      gaps.push_back(gap);
      longest = std::max(longest, gap);
    }
    if (!prev || (s.step > prev->step && s.time_s >= prev->time_s)) {
      prev = &s;
    }
  }
  double silent = 0;
  if (in.last_report_age_s && std::isfinite(*in.last_report_age_s)) {
    silent = *in.last_report_age_s;
  } else if (prev) {
    silent = in.now_s - prev->time_s;
  } else {
    return std::nullopt;  // no usable time at all
  }
  double threshold = std::max(options.stall_floor_s, options.unknown_grace_s);
  std::string basis;
  if (!gaps.empty()) {
    const double median = LowerMedian(gaps);
    threshold = std::max({options.stall_floor_s, options.stall_factor * median,
                          options.stall_pause_factor * longest});
    basis = " (median interval " + Duration(median) + ")";
  }
  if (!(silent > threshold)) {
    return std::nullopt;
  }
  return HealthVerdict{Health::kStalled, "no new step for " + Duration(silent) + basis, false,
                       std::nullopt};
}

Points FinitePoints(std::span<const MetricSample> series, Goal goal) {
  Points p;
  for (const MetricSample& s : series) {
    if (std::isfinite(s.value)) {
      p.value.push_back(goal == Goal::kMaximize ? -s.value : s.value);
      p.step.push_back(s.step);
    }
  }
  return p;
}

// The median of the training losses reported within `radius` reports of
// `step`; nullopt if none.
std::optional<double> LossAround(const Points& loss, std::int64_t step, std::size_t radius) {
  if (loss.size() == 0) {
    return std::nullopt;
  }
  auto at = static_cast<std::size_t>(std::lower_bound(loss.step.begin(), loss.step.end(), step) -
                                     loss.step.begin());
  std::size_t from = at > radius ? at - radius : 0;
  std::size_t to = std::min(loss.size(), at + radius + 1);
  if (from >= to) {
    return std::nullopt;
  }
  std::vector<double> v(loss.value.begin() + static_cast<std::ptrdiff_t>(from),
                        loss.value.begin() + static_cast<std::ptrdiff_t>(to));
  return LowerMedian(v);
}

std::optional<HealthVerdict> CheckOverfit(const HealthInput& in, const HealthOptions& options) {
  const Points eval = FinitePoints(in.eval_loss, Goal::kMinimize);
  const auto need = static_cast<std::size_t>(std::max(1, options.overfit_evals));
  if (eval.size() < need + 1) {
    return std::nullopt;
  }
  const std::size_t best_at = static_cast<std::size_t>(
      std::min_element(eval.value.begin(), eval.value.end()) - eval.value.begin());
  if (eval.size() - best_at - 1 < need) {
    return std::nullopt;  // too few evaluations since the best
  }
  const double best = eval.value[best_at];
  const double level =
      *std::min_element(eval.value.end() - static_cast<std::ptrdiff_t>(need), eval.value.end());
  // Evaluations are few and sparse, so their noise is read from as few as 6
  // (4 second differences). Below that it is unknown, and the evaluations
  // that hold the level must at least agree with each other: a rise smaller
  // than their own spread is a small, noisy evaluation set swinging, not a
  // model that got worse.
  const double noise = Noise(eval, 128, 6);
  const double spread =
      eval.size() < 6 ? *std::max_element(eval.value.end() - static_cast<std::ptrdiff_t>(need),
                                          eval.value.end()) -
                            level
                      : 0;
  const double threshold = std::max({options.overfit_margin * std::abs(best),
                                     options.overfit_noise_margin * noise, spread, 1e-12});
  if (!(level - best > threshold)) {
    return std::nullopt;
  }
  // The training loss kept falling since the best evaluation: its level
  // now (held by the newest reports) is below its level around then.
  const Points loss = FinitePoints(in.loss, Goal::kMinimize);
  const auto m = static_cast<std::size_t>(std::max(1, options.sustain_reports));
  if (loss.size() < m) {
    return std::nullopt;
  }
  const std::optional<double> then = LossAround(loss, eval.step[best_at], m);
  const double now =
      *std::max_element(loss.value.end() - static_cast<std::ptrdiff_t>(m), loss.value.end());
  if (!then || !(*then - now > options.overfit_loss_fall * std::abs(*then))) {
    return std::nullopt;
  }
  std::string reason =
      "eval_loss held " + Number(level) + " over the last " + std::to_string(need) +
      " evaluations, " + Number(100 * (level - best) / std::max(std::abs(best), 1e-12)) +
      "% above its best " + Number(best) + " at step " + std::to_string(eval.step[best_at]) +
      ", while loss fell " + Number(*then) + " -> " + Number(now) +
      "; the best checkpoint is step " + std::to_string(eval.step[best_at]);
  HealthEvidence evidence{"eval_loss",           level, best, eval.step[best_at], noise, threshold,
                          static_cast<int>(need)};
  return HealthVerdict{Health::kOverfitting, std::move(reason), false, std::move(evidence)};
}

// The held best before the last `window` steps of `p` and within them,
// each held by up to `sustain` consecutive values (a single evaluation
// where that is all there is); nullopt until both sides have values.
struct WindowBests {
  Held before, within;
  int held_by = 1;
};
std::optional<WindowBests> BestsAround(const Points& p, std::int64_t window, int sustain) {
  if (p.size() == 0) {
    return std::nullopt;
  }
  const std::int64_t boundary = p.step.back() - window;
  const auto split = static_cast<std::size_t>(
      std::upper_bound(p.step.begin(), p.step.end(), boundary) - p.step.begin());
  const std::size_t within = p.size() - split;
  if (split == 0 || within == 0) {
    return std::nullopt;  // the tail does not cover the window yet
  }
  const int m = static_cast<int>(
      std::min<std::size_t>({static_cast<std::size_t>(std::max(1, sustain)), split, within}));
  std::optional<Held> before = HeldBest(p, 0, split, m);
  std::optional<Held> after = HeldBest(p, split, p.size(), m);
  if (!before || !after) {
    return std::nullopt;
  }
  return WindowBests{*before, *after, m};
}

std::optional<HealthVerdict> CheckPlateau(const HealthInput& in, const HealthOptions& options) {
  if (options.plateau_window_steps <= 0 || in.objective.empty()) {
    return std::nullopt;
  }
  const Points p = FinitePoints(in.objective, in.objective_goal);
  const std::optional<WindowBests> bests =
      BestsAround(p, options.plateau_window_steps, options.sustain_reports);
  if (!bests) {
    return std::nullopt;
  }
  const double needed = options.plateau_min_delta * std::abs(bests->before.level);
  if (bests->before.level - bests->within.level > needed) {
    return std::nullopt;
  }
  // A held-out objective that stalls while the training loss still
  // improves is a model still learning (and perhaps overfitting, which is
  // its own verdict), not a plateau.
  if (in.objective.data() != in.loss.data()) {
    const Points loss = FinitePoints(in.loss, Goal::kMinimize);
    const std::optional<WindowBests> train =
        BestsAround(loss, options.plateau_window_steps, options.sustain_reports);
    if (train && train->before.level - train->within.level >
                     options.plateau_min_delta * std::abs(train->before.level)) {
      return std::nullopt;
    }
  }
  const double sign = in.objective_goal == Goal::kMaximize ? -1 : 1;
  std::string reason = "best " + std::string(in.objective_name) + " " +
                       Number(sign * bests->within.level) + " over the last " +
                       std::to_string(options.plateau_window_steps) + " steps improved on " +
                       Number(sign * bests->before.level) + " (step " +
                       std::to_string(bests->before.step) + ") by less than " + Number(needed);
  HealthEvidence evidence{std::string(in.objective_name),
                          sign * bests->within.level,
                          sign * bests->before.level,
                          bests->before.step,
                          Noise(p),
                          needed,
                          bests->held_by};
  return HealthVerdict{Health::kPlateaued, std::move(reason), false, std::move(evidence)};
}

}  // namespace

bool LossSaysNaN(double loss, bool non_finite_grad_norm, bool non_finite_eval_loss) {
  return !std::isfinite(loss) || (loss == 0 && (non_finite_grad_norm || non_finite_eval_loss));
}

Goal GoalOfMetric(std::string_view name) {
  // Word by word ("eval_answer_accuracy": eval, answer, accuracy), so that
  // "answer" is not a word error rate nor "mape" a mean average precision.
  // Short names must be the whole word; longer ones may begin it.
  constexpr std::string_view kFallsWhole[] = {"err", "ppl",  "wer",  "cer", "mse",
                                              "mae", "rmse", "mape", "nll"};
  constexpr std::string_view kFallsPrefix[] = {"loss", "error", "perplexit"};
  constexpr std::string_view kRisesWhole[] = {"acc", "f1", "auc", "map", "iou", "dice", "miou"};
  constexpr std::string_view kRisesPrefix[] = {"accurac", "bleu",  "rouge",  "reward", "precision",
                                               "recall",  "score", "return", "f1"};
  std::optional<Goal> goal;
  std::string word;
  auto judge = [&] {
    if (goal || word.empty()) {
      word.clear();
      return;
    }
    auto whole = [&](std::span<const std::string_view> list) {
      return std::find(list.begin(), list.end(), word) != list.end();
    };
    auto begins = [&](std::span<const std::string_view> list) {
      return std::any_of(list.begin(), list.end(),
                         [&](std::string_view p) { return word.starts_with(p); });
    };
    if (whole(kFallsWhole) || begins(kFallsPrefix)) {
      goal = Goal::kMinimize;
    } else if (whole(kRisesWhole) || begins(kRisesPrefix)) {
      goal = Goal::kMaximize;
    }
    word.clear();
  };
  for (char c : name) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      word += c;
    } else if (c >= 'A' && c <= 'Z') {
      word += static_cast<char>(c - 'A' + 'a');
    } else {
      judge();
    }
  }
  judge();
  return goal.value_or(Goal::kMinimize);
}

void LossHistory::Add(std::int64_t step, double value) {
  if (!std::isfinite(value) || (last_step_ && step <= *last_step_)) {
    return;
  }
  last_step_ = step;
  ++count_;
  window_.push_back(value);
  if (window_.size() > static_cast<std::size_t>(sustain_)) {
    window_.pop_front();
  }
  if (window_.size() < static_cast<std::size_t>(sustain_)) {
    return;
  }
  if (!start_) {
    start_ = *std::max_element(window_.begin(), window_.end());
  }
  const double high = *std::max_element(window_.begin(), window_.end());
  if (!best_ || high < *best_) {
    best_ = high;
    best_step_ = step;
  }
}

HealthVerdict ClassifyHealth(const HealthInput& in, const HealthOptions& options) {
  if (in.steps.empty()) {
    const double waited = in.now_s - in.started_at_s;
    if (waited >= options.unknown_grace_s) {
      return {Health::kUnknown, "no progress reported for " + Duration(waited) + " since start",
              false, std::nullopt};
    }
    return {Health::kUnknown, "waiting for first report", false, std::nullopt};
  }
  if (auto v = CheckNonFinite(in, options)) {
    return *v;
  }
  const Judged judged =
      !in.loss.empty() ? Judged{in.loss, "loss", Goal::kMinimize, true, in.loss_history}
                       : Judged{in.objective, in.objective_name, in.objective_goal, false, nullptr};
  if (auto v = CheckRise(in, options, judged)) {
    return *v;
  }
  for (auto* check : {&CheckStall, &CheckOverfit, &CheckPlateau}) {
    if (auto v = check(in, options)) {
      return *v;
    }
  }
  const StepSample& newest = in.steps.back();
  const double age = in.last_report_age_s && std::isfinite(*in.last_report_age_s)
                         ? *in.last_report_age_s
                         : in.now_s - newest.time_s;
  return {
      Health::kProgressing,
      "step " + std::to_string(newest.step) + " reported " + Duration(std::max(0.0, age)) + " ago",
      false, std::nullopt};
}

const HealthVerdict& HealthConfirmation::Update(const HealthVerdict& raw, std::uint64_t reports,
                                                double now_s, const ConfirmationOptions& options) {
  if (raw.health == confirmed_.health) {
    confirmed_ = raw;
    candidate_.reset();
    return confirmed_;
  }
  const bool at_once = raw.immediate || confirmed_.health == Health::kUnknown ||
                       raw.health == Health::kUnknown || raw.health == Health::kStalled ||
                       confirmed_.health == Health::kStalled;
  if (at_once) {
    confirmed_ = raw;
    candidate_.reset();
    return confirmed_;
  }
  if (candidate_ != raw.health) {
    candidate_ = raw.health;
    // A verdict held over several reports by its own evidence (a level the
    // last 3 losses all reached) has been said by each of them already.
    const std::uint64_t held =
        raw.evidence ? static_cast<std::uint64_t>(std::max(1, raw.evidence->window_reports)) : 1;
    candidate_reports_ = reports >= held ? reports - (held - 1) : 0;
    candidate_since_s_ = now_s;
  }
  const bool leaving = confirmed_.health != Health::kProgressing;
  const int need_reports = leaving ? options.leave_reports : options.enter_reports;
  const double need_seconds = leaving ? options.leave_seconds : options.enter_seconds;
  // The report that first said it counts as one.
  if (reports + 1 - candidate_reports_ >= static_cast<std::uint64_t>(std::max(1, need_reports)) &&
      (need_seconds <= 0 || now_s - candidate_since_s_ >= need_seconds)) {
    confirmed_ = raw;
    candidate_.reset();
  }
  return confirmed_;
}

}  // namespace headway::progress
