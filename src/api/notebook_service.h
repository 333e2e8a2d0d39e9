// What the REST API needs for notebooks (core/notebook.h); the notebook
// controller implements it. The API checks who asks; the service assumes
// the caller may.
//
// Thread safety: implementations must allow concurrent calls.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/job_service.h"
#include "core/job.h"
#include "core/notebook.h"
#include "core/status.h"

namespace headway::api {

struct NotebookView {
  NotebookRecord record;
  std::optional<JobState> job_state;  // of its current server's job
  std::string pending_reason;         // why that job waits, while it is queued
  QueuePlace place;                   // and where it stands in line (api/job_service.h)
  bool ready = false;                 // its server answers: the proxy reaches it
  // A JupyterHub notebook's server, once ready ("http://127.0.0.1:41234"):
  // where the hub's proxy sends its user.
  std::string server_url;
  std::optional<Time> idle_since;  // while running: idle since then
  std::optional<Time> cull_at;     // while idle: when it is culled unless used
};

struct NotebookStartRequest {
  std::string name;
  std::string team;
  std::string profile;      // empty: the first profile
  std::optional<int> gpus;  // unset: the profile's
  // JupyterHub's spawner: the hub user (its home is that user's) and the
  // environment of the single-user server (see NotebookRecord).
  std::string hub_user;
  std::map<std::string, std::string> server_env;
};

// Where the proxy sends a notebook's requests.
struct NotebookEndpoint {
  std::string host;
  int port = 0;
  // A connection to the notebook's server (inside its job's network); unset:
  // connect to host:port.
  std::function<Result<int>()> connect;
  std::string token;  // the server's Jupyter token, sent as "Authorization: token T"
  std::string team;
};

class NotebookService {
 public:
  virtual ~NotebookService() = default;
  // Creates the notebook and queues its server, or starts an existing one
  // that is not running again (same home; the profile and GPUs may change).
  // Conflict when it is running; InvalidArgument for an unknown profile or
  // more GPUs than the profile allows; a running one of another team is
  // Conflict too (names are unique on the server).
  virtual Result<NotebookView> Start(const NotebookStartRequest& request,
                                     const std::string& created_by) = 0;
  virtual Result<NotebookView> Get(std::string_view name) = 0;
  // By name; of one team when `team` is not empty.
  virtual Result<std::vector<NotebookView>> List(std::string_view team) = 0;
  // Stops its server (the home stays). Conflict when it is not running.
  virtual Result<NotebookView> Stop(std::string_view name) = 0;
  // Stops it if running and removes it; its home and jobs stay.
  virtual Status Delete(std::string_view name) = 0;
  // Unavailable while its server is not up yet (with why).
  virtual Result<NotebookEndpoint> Endpoint(std::string_view name) = 0;
  // Someone opened it through the server: activity for the idle rule.
  virtual void Opened(std::string_view name) = 0;
  // The user's own custom/custom.js as the notebook's server answers it;
  // empty when it has none or does not answer within a few seconds.
  virtual std::string OwnCustomScript(std::string_view name) = 0;
  // The secret environment of a notebook's server (its Jupyter token, or
  // JupyterHub's variables), for its current job alone: PermissionDenied for
  // any other job.
  virtual Result<std::map<std::string, std::string>> ServerEnv(std::string_view name,
                                                               std::string_view job) = 0;
  virtual std::vector<NotebookProfile> Profiles() = 0;
};

}  // namespace headway::api
