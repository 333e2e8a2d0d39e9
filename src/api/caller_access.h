// Who is asking, as the REST API decided it: what route groups kept in
// files of their own (api/argo_routes.h, api/notebook_routes.h) need to
// check a caller's team and name what it creates.
#pragma once

#include <functional>
#include <string>

#include "core/status.h"

namespace headway::api {

struct CallerAccess {
  std::function<Status(const std::string& team)> may_see;
  std::function<Status(const std::string& team)> may_change;
  std::function<std::string()> visible_team;  // "" when the caller sees every team
  std::function<std::string()> creator;       // Job::created_by style: "user/NAME"
  // Settles the team of something the caller creates: a member's without a
  // team is the member's; then checks the caller may create there.
  std::function<Status(std::string& team)> admit;
};

}  // namespace headway::api
