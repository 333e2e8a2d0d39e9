#include "exec/local/local_executor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "core/container_tools.h"
#include "exec/attached_command.h"
#include "exec/local/cgroup.h"
#include "exec/local/container.h"
#include "exec/local/egress_policy.h"
#include "exec/local/egress_proxy.h"
#include "exec/local/process_identity.h"
#include "exec/local/sandbox.h"
#include "exec/oci/cdi.h"
#include "exec/oci/image_store.h"
#include "exec/oci/runtime_config.h"

extern char** environ;

namespace headway {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A character device of the host as a CDI device node; nullopt when absent.
std::optional<oci::DeviceNode> HostDeviceNode(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) return std::nullopt;
  return oci::DeviceNode{path, 'c', static_cast<int>(major(st.st_rdev)),
                         static_cast<int>(minor(st.st_rdev))};
}

// The pool's GPUs as CDI devices named by pool index, with the driver's
// control nodes as common edits, as nvidia-ctk writes them.
json PoolCdiSpec(const std::map<int, int>& gpu_device_minors) {
  constexpr int kNvidiaMajor = 195;
  std::vector<oci::CdiGpu> gpus;
  for (const auto& [index, minor_number] : gpu_device_minors) {
    const std::string path = "/dev/nvidia" + std::to_string(minor_number);
    gpus.push_back(
        {index,
         {HostDeviceNode(path).value_or(oci::DeviceNode{path, 'c', kNvidiaMajor, minor_number})}});
  }
  std::vector<oci::DeviceNode> common;
  for (const char* path :
       {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}) {
    if (auto node = HostDeviceNode(path)) common.push_back(*node);
  }
  return oci::CdiSpec(gpus, common);
}

// A TCP port free right now on loopback, for MASTER_PORT. Another process may
// take it before rank 0 binds it; torchrun has the same window.
int FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 29500;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 29500;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// What of the server's environment a job gets: only the basics a program
// expects (PATH, locale, time zone) and what the admin passes on with
// --job-env. The server's own secrets (cloud keys, database passwords) and
// settings stay with it, as the job's identity and distributed env are set
// per job.
std::map<std::string, std::string> BaseEnvironment(const std::vector<std::string>& pass_on) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    std::string key(entry.substr(0, eq));
    bool basic = key == "PATH" || key == "LANG" || key == "LANGUAGE" || key == "TZ" ||
                 key.rfind("LC_", 0) == 0;
    bool passed = std::find(pass_on.begin(), pass_on.end(), key) != pass_on.end();
    if (basic || passed) env[key] = std::string(entry.substr(eq + 1));
  }
  if (!env.count("PATH")) env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  return env;
}

