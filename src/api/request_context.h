// Who is asking, decided once per request by the REST API's authentication
// and handed to every route explicitly (api/router.h): the caller's user
// token and the secret it sent, or the job whose own token it sent, and the
// rules that follow from it. Route groups kept in files of their own
// (api/argo_routes.h, api/notebook_routes.h) ask it what the caller may see,
// change and create.
//
// A request on a server without authentication has no caller and may do
// everything, as an admin.
#pragma once

#include <cstdint>
#include <string>

#include "core/access.h"
#include "core/job.h"
#include "core/status.h"
#include "core/team_policy.h"

namespace headway::api {

// What a workflow, workflow template or notebook asks of the pool, checked
// by the rule a job's spec is (core/team_policy.h): its team, and the
// highest priority any of its jobs asks for.
struct PoolRequest {
  std::string team;
  std::int64_t priority = 0;
};

// A viewer token with this team sees every team (for monitoring).
inline constexpr const char* kEveryTeam = "*";

class RequestContext {
 public:
  // No caller: authentication is off.
  RequestContext() = default;
  // A user token (or a session made from one) and the secret it was sent as;
  // `policy` bounds what a member may ask for. Both must outlive the context.
  RequestContext(const UserToken& caller, const std::string& secret, const TeamPolicy& policy)
      : caller_(&caller), secret_(&secret), policy_(&policy) {}
  // A job's own token (the artifact and notebook-environment routes).
  explicit RequestContext(const Job& job) : job_(&job) {}

  const UserToken* caller() const { return caller_; }
  const std::string* secret() const { return secret_; }
  const Job* job() const { return job_; }

  // The token's owner: a session acts for the token it was made from.
  std::string Owner() const;

  // Whether the caller may see what belongs to `team`: admins and viewers of
  // every team ("*") see all; other tokens their own team's.
  Status MaySee(const std::string& team) const;
  // The team a token confines reads to; empty when it sees all.
  std::string VisibleTeam() const;
  // Authorisation of a change to something of `team`.
  Status MayChange(const std::string& team) const;
  // A member's job without a team goes to the member's team, and stays
  // within the team's bounds on priority and grace (core/team_policy.h).
  Status Admit(JobSpec& spec) const;
  // The same for a workflow, template or notebook.
  Status Admit(PoolRequest& request) const;
  // What Job::created_by records for what the caller creates: "user/NAME".
  std::string Creator() const;
  Status RequireAdmin() const;

 private:
  const UserToken* caller_ = nullptr;
  const std::string* secret_ = nullptr;
  const TeamPolicy* policy_ = nullptr;
  const Job* job_ = nullptr;
};

}  // namespace headway::api
