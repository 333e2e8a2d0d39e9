// `headway`: the server and its command-line client in one binary.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstring>
#include <iostream>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/version.h"
#include "exec/local/local_executor.h"
#include "exec/ssh_server.h"
#include "server/server.h"
#include "server/store_migration.h"

namespace {

std::string SelfExecutable(const char* argv0) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) return std::string(buf, static_cast<std::size_t>(n));
  return argv0;
}

}  // namespace

int main(int argc, char** argv) {
  // The local executor's per-job supervisor; not for people to call.
  if (argc == 3 && std::strcmp(argv[1], "shim") == 0) return headway::RunLocalShim(argv[2]);
  // A command inside a running local job (`headway exec`); not for people to call.
  if (argc >= 5 && std::strcmp(argv[1], "exec-helper") == 0 && std::strcmp(argv[4], "--") == 0) {
    int code = headway::RunExecHelper(argv[2], std::atoi(argv[3]),
                                      std::vector<std::string>(argv + 5, argv + argc));
    // No exit-time work: this process joined a job's PID namespace for its
    // children, where a sanitizer's leak check (which forks a tracer) hangs.
    std::fflush(nullptr);
    ::_exit(code);
  }
  // An SSH session inside a Slurm job's step (`headway ssh --stdio`); not for people to call.
  if (argc == 2 && std::strcmp(argv[1], "ssh-serve") == 0) {
    int code = headway::ServeSshFromEnvironment();
    std::fflush(nullptr);
    ::_exit(code);
  }
  if (argc == 6 && std::strcmp(argv[1], "exec-helper") == 0 && std::strcmp(argv[4], "--ssh") == 0) {
    int code = headway::RunExecHelper(argv[2], std::atoi(argv[3]), {}, argv[5]);
    std::fflush(nullptr);
    ::_exit(code);
  }

  CLI::App app{"Headway: run training jobs on a shared GPU pool and see whether they make headway"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("headway ") + headway::Version());
  app.formatter(headway::cli::CleanHelpFormatter());
  int exit_code = 0;

  headway::ServerConfig server_config;
  server_config.data_dir = headway::DefaultDataDir();
  std::string listen = "127.0.0.1:8080";
  int gpus = -1;
  auto* server = app.add_subcommand("server",
                                    "Run the control plane (SQLite by default, or PostgreSQL or "
                                    "MariaDB; local executor or Slurm)");
  server->add_option("--listen", listen, "address:port to listen on (port 0 picks one)")
      ->capture_default_str();
  server->add_option("--data-dir", server_config.data_dir, "database and job files")
      ->capture_default_str();
  server->add_option("--store", server_config.store_url,
                     "the database: sqlite:///PATH (default: DATA_DIR/headway.db) or "
                     "postgresql://USER@HOST:PORT/DB (a password from PGPASSFILE or "
                     "?passfile=..., never on the command line) or mysql://USER@HOST:PORT/DB; "
                     "several servers on one database share the work: one leads, the others "
                     "pass requests on to it and take over if it stops");
  server->add_option("--peer-address", server_config.peer_address,
                     "with a shared --store: the IP address other servers reach this one at "
                     "(default: --listen's)");
  server
      ->add_option("--gpus", gpus,
                   "number of logical GPUs to schedule (default: the GPUs nvidia-smi lists)")
      ->check(CLI::Range(0, 4096));
  server
      ->add_option("--stall-floor", server_config.stall_floor_s,
                   "seconds without a new step before a job can be Stalled")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  server
      ->add_option("--no-report-grace", server_config.no_report_grace_s,
                   "seconds after start before a silent job is flagged")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  server
      ->add_option("--health-confirm", server_config.health_confirm_s,
                   "seconds a health verdict must hold (and 2 reports) before it is announced "
                   "and acted on; leaving one takes twice as long (and 5 reports)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  server
      ->add_option("--plateau-window", server_config.plateau_window,
                   "fraction of a job's total steps over which its objective must improve "
                   "(0 turns plateau detection off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  server->add_option("--queue", server_config.queues,
                     "route a queue to an executor: NAME=slurm[:partition=P,account=A,qos=Q] "
                     "(repeatable; other queues run on this machine)");
  server->add_option("--quota", server_config.quotas,
                     "a team's share of the local GPUs: TEAM=GPUS[:borrow=N,weight=W] (repeatable; "
                     "teams without one are bounded by the pool)");
  server->add_option("--max-priority", server_config.max_priority,
                     "highest priority a team's members may give a job: [TEAM=]N (repeatable; "
                     "a bare N is the default for every team, else 0; admins are not bounded)");
  server->add_option("--max-grace", server_config.max_grace,
                     "longest termination_grace and checkpoint_warning a team's members may set: "
                     "[TEAM=]DURATION (repeatable; a bare one is the default, else 10m)");
  server
      ->add_option("--preemption-grace", server_config.preemption_grace_s,
                   "seconds between a preempted job's checkpoint signal (SIGUSR1) and SIGTERM, "
                   "unless its spec sets checkpoint_warning")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  server
      ->add_option("--elastic-interval", server_config.elastic_interval_s,
                   "seconds an elastic job runs at a size before it grows again or gives back a "
                   "GPU that does not help (at least 4 of its measured restarts; shrinking for "
                   "a waiting job is never held back)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  server
      ->add_option("--elastic-restart-cost", server_config.elastic_restart_cost_s,
                   "seconds a resize is assumed to cost an elastic job until one is measured")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  server->add_flag("!--no-preemption", server_config.preemption,
                   "never preempt running jobs for waiting ones");
  server->add_flag("!--no-backfill", server_config.backfill,
                   "start jobs strictly in order (no backfill)");
  std::string finished_job_ttl = "off";
  server
      ->add_option("--finished-job-ttl", finished_job_ttl,
                   "delete ended jobs (with their progress, events, logs and files) this long "
                   "after they ended, unless their spec sets ttl_after_finished; e.g. 7d, or off")
      ->capture_default_str();
  std::string scheduling_policy{headway::sched::OrderingName(headway::sched::kDefaultOrdering)};
  server
      ->add_option("--scheduling-policy", scheduling_policy,
                   "fair-share (the default): FIFO within a team, the team using least of its "
                   "share first; progress-aware: least expected work first (learned run times, "
                   "live ETAs), teams within their quota first, jobs whose spec sets "
                   "checkpoint_warning may be preempted for much shorter work, and a job starves "
                   "after the starvation bound and 4x its expected run; balanced: "
                   "progress-aware's order, but a job starves once its time since submission "
                   "reaches 4x its expected run times the pool's load (GPUs running and asked "
                   "for / GPUs), a team at its quota may preempt its own much longer "
                   "checkpointable work, and its smaller jobs may pass one over the quota until "
                   "that starves (bench/README.md compares them)")
      ->check(CLI::IsMember({"fair-share", "progress-aware", "balanced"}))
      ->capture_default_str();
  std::string starvation_bound;
  server->add_option("--starvation-bound", starvation_bound,
                     "a job waiting this long goes ahead of the policy's order, oldest first, and "
                     "holds the backfill reservation until it starts (e.g. 30m, 2h; 0 = plain FIFO "
                     "across teams; off = never); default 30m, or 8h with progress-aware, where a "
                     "job must also have waited 4x its expected run; balanced applies it only to "
                     "jobs of unknown work");
  server->add_option("--webhook", server_config.webhooks,
                     "http:// URL to POST every job state and health change to (repeatable)");
  server->add_option("--webhook-secret-file", server_config.webhook_secret_file,
                     "file holding the key of the webhooks' X-Headway-Signature (HMAC-SHA-256 of "
                     "the body; default DATA_DIR/webhook-secret, made at first start)");
  server
      ->add_option("--max-connections", server_config.max_connections,
                   "open connections beyond which new ones are refused with 503")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  server
      ->add_option("--max-connections-per-client", server_config.max_connections_per_client,
                   "connections one client address (loopback too) may hold of --max-connections; "
                   "its further ones may only send progress reports")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  server
      ->add_option("--report-connections", server_config.reserved_connections,
                   "connections kept beyond --max-connections for the jobs' progress reports, so "
                   "a flood of other clients cannot make a healthy job look stalled")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  server
      ->add_option("--header-timeout", server_config.header_timeout_s,
                   "seconds a connection has to send a request's headers, after connecting or "
                   "after its previous answer (idle sockets are closed after this)")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  server
      ->add_option("--max-streams-per-token", server_config.max_streams_per_token,
                   "event and log streams one user token (with its dashboard sessions) may hold "
                   "open at once; more get 429")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  server
      ->add_option("--request-timeout", server_config.request_timeout_s,
                   "seconds a client has to send a whole request (slow clients are cut off)")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  server
      ->add_option("--max-series-per-job", server_config.max_series_per_job,
                   "distinct metric names one job may report")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  server
      ->add_option("--max-points-per-job", server_config.max_points_per_job,
                   "progress points one job may store (one per step reported plus one per "
                   "metric value): HTTP and Kubeflow reports past it get 413, stdout markers "
                   "are dropped, and the job gets one Warning event")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  server
      ->add_option("--max-log-bytes", server_config.max_log_bytes,
                   "bytes of output kept per rank of a job: past half of it the rank's "
                   "log is rotated to rank-N.log.1 (replacing the older one), so the newest "
                   "output is kept, and the job gets a Warning event (0: unbounded)")
      ->capture_default_str()
      ->check([](const std::string& value) -> std::string {
        std::uint64_t n = 0;
        try {
          n = std::stoull(value);
        } catch (...) {
          return "--max-log-bytes must be a number of bytes, got '" + value + "'";
        }
        if (n != 0 && n < 4096) return "--max-log-bytes must be 0 (unbounded) or at least 4096";
        return "";
      });
  bool auth_flag = false;  // the default now; kept so older command lines still start
  server->add_flag("--auth", auth_flag,
                   "(the default) require a user token on every API request: the first start "
                   "writes an admin token to DATA_DIR/admin-token, which the local CLI uses; "
                   "`headway token create` makes more");
  server->add_flag("!--no-auth", server_config.auth,
                   "serve without authentication: anyone who can reach the port may run jobs as "
                   "this user. Refused unless --listen is a loopback address");
  server
      ->add_option("--max-queued-jobs", server_config.max_queued_jobs_per_team,
                   "how many jobs of one team may wait at once before a member's next submit "
                   "is refused (429), and before the team's workflows start more steps; "
                   "admins' submits are not bounded; 0: no bound")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  std::string max_workflow_status = "64Mi";
  server
      ->add_option("--max-workflow-status-bytes", max_workflow_status,
                   "how large one workflow's status (its nodes and their outputs) may grow: "
                   "past it the workflow is stopped as a terminate stops it, and says why")
      ->capture_default_str();
  server
      ->add_option("--max-workflow-nodes", server_config.max_workflow_nodes_per_team,
                   "how many nodes one team's unfinished workflows may hold in all: a workflow "
                   "that would pass it is refused (429), a loop that would is its step's error")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  server->add_option("--jupyterhub-spawner", server_config.jupyterhub_spawners,
                     "the user token (by name) JupyterHub's HeadwaySpawner uses: only it may start "
                     "hub users' servers (repeatable)");
  server->add_option("--allow-host", server_config.allow_hosts,
                     "a host name browsers and clients may reach this server by (repeatable). On "
                     "a loopback address only loopback names are accepted; elsewhere, without "
                     "any, every name is");
  server->add_option("--notebook-domain", server_config.notebook_domain,
                     "notebooks get origins of their own: notebook NAME is served at NAME.DOMAIN "
                     "(a wildcard DNS name pointing at this server; on a loopback address the "
                     "default, localhost, needs none), so a notebook's pages share nothing with "
                     "the dashboard or other notebooks. 'none': under the server's own origin");
  server
      ->add_option("--notebook-profiles", server_config.notebook_profiles_file,
                   "a YAML file of the notebook profiles users may start (resources, limits, "
                   "idle_timeout, cull_warning; see docs). Default: one profile, no GPUs, "
                   "culled after 1h idle")
      ->check(CLI::ExistingFile);
  std::string notebook_check = "30s";
  server
      ->add_option("--notebook-check-interval", notebook_check,
                   "how often running notebooks' kernels and GPUs are checked for idleness")
      ->capture_default_str();
  std::string gpu_idle_check = "30s";
  server
      ->add_option("--gpu-idle-check-interval", gpu_idle_check,
                   "how often the GPUs of running jobs with policies.on_gpu_idle are read")
      ->capture_default_str();
  server
      ->add_option("--nvml-library", server_config.nvml_library,
                   "NVIDIA's management library, which lists the GPUs and reports their "
                   "utilisation (notebooks' idle reclaim, policies.on_gpu_idle); empty or not "
                   "loadable: --nvidia-smi instead")
      ->capture_default_str();
  server
      ->add_option("--nvidia-smi", server_config.nvidia_smi,
                   "the nvidia-smi program that lists the GPUs and reports their utilisation "
                   "when NVML cannot be loaded; neither there: no GPU-idle signal")
      ->capture_default_str();
  std::string session_ttl = "12h";
  server
      ->add_option("--session-ttl", session_ttl,
                   "how long a dashboard sign-in lasts (e.g. 30m, 12h, 7d)")
      ->capture_default_str();
  server
      ->add_option("--tls-cert", server_config.tls_cert_file,
                   "serve HTTPS only, with this PEM certificate (chain); needs --tls-key")
      ->check(CLI::ExistingFile);
  server->add_option("--tls-key", server_config.tls_key_file, "the PEM private key for --tls-cert")
      ->check(CLI::ExistingFile);
  std::string isolation = "namespace";
  server
      ->add_option("--isolation", isolation,
                   "how local jobs are kept from the server's files and each other: namespace "
                   "(mount and PID namespaces that hide the data directory) or none")
      ->check(CLI::IsMember({"namespace", "none"}))
      ->capture_default_str();
  std::string job_network = "isolated";
  server
      ->add_option("--job-network", job_network,
                   "local jobs' network: isolated (each job has its own, whose only way out is "
                   "this server's API; an admin may let a job ask for host_network) or host "
                   "(every job shares the host's, its loopback services included)")
      ->check(CLI::IsMember({"isolated", "host"}))
      ->capture_default_str();
  std::string job_outbound = "none";
  server
      ->add_option("--job-outbound", job_outbound,
                   "isolated local jobs' way to the internet: none (only this server's API) or "
                   "public (public addresses, through an egress proxy their HTTPS_PROXY and "
                   "HTTP_PROXY name; never the host itself, its loopback or a private, "
                   "link-local or reserved range)")
      ->check(CLI::IsMember({"none", "public"}))
      ->capture_default_str();
  server->add_option("--job-outbound-allow", server_config.job_outbound_allow,
                     "with --job-outbound=public: a private range jobs may reach too, such as a "
                     "dataset mirror's (10.0.5.0/24; repeatable; never loopback or the host's "
                     "own addresses)");
  server
      ->add_option("--image-cache", server_config.image_cache,
                   "bound on the disk the images of jobs that name one take "
                   "(DATA_DIR/images), least recently used evicted first (a quantity: 20Gi; "
                   "0: unbounded)")
      ->capture_default_str()
      ->check([](const std::string& value) -> std::string {
        return headway::ParseMemoryQuantity(value) ? ""
                                                   : "--image-cache must be a size such as 20Gi";
      });
  server->add_option("--insecure-registry", server_config.insecure_registries,
                     "an image registry reached over plain HTTP or without checking its "
                     "certificate (HOST:PORT, repeatable; as registries.conf's insecure)");
  server->add_option("--registry-auth", server_config.registry_auth,
                     "TEAM=FILE: a Docker config.json with the registry credentials a team's "
                     "images are pulled with ('*=FILE' for every other team; repeatable; the "
                     "file must not be readable by other users)");
  std::string workflow_images = "record";
  server
      ->add_option("--workflow-images", workflow_images,
                   "Argo container and script steps: run (each in its image, pulled as a job's "
                   "image is; needs a root server) or record (the image is recorded and the "
                   "step runs on the host)")
      ->check(CLI::IsMember({"run", "record"}))
      ->capture_default_str();
  server->add_option("--cdi-spec", server_config.cdi_spec,
                     "write the pool's GPUs as a CDI spec here (nvidia.com/gpu=INDEX), for "
                     "podman and other CDI consumers (e.g. /var/run/cdi/headway.json)");
  std::string job_tmp = "own";
  server
      ->add_option("--job-tmp", job_tmp,
                   "local jobs' /tmp: own (each job reads the host's /tmp through a layer of "
                   "its own that takes what it writes, so no job sees another's files) or "
                   "host (every job shares the host's /tmp)")
      ->check(CLI::IsMember({"own", "host"}))
      ->capture_default_str();
  server->add_option("--run-as", server_config.run_as,
                     "root servers: run a team's jobs as a Unix account, TEAM=USER (repeatable; "
                     "TEAM '*' for every team without its own)");
  server
      ->add_option("--job-user", server_config.job_user,
                   "root servers: the unprivileged account for teams without --run-as")
      ->capture_default_str();
  server->add_flag("--allow-root-jobs", server_config.allow_root_jobs,
                   "let jobs run as root (a --run-as mapping to root, or Slurm queues on a root "
                   "server); root in a namespace is not isolated");
  server->add_option("--job-env", server_config.job_env,
                     "a variable of the server's environment to pass on to jobs (repeatable; "
                     "jobs otherwise get only PATH, LANG, LC_* and TZ of it)");
  server->add_option("--web-dir", server_config.web_dir,
                     "serve the dashboard from this folder instead of the built-in copy");
  std::vector<std::string> artifact_quotas;
  server->add_option("--artifact-quota", artifact_quotas,
                     "TEAM=BYTES: the bytes of artifacts a team may keep, e.g. vision=500Gi "
                     "(repeatable; *=BYTES for every team not named; default: no limit)");
  server
      ->add_option("--artifact-store", server_config.artifact_store,
                   "where artifact bytes are kept: local (DATA_DIR/artifacts) or s3 (an "
                   "S3-compatible bucket; credentials from AWS_ACCESS_KEY_ID and "
                   "AWS_SECRET_ACCESS_KEY in the environment)")
      ->capture_default_str()
      ->check(CLI::IsMember({"local", "s3"}));
  server->add_option(
      "--s3-endpoint", server_config.s3_endpoint,
      "the S3 endpoint, e.g. https://s3.eu-west-3.amazonaws.com or http://minio:9000");
  server->add_option("--s3-bucket", server_config.s3_bucket, "the bucket (created if missing)");
  server->add_option("--s3-region", server_config.s3_region, "the region it signs for")
      ->capture_default_str();
  server->add_option("--s3-prefix", server_config.s3_prefix, "a prefix for every object key");
  server->add_option("--s3-public-endpoint", server_config.s3_public_endpoint,
                     "the endpoint clients and jobs reach the store at, when not --s3-endpoint");
  server->add_option("--s3-ca-file", server_config.s3_ca_file,
                     "PEM CA certificates to verify the endpoint with (default: the system's)");
  std::string orphan_age = "24h";
  server
      ->add_option("--artifact-orphan-age", orphan_age,
                   "objects in the artifact store that no version holds are deleted once this "
                   "old (looked for at start and daily)")
      ->capture_default_str();
  std::string presign_ttl = "10m";
  server
      ->add_option("--presign-ttl", presign_ttl,
                   "how long a presigned S3 URL the server hands out stays valid (1m..7d): a "
                   "download or upload must start within it, and a URL handed to a token "
                   "revoked since works no longer than this")
      ->capture_default_str();
  std::string s3_part_size = "64Mi";
  server
      ->add_option("--s3-part-size", s3_part_size,
                   "artifacts this large and over go up to the S3 store in parts of this size "
                   "(5Mi..5Gi), several at once, and resume where an interrupted upload stopped")
      ->capture_default_str();
  std::string max_upload = "5Gi";
  server
      ->add_option("--max-upload-bytes", max_upload,
                   "the largest artifact uploaded through the server (local artifact store)")
      ->capture_default_str();
  server->callback([&] {
    for (const std::string& entry : artifact_quotas) {
      auto eq = entry.find('=');
      auto bytes =
          eq == std::string::npos ? std::nullopt : headway::ParseByteQuantity(entry.substr(eq + 1));
      if (!bytes || *bytes < 0 || eq == 0) {
        throw CLI::ValidationError("--artifact-quota",
                                   "must be TEAM=BYTES such as vision=500Gi, got '" + entry + "'");
      }
      if (entry.substr(0, eq) == "*") {
        server_config.default_artifact_quota_bytes = static_cast<std::uint64_t>(*bytes);
      } else {
        server_config.artifact_quota_bytes[entry.substr(0, eq)] =
            static_cast<std::uint64_t>(*bytes);
      }
    }
    if (auto age = headway::ParseDuration(orphan_age); age && age->count() >= 0) {
      server_config.artifact_orphan_age = *age;
    } else {
      throw CLI::ValidationError("--artifact-orphan-age",
                                 "must be a duration such as 24h, got '" + orphan_age + "'");
    }
    if (auto bytes = headway::ParseByteQuantity(max_workflow_status); bytes && *bytes >= 4096) {
      server_config.max_workflow_status_bytes = static_cast<std::size_t>(*bytes);
    } else {
      throw CLI::ValidationError(
          "--max-workflow-status-bytes",
          "must be a size of at least 4Ki such as 64Mi, got '" + max_workflow_status + "'");
    }
    if (auto ttl = headway::ParseDuration(presign_ttl);
        ttl && *ttl >= std::chrono::minutes(1) && *ttl <= std::chrono::hours(24 * 7)) {
      server_config.presign_ttl = std::chrono::duration_cast<std::chrono::seconds>(*ttl);
    } else {
      throw CLI::ValidationError("--presign-ttl",
                                 "must be a duration from 1m to 7d such as 10m, "
                                 "got '" +
                                     presign_ttl + "'");
    }
    if (auto bytes = headway::ParseByteQuantity(s3_part_size);
        bytes && *bytes >= (5ll << 20) && *bytes <= (5ll << 30)) {
      server_config.s3_part_size = static_cast<std::uint64_t>(*bytes);
    } else {
      throw CLI::ValidationError("--s3-part-size",
                                 "must be a size from 5Mi to 5Gi, got '" + s3_part_size + "'");
    }
    if (auto bytes = headway::ParseByteQuantity(max_upload); bytes && *bytes > 0) {
      server_config.max_upload_bytes = static_cast<std::uint64_t>(*bytes);
    } else {
      throw CLI::ValidationError("--max-upload-bytes",
                                 "must be a size such as 5Gi, got '" + max_upload + "'");
    }
    auto colon = listen.rfind(':');
    if (colon == std::string::npos) throw CLI::ValidationError("--listen", "must be address:port");
    server_config.listen_address = listen.substr(0, colon);
    try {
      server_config.port = std::stoi(listen.substr(colon + 1));
    } catch (const std::exception&) {
      throw CLI::ValidationError("--listen", "port must be a number");
    }
    if (gpus >= 0) server_config.gpus = gpus;
    server_config.isolate_jobs = isolation == "namespace";
    server_config.isolate_job_network = job_network == "isolated";
    server_config.job_outbound = job_outbound == "public";
    server_config.workflow_images_run = workflow_images == "run";
    server_config.own_job_tmp = job_tmp == "own";
    auto ttl = headway::ParseDuration(session_ttl);
    if (!ttl || ttl->count() <= 0) {
      throw CLI::ValidationError("--session-ttl", "must be a positive duration such as 12h");
    }
    server_config.session_ttl = *ttl;
    auto check = headway::ParseDuration(notebook_check);
    if (!check || check->count() <= 0) {
      throw CLI::ValidationError("--notebook-check-interval",
                                 "must be a positive duration such as 30s");
    }
    server_config.notebook_check_interval = *check;
    auto gpu_check = headway::ParseDuration(gpu_idle_check);
    if (!gpu_check || gpu_check->count() <= 0) {
      throw CLI::ValidationError("--gpu-idle-check-interval",
                                 "must be a positive duration such as 30s");
    }
    server_config.gpu_idle_check_interval = *gpu_check;
    if (finished_job_ttl == "off") {
      server_config.finished_job_ttl.reset();
    } else if (auto keep = headway::ParseDuration(finished_job_ttl); keep && keep->count() >= 0) {
      server_config.finished_job_ttl = *keep;
    } else {
      throw CLI::ValidationError("--finished-job-ttl", "must be a duration such as 7d, or off");
    }
    server_config.ordering =
        headway::sched::ParseOrdering(scheduling_policy).value_or(headway::sched::kDefaultOrdering);
    if (server_config.ordering == headway::sched::Ordering::kShortestWork) {
      server_config.starvation_bound =
          headway::sched::SchedulerOptions::kShortestWorkStarvationBound;
    }
    if (starvation_bound.empty()) {
      // the policy's default, set above
    } else if (starvation_bound == "off") {
      server_config.starvation_bound.reset();
    } else if (auto bound = headway::ParseDuration(starvation_bound)) {
      server_config.starvation_bound = *bound;
    } else {
      throw CLI::ValidationError("--starvation-bound", "must be a duration such as 30m, or off");
    }
    if (server_config.tls_cert_file.empty() != server_config.tls_key_file.empty()) {
      throw CLI::ValidationError("--tls-cert/--tls-key", "give both or neither");
    }
    server_config.self_executable = SelfExecutable(argv[0]);
    exit_code = headway::RunServer(server_config);
  });

  std::string migrate_from, migrate_to;
  auto* migrate = app.add_subcommand(
      "migrate",
      "Copy a store to another database, checked table by table (stop the server first)");
  migrate
      ->add_option("--from", migrate_from,
                   "the store now: sqlite:///PATH, postgresql://..., mysql://...")
      ->required();
  migrate->add_option("--to", migrate_to, "the store to copy it to (made if empty)")->required();
  migrate->footer(
      "Example: headway migrate --from sqlite:///var/lib/headway/headway.db \\\n"
      "           --to postgresql://headway@db.example/headway\n"
      "Ids, versions and times are kept. Interrupted, the same command goes on from where it "
      "stopped.");
  migrate->callback([&] {
    exit_code = headway::RunStoreMigration(migrate_from, migrate_to, std::cout, std::cerr);
  });

  auto client_state = headway::cli::AddClientCommands(
      app, exit_code, headway::AdminTokenPath(headway::DefaultDataDir()));
  int code = headway::cli::ParseAndRun(app, argc, argv);
  return code >= 0 ? code : exit_code;
}
