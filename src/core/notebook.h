// Notebooks: a Jupyter server run for one user as an ordinary job on the
// pool (queue, quota, GPUs, isolation), with a persistent home, reached
// through the server's authenticated proxy, and reclaimed when both its
// kernels and its GPUs have been idle for its profile's timeout.
//
// Pure: the records, the admin's profiles and the idle rule. The notebook
// controller (server/notebook_controller.h) does the I/O.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "core/time.h"

namespace headway {

// What an admin offers (`--notebook-profiles FILE`): the resources and
// limits of a notebook, and when an idle one is reclaimed.
struct NotebookProfile {
  std::string name = "default";
  std::string description;
  int gpus = 0;                   // the most a notebook of it may ask for; also its default
  double cpus = 0;                // 0: no limit
  std::int64_t memory_bytes = 0;  // 0: no limit
  std::optional<Duration> time_limit;
  std::string queue;  // empty: the team's default queue
  std::map<std::string, std::string> env;
  // Kernels and GPUs idle this long: culled. 0: never.
  Duration idle_timeout = std::chrono::hours(1);
  // The owner is warned this long before (an event, hence webhooks).
  Duration cull_warning = std::chrono::minutes(10);
  // A GPU used less than this (percent) counts as idle.
  double gpu_idle_below_percent = 5;
};

// The profiles file:
//   profiles:
//     - name: small
//       description: "1 GPU, 8 CPUs"
//       gpus: 1
//       cpus: 8
//       memory: 32Gi
//       time_limit: 12h
//       queue: interactive
//       env: {HF_HOME: /data/hf}
//       idle_timeout: 1h
//       cull_warning: 10m
//       gpu_idle_below_percent: 5
// Names are unique DNS labels; InvalidArgument naming the field otherwise.
// An empty document gives the one built-in "default" profile.
Result<std::vector<NotebookProfile>> ParseNotebookProfiles(std::string_view yaml);

// Running: its server is queued, starting or up. Stopped: by its owner.
// Culled: reclaimed while idle. Failed: the server ended on its own.
// Every state but Running can be started again, with the same home.
enum class NotebookState { kRunning, kStopped, kCulled, kFailed };
std::string_view NotebookStateName(NotebookState state);
std::optional<NotebookState> ParseNotebookState(std::string_view name);

struct NotebookRecord {
  std::string name;  // a job name's rules; unique on the server
  std::string team;
  std::string created_by;  // Job::created_by of its jobs; its home is HomeOwner(created_by)'s
  std::string profile;
  int gpus = 0;
  NotebookState state = NotebookState::kRunning;
  std::string job;      // the current (or last) server's job
  int starts = 0;       // jobs made so far; the next is named after it
  std::string message;  // why it is not running, e.g. "idle for 1h: culled"
  Time created_at{};
  // When the owner was last warned of a cull; a warning counts only for the
  // idle spell it was given in.
  std::optional<Time> cull_warned_at;
  // Spawned by JupyterHub (HeadwaySpawner) for this hub user: its server is
  // JupyterHub's single-user server, reached through the hub's proxy with the
  // hub's login, not through Headway's; empty for Headway's own notebooks.
  std::string hub_user;
  // The secret environment of its current server, as a JSON object: the
  // Jupyter token Headway's proxy sends (JUPYTER_TOKEN, new at each start),
  // or what JupyterHub gives its single-user server (its API token among
  // it). Never shown by the API; the job fetches it with its own token.
  std::string server_env_json;
};

// The job name of a notebook's `start`-th server (1-based).
std::string NotebookJobName(std::string_view notebook, int start);

// What the controller last saw of a running notebook.
struct NotebookActivity {
  Time started_at{};  // when its server came up
  // The latest activity of any of its kernels (Jupyter's kernel
  // last_activity); nullopt: no kernel yet.
  std::optional<Time> kernel_activity;
  bool kernel_busy = false;  // a kernel is executing
  // The last time one of its GPUs was used above the profile's threshold;
  // nullopt: never seen busy (or no GPU, or no utilisation signal).
  std::optional<Time> gpu_busy_at;
  bool gpu_busy = false;  // busy at the latest reading
  // The last time its owner opened it through the server.
  std::optional<Time> opened_at;
};

struct IdleVerdict {
  enum class Action { kNone, kWarn, kCull };
  Action action = Action::kNone;
  Time idle_since{};
  Duration idle_for{0};
};

// The idle rule: idle since the latest of its start, kernel activity, GPU
// use and opening; while a kernel or GPU is busy it is not idle. Warned
// once `idle_timeout - cull_warning` has passed in this idle spell; culled
// once `idle_timeout` has passed and a warning of this spell is at least
// `cull_warning` old (a warning given late, after a server restart, still
// gives the owner the whole warning).
IdleVerdict DecideIdle(const NotebookActivity& activity, std::optional<Time> warned_at,
                       const NotebookProfile& profile, Time now);

}  // namespace headway
