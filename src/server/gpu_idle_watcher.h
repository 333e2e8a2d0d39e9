// Watches the GPUs of running batch jobs whose spec has policies.on_gpu_idle
// (core/gpu_idle.h): every `check_interval` it reads the GPUs' utilisation
// and, once a job's GPUs have all been idle for its gpu_idle_after, records a
// "GpuIdle" event (delivered to webhooks) or stops the job (reason GpuIdle),
// so that its GPUs go back to the pool. Jobs on this machine only: the
// readings are of this machine's GPUs.
//
// What it remembers of a job (when its GPUs were last busy) is not
// persisted: after a server restart an attempt's idle time counts from then,
// which only ever delays the policy.
//
// Thread safety: Tick, RunLoop and Shutdown may be called from any thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "api/job_service.h"
#include "core/gpu_idle.h"
#include "core/time.h"
#include "server/control_loop.h"

namespace headway {

struct GpuIdleWatcherOptions {
  Duration check_interval = std::chrono::seconds(30);
  // Utilisation (percent) of each GPU by id; ids it leaves out have no
  // reading. The server reads NVML, else nvidia-smi (exec/local/nvml.h).
  std::function<std::map<int, double>()> gpu_utilization;
};

class GpuIdleWatcher {
 public:
  GpuIdleWatcher(api::JobService& jobs, const Clock& clock, GpuIdleWatcherOptions options);

  // One reading of every watched running job.
  void Tick();
  // Ticks every check_interval until Shutdown.
  void RunLoop();
  void Shutdown();

 private:
  api::JobService& jobs_;
  const Clock& clock_;
  const GpuIdleWatcherOptions options_;
  std::mutex mu_;  // guards watches_
  // By "job/attempt": a restarted attempt starts a spell of its own.
  std::map<std::string, GpuIdleWatch> watches_;
  ControlLoop loop_;
};

}  // namespace headway