// Makes `path` belong to the job's account (the server creates it as root).
Status HandOver(const std::string& path, const internal::UnixAccount& account, mode_t mode) {
  if (::geteuid() == 0 && ::chown(path.c_str(), account.uid, account.gid) != 0) {
    return Unavailable("cannot hand " + path + " to " + account.name + ": " + std::strerror(errno));
  }
  if (::chmod(path.c_str(), mode) != 0) {
    return Unavailable("cannot set the mode of " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

std::string JoinIds(const std::vector<int>& ids, std::size_t begin, std::size_t end) {
  std::string out;
  for (std::size_t i = begin; i < end && i < ids.size(); ++i) {
    if (!out.empty()) out += ",";
    out += std::to_string(ids[i]);
  }
  return out;
}

Status WriteFileAtomically(const fs::path& path, const std::string& content, mode_t mode) {
  fs::path tmp = path;
  tmp += ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Unavailable("cannot write " + tmp.string() + ": " + std::strerror(errno));
  bool ok = ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) &&
            ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    return Unavailable("cannot write " + path.string() + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

struct Handle {
  pid_t pid = 0;
  std::uint64_t start_time = 0;
  std::string run_dir;
  internal::AttemptCgroup cgroup;

  std::string Encode() const {
    return json{
        {"pid", pid}, {"start_time", start_time}, {"run_dir", run_dir}, {"cgroup", cgroup.ToJson()}}
        .dump();
  }
  static std::optional<Handle> Decode(const std::string& text) {
    auto j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("pid") || !j.contains("start_time") ||
        !j.contains("run_dir")) {
      return std::nullopt;
    }
    // Handles written before attempts had cgroups have none.
    return Handle{j["pid"].get<pid_t>(), j["start_time"].get<std::uint64_t>(),
                  j["run_dir"].get<std::string>(),
                  internal::AttemptCgroup::FromJson(j.value("cgroup", json::object()))};
  }
  bool Alive() const {
    auto start = internal::ProcessStartTime(pid);
    return start && *start == start_time;
  }
};

// The IPv4 address and port of "http(s)://HOST:PORT": where the job's
// HEADWAY_URL leads, which its relay listens on inside its network. Empty
// for a host that is not an IPv4 address (the job then has no way out).
std::pair<std::string, int> ControlAddress(const std::string& url) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string::npos) return {};
  const std::string rest = url.substr(scheme + 3);
  const std::size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return {};
  const std::string host = rest.substr(0, colon);
  const int port = std::atoi(rest.substr(colon + 1).c_str());
  in_addr parsed{};
  if (::inet_pton(AF_INET, host.c_str(), &parsed) != 1 || port <= 0 || port > 65535) return {};
  return {host, port};
}

bool MayPassThrough(const struct stat& st, const internal::UnixAccount& account) {
  if (account.uid == 0) return true;
  if (st.st_uid == account.uid) return st.st_mode & S_IXUSR;
  bool in_group =
      st.st_gid == account.gid ||
      std::find(account.groups.begin(), account.groups.end(), st.st_gid) != account.groups.end();
  return st.st_mode & (in_group ? S_IXGRP : S_IXOTH);
}

// What to cover with an empty tmpfs so that `dir` is hidden and the job's own
// directories, bound back under it, are reachable: `dir` itself, or its
// highest ancestor the account may not pass through (a root server's data
// directory under /root, say), whose contents the account could not see anyway.
std::string CoverFor(const std::string& dir, const internal::UnixAccount& account) {
  fs::path path = fs::path(dir).lexically_normal();
  fs::path prefix = "/";
  for (auto it = std::next(path.begin()); it != path.end(); ++it) {
    if (it->empty()) continue;
    prefix /= *it;
    if (prefix == path) break;
    struct stat st {};
    if (::stat(prefix.c_str(), &st) == 0 && !MayPassThrough(st, account)) return prefix.string();
  }
  return path.string();
}

class LocalExecutor final : public Executor {
 public:
  explicit LocalExecutor(const ExecutorOptions& options)
      : self_(options.self_executable),
        isolate_(options.isolate),
        isolate_network_(options.isolate && options.isolate_network),
        outbound_(isolate_network_ && options.outbound),
        outbound_allow_(options.outbound_allow),
        own_tmp_(options.isolate && options.own_tmp),
        gpu_device_minors_(options.gpu_device_minors),
        allow_root_(options.allow_root_jobs),
        job_env_(options.job_env),
        max_log_bytes_(options.max_log_bytes),
        cgroups_(internal::CgroupManager::Detect()),
        cdi_spec_(PoolCdiSpec(options.gpu_device_minors)) {
    if (!options.image_dir.empty()) {
      if (options.runner == nullptr) own_runner_ = MakeProcessRunner();
      oci::ImageStoreOptions store;
      store.dir = options.image_dir;
      store.max_bytes = options.image_cache_bytes;
      store.insecure_registries = options.insecure_registries;
      store.auth_files = options.registry_auth;
      images_ = std::make_unique<oci::ImageStore>(
          store, options.runner != nullptr ? *options.runner : *own_runner_);
    }
    if (!options.cdi_spec_path.empty()) WriteCdiSpec(options.cdi_spec_path, options.log);
    if (options.log) {
      options.log("local jobs: " + cgroups_.Describe());
      options.log(isolate_
                      ? "local jobs run in mount and PID namespaces that hide the data "
                        "directory" +
                            std::string(::geteuid() != 0 ? " (user namespace)" : "") +
                            (isolate_network_
                                 ? std::string(", each with a network of its own whose only "
                                               "way out is this server") +
                                       (outbound_ ? " and an egress proxy to public "
                                                    "addresses (--job-outbound=public)"
                                                  : "")
                                 : ", on the host's network (--job-network=host)") +
                            (own_tmp_ ? "; each writes a /tmp of its own over the host's"
                                      : "; all share the host's /tmp (--job-tmp=host)")
                      : "local jobs are NOT isolated from the server's files (--isolation=none)");
    }
  }

  std::string_view Name() const override { return "local"; }

  // Whether jobs in images can run here: an image cache, and a root server
  // that isolates jobs (crun and the overlay need both).
  bool RunsImages() const { return images_ != nullptr && isolate_ && ::geteuid() == 0; }

  // A job in a network of its own, where the site lets jobs out.
  bool JobGetsOutbound(const JobSpec& spec) const { return outbound_ && !spec.host_network; }

  Status Admit(const JobSpec& spec) const override {
    if (spec.resources.nodes > 1) {
      return InvalidArgument("the local executor runs on one node; this job asks for " +
                             std::to_string(spec.resources.nodes) +
                             " (submit it to a Slurm queue instead)")
          .WithField("resources.nodes");
    }
    if (!spec.image.empty() && !RunsImages()) {
      return InvalidArgument(
                 "this server cannot run jobs in images: that needs a server run as "
                 "root with job isolation on")
          .WithField("image");
    }
    if (spec.elastic && spec.elastic->ByNodes()) {
      return InvalidArgument(
                 "the local executor runs on one node: let the job grow in ranks "
                 "(elastic.min_ranks/max_ranks) or submit it to a Slurm queue")
          .WithField("elastic");
    }
    return Status::Ok();
  }

  Result<Launched> Launch(const LaunchRequest& request) override {
    std::error_code ec;
    fs::create_directories(request.run_dir, ec);
    if (ec) return Unavailable("cannot create " + request.run_dir + ": " + ec.message());

    const JobSpec& spec = request.spec;
    const int world = spec.resources.processes();
    const int gpus_each = spec.resources.gpus_per_process;
    const std::string master_port = std::to_string(FreeLoopbackPort());

    auto account = request.run_as.empty()
                       ? Result<internal::UnixAccount>(internal::CurrentAccount())
                       : internal::LookUpAccount(request.run_as);
    if (!account.ok()) {
      return PermissionDenied(account.status().message() + " to run team '" + spec.team +
                              "' jobs as (see --run-as and --job-user)");
    }
    if (account->uid == 0 && !allow_root_) {
      return PermissionDenied(
          "jobs may not run as root: map the team to an unprivileged account with "
          "--run-as TEAM=USER, or let an admin allow root jobs with --allow-root-jobs");
    }
    std::optional<oci::PreparedImage> image;
    std::string runtime;
    if (!spec.image.empty()) {
      // Admitted at submit; checked again for a job submitted before a restart with other flags.
      if (!RunsImages()) {
        return Unavailable("jobs in images need a server run as root with job isolation on");
      }
      auto found = internal::FindContainerRuntime();
      if (!found.ok()) return found.status();
      runtime = *found;
      auto prepared = images_->Prepare(spec.image, spec.image_pull_policy, spec.team, account->uid,
                                       account->gid);
      if (!prepared.ok()) return prepared.status();
      image = std::move(*prepared);
      // Above the descriptors the supervisor is handed, so the child's dup2s cannot clobber it.
      if (image->lock_fd <= internal::kImageLockFd) {
        const int high = ::fcntl(image->lock_fd, F_DUPFD_CLOEXEC, internal::kImageLockFd + 1);
        ::close(image->lock_fd);
        image->lock_fd = high;
      }
    }
    // Closed when this launch ends, failed or handed to the supervisor.
    struct CloseOnReturn {
      int fd;
      ~CloseOnReturn() {
        if (fd >= 0) ::close(fd);
      }
    } image_lock{image ? image->lock_fd : -1};
    for (const std::string& dir : request.job_dirs) {
      HEADWAY_RETURN_IF_ERROR(HandOver(dir, *account, 0700));
    }
    for (const std::string& file : request.job_files) {
      HEADWAY_RETURN_IF_ERROR(HandOver(file, *account, 0400));
    }
    std::string home = account->home;
    struct stat home_stat {};
    // A persistent home is the job's HOME even where the account has one.
    if (spec.persistent_home || home.empty() || ::stat(home.c_str(), &home_stat) != 0 ||
        !S_ISDIR(home_stat.st_mode) || home_stat.st_uid != account->uid) {
      home = request.job_home;
    }
    std::string cwd = spec.working_dir.empty() ? home : spec.working_dir;

    std::vector<std::string> warnings;
    // Named for the attempt and, by its run directory, for this server's
    // data directory: two servers on one machine may each run a job of the
    // same name, and one's cgroup.kill must never reach the other's.
    char run_dir_hash[17];
    std::snprintf(run_dir_hash, sizeof run_dir_hash, "%016zx",
                  std::hash<std::string>{}(request.run_dir));
    auto cgroup = cgroups_.Create(
        spec.name + ".attempt-" + std::to_string(request.attempt) + "." + run_dir_hash,
        {spec.resources.memory_bytes, spec.resources.cpus}, warnings);
    if (!cgroup.ok()) return cgroup.status();

    std::map<std::string, std::string> base = BaseEnvironment(job_env_);
    // In an image, the image's PATH (unless the spec sets one), not the host's.
    if (image) base.erase("PATH");
    base["HOME"] = home;
    base["USER"] = account->name;
    base["LOGNAME"] = account->name;
    if (!account->shell.empty()) base["SHELL"] = account->shell;
    for (const auto& [k, v] : spec.env) base[k] = v;
    for (const auto& [k, v] : request.platform_env) base[k] = v;
    if (JobGetsOutbound(spec)) {
      // Both spellings: curl reads only the lower-case http_proxy.
      const std::string proxy = "http://127.0.0.1:" + std::to_string(internal::kEgressProxyPort);
      std::string bypass = "localhost,127.0.0.1,::1";
      if (auto url = request.platform_env.find("HEADWAY_URL"); url != request.platform_env.end()) {
        const std::string control = ControlAddress(url->second).first;
        if (!control.empty() && control != "127.0.0.1") bypass += "," + control;
      }
      for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}) {
        base.emplace(name, proxy);
      }
      for (const char* name : {"NO_PROXY", "no_proxy"}) base.emplace(name, bypass);
    }
    base["HEADWAY_ATTEMPT"] = std::to_string(request.attempt);
    base["WORLD_SIZE"] = std::to_string(world);
    base["LOCAL_WORLD_SIZE"] = std::to_string(spec.resources.processes_per_node);
    base["MASTER_ADDR"] = "127.0.0.1";
    base["MASTER_PORT"] = master_port;
    base["NODE_RANK"] = "0";
    base["GROUP_RANK"] = "0";
    // torchrun's defaults (PET_*), as Kubeflow's torch runtime sets them, so
    // a one-process-per-node job running `torchrun` needs no rendezvous flags.
    base.emplace("PET_NODE_RANK", "0");
    base.emplace("PET_MASTER_ADDR", "127.0.0.1");
    base.emplace("PET_MASTER_PORT", master_port);

    // An elastic job on one node: each rank is a rank group, an elastic
    // agent (torchrun) of its own, up to the job's maximum; those above its
    // size wait for a growth (shim.cc).
    const bool elastic_ranks = spec.elastic && !spec.elastic->ByNodes();
    const int slots = elastic_ranks ? spec.elastic->max_ranks : world;
    if (elastic_ranks) {
      for (const char* fixed :
           {"WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NODE_RANK",
            "GROUP_RANK", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}) {
        base.erase(fixed);
      }
      // torchrun's flags, as variables a spec may override: a c10d
      // rendezvous inside the job's network, served by rank group 0.
      base.emplace("PET_NNODES", std::to_string(spec.elastic->min_ranks) + ":" +
                                     std::to_string(spec.elastic->max_ranks));
      base.emplace("PET_NPROC_PER_NODE", "1");
      base.emplace("PET_RDZV_BACKEND", "c10d");
      base.emplace("PET_RDZV_ENDPOINT", "127.0.0.1:" + master_port);
      base.emplace("PET_RDZV_ID", spec.name + "-" + std::to_string(request.attempt));
      base.emplace("PET_MAX_RESTARTS", "1000");  // every resize is a restart
      base.emplace("PET_MONITOR_INTERVAL", "1");
      // Debian's torch 1.13 on Python 3.11 cannot read "0" (its default) for
      // these; a mapping of a local rank it never has means the same.
      base.emplace("PET_REDIRECTS", "9:0");
      base.emplace("PET_TEE", "9:0");
      base["HEADWAY_ELASTIC"] = base["PET_NNODES"];
    }
    json ranks = json::array();
    Launched launched;
    for (int rank = 0; rank < slots; ++rank) {
      std::map<std::string, std::string> env = base;
      if (elastic_ranks) {
        env["HEADWAY_RANK_GROUP"] = std::to_string(rank);
        // Rank group 0 serves the rendezvous; a short last call, so a
        // group that joins is taken in at once.
        env.emplace("PET_RDZV_CONF",
                    std::string("is_host=") + (rank == 0 ? "1" : "0") + ",last_call_timeout=1");
      } else {
        env["RANK"] = std::to_string(rank);
        env["LOCAL_RANK"] = std::to_string(rank);
      }
      // A job without GPUs sees none, so it cannot grab a device by accident.
      env["CUDA_VISIBLE_DEVICES"] =
          rank < world ? JoinIds(request.gpu_ids, rank * gpus_each, (rank + 1) * gpus_each) : "";
      json env_list = json::array();
      for (const auto& [k, v] : env) env_list.push_back(k + "=" + v);
      std::string log = (fs::path(request.run_dir) / ("rank-" + std::to_string(rank) + ".log"));
      ranks.push_back(
          {{"rank", rank}, {"argv", spec.Argv()}, {"env", env_list}, {"cwd", cwd}, {"log", log}});
      launched.logs.push_back({rank, log});
    }
    std::string image_note;
    std::optional<internal::ContainerLaunch> container;
    if (image) {
      container.emplace();
      container->lower = image->rootfs;
      container->dir = (fs::path(request.run_dir) / "image").string();
      container->crun = runtime;
      auto configs = ContainerConfigs(request, *image, *account, *container, ranks);
      if (!configs.ok()) return configs.status();
      HEADWAY_RETURN_IF_ERROR(
          internal::LayOutContainer(*container, account->uid, account->gid, *configs));
      char note[256];
      std::snprintf(note, sizeof note, ", in image %s (%s", spec.image.substr(0, 160).c_str(),
                    image->digest.substr(0, 19).c_str());
      image_note = note;
      if (image->pulled) {
        std::snprintf(note, sizeof note, "; pulled %.1f MB in %.2f s",
                      static_cast<double>(image->pull_bytes) / 1e6, image->pull_seconds);
        image_note += note;
      } else {
        image_note += "; cached";
      }
      if (image->evicted > 0) {
        image_note +=
            "; " + std::to_string(image->evicted) + " older image(s) evicted from the cache";
      }
      image_note += ")";
    }
    json launch = {{"ranks", ranks},
                   {"failure_grace_ms", spec.termination_grace.count()},
                   {"max_log_bytes", max_log_bytes_},
                   {"cgroup", cgroup->ToJson()}};
    if (elastic_ranks) launch["elastic"] = {{"active", world}};
    // Only a root supervisor switches accounts; otherwise the job is us.
    if (::geteuid() == 0 && account->uid != 0) launch["account"] = account->ToJson();
    if (isolate_) {
      internal::SandboxPlan plan;
      for (const std::string& dir : request.private_dirs) {
        plan.hidden.push_back(CoverFor(dir, *account));
      }
      plan.exposed = request.job_dirs;
      if (container) {
        plan.exposed.push_back(container->dir);
        plan.exposed.push_back(image->bundle);
      }
      if (spec.private_tmp && !request.job_home.empty()) {
        // Beside the attempt's run directory, in the job's own folder (not
        // beside a persistent home, which other jobs share). Made afresh for
        // each attempt: the folders leading to the exposed ones are made in
        // it by this (root) process, and links a previous attempt left
        // there must not lead those anywhere else.
        const std::string tmp = (fs::path(request.run_dir).parent_path() / "tmp").string();
        HEADWAY_RETURN_IF_ERROR(RemoveTree(tmp));
        fs::create_directories(tmp, ec);
        HEADWAY_RETURN_IF_ERROR(HandOver(tmp, *account, 01777));
        plan.mapped.emplace_back(tmp, "/tmp");
      } else if (own_tmp_) {
        // What the job writes in /tmp is its own; the host's is read through.
        const std::string layer = (fs::path(request.run_dir) / "tmp-layer").string();
        HEADWAY_RETURN_IF_ERROR(RemoveTree(layer));
        fs::create_directories(layer, ec);
        plan.tmp_layer = layer;
      }
      plan.masked = OtherGpusDeviceNodes(request.gpu_ids);
      // Its own /dev/shm, as a container has: what one job leaves there
      // (data loaders' shared tensors) no other job reads.
      if (fs::is_directory("/dev/shm", ec)) plan.fresh.push_back("/dev/shm");
      if (isolate_network_ && !spec.host_network) {
        plan.network.isolated = true;
        if (auto url = request.platform_env.find("HEADWAY_URL");
            url != request.platform_env.end()) {
          std::tie(plan.network.control_host, plan.network.control_port) =
              ControlAddress(url->second);
        }
        plan.network.source_address = internal::AttemptSourceAddress(request.run_dir);
        plan.network.connect_socket = (fs::path(request.run_dir) / "connect.sock").string();
        plan.network.outbound = JobGetsOutbound(spec);
        plan.network.outbound_allow = outbound_allow_;
      }
      plan.exposed_read_only = request.job_files;
      plan.exposed_read_only.insert(plan.exposed_read_only.end(), request.shared_files.begin(),
                                    request.shared_files.end());
      launch["sandbox"] = plan.ToJson();
    }
    if (container) launch["container"] = container->ToJson();
    // A relaunch of the same attempt starts clean (see FindLaunched).
    for (const char* stale : {"supervisor.json", "result.json", "kill-requested"}) {
      fs::remove(fs::path(request.run_dir) / stale, ec);
    }
    // 0600: the environment holds the job's report token.
    HEADWAY_RETURN_IF_ERROR(
        WriteFileAtomically(fs::path(request.run_dir) / "launch.json", launch.dump(), 0600));

    std::string shim_log = fs::path(request.run_dir) / "supervisor.log";
    std::vector<std::string> args = {self_, "shim", request.run_dir};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    // Held from before the fork for exactly as long as the supervisor lives
    // (it inherits the lock), so recovery can tell a supervisor that is
    // still starting from one that never was (see FindLaunched).
    std::string lock_path = fs::path(request.run_dir) / "supervisor.lock";
    int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock_fd < 0) return Unavailable("cannot create " + lock_path + ": " + std::strerror(errno));
    if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(lock_fd);
      return Unavailable("a supervisor of this attempt is still running (" + lock_path + ")");
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      ::close(lock_fd);
      return Unavailable(std::string("fork failed: ") + std::strerror(errno));
    }
    if (pid == 0) {
      // Child: only async-signal-safe calls until exec.
      // The server blocks SIGINT/SIGTERM in its threads (to take them with
      // sigwait) and ignores SIGPIPE; a signal mask and ignored signals
      // survive exec. The supervisor starts with exactly the signals a stop
      // or a checkpoint warning sends blocked: one that arrives before it is
      // ready waits for it instead of killing it, and it passes it on to the
      // ranks (see RunLocalShim), which start with nothing blocked.
      sigset_t stop_signals;
      sigemptyset(&stop_signals);
      sigaddset(&stop_signals, SIGTERM);
      sigaddset(&stop_signals, SIGINT);
      sigaddset(&stop_signals, SIGUSR1);
      ::sigprocmask(SIG_SETMASK, &stop_signals, nullptr);
      ::signal(SIGPIPE, SIG_DFL);
      ::setsid();
      int null_fd = ::open("/dev/null", O_RDONLY);
      int log_fd = ::open(shim_log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      if (null_fd >= 0) ::dup2(null_fd, 0);
      if (log_fd >= 0) {
        ::dup2(log_fd, 1);
        ::dup2(log_fd, 2);
      }
      if (lock_fd == internal::kSupervisorLockFd) {
        ::fcntl(lock_fd, F_SETFD, 0);  // dup2 onto itself would leave close-on-exec set
      } else {
        ::dup2(lock_fd, internal::kSupervisorLockFd);  // a dup is not close-on-exec
      }
      if (image_lock.fd >= 0) ::dup2(image_lock.fd, internal::kImageLockFd);
      ::closefrom(image_lock.fd >= 0 ? internal::kImageLockFd + 1
                                     : internal::kSupervisorLockFd + 1);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(lock_fd);
    Handle handle{pid, 0, request.run_dir, *cgroup};
    auto start = internal::ProcessStartTime(pid);
    if (!start) {
      // It already exited (exec failed?). Reap it and say why.
      int status = 0;
      ::waitpid(pid, &status, 0);
      return Unavailable("the job supervisor exited at once; see " + shim_log);
    }
    handle.start_time = *start;
    {
      std::lock_guard lock(mu_);
      children_.insert(pid);
    }
    launched.handle = handle.Encode();
    launched.description =
        "supervisor pid " + std::to_string(pid) + ", running as " + account->name + image_note;
    launched.warnings = std::move(warnings);
    return launched;
  }

  Result<std::optional<Launched>> FindLaunched(const LaunchRequest& request) override {
    // The supervisor holds supervisor.lock from before it exists until it
    // ends, and records itself in supervisor.json before it starts any rank.
    // Unlocked with no record: no rank of this attempt ever ran. Locked: a
    // supervisor lives, perhaps still starting; wait for its record.
    std::string lock_path = fs::path(request.run_dir) / "supervisor.lock";
    int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CLOEXEC);
    if (lock_fd < 0) return std::optional<Launched>();  // the launch never got to fork
    bool alive = ::flock(lock_fd, LOCK_EX | LOCK_NB) != 0;
    ::close(lock_fd);
    fs::path record_path = fs::path(request.run_dir) / "supervisor.json";
    for (int i = 0; alive && !fs::exists(record_path) && i < 600; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (alive && !fs::exists(record_path)) {
      return Unavailable("a supervisor of " + request.run_dir +
                         " holds its lock but has not recorded itself yet");
    }
    std::ifstream record(record_path);
    auto supervisor = json::parse(record, nullptr, /*allow_exceptions=*/false);
    std::ifstream launch_file(fs::path(request.run_dir) / "launch.json");
    auto launch = json::parse(launch_file, nullptr, /*allow_exceptions=*/false);
    if (!supervisor.is_object() || !launch.is_object() || !supervisor.contains("pid") ||
        !supervisor.contains("start_time") || !launch.contains("ranks")) {
      return std::optional<Launched>();
    }
    Handle handle{supervisor["pid"].get<pid_t>(), supervisor["start_time"].get<std::uint64_t>(),
                  request.run_dir,
                  internal::AttemptCgroup::FromJson(launch.value("cgroup", json::object()))};
    Launched launched;
    launched.handle = handle.Encode();
    launched.description = "supervisor pid " + std::to_string(handle.pid);
    for (const auto& r : launch["ranks"]) launched.logs.push_back({r["rank"], r["log"]});
    return std::optional<Launched>(std::move(launched));
  }

  ExecStatus Poll(const std::string& handle_text) override {
    auto handle = Handle::Decode(handle_text);
    if (!handle) return {ExecStatus::Phase::kLost, 0, "unreadable executor handle", ""};
    bool is_child;
    {
      std::lock_guard lock(mu_);
      is_child = children_.count(handle->pid) > 0;
    }
    if (is_child) {
      int status = 0;
      pid_t r = ::waitpid(handle->pid, &status, WNOHANG);
      if (r == 0) return {ExecStatus::Phase::kRunning, 0, "", ""};
      std::lock_guard lock(mu_);
      children_.erase(handle->pid);
    } else if (handle->Alive()) {
      // Started by an earlier server process; not our child to wait for.
      return {ExecStatus::Phase::kRunning, 0, "", ""};
    }
    // The supervisor waits for the cgroup to empty before it records the
    // result; if it was killed instead, nothing of the attempt may outlive it
    // while its GPUs go to another job.
    if (handle->cgroup.Populated()) {
      (void)handle->cgroup.Kill();
      return {ExecStatus::Phase::kRunning, 0, "", ""};
    }
    handle->cgroup.Remove();
    return ReadResult(handle->run_dir);
  }

  Result<int> ConnectToJob(const std::string& handle_text, int port) override {
    auto handle = Handle::Decode(handle_text);
    if (!handle) return Internal("unreadable executor handle");
    const std::string socket = (fs::path(handle->run_dir) / "connect.sock").string();
    std::error_code ec;
    // A job with a network of its own is reached inside it, never on the host.
    if (fs::exists(socket, ec)) return internal::ConnectIntoJob(socket, port);
    // On the host's network a port the job names (in its notebook's start-up
    // file, its progress endpoint) could be another service's: only one a
    // process of the attempt listens on is reached.
    if (!handle->cgroup.empty() && !internal::AnyListensOn(handle->cgroup.Processes(), port)) {
      return PermissionDenied("no process of the job listens on port " + std::to_string(port) +
                              " of the host");
    }
    return ConnectTcp("127.0.0.1", port);
  }

  Result<ExecProcess> Exec(const std::string& handle_text, const ExecRequest& request) override {
    auto handle = Handle::Decode(handle_text);
    if (!handle) return Internal("unreadable executor handle");
    if (!handle->Alive()) return Conflict("the attempt is no longer running");
    std::vector<std::string> args = {self_, "exec-helper", handle->run_dir,
                                     std::to_string(request.rank)};
    if (!request.ssh_host_key_file.empty()) {
      args.insert(args.end(), {"--ssh", request.ssh_host_key_file});
    } else {
      args.push_back("--");
      args.insert(args.end(), request.argv.begin(), request.argv.end());
    }
    return StartAttached(args, request, AttachOptions{});
  }

  Status Resize(const std::string& handle_text,
                const std::vector<std::vector<int>>& unit_gpus) override {
    auto handle = Handle::Decode(handle_text);
    if (!handle) return Internal("unreadable executor handle");
    if (unit_gpus.empty()) return InvalidArgument("an elastic job keeps at least one rank group");
    if (!handle->Alive()) return Conflict("the attempt has ended");
    // Later requests win: the supervisor applies a file whose seq is newer
    // than the last it applied (the clock's milliseconds, also across restarts).
    const auto seq = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    std::int64_t last = last_resize_seq_.load();
    std::int64_t next = 0;
    do {
      next = std::max<std::int64_t>(seq, last + 1);
    } while (!last_resize_seq_.compare_exchange_weak(last, next));
    json request = {
        {"seq", next}, {"size", static_cast<int>(unit_gpus.size())}, {"gpus", unit_gpus}};
    // In its sandbox, the device nodes of the GPUs it holds now are shown
    // and the others masked (see OtherGpusDeviceNodes).
    if (isolate_) {
      std::vector<int> held;
      for (const auto& unit : unit_gpus) held.insert(held.end(), unit.begin(), unit.end());
      request["masked"] = OtherGpusDeviceNodes(held);
    }
    return WriteFileAtomically(fs::path(handle->run_dir) / "resize.json", request.dump(), 0600);
  }

  Status Signal(const std::string& handle_text, int signal) override {
    auto handle = Handle::Decode(handle_text);
    if (!handle) return Internal("unreadable executor handle");
    // With a cgroup, SIGKILL reaches every process of the attempt, daemons
    // that left its process group included, and spares the supervisor, which
    // records how the ranks ended once the cgroup is empty.
    // A rank still being started may join the cgroup after the kill: the
    // mark tells the supervisor to keep killing until its ranks are gone.
    if (signal == SIGKILL && !handle->cgroup.empty()) {
      std::string mark = fs::path(handle->run_dir) / "kill-requested";
      int fd = ::open(mark.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
      if (fd >= 0) ::close(fd);
      return handle->cgroup.Kill();
    }
    // Check identity first so a reused pid is never signalled.
    if (!handle->Alive()) return Status::Ok();
    if (::kill(-handle->pid, signal) != 0 && errno != ESRCH) {
      return Unavailable(std::string("kill failed: ") + std::strerror(errno));
    }
    return Status::Ok();
  }

 private:
  // The machine's GPU device nodes (/dev/nvidiaN, a character device each)
  // that are not of `gpu_ids`: what the job's sandbox masks, so a job sees
  // its own GPUs only, whatever CUDA_VISIBLE_DEVICES it sets itself.
  void WriteCdiSpec(const std::string& path,
                    const std::function<void(const std::string&)>& log) const {
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    Status written = WriteFileAtomically(path, cdi_spec_.dump(2) + "\n", 0644);
    if (log) {
      log(written.ok() ? "wrote the CDI spec of " + std::to_string(cdi_spec_["devices"].size()) +
                             " GPU(s) to " + path
                       : "cannot write the CDI spec: " + std::string(written.message()));
    }
  }

  // The container of each rank of a job in an image: its config.json (see
  // exec/oci/runtime_config.h and exec/local/container.h).
  Result<std::vector<json>> ContainerConfigs(const LaunchRequest& request,
                                             const oci::PreparedImage& image,
                                             const internal::UnixAccount& account,
                                             const internal::ContainerLaunch& container,
                                             const json& ranks) const {
    const JobSpec& spec = request.spec;
    oci::ContainerPlan plan;
    plan.rootfs = container.Root();
    for (const std::string& dir : request.job_dirs) plan.binds.push_back({dir, dir, false});
    for (const std::string& file : request.job_files) plan.binds.push_back({file, file, true});
    for (const std::string& file : request.shared_files) plan.binds.push_back({file, file, true});
    if (const std::string busybox = internal::StaticBusybox(); !busybox.empty()) {
      plan.binds.push_back({busybox, std::string(kContainerBusybox), true});
    }
    std::vector<json> configs;
    const int gpus_each = spec.resources.gpus_per_process;
    for (const json& rank : ranks) {
      oci::ContainerProcess process;
      process.command = spec.command;
      process.args = spec.args;
      process.cwd = spec.working_dir;
      process.uid = account.uid;
      process.gid = account.gid;
      process.groups = account.groups;
      for (const json& entry : rank["env"]) {
        const std::string text = entry.get<std::string>();
        const auto eq = text.find('=');
        if (eq != std::string::npos) process.env[text.substr(0, eq)] = text.substr(eq + 1);
      }
      if (oci::ContainerArgv(image.defaults, process).empty()) {
        return InvalidArgument("neither the job nor image " + spec.image +
                               " names a command to run")
            .WithField("command");
      }
      std::vector<std::string> devices;
      const int r = rank["rank"].get<int>();
      for (int i = r * gpus_each;
           i < (r + 1) * gpus_each && i < static_cast<int>(request.gpu_ids.size()); ++i) {
        const int gpu = request.gpu_ids[static_cast<std::size_t>(i)];
        if (gpu_device_minors_.count(gpu) != 0) {
          devices.push_back(std::string(oci::kCdiGpuKind) + "=" + std::to_string(gpu));
        }
      }
      auto edits = oci::CdiEditsFor(cdi_spec_, devices);
      if (!edits.ok()) return edits.status();
      oci::ContainerPlan rank_plan = plan;
      rank_plan.devices = edits->devices;
      rank_plan.extra_env = edits->env;
      configs.push_back(oci::RuntimeConfig(image.defaults, process, rank_plan));
    }
    return configs;
  }

  std::vector<std::string> OtherGpusDeviceNodes(const std::vector<int>& gpu_ids) const {
    std::set<int> own;
    for (int id : gpu_ids) {
      auto minor = gpu_device_minors_.find(id);
      own.insert(minor != gpu_device_minors_.end() ? minor->second : id);
    }
    std::vector<std::string> others;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/dev", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.size() <= 6 || name.size() > 12 || name.compare(0, 6, "nvidia") != 0 ||
          name.find_first_not_of("0123456789", 6) != std::string::npos) {
        continue;
      }
      struct stat st {};
      if (::stat(entry.path().c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) continue;
      if (own.count(std::stoi(name.substr(6))) == 0) others.push_back(entry.path().string());
    }
    std::sort(others.begin(), others.end());
    return others;
  }

  static ExecStatus ReadResult(const std::string& run_dir) {
    std::ifstream in(fs::path(run_dir) / "result.json");
    if (!in) {
      return {ExecStatus::Phase::kLost, 0,
              "the job's supervisor ended without recording an exit status (it was killed)", ""};
    }
    auto result = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!result.is_object() || !result.contains("exit_code")) {
      return {ExecStatus::Phase::kLost, 0, "the job's result file is unreadable", ""};
    }
    ExecStatus status{ExecStatus::Phase::kExited, result["exit_code"].get<int>(),
                      result.value("message", ""), result.value("reason", "")};
    return status;
  }

  const std::string self_;
  const bool isolate_;
  const bool isolate_network_;
  const bool outbound_;
  const std::vector<std::string> outbound_allow_;
  const bool own_tmp_;
  const std::map<int, int> gpu_device_minors_;  // pool index -> /dev/nvidiaMINOR
  const bool allow_root_;
  const std::vector<std::string> job_env_;
  const std::uint64_t max_log_bytes_;
  const internal::CgroupManager cgroups_;
  const json cdi_spec_;  // the pool's GPUs as CDI devices (exec/oci/cdi.h)
  std::unique_ptr<CommandRunner> own_runner_;
  std::unique_ptr<oci::ImageStore> images_;  // null: jobs in images are refused
  std::atomic<std::int64_t> last_resize_seq_{0};
  std::mutex mu_;
  std::set<pid_t> children_;  // guarded by mu_: supervisors this process forked and must reap
};

}  // namespace

