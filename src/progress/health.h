// Is a running job making headway? A pure classifier over the recent tail of
// its step, loss and objective series, built for real training curves: noisy,
// with sharp drops, spikes, warm-ups and epochs. No I/O, no clocks (`now_s`
// is given), thread-safe (no shared state), throws nothing but
// std::bad_alloc; malformed input (empty or unsorted spans, NaN times)
// yields a defined verdict.
//
// Levels, not single values. A level is *held* when several reports in a row
// agree on it: the loss's best is the lowest value that `sustain_reports`
// consecutive losses all stayed at or below (one lucky low batch sets no
// best), and its current level is the highest value that the newest
// `sustain_reports` losses all reached (one spike is no rise). Margins are
// measured against the curve's own noise (a robust scale of its
// report-to-report changes) and its own range (how far it came down).
//
// Verdicts, first match wins (Diverging > Stalled > Overfitting > Plateaued
// > Progressing); this is the raw verdict of one moment: what to announce and
// act on is confirmed over several reports by HealthConfirmation below.
//
//   Unknown      no step sample yet: "waiting for first report", and once
//                unknown_grace_s have passed since started_at_s
//                "no progress reported for 5m since start".
//   Diverging    (a) the newest loss is NaN or inf, or is 0 with a
//                non-finite grad_norm or eval_loss at the same step (Hugging
//                Face's Trainer logs NaN losses that way); for a job that
//                reports no loss, its newest objective is NaN or inf. Marked `immediate`:
//                no confirmation is needed. A finite loss after it clears
//                (a) once the finite losses since the NaN are in range by
//                (c), judged on those alone until `sustain_reports` follow.
//                (b) grad_norm was non-finite in each of the newest
//                `nan_grad_reports` reports (one skipped fp16 step is normal).
//                (c) a sustained rise: the current level exceeds the held
//                best by more than each of noise_margin x noise,
//                range_margin x (start - best) and level_margin x |best|,
//                where start is the highest of the run's first
//                sustain_reports losses (where it began). A job that
//                reports no loss is judged on its objective, the right way
//                round (a reward or an accuracy that collapses). The
//                reason says whether the loss went back to where it began.
//   Stalled      no new step for longer than max(stall_floor_s,
//                stall_factor x median interval between recent reports,
//                stall_pause_factor x longest gap in the tail), silence
//                measured by the server's clock (`last_report_age_s`) when
//                given: a client's clock decides nothing here.
//   Overfitting  the held-out loss (`eval_loss`) stopped improving: its
//                newest `overfit_evals` evaluations all exceed its best by
//                more than overfit_margin x |best| and overfit_noise_margin x
//                their noise (read from 6 evaluations on; with fewer, by more
//                than those newest evaluations spread apart), while the
//                training loss fell by more than overfit_loss_fall since
//                that best. The reason names the step of the best
//                evaluation (the checkpoint to keep).
//   Plateaued    only if plateau_window_steps > 0: the objective's held
//                best within the last window improved on its held best
//                before it by less than plateau_min_delta (relative).
//                Goal-aware.
//   Progressing  otherwise.
//
// Cost: O(n log n) in the sizes of the spans; the caller passes bounded tails.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/health.h"
#include "progress/eta.h"

namespace headway::progress {

// The verdicts are a domain type (core/health.h): jobs carry the last one announced.
using ::headway::Health;
using ::headway::HealthEvidence;
using ::headway::HealthName;
using ::headway::ParseHealth;

enum class Goal { kMinimize, kMaximize };

// The direction of a metric from its name when the job does not say:
// accuracy, F1, BLEU, ROUGE, reward, AUC, precision, recall, mAP, IoU,
// score and return rise as a model learns; everything else (losses,
// perplexity, error rates) falls.
Goal GoalOfMetric(std::string_view name);

// Whether a loss report says the run holds NaN: a non-finite loss, or a
// loss of exactly 0 with a non-finite grad_norm or eval_loss at the same
// step (how Hugging Face's Trainer logs a window of NaN losses: it drops
// them from its running sum).
bool LossSaysNaN(double loss, bool non_finite_grad_norm, bool non_finite_eval_loss);

struct MetricSample {
  std::int64_t step;
  double value;  // may be NaN or inf
};

// What a run's whole loss series held, in O(1) memory, for a caller that
// keeps only a tail: the level its first losses started at and the best
// level it held. Feed finite losses in step order; older steps are ignored.
class LossHistory {
 public:
  explicit LossHistory(int sustain_reports = 3)
      : sustain_(sustain_reports < 1 ? 1 : sustain_reports) {}
  void Add(std::int64_t step, double value);
  // The highest of the first sustain_reports losses (where the run began:
  // its first loss, unless the loss rose at once); nullopt before then.
  std::optional<double> start() const { return start_; }
  // The lowest level held by sustain_reports consecutive losses, and the
  // step of the newest of them; nullopt before then.
  std::optional<double> best() const { return best_; }
  std::int64_t best_step() const { return best_step_; }
  std::int64_t count() const { return count_; }

