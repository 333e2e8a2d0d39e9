#include "core/health.h"

#include <algorithm>
#include <array>

namespace headway {

namespace {

constexpr std::array<Health, 6> kAll = {Health::kUnknown,   Health::kProgressing,
                                        Health::kStalled,   Health::kDiverging,
                                        Health::kPlateaued, Health::kOverfitting};

}  // namespace

std::string_view HealthName(Health health) {
  switch (health) {
    case Health::kUnknown:
      return "Unknown";
    case Health::kProgressing:
      return "Progressing";
    case Health::kStalled:
      return "Stalled";
    case Health::kDiverging:
      return "Diverging";
    case Health::kPlateaued:
      return "Plateaued";
    case Health::kOverfitting:
      return "Overfitting";
  }
  return "Unknown";
}

std::optional<Health> ParseHealth(std::string_view name) {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (Health h : kAll) {
    std::string_view candidate = HealthName(h);
    if (candidate.size() == name.size() &&
        std::equal(name.begin(), name.end(), candidate.begin(),
                   [&](char a, char b) { return lower(a) == lower(b); })) {
      return h;
    }
  }
  return std::nullopt;
}

}  // namespace headway