std::unique_ptr<Executor> MakeLocalExecutor(const ExecutorOptions& options) {
  return std::make_unique<LocalExecutor>(options);
}

Status CheckJobIsolation(bool network) { return internal::ProbeSandbox(network); }

Status RemoveTree(const std::string& dir) {
  if (dir.empty()) return Status::Ok();
  std::error_code ec;
  fs::remove_all(dir, ec);  // never follows symbolic links
  // A folder its owner may not enter stops it: opened to the owner, then removed.
  for (int pass = 0; ec && pass < 3; ++pass) {
    std::error_code walk;
    for (auto it = fs::recursive_directory_iterator(
             dir, fs::directory_options::skip_permission_denied, walk);
         !walk && it != fs::recursive_directory_iterator(); it.increment(walk)) {
      std::error_code ignored;
      if (it->is_directory(ignored) && !it->is_symlink(ignored)) {
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ignored);
      }
    }
    ec.clear();
    fs::remove_all(dir, ec);
  }
  if (ec) return Unavailable("cannot remove " + dir + ": " + ec.message());
  return Status::Ok();
}

Status CheckOutboundRanges(const std::vector<std::string>& ranges) {
  for (const std::string& range : ranges) {
    auto parsed = internal::Cidr::Parse(range);
    if (!parsed.ok()) return parsed.status();
  }
  return Status::Ok();
}

}  // namespace headway
