// Executors run job attempts somewhere (this machine, Slurm, Kubernetes) behind
// one small interface. The server persists the opaque handle Launch returns
// and hands it back to Poll/Signal, also after a restart, so an executor must
// be able to re-adopt a running attempt from its handle alone.
//
// Thread safety: implementations must allow concurrent calls.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/exec_status.h"
#include "core/job.h"
#include "core/status.h"
#include "core/time.h"

namespace headway {

struct LaunchRequest {
  JobSpec spec;
  int attempt = 0;                                  // 0 for the first run, +1 per restart
  std::vector<int> gpu_ids;                         // GPUs granted by the scheduler, gpus() of them
  std::map<std::string, std::string> platform_env;  // HEADWAY_URL, HEADWAY_JOB, HEADWAY_TOKEN
  std::string run_dir;                              // an empty directory the attempt may own
  // From the job's queue mapping, e.g. partition, account, qos for Slurm.
  std::map<std::string, std::string> queue_options;
  // The Unix account the attempt's processes run as; empty: the server's own.
  std::string run_as;
  // The job's own directories (checkpoints, a scratch home): made the
  // account's, and the only part of the server's data directory it sees.
  std::vector<std::string> job_dirs;
  // Files the job reads (the Kubeflow token file): made the account's, read-only.
  std::vector<std::string> job_files;
  // Files the job reads as they are, read-only (the server's CA certificate).
  std::vector<std::string> shared_files;
  // HOME for an account without a usable home of its own.
  std::string job_home;
  // Directories the job must never see (the server's data directory).
  std::vector<std::string> private_dirs;
};

struct RankLog {
  int rank = 0;
  std::string path;  // stdout and stderr of that rank, interleaved as written
};

struct Launched {
  std::string handle;
  std::string description;  // for people: "pid 4242", "Slurm job 17"
  std::vector<RankLog> logs;
  std::vector<std::string> warnings;  // e.g. a limit the machine cannot enforce
};

// A command to run inside a running attempt (`headway exec`, `headway ssh`).
struct ExecRequest {
  int rank = 0;
  std::vector<std::string> argv;  // empty: the account's login shell
  bool tty = false;               // on a terminal (a pty) instead of pipes
  int columns = 80, rows = 24;    // the terminal's first size
  // Set: instead of argv, an SSH server on the streams (exec/ssh_server.h),
  // with the host key in this file, which only the server may read.
  std::string ssh_host_key_file;
};

// The running command: the caller owns the descriptors and must reap `pid`.
struct ExecProcess {
  pid_t pid = -1;
  int input = -1;   // its stdin (with a terminal: the pty's master, also its output)
  int output = -1;  // its stdout (with a terminal: a second descriptor of the master)
  int error = -1;   // its stderr; -1 with a terminal
  bool tty = false;
  // How long the command may take to end after a SIGHUP before it is
  // killed: a cluster's client (srun) needs the time to end what it started.
  Duration stop_grace{0};
  // Run once when its client hung up before the command ended: ends what may
  // outlive a killed cluster client (a Slurm step whose srun died before it
  // passed the hang-up on). Blocks for at most a few seconds. Empty: nothing.
  std::function<void()> after_hang_up;
};

class Executor {
 public:
  virtual ~Executor() = default;

