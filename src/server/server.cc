#include "server/server.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "api/auth.h"
#include "api/http_server.h"
#include "api/notebook_routes.h"
#include "api/request_guard.h"
#include "api/rest_api.h"
#include "api/watch_cache.h"
#include "artifact/local/local_object_store.h"
#include "artifact/s3/s3_object_store.h"
#include "core/run_as.h"
#include "core/team_policy.h"
#include "exec/command_runner.h"
#include "exec/executor.h"
#include "exec/local/gpu_inventory.h"
#include "exec/local/local_executor.h"
#include "exec/local/nvml.h"
#include "server/artifact_manager.h"
#include "server/experiment_controller.h"
#include "server/gpu_idle_watcher.h"
#include "server/job_controller.h"
#include "server/memory_keeper.h"
#include "server/notebook_controller.h"
#include "server/user_tokens.h"
#include "server/webhook_notifier.h"
#include "server/workflow_controller.h"
#include "store/store.h"

namespace headway {

std::string DefaultDataDir() {
  if (const char* dir = std::getenv("HEADWAY_DATA_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) {
    return (std::filesystem::path(xdg) / "headway").string();
  }
  const char* home = std::getenv("HOME");
  return (std::filesystem::path(home && *home ? home : ".") / ".local/share/headway").string();
}

Result<std::map<std::string, QueueConfig>> ParseQueueMappings(
    const std::vector<std::string>& mappings) {
  std::map<std::string, QueueConfig> queues;
  for (const std::string& m : mappings) {
    auto eq = m.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("--queue '" + m + "' must be NAME=EXECUTOR[:key=value,...]");
    }
    QueueConfig q;
    std::string rest = m.substr(eq + 1);
    auto colon = rest.find(':');
    q.executor = rest.substr(0, colon);
    if (colon != std::string::npos) {
      std::string opts = rest.substr(colon + 1);
      std::size_t start = 0;
      while (start < opts.size()) {
        auto comma = opts.find(',', start);
        if (comma == std::string::npos) comma = opts.size();
        std::string kv = opts.substr(start, comma - start);
        auto e = kv.find('=');
        if (e == std::string::npos)
          return InvalidArgument("--queue option '" + kv + "' must be key=value");
        std::string key = kv.substr(0, e);
        if (key != "partition" && key != "account" && key != "qos") {
          return InvalidArgument("--queue option '" + key +
                                 "' is not one of partition, account, qos");
        }
        q.options[key] = kv.substr(e + 1);
        start = comma + 1;
      }
    }
    queues[m.substr(0, eq)] = q;
  }
  return queues;
}

Result<std::map<std::string, sched::QueueQuota>> ParseQuotas(
    const std::vector<std::string>& quotas) {
  std::map<std::string, sched::QueueQuota> out;
  auto number = [](const std::string& text, double& value) {
    char* end = nullptr;
    value = std::strtod(text.c_str(), &end);
    return !text.empty() && end == text.c_str() + text.size() && std::isfinite(value) && value >= 0;
  };
  for (const std::string& q : quotas) {
    const std::string usage = "--quota '" + q + "' must be TEAM=GPUS[:borrow=N,weight=W]";
    auto eq = q.find('=');
    if (eq == std::string::npos || eq == 0) return InvalidArgument(usage);
    std::string team = q.substr(0, eq);
    std::string rest = q.substr(eq + 1);
    auto colon = rest.find(':');
    sched::QueueQuota quota;
    double gpus = 0;
    if (!number(rest.substr(0, colon), gpus) || gpus != std::floor(gpus))
      return InvalidArgument(usage);
    quota.nominal_gpus = static_cast<int>(gpus);
    if (colon != std::string::npos) {
      std::string opts = rest.substr(colon + 1);
      std::size_t start = 0;
      while (start <= opts.size()) {
        auto comma = opts.find(',', start);
        if (comma == std::string::npos) comma = opts.size();
        std::string kv = opts.substr(start, comma - start);
        auto e = kv.find('=');
        double value = 0;
        if (e == std::string::npos || !number(kv.substr(e + 1), value))
          return InvalidArgument(usage);
        std::string key = kv.substr(0, e);
        if (key == "borrow" && value == std::floor(value)) {
          quota.borrowing_limit = static_cast<int>(value);
        } else if (key == "weight" && value > 0) {
          quota.weight = value;
        } else {
          return InvalidArgument(usage + " (bad '" + kv + "')");
        }
        start = comma + 1;
      }
    }
    if (out.count(team)) return InvalidArgument("--quota for team '" + team + "' given twice");
    out[team] = quota;
  }
  return out;
}

std::string AdminTokenPath(const std::string& data_dir) {
  return (std::filesystem::path(data_dir) / "admin-token").string();
}

namespace {

// --registry-auth TEAM=FILE, checked: the file exists and no other user can
// read it (it holds registry passwords).
Result<std::map<std::string, std::string>> RegistryAuthFiles(
    const std::vector<std::string>& entries) {
  std::map<std::string, std::string> out;
  for (const std::string& entry : entries) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size()) {
      return InvalidArgument("'" + entry + "' is not TEAM=FILE");
    }
    const std::string team = entry.substr(0, eq);
    std::string file = entry.substr(eq + 1);
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return InvalidArgument(file + " is not a readable file");
    }
    if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
      return InvalidArgument(file + " holds registry credentials and is readable by other " +
                             "users: chmod 600 it");
    }
    std::error_code ec;
    file = std::filesystem::absolute(file, ec).string();
    if (!out.emplace(team, file).second) {
      return InvalidArgument("team '" + team + "' has two credential files");
    }
  }
  return out;
}

