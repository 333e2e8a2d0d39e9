// Whether a running job is making headway: the verdicts of the progress
// health classifier (progress/health.h), kept on the job so the last one
// announced survives a restart.
#pragma once

#include <optional>
#include <string_view>

namespace headway {

// Overfitting: the held-out loss rises while the training loss falls.
enum class Health { kUnknown, kProgressing, kStalled, kDiverging, kPlateaued, kOverfitting };

// "Unknown", "Progressing", "Stalled", "Diverging", "Plateaued", "Overfitting".
std::string_view HealthName(Health health);
// The inverse of HealthName, ASCII case-insensitive; nullopt for other text.
std::optional<Health> ParseHealth(std::string_view name);

}  // namespace headway
