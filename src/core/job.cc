#include "core/job.h"

#include <cctype>
#include <filesystem>

namespace headway {

std::vector<std::string> JobSpec::Argv() const {
  std::vector<std::string> argv = command;
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kQueued: return "Queued";
    case JobState::kStarting: return "Starting";
    case JobState::kRunning: return "Running";
    case JobState::kSucceeded: return "Succeeded";
    case JobState::kFailed: return "Failed";
    case JobState::kStopped: return "Stopped";
    case JobState::kPreempted: return "Preempted";
  }
  return "Unknown";
}

std::optional<JobState> ParseJobState(std::string_view name) {
  for (JobState s : {JobState::kQueued, JobState::kStarting, JobState::kRunning,
                     JobState::kSucceeded, JobState::kFailed, JobState::kStopped,
                     JobState::kPreempted}) {
    std::string_view canonical = JobStateName(s);
    if (canonical.size() != name.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < name.size(); ++i) {
      same = same && std::tolower(static_cast<unsigned char>(canonical[i])) ==
                         std::tolower(static_cast<unsigned char>(name[i]));
    }
    if (same) return s;
  }
  return std::nullopt;
}

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kStopped;
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

void ApplySubmitDir(JobSpec& spec, std::string_view submit_dir) {
  if (submit_dir.empty() || submit_dir.front() != '/') return;
  if (spec.working_dir.empty()) {
    spec.working_dir = std::string(submit_dir);
  } else if (spec.working_dir.front() != '/') {
    spec.working_dir =
        (std::filesystem::path(submit_dir) / spec.working_dir).lexically_normal().string();
  }
}

}  // namespace headway
