#include "core/job.h"

#include <cctype>
#include <filesystem>

#include "core/ascii.h"

namespace headway {

std::vector<std::string> JobSpec::Argv() const {
  std::vector<std::string> argv = command;
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return "Queued";
    case JobState::kStarting:
      return "Starting";
    case JobState::kRunning:
      return "Running";
    case JobState::kSucceeded:
      return "Succeeded";
    case JobState::kFailed:
      return "Failed";
    case JobState::kStopped:
      return "Stopped";
    case JobState::kPreempted:
      return "Preempted";
  }
  return "Unknown";
}

std::optional<JobState> ParseJobState(std::string_view name) {
  for (JobState s : kAllJobStates) {
    if (EqualsIgnoringCase(JobStateName(s), name)) return s;
  }
  return std::nullopt;
}

std::string_view StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kNone:
      return "";
    case StopReason::kUser:
      return "Stopped";
    case StopReason::kPreempted:
      return "Preempted";
    case StopReason::kTimeLimit:
      return "TimeLimitExceeded";
    case StopReason::kStalled:
      return "Stalled";
    case StopReason::kDiverging:
      return "Diverging";
    case StopReason::kPlateaued:
      return "Plateaued";
    case StopReason::kOverfitting:
      return "Overfitting";
    case StopReason::kGpuIdle:
      return "GpuIdle";
  }
  return "";
}

std::optional<StopReason> ParseStopReason(std::string_view name) {
  for (StopReason r : {StopReason::kNone, StopReason::kUser, StopReason::kPreempted,
                       StopReason::kTimeLimit, StopReason::kStalled, StopReason::kDiverging,
                       StopReason::kPlateaued, StopReason::kOverfitting, StopReason::kGpuIdle}) {
    if (StopReasonName(r) == name) return r;
  }
  return std::nullopt;
}

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed || state == JobState::kStopped;
}

bool IsValidJobName(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  for (char c : name) {
    if (!alnum(c) && c != '-') return false;
  }
  return true;
}

std::string HomeOwner(std::string_view created_by) {
  if (created_by.empty()) return "anonymous";
  if (created_by.starts_with("user/")) created_by.remove_prefix(5);
  std::string owner;
  for (char c : created_by) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    owner += keep ? c : '-';
  }
  // Names are DNS labels already; this keeps anything else out of a path.
  if (owner.empty() || owner.size() > 120) return "anonymous";
  return owner;
}

std::optional<std::int64_t> ParseByteQuantity(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 15) return std::nullopt;
  std::int64_t value = std::stoll(std::string(text.substr(0, digits)));
  static const std::pair<std::string_view, std::int64_t> kUnits[] = {
      {"", 1},           {"k", 1000},          {"M", 1000000},
      {"G", 1000000000}, {"T", 1000000000000}, {"Ki", 1LL << 10},
      {"Mi", 1LL << 20}, {"Gi", 1LL << 30},    {"Ti", 1LL << 40}};
  std::string_view suffix = text.substr(digits);
  for (const auto& [unit, scale] : kUnits) {
    if (suffix != unit) continue;
    if (value > (std::int64_t{1} << 62) / scale) return std::nullopt;
    return value * scale;
  }
  return std::nullopt;
}

std::optional<std::int64_t> ParseMemoryQuantity(std::string_view text) {
  auto bytes = ParseByteQuantity(text);
  if (!bytes || *bytes < (std::int64_t{4} << 20)) return std::nullopt;
  return bytes;
}

std::string FormatMemoryQuantity(std::int64_t bytes) {
  static const std::pair<const char*, int> kUnits[] = {
      {"Ti", 40}, {"Gi", 30}, {"Mi", 20}, {"Ki", 10}};
  for (const auto& [unit, shift] : kUnits) {
    if (bytes > 0 && bytes % (std::int64_t{1} << shift) == 0) {
      return std::to_string(bytes >> shift) + unit;
    }
  }
  return std::to_string(bytes);
}

void ApplySubmitDir(JobSpec& spec, std::string_view submit_dir) {
  if (submit_dir.empty() || submit_dir.front() != '/') return;
  // A job in an image starts where its image or spec says: the submitter's
  // directory is a path on their machine, not in the image.
  if (!spec.image.empty()) return;
  if (spec.working_dir.empty()) {
    spec.working_dir = std::string(submit_dir);
  } else if (spec.working_dir.front() != '/') {
    spec.working_dir =
        (std::filesystem::path(submit_dir) / spec.working_dir).lexically_normal().string();
  }
}

}  // namespace headway
