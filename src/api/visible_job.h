// A job as the routes hand it to a caller: only when the caller may see its
// team (api/request_context.h).
#pragma once

#include <string>

#include "api/job_service.h"
#include "api/request_context.h"

namespace headway::api {

// The job `name` if the caller may see it.
inline Result<Job> VisibleJob(JobService& jobs, const RequestContext& ctx,
                              const std::string& name) {
  auto job = jobs.Get(name);
  if (!job.ok()) return job.status();
  HEADWAY_RETURN_IF_ERROR(ctx.MaySee(job->spec.team));
  return job;
}

// VisibleJob() for routes that need no job of their own: a caller who sees
// every team costs no read (the service reports an unknown job itself).
inline Status CheckJobVisible(JobService& jobs, const RequestContext& ctx,
                              const std::string& name) {
  if (ctx.VisibleTeam().empty()) return Status::Ok();
  return VisibleJob(jobs, ctx, name).status();
}

}  // namespace headway::api