 private:
  int sustain_;
  std::deque<double> window_;  // the newest `sustain_` losses
  std::optional<std::int64_t> last_step_;
  std::optional<double> start_, best_;
  std::int64_t best_step_ = 0, count_ = 0;
};

struct HealthInput {
  double now_s = 0;
  double started_at_s = 0;                  // when the job started running
  std::span<const StepSample> steps;        // recent step/time samples, as for EstimateEta
  std::span<const MetricSample> loss;       // recent training loss, sorted by step
  std::span<const MetricSample> grad_norm;  // recent gradient norms, sorted by step (may be empty)
  std::span<const MetricSample> eval_loss;  // recent held-out loss, sorted by step (may be empty)
  std::span<const MetricSample> objective;  // recent plateau objective (may be `loss` again)
  Goal objective_goal = Goal::kMinimize;
  std::string_view objective_name = "objective";  // for the reason text, e.g. "eval_loss"
  // Seconds since the newest report reached the server, by the server's own
  // clock. Unset: measured from the newest step sample's time.
  std::optional<double> last_report_age_s;
  // Caller-kept, over the whole series: a non-finite loss was ever reported.
  // Consulted only when `loss` is empty.
  bool any_non_finite_loss = false;
  // The whole run's loss, for a caller that passes only a tail, so a rise is
  // measured against the run's start and best, not only the tail's.
  const LossHistory* loss_history = nullptr;
};

// Thresholds; plain values read on each call. Which data set them, and how
// they do on data that did not, is in bench/README.md ("Health verdicts").
struct HealthOptions {
  double stall_factor = 10;         // Stalled after stall_factor x median report interval...
  double stall_floor_s = 60;        // ...but never sooner than this...
  double stall_pause_factor = 1.5;  // ...nor within this x the longest gap in the tail (0: off)
  double unknown_grace_s = 300;     // before: "waiting for first report"
  // Levels: how many consecutive reports hold one.
  int sustain_reports = 3;
  // Diverging (c): a rise must exceed all three margins.
  double noise_margin = 6;    // x the noise of single losses
  double range_margin = 0.2;  // x what the run learned (start - best)
  double level_margin = 0.5;  // x |best|
  int nan_grad_reports = 8;   // Diverging (b)
  // Overfitting.
  int overfit_evals = 2;
  double overfit_margin = 0.01;  // x |best eval_loss|
  // x the noise of single evaluations: the held level is the lower of the
  // newest evaluations and the best the lowest of all, so noise alone puts
  // them 1-2 noise apart; a single loss's margin (6) would hide real rises.
  double overfit_noise_margin = 3;
  double overfit_loss_fall = 0.02;  // x the training loss at the best evaluation
  // Plateau window, in steps; 0 disables plateau detection (the default: a
  // window only makes sense relative to the job's length, so the caller sets it).
  std::int64_t plateau_window_steps = 0;
  double plateau_min_delta = 1e-3;  // relative improvement needed within the window
};

struct HealthVerdict {
  Health health = Health::kUnknown;
  // Short human text: "no new step for 12m (median interval 4.1s)",
  // "loss is NaN at step 1200", "loss held 2.31 over 3 reports, 1.2 above
  // its held best 1.11 at step 400 (noise 0.02, range 3.1)".
  std::string reason;
  // Needs no confirmation: a NaN loss is Diverging at once.
  bool immediate = false;
  std::optional<HealthEvidence> evidence;
};

HealthVerdict ClassifyHealth(const HealthInput& input, const HealthOptions& options = {});

// Hysteresis over the raw verdicts: a verdict is entered only once the
// classifier has said it for `enter_reports` new reports and `enter_seconds`,
// and left only once it has said something else for `leave_reports` reports
// and `leave_seconds`; so one report neither raises nor clears an alarm, and
// every announced change stands. A raw verdict whose evidence was held over
// several reports (HealthEvidence::window_reports) counts them as said. Exempt, as their own
// confirmation: `immediate` verdicts (NaN), Stalled (its threshold is a time already) and leaving
// Stalled (a report came), and leaving Unknown.
struct ConfirmationOptions {
  int enter_reports = 2;
  double enter_seconds = 30;
  int leave_reports = 5;
  double leave_seconds = 60;
};

class HealthConfirmation {
 public:
  // The raw verdict as of `now_s`, when `reports` reports have been applied
  // in all (a count that only grows); returns the confirmed verdict. A
  // confirmed verdict that the raw one still says takes its newest reason.
  const HealthVerdict& Update(const HealthVerdict& raw, std::uint64_t reports, double now_s,
                              const ConfirmationOptions& options = {});
  const HealthVerdict& confirmed() const { return confirmed_; }

 private:
  HealthVerdict confirmed_;
  std::optional<Health> candidate_;
  std::uint64_t candidate_reports_ = 0;
  double candidate_since_s_ = 0;
};

}  // namespace headway::progress