// The dashboard's address to print at start, like Jupyter's: with
// authentication on, it carries a session made from the admin token, so
// opening it signs in. Not the admin token itself: server output ends up in
// journals, CI logs and terminal scrollback that others may read, and a
// session expires (--session-ttl) and dies with a revoked admin token, while
// the admin token is good until revoked.
std::string DashboardUrl(const ServerConfig& config, UserTokens& tokens,
                         const std::string& base_url) {
  std::string url = base_url + "/ui/";
  if (!config.auth) return url;
  std::string secret;
  if (std::ifstream file(AdminTokenPath(config.data_dir)); file) std::getline(file, secret);
  auto admin = tokens.Authenticate(secret);
  auto link = admin.ok() ? tokens.CreateSignInLink(*admin, UserTokens::kSignInLinkTtl)
                         : Result<std::string>(admin.status());
  if (!link.ok()) {
    return url + " (sign in with a user token; `headway token create` makes one)";
  }
  return url + "#token=" + *link + " (signs in once, within " +
         FormatDuration(UserTokens::kSignInLinkTtl) + ", for " +
         FormatDuration(config.session_ttl) + ")";
}

// The data directory holds every job's spec, env and tokens: only the
// server's user may enter it. An older install's 0755 directory and 0644
// files are tightened on start.
Status SecureDataDir(const std::string& data_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(data_dir, ec);
  if (ec) return Unavailable("cannot create data directory " + data_dir + ": " + ec.message());
  if (::chmod(data_dir.c_str(), 0700) != 0) {
    return Unavailable("cannot make " + data_dir + " private: " + std::strerror(errno));
  }
  for (const char* name : {"headway.db", "headway.db-wal", "headway.db-shm", "admin-token"}) {
    fs::path file = fs::path(data_dir) / name;
    if (fs::exists(file, ec)) ::chmod(file.c_str(), 0600);
  }
  return Status::Ok();
}

Result<std::string> PublishCertificate(const std::string& cert_file, const std::string& data_dir) {
  namespace fs = std::filesystem;
  fs::path copy = fs::path(data_dir) / "tls-ca.pem";
  std::error_code ec;
  fs::copy_file(cert_file, copy, fs::copy_options::overwrite_existing, ec);
  if (ec || ::chmod(copy.c_str(), 0644) != 0) {
    return Unavailable("cannot copy " + cert_file + " to " + copy.string() + ": " +
                       (ec ? ec.message() : std::string(std::strerror(errno))));
  }
  return copy.string();
}

// Who holds a data directory: the first server takes an exclusive lock on
// DATA_DIR/server.lock for its whole life (the kernel drops it when the
// process ends, crashed or not) and writes its pid and URL there, so a
// second server on the same directory refuses to start and names the first
// instead of re-adopting and driving its jobs too.
class DataDirLock {
 public:
  static Result<DataDirLock> Acquire(const std::string& data_dir) {
    std::string path = (std::filesystem::path(data_dir) / "server.lock").string();
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return Unavailable("cannot open " + path + ": " + std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int error = errno;
      char holder[256] = {};
      ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
      ::close(fd);
      if (error != EWOULDBLOCK)
        return Unavailable("cannot lock " + path + ": " + std::strerror(error));
      std::string who = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : "";
      while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
      return Conflict("another headway server (" + (who.empty() ? "starting" : who) +
                      ") is using the data directory " + data_dir +
                      "; stop it first, or give this one another --data-dir");
    }
    return DataDirLock(fd);
  }
  DataDirLock(DataDirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  DataDirLock& operator=(DataDirLock&&) = delete;
  ~DataDirLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  // Records who holds it, for the error a second server prints.
  void Describe(const std::string& url) const {
    std::string text = "pid " + std::to_string(::getpid()) + ", " + url + "\n";
    if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, text.data(), text.size(), 0);
  }

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}
  int fd_;
};

