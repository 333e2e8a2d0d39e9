// Whether a running job is making headway: the verdicts of the progress
// health classifier (progress/health.h), kept on the job so the last one
// announced survives a restart.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace headway {

// Overfitting: the held-out loss rises while the training loss falls.
enum class Health { kUnknown, kProgressing, kStalled, kDiverging, kPlateaued, kOverfitting };

// "Unknown", "Progressing", "Stalled", "Diverging", "Plateaued", "Overfitting".
std::string_view HealthName(Health health);
// The inverse of HealthName, ASCII case-insensitive; nullopt for other text.
std::optional<Health> ParseHealth(std::string_view name);

// What a verdict was decided on: a held level of one series against its held
// best, and the margin it had to pass. Shown with the verdict, so a user can
// see why (and, for Overfitting, which checkpoint to keep: best_step).
struct HealthEvidence {
  std::string series;          // "loss", "eval_loss", ...
  double level = 0;            // the current held level
  double best = 0;             // the held best it is compared with
  std::int64_t best_step = 0;  // where that best was held
  double noise = 0;            // robust scale of single values
  double threshold = 0;        // the margin the level had to pass
  int window_reports = 0;      // reports that hold a level
};

}  // namespace headway
