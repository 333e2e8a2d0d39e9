// Who is asking, as the REST API decided it: what route groups kept in
// files of their own (api/argo_routes.h, api/notebook_routes.h) need to
// check a caller's team and name what it creates.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"

namespace headway::api {

// What a workflow, workflow template or notebook asks of the pool, checked
// by the rule a job's spec is (core/team_policy.h): its team, and the
// highest priority any of its jobs asks for.
struct PoolRequest {
  std::string team;
  std::int64_t priority = 0;
};

struct CallerAccess {
  std::function<Status(const std::string& team)> may_see;
  std::function<Status(const std::string& team)> may_change;
  std::function<std::string()> visible_team;  // "" when the caller sees every team
  std::function<std::string()> creator;       // Job::created_by style: "user/NAME"
  // Settles the team of something the caller creates: a member's without a
  // team is the member's; then checks the caller may create there, within
  // the team's bounds for members (priority).
  std::function<Status(PoolRequest& request)> admit;
};

}  // namespace headway::api
