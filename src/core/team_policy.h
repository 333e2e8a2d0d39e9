// Bounds an admin sets on what a team's members may put in a job spec, in the
// way Slurm's QOS limits bound what users of an account may ask for:
//
//   priority            how high a member may rank a job, and so whose jobs it
//                       may preempt. Without an admin setting, members may not
//                       raise it above 0 (they may lower it).
//   termination_grace   how long a stop (an admin's included) or a preemption
//   checkpoint_warning  waits for the job before SIGKILL / SIGTERM.
//
// Admins set the bounds with the server flags `--max-priority [TEAM=]N` and
// `--max-grace [TEAM=]DURATION` (a bare value is the default for every team).
// Admin tokens are not bounded, and neither is a server run without
// authentication, where every caller acts as the admin.
//
// Plain values, no I/O; safe to share between threads once built.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/access.h"
#include "core/job.h"
#include "core/status.h"
#include "core/time.h"

namespace headway {

struct TeamBounds {
  int max_priority = 0;
  Duration max_grace{};  // bounds termination_grace and checkpoint_warning, each
};

class TeamPolicy {
 public:
  // Members may not raise priority unless an admin allows it (Slurm's model).
  static constexpr int kDefaultMaxPriority = 0;
  // Ten minutes: long enough for a large model to write its checkpoint to
  // shared storage after SIGUSR1/SIGTERM, short enough that an admin's stop
  // or a preemption for a waiting job never hangs for hours. (Slurm's
  // KillWait and Kubernetes' grace period default to 30s, which is also the
  // spec's default termination_grace.)
  static constexpr Duration kDefaultMaxGrace = std::chrono::minutes(10);

  TeamBounds For(std::string_view team) const;

  // One `--max-priority` value, "N" or "TEAM=N"; InvalidArgument naming it
  // when malformed or when the same team (or the default) is set twice.
  Status AddMaxPriority(std::string_view flag);
  // One `--max-grace` value, "DURATION" or "TEAM=DURATION" (e.g. "30m").
  Status AddMaxGrace(std::string_view flag);

 private:
  int default_max_priority_ = kDefaultMaxPriority;
  Duration default_max_grace_ = kDefaultMaxGrace;
  bool priority_default_set_ = false;
  bool grace_default_set_ = false;
  std::map<std::string, int, std::less<>> max_priority_;
  std::map<std::string, Duration, std::less<>> max_grace_;
};

// The policy from the server's flags; InvalidArgument naming the bad value.
Result<TeamPolicy> ParseTeamPolicy(const std::vector<std::string>& max_priority,
                                   const std::vector<std::string>& max_grace);

// Whether `who` may submit `spec` (into spec.team) as far as the team's bounds
// go: always for an admin; for anyone else PermissionDenied for host_network
// (the host's network is an admin's to grant), and InvalidArgument naming the field
// and the bound of the first field above it, e.g. "priority 1000000 is above
// team vision's limit of 0 for members; an admin can raise it with
// --max-priority vision=N".
Status CheckTeamBounds(const UserToken& who, const JobSpec& spec, const TeamPolicy& policy);

}  // namespace headway
