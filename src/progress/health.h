// Is a running job making headway? A pure classifier over the recent tail of
// its step, loss and objective series. No I/O, no clocks (`now_s` is given),
// thread-safe (no shared state), throws nothing but std::bad_alloc; malformed
// input (empty or unsorted spans, NaN times) yields a defined verdict.
//
// Verdicts, first match wins (Diverging > Stalled > Plateaued > Progressing):
//
//   Unknown      no step sample yet: "waiting for first report", and once
//                unknown_grace_s have passed since started_at_s
//                "no progress reported for 5m since start".
//   Diverging    (a) the newest loss report is NaN or inf ("loss is NaN at
//                step 1200"). A finite loss reported after it clears this: a
//                NaN that poisoned the weights keeps every later loss NaN,
//                while a transient overflow (fp16 loss scaling) does not.
//                Until three finite losses follow it, (b) judges only those
//                that do: a huge loss right after NaN stays Diverging.
//                `any_non_finite_loss` decides only when `loss` is empty.
//                (b) the loss exploded: the median of the newest 3 finite
//                losses exceeds min + (explode_factor - 1) x scale, where
//                min is the lowest finite loss (of the tail, or `min_loss` if
//                lower) and scale = max(|min|, 1e-3 x |first loss|). For a
//                positive minimum that is "recent > explode_factor x min";
//                the floor keeps losses near 0 from tripping on noise, |min|
//                makes negative losses work. The median of 3 ignores a
//                single spike that recovers at once.
//   Stalled      no new step for longer than max(stall_floor_s,
//                stall_factor x median interval between recent reports,
//                stall_pause_factor x longest gap in the tail). The last term
//                lets a pause that recurs (a long eval) happen again without
//                a false alarm. With a single sample the median is unknown
//                and the threshold is max(stall_floor_s, unknown_grace_s).
//                Applies whether or not the process is alive: a hung job is
//                exactly a live process that does not report.
//   Plateaued    only if plateau_window_steps > 0: the objective's best value
//                among points with step > last - window improved on its best
//                before that by less than plateau_min_delta (relative to
//                |best before|). Needs points on both sides of the boundary.
//                Best-so-far, like Keras' EarlyStopping(min_delta, patience).
//   Progressing  otherwise.
//
// Cost: O(n) in the sizes of the spans; the caller passes bounded tails.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/health.h"
#include "progress/eta.h"

namespace headway::progress {

// The verdicts are a domain type (core/health.h): jobs carry the last one announced.
using ::headway::Health;
using ::headway::HealthName;
using ::headway::ParseHealth;

enum class Goal { kMinimize, kMaximize };

struct MetricSample {
  std::int64_t step;
  double value;  // may be NaN or inf
};

struct HealthInput {
  double now_s = 0;
  double started_at_s = 0;                  // when the job started running
  std::span<const StepSample> steps;        // recent step/time samples, as for EstimateEta
  std::span<const MetricSample> loss;       // recent training loss, sorted by step
  std::span<const MetricSample> objective;  // recent plateau objective (may be `loss` again)
  Goal objective_goal = Goal::kMinimize;
  std::string_view objective_name = "objective";  // for the reason text, e.g. "eval_loss"
  // Caller-kept, over the whole series: a non-finite loss was ever reported.
  // Consulted only when `loss` is empty (see Diverging above).
  bool any_non_finite_loss = false;
  // Optional whole-run summaries (O(1) state the caller may keep), so an
  // explosion is measured against the run's best, not only the tail's.
  std::optional<double> first_loss;  // the first finite loss of the run
  std::optional<double> min_loss;    // the lowest finite loss of the run
};

// Thresholds; plain values read on each call.
struct HealthOptions {
  double stall_factor = 10;         // Stalled after stall_factor x median report interval...
  double stall_floor_s = 60;        // ...but never sooner than this...
  double stall_pause_factor = 1.5;  // ...nor within this x the longest gap in the tail (0: off)
  double unknown_grace_s = 300;     // before: "waiting for first report"
  double explode_factor = 10;       // Diverging when recent loss > explode_factor x min loss
  // Plateau window, in steps; 0 disables plateau detection (the default: a
  // window only makes sense relative to the job's length, so the caller sets it).
  std::int64_t plateau_window_steps = 0;
  double plateau_min_delta = 1e-4;  // relative improvement needed within the window
};

struct HealthVerdict {
  Health health = Health::kUnknown;
  // Short human text: "no new step for 12m (median interval 4.1s)",
  // "loss is NaN at step 1200", "loss 41.2 is 52x its minimum 0.79",
  // "best loss improved <0.01% over the last 500 steps".
  std::string reason;
};

HealthVerdict ClassifyHealth(const HealthInput& input, const HealthOptions& options = {});

}  // namespace headway::progress