// The key webhook bodies are signed with: --webhook-secret-file, else
// DATA_DIR/webhook-secret, made (0600) at the first start that needs it.
Result<std::string> WebhookSecret(const ServerConfig& config) {
  std::string path = !config.webhook_secret_file.empty()
                         ? config.webhook_secret_file
                         : (std::filesystem::path(config.data_dir) / "webhook-secret").string();
  std::string secret;
  if (std::ifstream file(path); file) std::getline(file, secret);
  if (!secret.empty()) return secret;
  if (!config.webhook_secret_file.empty()) {
    return InvalidArgument("--webhook-secret-file " + path + " is missing or empty");
  }
  secret = api::NewSecret();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || ::write(fd, (secret + "\n").data(), secret.size() + 1) !=
                    static_cast<ssize_t>(secret.size() + 1)) {
    if (fd >= 0) ::close(fd);
    return Unavailable("cannot write " + path + ": " + std::strerror(errno));
  }
  ::close(fd);
  spdlog::info("webhook bodies are signed (X-Headway-Signature) with the secret in {}", path);
  return secret;
}

// This replica's name among the servers sharing a data directory.
std::string ReplicaName() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + "-" + std::to_string(::getpid());
}

// Upload folders of this host's replicas that are gone (a crash leaves one).
void RemoveDeadReplicasUploads(const std::string& uploads) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string prefix = std::string(host) + "-";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(uploads, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const pid_t pid = static_cast<pid_t>(std::atoi(name.c_str() + prefix.size()));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) std::filesystem::remove_all(entry, ec);
  }
}

// "http://10.0.0.5:8080" as its host and port; nullopt for another form.
std::optional<std::pair<std::string, int>> HttpHostPort(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return std::nullopt;
  const std::string rest = url.substr(scheme.size());
  const std::size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  const int port = std::atoi(rest.c_str() + colon + 1);
  if (port <= 0 || port > 65535) return std::nullopt;
  return std::make_pair(rest.substr(0, colon), port);
}

// A replica that does not lead serves the API by passing every request on
// to the leader (WebSockets and streams included), as Vault's and Nomad's
// standbys do; uploads spooled to a file and HTTPS leaders get a redirect.
// Returns once this server takes the lead, or the stop signal that came
// first.
std::optional<int> FollowUntilLeading(Leadership& leadership, const std::string& self,
                                      const Clock& clock, const sigset_t& stop_signals,
                                      std::atomic<const api::HttpHandler*>& ready,
                                      api::HttpHandler& forward) {
  struct Leader {
    std::mutex mu;
    std::string url;
  };
  auto leader = std::make_shared<Leader>();
  forward = [leader](const api::HttpRequest& req) {
    std::string url;
    {
      std::lock_guard lock(leader->mu);
      url = leader->url;
    }
    if (url.empty()) {
      return api::HttpResponse{503,
                               "application/json",
                               R"({"error":{"code":"Unavailable","message":"no server leads yet; )"
                               R"(try again in a moment"}})",
                               {{"Retry-After", "1"}},
                               nullptr};
    }
    auto host_port = HttpHostPort(url);
    if (!host_port || !req.body_file.empty()) {
      return api::HttpResponse{
          307, "application/json", "", {{"Location", url + req.target}}, nullptr};
    }
    api::HttpResponse response;
    response.proxy = std::make_shared<api::ProxyTarget>();
    response.proxy->host = host_port->first;
    response.proxy->port = host_port->second;
    return response;
  };
  std::string followed;
  bool unreachable = false;
  for (;;) {
    auto led = leadership.TryLead(self, clock.Now());
    if (led.ok() && *led) {
      ready.store(nullptr);  // "starting" (503) until the API is ready
      spdlog::info("leading: this server now schedules and runs jobs (others reach it at {})",
                   self);
      return std::nullopt;
    }
    if (!led.ok() && !unreachable) {
      spdlog::warn("cannot take part in electing a leader: {}", led.status().message());
    }
    unreachable = !led.ok();
    auto address = leadership.LeaderAddress();
    // A leader's own old address (this server, restarted) is nobody's now.
    if (address.ok() && *address != followed && *address != self) {
      {
        std::lock_guard lock(leader->mu);
        leader->url = *address;
      }
      if (followed.empty()) {
        spdlog::info("headway server listening on {} as a replica, following the leader at {}",
                     self, *address);
      } else {
        spdlog::info("following the new leader at {}", *address);
      }
      followed = *address;
    }
    ready.store(&forward);
    timespec wait{0, 500'000'000};
    const int sig = ::sigtimedwait(&stop_signals, nullptr, &wait);
    if (sig > 0) return sig;
  }
}

}  // namespace

