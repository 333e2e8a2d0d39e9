// `headway server`: wires the store, executor, controller and HTTP API
// together and runs until SIGINT/SIGTERM. Jobs are not stopped when the
// server stops: they run on and are re-adopted by the next start.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/time.h"
#include "server/job_controller.h"

namespace headway {

struct ServerConfig {
  std::string listen_address = "127.0.0.1";
  int port = 8080;       // 0: any free port (printed at start)
  std::string data_dir;  // SQLite file and job run directories
  // Where jobs and everything else are kept (store/store.h OpenStore):
  // empty for the SQLite file in data_dir, or postgresql://...
  std::string store_url;
  // How the other replicas on the same database reach this server (an IP
  // address; the port is the one it listens on). Default: the listen address.
  std::string peer_address;
  std::optional<int> gpus;  // logical GPU count; default: the GPUs NVML (or nvidia-smi) lists
  // Queue mappings, "NAME=EXECUTOR[:key=value,...]", e.g.
  // "gpu=slurm:partition=debug,account=ml,qos=normal". Unmapped queues run locally.
  std::vector<std::string> queues;
  // Team quotas of the local pool, "TEAM=GPUS[:borrow=N,weight=W]".
  std::vector<std::string> quotas;
  // Bounds on members' specs (core/team_policy.h): "[TEAM=]N" for priority,
  // "[TEAM=]DURATION" for termination_grace and checkpoint_warning.
  std::vector<std::string> max_priority;
  std::vector<std::string> max_grace;
  double preemption_grace_s = 30;  // checkpoint warning → SIGTERM for preempted jobs
  // Elastic jobs: the shortest time between two resizes of one job that a
  // job chooses (growth, giving back a useless unit), and the restart cost
  // a job is assumed to pay until one of its resizes is measured.
  double elastic_interval_s = 120;
  double elastic_restart_cost_s = 60;
  bool preemption = true;
  bool backfill = true;
  // See sched::SchedulerOptions::starvation_bound; nullopt: fair share only.
  std::optional<Duration> starvation_bound = sched::SchedulerOptions::kDefaultStarvationBound;
  // fair share (FIFO within a team), progress-aware (least expected work
  // first) or balanced; see sched::Ordering.
  sched::Ordering ordering = sched::kDefaultOrdering;
  std::string self_executable;  // this binary, for the local executor's supervisor
  // Threads for request handlers, which may block (store reads, a request
  // forwarded to the leader); sockets and progress reports are served by
  // as many I/O threads as there are cores (2 to 8).
  int http_threads = 16;
  std::size_t max_body_bytes = 1 << 20;
  int max_connections = 1024;           // beyond this, new connections get 503
  int max_connections_per_client = 64;  // of max_connections, per client address
  int reserved_connections = 64;        // beyond max_connections, for progress reports only
  int header_timeout_s = 10;  // a new connection's first request headers must arrive within this
  int max_streams_per_token = 32;  // open event/log streams per user token (and its sessions)
  int request_timeout_s = 30;      // a request must arrive whole within this (slow clients)
  std::size_t max_series_per_job = 1000;
  std::uint64_t max_points_per_job = 1000000;  // progress rows (steps + metric values) per job
  std::uint64_t max_log_bytes = 1ull << 30;  // per rank (local and Slurm), rotated at half; 0: off
  std::uint64_t max_upload_bytes = 5ull << 30;  // one artifact uploaded through the server
  // Bytes of artifacts a team may hold (--artifact-quota TEAM=BYTES); 0: no limit.
  std::map<std::string, std::uint64_t> artifact_quota_bytes;
  std::uint64_t default_artifact_quota_bytes = 0;
  // Where artifact bytes are kept: "local" (DATA_DIR/artifacts) or "s3".
  std::string artifact_store = "local";
  std::string s3_endpoint;  // e.g. https://s3.eu-west-3.amazonaws.com, http://minio:9000
  std::string s3_bucket;
  std::string s3_region = "us-east-1";
  std::string s3_prefix;                     // before every key
  std::uint64_t s3_part_size = 64ull << 20;  // and the size from which uploads go in parts
  Duration artifact_orphan_age = std::chrono::hours(24);  // objects no version holds go then
  std::chrono::seconds presign_ttl{600};                  // --presign-ttl
  std::string s3_public_endpoint;  // in presigned URLs, when clients reach the store elsewhere
  std::string s3_ca_file;
  double stall_floor_s = 60;       // never call a job Stalled sooner than this
  double health_confirm_s = 30;    // a verdict holds this long before it is announced
  double no_report_grace_s = 300;  // say "no progress reported" after this long
  // Ended jobs without a spec ttl_after_finished are deleted this long after
  // they ended; nullopt (the default): kept until deleted.
  std::optional<Duration> finished_job_ttl;
  std::vector<std::string> webhooks;  // http:// URLs that get every state/health change
  std::string
      webhook_secret_file;       // HMAC key for their signatures; default DATA_DIR/webhook-secret
  double plateau_window = 0.25;  // fraction of total_steps the objective must improve over; 0: off
  // Require user tokens on the API (see api/rest_api.h). The first start
  // writes an admin token to data_dir/admin-token. Off (--no-auth) only on a
  // loopback listen address: RunServer refuses it elsewhere.
  bool auth = true;
  // Host names requests may use besides loopback ones and the listen address
  // (api/request_guard.h).
  std::vector<std::string> allow_hosts;
  // --notebook-domain: empty means localhost on a loopback address and none
  // elsewhere; "none" turns notebooks' own origins off.
  std::string notebook_domain;
  std::vector<std::string> jupyterhub_spawners;       // --jupyterhub-spawner TOKEN_NAME
  int max_queued_jobs_per_team = 1000;                // --max-queued-jobs (members' submits)
  std::size_t max_workflow_nodes_per_team = 100000;   // --max-workflow-nodes
  std::size_t max_workflow_status_bytes = 64u << 20;  // --max-workflow-status-bytes
  // How long a dashboard session (POST /api/v1/sessions) lasts.
  Duration session_ttl = std::chrono::hours(12);
  std::string web_dir;  // serve the dashboard from here instead of the built-in copy
  // Job isolation (see exec/local/sandbox.h and core/run_as.h).
  bool isolate_jobs = true;                     // --isolation=namespace (default) or none
  bool isolate_job_network = true;              // --job-network=isolated (default) or host
  bool job_outbound = false;                    // --job-outbound=public, or none (default)
  std::vector<std::string> job_outbound_allow;  // --job-outbound-allow RANGE
  bool own_job_tmp = true;                      // --job-tmp=own (default) or host
  // Jobs in images (JobSpec::image; exec/oci/image_store.h).
  std::string image_cache = "20Gi";              // --image-cache: bound on DATA_DIR/images
  std::vector<std::string> insecure_registries;  // --insecure-registry HOST[:PORT]
  std::vector<std::string> registry_auth;        // --registry-auth TEAM=FILE ("*=FILE")
  std::string cdi_spec;              // --cdi-spec PATH: the pool's GPUs for CDI consumers
  bool workflow_images_run = false;  // --workflow-images=run (or record, the default)
  std::vector<std::string> run_as;   // "TEAM=USER" (root servers only)
  std::string job_user = "nobody";   // root servers: teams without a mapping
  bool allow_root_jobs = false;
  std::vector<std::string> job_env;  // server variables passed on to jobs
  // Notebook profiles (core/notebook.h); empty: the built-in default.
  std::string notebook_profiles_file;
  Duration notebook_check_interval = std::chrono::seconds(30);
  // GPU utilisation (notebooks' idle reclaim and policies.on_gpu_idle).
  // NVIDIA's management library, read first; nvidia-smi where it is missing.
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string nvidia_smi = "/usr/bin/nvidia-smi";
  Duration gpu_idle_check_interval = std::chrono::seconds(30);
  // Both set: the API is HTTPS only, with this PEM certificate chain and key.
  std::string tls_cert_file;
  std::string tls_key_file;
};

// Where `headway server` keeps the admin token it created.
std::string AdminTokenPath(const std::string& data_dir);

// The default data directory: $HEADWAY_DATA_DIR, else $XDG_DATA_HOME/headway,
// else ~/.local/share/headway.
std::string DefaultDataDir();

// "--queue" values to queue configs; InvalidArgument naming the bad one.
Result<std::map<std::string, QueueConfig>> ParseQueueMappings(
    const std::vector<std::string>& mappings);

// "--quota" values to team quotas; InvalidArgument naming the bad one.
Result<std::map<std::string, sched::QueueQuota>> ParseQuotas(
    const std::vector<std::string>& quotas);

// Returns the process exit code.
int RunServer(const ServerConfig& config);

}  // namespace headway
