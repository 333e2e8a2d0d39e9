// What the REST API needs from the control plane. The server implements it;
// keeping it here lets the API be built and tested without the server.
//
// Thread safety: implementations must allow concurrent calls.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/job.h"
#include "core/status.h"

namespace headway::api {

class JobService {
 public:
  virtual ~JobService() = default;

  // Validates against the executor and the GPU pool, then queues the job.
  // InvalidArgument (naming the field) or Conflict for a taken name.
  virtual Result<Job> Submit(JobSpec spec) = 0;
  virtual Result<Job> Get(std::string_view name) = 0;
  virtual Result<std::vector<Job>> List(const JobFilter& filter) = 0;
  // Asks a job to stop: a queued one stops at once, a running one gets SIGTERM
  // and, after its termination grace, SIGKILL. Conflict if it already ended.
  virtual Result<Job> Stop(std::string_view name, std::string why) = 0;
  virtual Result<std::vector<JobEvent>> Events(std::string_view name, std::int64_t after_id) = 0;
  virtual Result<std::vector<LogFile>> LogFiles(std::string_view name) = 0;
  // Why a queued job is not running yet; empty when it is not queued.
  virtual std::string PendingReason(std::string_view name) = 0;
};

}  // namespace headway::api
