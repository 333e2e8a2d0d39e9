#include "core/team_policy.h"

#include <charconv>

namespace headway {
namespace {

// "TEAM=VALUE" or "VALUE": the team ("" for the default) and the value.
Result<std::pair<std::string, std::string>> SplitFlag(std::string_view flag,
                                                      std::string_view usage) {
  auto eq = flag.find('=');
  if (eq == std::string_view::npos)
    return std::pair<std::string, std::string>{"", std::string(flag)};
  if (eq == 0 || eq + 1 == flag.size()) {
    return InvalidArgument(std::string(usage) + ", got '" + std::string(flag) + "'");
  }
  return std::pair<std::string, std::string>{std::string(flag.substr(0, eq)),
                                             std::string(flag.substr(eq + 1))};
}

std::string TeamText(std::string_view team) {
  return team.empty() ? "every team" : "team " + std::string(team);
}

}  // namespace

TeamBounds TeamPolicy::For(std::string_view team) const {
  TeamBounds b{default_max_priority_, default_max_grace_};
  if (auto it = max_priority_.find(team); it != max_priority_.end()) b.max_priority = it->second;
  if (auto it = max_grace_.find(team); it != max_grace_.end()) b.max_grace = it->second;
  return b;
}

Status TeamPolicy::AddMaxPriority(std::string_view flag) {
  constexpr std::string_view kUsage = "--max-priority must be N or TEAM=N (an integer)";
  auto parts = SplitFlag(flag, kUsage);
  if (!parts.ok()) return parts.status();
  const auto& [team, text] = *parts;
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < -1000000 ||
      value > 1000000) {
    return InvalidArgument(std::string(kUsage) + " from -1000000 to 1000000, got '" +
                           std::string(flag) + "'");
  }
  if (team.empty()) {
    if (priority_default_set_) return InvalidArgument("--max-priority for every team given twice");
    priority_default_set_ = true;
    default_max_priority_ = value;
    return Status::Ok();
  }
  if (!max_priority_.emplace(team, value).second) {
    return InvalidArgument("--max-priority for " + TeamText(team) + " given twice");
  }
  return Status::Ok();
}

Status TeamPolicy::AddMaxGrace(std::string_view flag) {
  constexpr std::string_view kUsage = "--max-grace must be DURATION or TEAM=DURATION (e.g. 30m)";
  auto parts = SplitFlag(flag, kUsage);
  if (!parts.ok()) return parts.status();
  const auto& [team, text] = *parts;
  auto value = ParseDuration(text);
  if (!value) return InvalidArgument(std::string(kUsage) + ", got '" + std::string(flag) + "'");
  if (team.empty()) {
    if (grace_default_set_) return InvalidArgument("--max-grace for every team given twice");
    grace_default_set_ = true;
    default_max_grace_ = *value;
    return Status::Ok();
  }
  if (!max_grace_.emplace(team, *value).second) {
    return InvalidArgument("--max-grace for " + TeamText(team) + " given twice");
  }
  return Status::Ok();
}

Result<TeamPolicy> ParseTeamPolicy(const std::vector<std::string>& max_priority,
                                   const std::vector<std::string>& max_grace) {
  TeamPolicy policy;
  for (const std::string& f : max_priority) HEADWAY_RETURN_IF_ERROR(policy.AddMaxPriority(f));
  for (const std::string& f : max_grace) HEADWAY_RETURN_IF_ERROR(policy.AddMaxGrace(f));
  return policy;
}

Status CheckTeamBounds(const UserToken& who, const JobSpec& spec, const TeamPolicy& policy) {
  if (who.role == Role::kAdmin) return Status::Ok();
  if (spec.host_network) {
    return PermissionDenied(
               "host_network: only an admin may run a job on the host's network (it could "
               "reach every service on the host's loopback, other teams' included)")
        .WithField("host_network");
  }
  TeamBounds bounds = policy.For(spec.team);
  auto above = [&](const std::string& field, const std::string& value, const std::string& limit,
                   const std::string& flag, const std::string& placeholder) {
    return InvalidArgument(field + " " + value + " is above team " + spec.team + "'s limit of " +
                           limit + " for members; an admin can raise it with " + flag + " " +
                           spec.team + "=" + placeholder)
        .WithField(field);
  };
  if (spec.priority > bounds.max_priority) {
    return above("priority", std::to_string(spec.priority), std::to_string(bounds.max_priority),
                 "--max-priority", "N");
  }
  if (spec.termination_grace > bounds.max_grace) {
    return above("termination_grace", FormatDuration(spec.termination_grace),
                 FormatDuration(bounds.max_grace), "--max-grace", "DURATION");
  }
  if (spec.checkpoint_warning && *spec.checkpoint_warning > bounds.max_grace) {
    return above("checkpoint_warning", FormatDuration(*spec.checkpoint_warning),
                 FormatDuration(bounds.max_grace), "--max-grace", "DURATION");
  }
  return Status::Ok();
}

}  // namespace headway