int RunServer(const ServerConfig& config) {
  BoundArenas();
  if (!config.auth) {
    if (!api::IsLoopbackHost(config.listen_address)) {
      spdlog::error(
          "--no-auth is refused on {}: anyone who can reach it could run commands as "
          "this user. Listen on a loopback address (127.0.0.1) or drop --no-auth.",
          config.listen_address);
      return 2;
    }
    spdlog::warn(
        "authentication is OFF (--no-auth): every local user and program that can reach "
        "{} can submit jobs that run as this user",
        config.listen_address);
  }
  // Every file the server creates is private from the start (no window in
  // which a database, token or log is readable by others); jobs get 022 back.
  ::umask(077);
  Status secured = SecureDataDir(config.data_dir);
  if (!secured.ok()) {
    spdlog::error("{}", secured.message());
    return 1;
  }
  const std::string store_url =
      config.store_url.empty()
          ? "sqlite://" + (std::filesystem::absolute(config.data_dir) / "headway.db").string()
          : config.store_url;
  // On a shared database, several servers (replicas) may share the data
  // directory too (so that a new leader finds the jobs' run directories):
  // the database's lead, not the directory's lock, keeps one in charge.
  const bool replicated = StoreIsShared(store_url);
  std::optional<DataDirLock> data_dir_lock;
  if (!replicated) {
    auto lock = DataDirLock::Acquire(config.data_dir);
    if (!lock.ok()) {
      spdlog::error("{}", lock.status().message());
      return 1;
    }
    data_dir_lock.emplace(std::move(*lock));
  }
  auto store = OpenStore(store_url);
  if (!store.ok()) {
    spdlog::error("{}", store.status().ToString());
    return 1;
  }
  spdlog::info("store: {}", RedactedStoreUrl(store_url));
  std::unique_ptr<Leadership> leadership;
  if (replicated) {
    auto opened = OpenLeadership(store_url);
    if (!opened.ok()) {
      spdlog::error("{}", opened.status().ToString());
      return 1;
    }
    leadership = std::move(*opened);
  }
  auto queues = ParseQueueMappings(config.queues);
  if (!queues.ok()) {
    spdlog::error("{}", queues.status().ToString());
    return 2;
  }
  auto quotas = ParseQuotas(config.quotas);
  if (!quotas.ok()) {
    spdlog::error("{}", quotas.status().ToString());
    return 2;
  }
  const bool root = ::geteuid() == 0;
  auto run_as = ParseRunAs(config.run_as, root, config.job_user);
  if (!run_as.ok()) {
    spdlog::error("{}", run_as.status().message());
    return 2;
  }
  if (root && !config.allow_root_jobs) {
    for (const auto& [name, queue] : *queues) {
      if (queue.executor != "local") {
        spdlog::error(
            "queue {} runs on {}, whose jobs run as the account that submits them, here root; "
            "start the server as an unprivileged user or allow it with --allow-root-jobs",
            name, queue.executor);
        return 2;
      }
    }
  }
  if (config.isolate_jobs) {
    // Before any thread starts: the probe forks.
    Status isolation = CheckJobIsolation(config.isolate_job_network);
    if (!isolation.ok()) {
      spdlog::error(
          "jobs cannot be isolated on this machine: {}; start the server with "
          "--isolation=none to run them without namespaces (they can then read the "
          "server's files{})",
          isolation.message(), root ? "" : " as its own user");
      return 1;
    }
  } else {
    spdlog::warn("--isolation=none: jobs are not hidden from the server's data directory{}",
                 root ? "" : ", and run as the server's user: any job can read its tokens");
  }
  if (Status ranges = CheckOutboundRanges(config.job_outbound_allow); !ranges.ok()) {
    spdlog::error("--job-outbound-allow {}", ranges.message());
    return 2;
  }
  if (config.job_outbound && !(config.isolate_jobs && config.isolate_job_network)) {
    spdlog::warn(
        "--job-outbound=public changes nothing: jobs share the host's network "
        "(--job-network=host or --isolation=none) and reach whatever it reaches");
  }
  if (!config.job_outbound_allow.empty() && !config.job_outbound) {
    spdlog::warn("--job-outbound-allow changes nothing without --job-outbound=public");
  }
  auto team_policy = ParseTeamPolicy(config.max_priority, config.max_grace);
  if (!team_policy.ok()) {
    spdlog::error("{}", team_policy.status().ToString());
    return 2;
  }
  // The GPUs' own library where the driver installed it, else nvidia-smi.
  std::unique_ptr<Nvml> nvml = Nvml::Load(config.nvml_library);
  spdlog::info("GPU telemetry: {}", nvml ? "NVML (" + config.nvml_library + ")"
                                         : "nvidia-smi (" + config.nvidia_smi + ") where present");
  int gpus = 0;
  // Each GPU's /dev/nvidiaN, so that a local job sees only its own.
  std::map<int, int> gpu_device_minors;
  if (config.gpus) {
    gpus = *config.gpus;
    spdlog::info("GPU pool: {} logical GPU(s) (--gpus)", gpus);
    gpu_device_minors = DeviceMinorsByIndex(LogicalGpus(gpus), {});
  } else {
    auto detected = nvml ? nvml->Devices() : DetectNvidiaGpus();
    gpus = static_cast<int>(detected.size());
    gpu_device_minors = DeviceMinorsByIndex(detected, ReadNvidiaDeviceMinors());
    for (const auto& g : detected) spdlog::info("GPU {}: {} {}", g.index, g.name, g.uuid);
    if (gpus == 0)
      spdlog::info(
          "no GPUs found; jobs that request GPUs are refused (--gpus N adds logical ones)");
  }
  std::unique_ptr<CommandRunner> runner = MakeProcessRunner();
  std::map<std::string, std::unique_ptr<Executor>> owned;
  std::map<std::string, Executor*> executors;
  auto registry_auth = RegistryAuthFiles(config.registry_auth);
  if (!registry_auth.ok()) {
    spdlog::error("--registry-auth {}", registry_auth.status().message());
    return 2;
  }
  std::set<std::string> wanted = {"local"};
  for (const auto& [name, queue] : *queues) wanted.insert(queue.executor);
  for (const std::string& name : wanted) {
    ExecutorOptions executor_options;
    executor_options.self_executable = config.self_executable;
    executor_options.runner = runner.get();
    executor_options.isolate = config.isolate_jobs;
    executor_options.isolate_network = config.isolate_job_network;
    executor_options.outbound = config.job_outbound;
    executor_options.outbound_allow = config.job_outbound_allow;
    executor_options.own_tmp = config.own_job_tmp;
    executor_options.gpu_device_minors = gpu_device_minors;
    executor_options.allow_root_jobs = config.allow_root_jobs;
    executor_options.job_env = config.job_env;
    executor_options.max_log_bytes = config.max_log_bytes;
    executor_options.image_dir = (std::filesystem::path(config.data_dir) / "images").string();
    executor_options.image_cache_bytes =
        static_cast<std::uint64_t>(ParseMemoryQuantity(config.image_cache).value_or(0));
    executor_options.insecure_registries = config.insecure_registries;
    executor_options.registry_auth = *registry_auth;
    executor_options.cdi_spec_path = config.cdi_spec;
    executor_options.log = [](const std::string& line) { spdlog::info("{}", line); };
    auto executor = MakeExecutor(name, executor_options);
    if (!executor.ok()) {
      spdlog::error("{}", executor.status().ToString());
      return 2;
    }
    executors[name] = executor->get();
    owned[name] = std::move(executor.value());
  }

  // Block the stop signals in every thread; the main thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // A client hanging up mid-write must not kill the server.
  signal(SIGPIPE, SIG_IGN);

  SystemClock clock;
  UserTokens user_tokens(**store, clock, config.session_ttl);
  if (config.auth) {
    Status loaded = user_tokens.Load();
    auto created = loaded.ok() ? user_tokens.EnsureAdminToken(AdminTokenPath(config.data_dir))
                               : Result<std::string>(loaded);
    if (!created.ok()) {
      spdlog::error("authentication: {}", created.status().ToString());
      return 1;
    }
    if (!created->empty()) {
      spdlog::info("created admin token '{}' in {}", *created, AdminTokenPath(config.data_dir));
    }
  }

  ControllerOptions options;
  options.total_gpus = gpus;
  options.data_dir = config.data_dir;
  options.health.stall_floor_s = config.stall_floor_s;
  options.health.unknown_grace_s = config.no_report_grace_s;
  options.finished_job_ttl = config.finished_job_ttl;
  options.plateau_window = config.plateau_window;
  options.confirmation.enter_seconds = config.health_confirm_s;
  options.confirmation.leave_seconds = 2 * config.health_confirm_s;
  options.max_series_per_job = config.max_series_per_job;
  options.max_points_per_job = config.max_points_per_job;
  options.max_log_bytes = config.max_log_bytes;
  options.team_quotas = *quotas;
  options.scheduling.preemption = config.preemption;
  options.scheduling.backfill = config.backfill;
  options.scheduling.starvation_bound = config.starvation_bound;
  options.scheduling.ordering = config.ordering;
  options.preemption_grace =
      std::chrono::milliseconds(static_cast<std::int64_t>(config.preemption_grace_s * 1000));
  options.elastic.min_interval =
      std::chrono::milliseconds(static_cast<std::int64_t>(config.elastic_interval_s * 1000));
  options.elastic.default_restart_cost =
      std::chrono::milliseconds(static_cast<std::int64_t>(config.elastic_restart_cost_s * 1000));
  WebhookOptions webhook_options;
  webhook_options.urls = config.webhooks;
  if (!config.webhooks.empty()) {
    auto secret = WebhookSecret(config);
    if (!secret.ok()) {
      spdlog::error("{}", secret.status().message());
      return 1;
    }
    webhook_options.secret = *secret;
  }
  // Delivery follows the store's event log (see webhook_notifier.h); the
  // controller's changes only wake the workers. Made once this server leads.
  std::unique_ptr<WebhookNotifier> webhooks;
  // The watch cache, once it exists (it needs the controller it is fed by).
  std::atomic<api::WatchCache*> watch_feed{nullptr};
  options.on_tick = [&watch_feed](const std::vector<Job>& active) {
    if (api::WatchCache* cache = watch_feed.load()) cache->OnTick(active);
  };
  options.on_removed = [&watch_feed](const Job& job) {
    if (api::WatchCache* cache = watch_feed.load()) cache->OnRemoved(job);
  };
  options.on_change = [&webhooks, &watch_feed](const Job& job, const JobEvent&) {
    if (api::WatchCache* cache = watch_feed.load()) cache->OnChange(job);
    if (webhooks && webhooks->enabled()) webhooks->Notify();
  };

  // Bind first, so the URL handed to jobs names the real port; requests that
  // arrive before the controller exists get 503.
  std::unique_ptr<JobController> controller;
  std::unique_ptr<api::WatchCache> watch_cache;  // gone before the controller it reads
  std::unique_ptr<WorkflowController> workflows;
  std::unique_ptr<ExperimentController> experiments;  // uses workflows
  std::unique_ptr<NotebookController> notebooks;
  // Artifact bytes: content-addressed under the data directory. Uploads
  // through the server are written to files in uploads/ (never memory),
  // checked, then moved into the store; leftovers of a crash are removed.
  namespace fs = std::filesystem;
  const std::string upload_dir =
      (fs::path(config.data_dir) / "uploads" / (replicated ? ReplicaName() : std::string()))
          .string();
  {
    std::error_code ec;
    if (replicated) RemoveDeadReplicasUploads((fs::path(config.data_dir) / "uploads").string());
    fs::remove_all(upload_dir, ec);
    fs::create_directories(upload_dir, ec);
    if (ec || ::chmod(upload_dir.c_str(), 0700) != 0) {
      spdlog::error("cannot create {}: {}", upload_dir, ec ? ec.message() : std::strerror(errno));
      return 1;
    }
  }
  Result<std::unique_ptr<ObjectStore>> objects = Internal("no artifact store");
  if (config.artifact_store == "s3") {
    // Credentials as every S3 tool takes them: from the environment (a
    // systemd EnvironmentFile readable by root only), never from a flag.
    S3ObjectStoreOptions s3;
    s3.client.endpoint = config.s3_endpoint;
    s3.client.region = config.s3_region;
    s3.client.ca_file = config.s3_ca_file;
    const char* key_id = std::getenv("AWS_ACCESS_KEY_ID");
    const char* secret = std::getenv("AWS_SECRET_ACCESS_KEY");
    const char* session = std::getenv("AWS_SESSION_TOKEN");
    if (key_id == nullptr || secret == nullptr || !*key_id || !*secret) {
      spdlog::error(
          "--artifact-store s3 needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in "
          "the server's environment");
      return 1;
    }
    s3.client.credentials = {key_id, secret, session ? session : ""};
    // The server's own uploads (what jobs on their own network send through
    // it) go up in the same parts as the clients' do.
    s3.client.part_size = config.s3_part_size;
    s3.client.multipart_threshold = config.s3_part_size;
    s3.bucket = config.s3_bucket;
    s3.prefix = config.s3_prefix;
    s3.public_endpoint = config.s3_public_endpoint;
    objects = OpenS3ObjectStore(std::move(s3), clock);
  } else {
    objects = OpenLocalObjectStore((fs::path(config.data_dir) / "artifacts").string());
  }
  if (!objects.ok()) {
    spdlog::error("artifact store: {}", objects.status().ToString());
    return 1;
  }
  spdlog::info("artifacts are kept in {}", (*objects)->Describe());
  ArtifactManagerOptions artifact_options;
  artifact_options.quota_bytes = config.artifact_quota_bytes;
  artifact_options.default_quota_bytes = config.default_artifact_quota_bytes;
  artifact_options.part_size = config.s3_part_size;
  artifact_options.orphan_min_age = config.artifact_orphan_age;
  artifact_options.multipart_threshold = config.s3_part_size;
  artifact_options.scratch_dir = upload_dir;
  artifact_options.presign_ttl = config.presign_ttl;
  ArtifactManager artifacts(**store, **objects, clock, artifact_options);
  api::HttpHandler api_handler;
  api::HttpHandler forward_handler;  // a replica's, while another server leads
  std::atomic<const api::HttpHandler*> ready{nullptr};
  api::HttpServerOptions http_options;
  http_options.address = config.listen_address;
  http_options.port = config.port;
  http_options.threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 2, 8);
  http_options.handler_threads = config.http_threads;
  http_options.max_body_bytes = config.max_body_bytes;
  http_options.read_timeout = std::chrono::seconds(config.request_timeout_s);
  http_options.header_timeout = std::chrono::seconds(config.header_timeout_s);
  http_options.max_connections = config.max_connections;
  http_options.max_connections_per_client = config.max_connections_per_client;
  http_options.reserved_connections = config.reserved_connections;
  http_options.reserved_for = api::IsJobReport;
  // A leader's progress reports wait for their group commit without a
  // thread; a follower forwards them, which blocks.
  http_options.inline_for = [&ready, &api_handler](std::string_view method, std::string_view path) {
    return ready.load() == &api_handler && api::DefersItsAnswer(method, path);
  };
  http_options.body_to_file = api::IsArtifactUpload;
  http_options.large_body_for = [](std::string_view, std::string_view path) {
    return api::IsNotebookPath(path);
  };
  http_options.file_body_dir = upload_dir;
  http_options.max_file_body_bytes = config.max_upload_bytes;
  http_options.tls_cert_file = config.tls_cert_file;
  http_options.tls_key_file = config.tls_key_file;
  auto server = api::HttpServer::Start(http_options, [&ready](const api::HttpRequest& req) {
    const api::HttpHandler* handler = ready.load();
    if (handler == nullptr) {
      return api::HttpResponse{503,
                               "application/json",
                               R"({"error":{"code":"Unavailable","message":"starting"}})",
                               {},
                               nullptr};
    }
    return (*handler)(req);
  });
  if (!server.ok()) {
    spdlog::error("{}", server.status().ToString());
    return 1;
  }
  std::string host = config.listen_address == "0.0.0.0" ? "127.0.0.1" : config.listen_address;
  bool tls = !config.tls_cert_file.empty();
  options.advertise_url =
      (tls ? "https://" : "http://") + host + ":" + std::to_string((*server)->port());
  // Jobs verify the server with its own certificate chain (a self-signed
  // one included); the Python SDK reads HEADWAY_CA_FILE.
  if (tls) {
    // A public copy in the data directory, which jobs are shown read-only:
    // the original may sit beside the private key, where jobs must not look.
    auto published = PublishCertificate(config.tls_cert_file, config.data_dir);
    if (!published.ok()) {
      spdlog::error("{}", published.status().message());
      return 1;
    }
    options.ca_file = *published;
  }
  if (leadership) {
    const std::string peer_url = config.peer_address.empty()
                                     ? options.advertise_url
                                     : (tls ? "https://" : "http://") + config.peer_address + ":" +
                                           std::to_string((*server)->port());
    std::optional<int> stopped =
        FollowUntilLeading(*leadership, peer_url, clock, stop_signals, ready, forward_handler);
    if (stopped) {
      spdlog::info("received {}, shutting down", strsignal(*stopped));
      (*server)->Stop();
      return 0;
    }
    // Tokens made through the leader this server followed.
    if (config.auth) {
      Status reloaded = user_tokens.Load();
      if (!reloaded.ok()) {
        spdlog::error("authentication: {}", reloaded.ToString());
        return 1;
      }
    }
  }
  webhooks = std::make_unique<WebhookNotifier>(**store, webhook_options);
  options.queues = *queues;
  options.run_as = *run_as;
  if (root) {
    spdlog::info("jobs run as {}{}", run_as->job_user,
                 run_as->by_team.empty() ? " (map teams to accounts with --run-as TEAM=USER)"
                                         : " unless their team is mapped with --run-as");
  }
  controller = std::make_unique<JobController>(**store, executors, clock, options);
  watch_cache = std::make_unique<api::WatchCache>(*controller);
  watch_feed.store(watch_cache.get());
  workflows = std::make_unique<WorkflowController>(**store, *controller, clock, config.data_dir,
                                                   &artifacts);
  workflows->FollowJobChanges(watch_cache.get());
  WorkflowBounds workflow_bounds;
  workflow_bounds.max_queued_jobs_per_team = config.max_queued_jobs_per_team;
  workflow_bounds.max_nodes_per_team = config.max_workflow_nodes_per_team;
  workflow_bounds.max_status_bytes = config.max_workflow_status_bytes;
  workflows->SetBounds(workflow_bounds);
  workflows->SetRunStepImages(config.workflow_images_run);
  experiments =
      std::make_unique<ExperimentController>(**store, *controller, clock, workflows.get());
  NotebookControllerOptions notebook_options;
  notebook_options.data_dir = config.data_dir;
  notebook_options.check_interval = config.notebook_check_interval;
  // One reader of this machine's GPUs for the notebooks and the batch jobs.
  auto gpu_utilization = [&runner, nvml = nvml.get(), nvidia_smi = config.nvidia_smi] {
    return nvml ? nvml->Utilization() : ReadGpuUtilization(*runner, nvidia_smi);
  };
  notebook_options.gpu_utilization = gpu_utilization;
  if (!config.notebook_profiles_file.empty()) {
    std::ifstream in(config.notebook_profiles_file);
    std::stringstream text;
    text << in.rdbuf();
    auto profiles = ParseNotebookProfiles(text.str());
    if (!in || !profiles.ok()) {
      spdlog::error("--notebook-profiles {}: {}", config.notebook_profiles_file,
                    profiles.ok() ? "cannot read it" : profiles.status().ToString());
      return 1;
    }
    notebook_options.profiles = std::move(*profiles);
  }
  notebooks = std::make_unique<NotebookController>(**store, *controller, clock,
                                                   std::move(notebook_options));
  GpuIdleWatcher gpu_idle(
      *controller, clock,
      {.check_interval = config.gpu_idle_check_interval, .gpu_utilization = gpu_utilization});
  api::RestApiOptions api_options;
  api_options.notebooks = notebooks.get();
  api_options.tls = tls;
  api_options.watch_cache = watch_cache.get();
  api_options.max_streams_per_token = config.max_streams_per_token;
  api_options.experiments = experiments.get();
  api_options.workflows = workflows.get();
  api_options.artifacts = &artifacts;
  api_options.tokens = config.auth ? &user_tokens : nullptr;
  api_options.web_dir = config.web_dir;
  api_options.hosts.listen_address = config.listen_address;
  api_options.hosts.allowed_hosts = config.allow_hosts;
  if (config.notebook_domain.empty()) {
    api_options.notebook_domain = api::IsLoopbackHost(config.listen_address) ? "localhost" : "";
  } else if (config.notebook_domain != "none") {
    api_options.notebook_domain = api::HostOfHeader(config.notebook_domain);
  }
  if (api_options.notebook_domain.empty()) {
    spdlog::warn(
        "notebooks are served under this server's own origin, so a notebook's pages "
        "(and what its team puts in them) share it with the dashboard: give them their "
        "own with --notebook-domain DOMAIN");
  } else {
    spdlog::info("notebook NAME is served at its own origin, NAME.{}", api_options.notebook_domain);
  }
  api_options.team_policy = *team_policy;
  api_options.jupyterhub_spawners = config.jupyterhub_spawners;
  api_options.local_jobs_reach_only_the_server = config.isolate_jobs && config.isolate_job_network;
  api_options.spool_dir = upload_dir;
  api_options.max_queued_jobs_per_team = config.max_queued_jobs_per_team;
  api_handler = api::MakeRestApi(*controller, api_options);
  ready.store(&api_handler);

  Status reconciled = controller->Reconcile();
  if (!reconciled.ok()) {
    spdlog::error("recovery failed: {}", reconciled.ToString());
    return 1;
  }
  std::thread loop([&] { controller->RunLoop(std::chrono::milliseconds(200)); });
  std::thread experiment_loop([&] { experiments->RunLoop(std::chrono::milliseconds(500)); });
  std::thread workflow_loop([&] { workflows->RunLoop(std::chrono::milliseconds(500)); });
  // Often enough that a notebook is ready soon after its server answers;
  // idle checks keep to --notebook-check-interval.
  std::thread notebook_loop([&] { notebooks->RunLoop(std::chrono::milliseconds(250)); });
  // Its own thread: a job's endpoint may take its 2 s timeout to answer.
  std::thread pull_loop([&] { controller->RunPullLoop(std::chrono::milliseconds(500)); });
  std::thread artifact_loop([&] { artifacts.RunLoop(std::chrono::minutes(10)); });
  std::thread gpu_idle_loop([&] { gpu_idle.RunLoop(); });
  MemoryKeeper memory_keeper(std::chrono::seconds(10));
  for (const auto& [name, queue] : options.queues) {
    spdlog::info("queue {} runs on {}", name, queue.executor);
  }
  for (const auto& [team, quota] : options.team_quotas) {
    spdlog::info("team {}: quota {} GPU(s), may borrow {}, weight {}", team, quota.nominal_gpus,
                 quota.borrowing_limit, quota.weight);
  }
  if (data_dir_lock) data_dir_lock->Describe(options.advertise_url);
  // A leader that loses its lead (its database connection) stops at once,
  // before it could launch or change anything the new leader also does.
  std::mutex lead_watch_mu;
  std::condition_variable lead_watch_cv;
  bool lead_watch_stop = false;
  std::thread lead_watch;
  if (leadership) {
    lead_watch = std::thread([&] {
      std::unique_lock lock(lead_watch_mu);
      while (!lead_watch_cv.wait_for(lock, std::chrono::milliseconds(500),
                                     [&] { return lead_watch_stop; })) {
        auto leading = leadership->StillLeading();
        if (leading.ok() && *leading) continue;
        spdlog::critical(
            "lost the lead ({}): stopping now; another server takes over",
            leading.ok() ? "the database ended this server's session" : leading.status().message());
        std::_Exit(75);
      }
    });
  }
  spdlog::info("headway server listening on {} (data: {})", options.advertise_url, config.data_dir);
  spdlog::info("dashboard: {}", DashboardUrl(config, user_tokens, options.advertise_url));

  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("received {}, shutting down; running jobs keep running", strsignal(sig));
  (*server)->Stop();
  if (lead_watch.joinable()) {
    {
      std::lock_guard lock(lead_watch_mu);
      lead_watch_stop = true;
    }
    lead_watch_cv.notify_all();
    lead_watch.join();
  }
  controller->Shutdown();
  experiments->Shutdown();
  workflows->Shutdown();
  notebooks->Shutdown();
  gpu_idle.Shutdown();
  artifacts.Shutdown();
  loop.join();
  experiment_loop.join();
  workflow_loop.join();
  notebook_loop.join();
  pull_loop.join();
  artifact_loop.join();
  gpu_idle_loop.join();
  watch_feed.store(nullptr);
  return 0;
}

}  // namespace headway