  virtual std::string_view Name() const = 0;
  // Whether this executor can ever run the spec (e.g. node count); checked at submit.
  virtual Status Admit(const JobSpec& spec) const = 0;
  virtual Result<Launched> Launch(const LaunchRequest& request) = 0;
  // The attempt `request` already started, if Launch got that far for it
  // before the server stopped without saving the handle (a crash mid-launch):
  // recovery adopts it instead of launching the attempt a second time.
  // nullopt: nothing of it started. An error: the executor cannot tell now
  // (e.g. slurmctld does not answer); the caller must ask again later and
  // neither adopt nor relaunch meanwhile.
  virtual Result<std::optional<Launched>> FindLaunched(const LaunchRequest& request) {
    (void)request;
    return std::optional<Launched>();
  }
  virtual ExecStatus Poll(const std::string& handle) = 0;
  // The address of the host rank 0 of a running attempt is on, for the
  // server to reach a port the job serves (pull-mode progress).
  virtual Result<std::string> PrimaryHost(const std::string& handle) {
    (void)handle;
    return std::string("127.0.0.1");
  }
  // A socket connected to `port` where the running attempt `handle` serves
  // it: inside the job's own network where it has one (the local executor),
  // else on PrimaryHost. The caller owns the descriptor.
  virtual Result<int> ConnectToJob(const std::string& handle, int port);
  // Starts a command inside the running attempt `handle` (its namespaces,
  // cgroup, account and environment). Unavailable where the executor cannot.
  virtual Result<ExecProcess> Exec(const std::string& handle, const ExecRequest& request) {
    (void)handle;
    (void)request;
    return Unavailable("this executor cannot run commands inside its jobs");
  }
  // An elastic job's new size (JobSpec::elastic): `unit_gpus[i]` are the GPUs
  // of its rank group (or node) i, one entry per unit of the new size. Units
  // above it are stopped, units below it started; the job's elastic agents
  // restart its workers at the new size. Returns once the request is handed
  // over, not once it took effect.
  virtual Status Resize(const std::string& handle, const std::vector<std::vector<int>>& unit_gpus) {
    (void)handle;
    (void)unit_gpus;
    return Unavailable("this executor cannot resize a running job");
  }
  // Delivers `signal` to every process of the attempt. Ok if it already ended.
  virtual Status Signal(const std::string& handle, int signal) = 0;
  // True when the backend itself ends attempts at spec.time_limit (and sends
  // the checkpoint warning); otherwise the server does both.
  virtual bool EnforcesTimeLimit() const { return false; }
  // How often Poll may be called per attempt; a cluster engine's CLI is not free.
  virtual Duration PollInterval() const { return Duration(0); }
};

class CommandRunner;

struct ExecutorOptions {
  std::string self_executable;      // the headway binary, for helper processes
  CommandRunner* runner = nullptr;  // external commands (sbatch, ...); must outlive executors
  // Local jobs run in namespaces that hide the server's files (exec/local/sandbox.h).
  bool isolate = true;
  // ...and, with `isolate`, in a network namespace of their own whose only
  // way out is the control plane (exec/local/job_network.h), unless their
  // spec asks for the host's network (JobSpec::host_network).
  bool isolate_network = true;
  // ...and, in a network of its own, whether a job reaches the internet
  // (public addresses only, through an egress proxy the job's HTTPS_PROXY
  // names; exec/local/egress_proxy.h), and the private ranges the site opens
  // to it ("10.0.5.0/24"; CheckOutboundRanges).
  bool outbound = false;
  std::vector<std::string> outbound_allow;
  // ...and, with `isolate`, what a job writes in /tmp is its own: it sees
  // the host's /tmp through an overlay (sandbox.h, SandboxPlan::tmp_layer).
  bool own_tmp = true;
  // Whether a job may run as root (uid 0); refused at launch otherwise.
  bool allow_root_jobs = false;
  // Variables of the server's environment passed on to jobs besides the
  // basics (PATH, LANG, LC_*, TZ); nothing else of it reaches them.
  std::vector<std::string> job_env;
  // Bound on each rank's log where the executor writes logs itself (local):
  // past half of it the log is rotated to PATH.1, replacing the older one,
  // so a rank keeps at most this many bytes, the newest. 0: unbounded.
  std::uint64_t max_log_bytes = 0;
  // Start-up notes (what isolation and limits this machine supports).
  std::function<void(const std::string&)> log;
  // The device node minor (/dev/nvidiaMINOR) of each GPU of the pool by
  // index: an isolated local job sees only its own GPUs' nodes; the others
  // are masked in its sandbox.
  std::map<int, int> gpu_device_minors;
  // Jobs in images (JobSpec::image, exec/oci/image_store.h): the image
  // cache (empty: images are refused), its bound in bytes (0: none),
  // registries reached without TLS ("127.0.0.1:5000"), and a Docker
  // config.json of registry credentials per team ("*": any other team).
  std::string image_dir;
  std::uint64_t image_cache_bytes = 0;
  std::vector<std::string> insecure_registries;
  std::map<std::string, std::string> registry_auth;
  // Where the pool's CDI spec (exec/oci/cdi.h) is written for other CDI
  // consumers (podman --device nvidia.com/gpu=N); empty: not written.
  std::string cdi_spec_path;
};

// A TCP connection to host:port, blocking, given up after a few seconds.
Result<int> ConnectTcp(const std::string& host, int port);

// The registry: the one place that lists executors. Unknown name: NotFound.
Result<std::unique_ptr<Executor>> MakeExecutor(std::string_view name,
                                               const ExecutorOptions& options);
std::vector<std::string_view> ExecutorNames();

}  // namespace headway
