#include "api/request_context.h"

#include <algorithm>
#include <limits>

namespace headway::api {

std::string RequestContext::Owner() const {
  if (!caller_) return {};
  return caller_->parent.empty() ? caller_->name : caller_->parent;
}

Status RequestContext::MaySee(const std::string& team) const {
  if (!caller_ || caller_->role == Role::kAdmin || caller_->team == kEveryTeam ||
      caller_->team == team) {
    return Status::Ok();
  }
  return PermissionDenied("token '" + caller_->name + "' sees team '" + caller_->team +
                          "' only, not '" + team + "'");
}

std::string RequestContext::VisibleTeam() const {
  if (!caller_ || MaySee("").ok()) return {};
  return caller_->team;
}

Status RequestContext::MayChange(const std::string& team) const {
  if (!caller_ || MayModify(*caller_, team)) return Status::Ok();
  return PermissionDenied("token '" + caller_->name + "' (" + std::string(RoleName(caller_->role)) +
                          (caller_->team.empty() ? "" : " of team " + caller_->team) +
                          ") may not change team '" + team + "'");
}

Status RequestContext::Admit(JobSpec& spec) const {
  if (caller_ && caller_->role == Role::kMember && spec.team == JobSpec().team) {
    spec.team = caller_->team;
  }
  HEADWAY_RETURN_IF_ERROR(MayChange(spec.team));
  if (!caller_ || !policy_) return Status::Ok();
  return CheckTeamBounds(*caller_, spec, *policy_);
}

Status RequestContext::Admit(PoolRequest& request) const {
  JobSpec spec;
  spec.team = request.team;
  spec.priority = static_cast<int>(std::clamp<std::int64_t>(
      request.priority, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
  HEADWAY_RETURN_IF_ERROR(Admit(spec));
  request.team = spec.team;
  return Status::Ok();
}

std::string RequestContext::Creator() const {
  if (!caller_) return {};
  return "user/" + Owner();
}

Status RequestContext::RequireAdmin() const {
  if (!caller_ || caller_->role == Role::kAdmin) return Status::Ok();
  return PermissionDenied("managing tokens needs an admin token");
}

}  // namespace headway::api
