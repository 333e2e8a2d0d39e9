// Runs notebooks (core/notebook.h): each start of a notebook submits a job
// whose command is a small launcher (NotebookCommand) that fetches its
// server's secret environment with the job's own token (a Jupyter token
// made for this start, or JupyterHub's variables), picks a loopback port,
// leaves it in the job's own directory for this controller (read without
// following links), and runs Debian's Jupyter Notebook (or Jupyter Server
// where the classic notebook is not installed) under /notebooks/NAME/ with
// HOME the owner's persistent home, or JupyterHub's single-user server.
//
// The loop watches every running notebook: once its server answers it is
// ready (a "NotebookReady" event gives the time from queueing), and every
// `check_interval` its kernels (Jupyter's /api/kernels: last_activity and
// execution_state) and its GPUs' utilisation decide, by DecideIdle, whether
// to warn its owner (a "NotebookIdle" event, delivered to webhooks) or cull
// it (its job is stopped, so its GPUs go back to the pool; the home stays).
//
// Thread safety: all public methods are thread-safe.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "api/job_service.h"
#include "api/notebook_service.h"
#include "core/notebook.h"
#include "core/time.h"
#include "server/control_loop.h"
#include "store/store.h"

namespace headway {

struct NotebookControllerOptions {
  std::vector<NotebookProfile> profiles = {NotebookProfile{}};
  std::string data_dir;  // the server's: jobs' own directories are under it
  // How often a ready notebook's kernels and GPUs are looked at.
  Duration check_interval = std::chrono::seconds(30);
  std::string python = "/usr/bin/python3";
  // Utilisation (percent) of each GPU by id; GPUs it leaves out have no
  // signal (judged by their kernels alone). The server reads NVML, else
  // nvidia-smi (exec/local/nvml.h); unset: no GPU signal.
  std::function<std::map<int, double>()> gpu_utilization;
};

// The job command of a notebook's server (see the file comment). Pure.
// `every_interface`: on a cluster node the server listens on every
// interface, for the proxy to reach it; else on loopback.
std::vector<std::string> NotebookCommand(const std::string& python, const std::string& notebook,
                                         bool jupyterhub, bool every_interface = false);

class NotebookController final : public api::NotebookService {
 public:
  NotebookController(Store& store, api::JobService& jobs, const Clock& clock,
                     NotebookControllerOptions options);

  // One pass over the running notebooks (see the file comment).
  void Tick();
  // Runs Tick until Shutdown(), every `period`.
  void RunLoop(Duration period);
  void Shutdown();

  Result<api::NotebookView> Start(const api::NotebookStartRequest& request,
                                  const std::string& created_by) override;
  Result<api::NotebookView> Get(std::string_view name) override;
  Result<std::vector<api::NotebookView>> List(std::string_view team) override;
  Result<api::NotebookView> Stop(std::string_view name) override;
  Status Delete(std::string_view name) override;
  Result<api::NotebookEndpoint> Endpoint(std::string_view name) override;
  std::string OwnCustomScript(std::string_view name) override;
  void Opened(std::string_view name) override;
  Result<std::map<std::string, std::string>> ServerEnv(std::string_view name,
                                                       std::string_view job) override;
  std::vector<NotebookProfile> Profiles() override { return options_.profiles; }

 private:
  // What the loop knows of a running notebook's server (not persisted: a
  // restarted server finds it again from the job's directory).
  struct Live {
    std::string job;  // the job this is about
    bool ready = false;
    api::NotebookEndpoint endpoint;
    NotebookActivity activity;
    std::optional<Time> last_check;
    std::optional<Time> idle_since;
    std::optional<Time> cull_at;
  };

  const NotebookProfile* ProfileNamed(const std::string& name) const;
  api::NotebookView View(const NotebookRecord& record);
  // Reads the launcher's file and asks the server for its kernels.
  Status Probe(const NotebookRecord& record, const Job& job, Live& live);
  void CheckIdle(NotebookRecord& record, const Job& job, Live& live, Time now);

  Store& store_;
  api::JobService& jobs_;
  const Clock& clock_;
  const NotebookControllerOptions options_;
  std::mutex mu_;  // guards live_, the records' writes and the loop's state
  std::map<std::string, Live> live_;
  ControlLoop loop_;
};

}  // namespace headway
