#include "server/notebook_controller.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "api/auth.h"
#include "api/http_client.h"

namespace headway {
namespace {

using nlohmann::json;

constexpr const char* kServerFile = "notebook-server.json";

// The launcher. Runs as the job, in its sandbox. The server's secrets (the
// Jupyter token Headway's proxy sends, or JupyterHub's environment for its
// single-user server) come from Headway over the API, asked with this job's
// own token: they are in no spec, listing, file or log (Jupyter logs a token
// it was given as "..."). It picks a free loopback port, leaves it (not a
// secret) where the controller looks, and runs the notebook server.
constexpr const char* kLauncher = R"py(
import json, os, socket, ssl, sys, urllib.request
name, mode = sys.argv[1], sys.argv[2]
ip = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
info_dir = os.environ["HEADWAY_CHECKPOINT_DIR"]
home = os.environ.get("HOME") or os.getcwd()
request = urllib.request.Request(
    "%s/api/v1/notebooks/%s/server-env" % (os.environ["HEADWAY_URL"], name),
    headers={"Authorization": "Bearer " + os.environ["HEADWAY_TOKEN"],
             "X-Headway-Job": os.environ["HEADWAY_JOB"]})
context = None
if os.environ.get("HEADWAY_CA_FILE"):
    context = ssl.create_default_context(cafile=os.environ["HEADWAY_CA_FILE"])
with urllib.request.urlopen(request, timeout=30, context=context) as answer:
    os.environ.update(json.load(answer)["env"])
s = socket.socket()
s.bind((ip, 0))
port = s.getsockname()[1]
s.close()
if mode == "jupyterhub":
    base = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/")
    os.environ["JUPYTERHUB_SERVICE_URL"] = "http://%s:%d%s" % (ip, port, base)
    argv = [sys.executable, "-m", "jupyterhub.singleuser", "--port=%d" % port,
            "--ip=" + ip, "--SingleUserNotebookApp.open_browser=False"]
else:
    base = "/notebooks/%s/" % name
    try:
        import notebook.notebookapp
        app, argv = "NotebookApp", [sys.executable, "-m", "notebook"]
    except ImportError:
        app, argv = "ServerApp", [sys.executable, "-m", "jupyter_server"]
    for key, value in (("ip", ip), ("port", str(port)), ("port_retries", "0"),
                       ("base_url", base), ("open_browser", "False"),
                       ("allow_remote_access", "True"),
                       ("notebook_dir" if app == "NotebookApp" else "root_dir", home)):
        argv.append("--%s.%s=%s" % (app, key, value))
if os.getuid() == 0:
    argv.append("--allow-root")
tmp = os.path.join(info_dir, ".%s.tmp" % os.getpid())
fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
os.write(fd, json.dumps({"port": port, "base_url": base}).encode())
os.close(fd)
os.replace(tmp, os.path.join(info_dir, "notebook-server.json"))
os.chdir(home)
sys.stdout.flush()
os.execv(sys.executable, argv)
)py";

// The launcher's file in a job's own directory (the job controller's
// checkpoint directory, DATA_DIR/jobs/JOB/checkpoints, which only that job
// and the server see). The job may have planted a link or a FIFO there:
// opened without following links, without blocking, regular files only.
Result<json> ReadServerFile(const std::string& data_dir, const std::string& job) {
  const std::string path =
      (std::filesystem::path(data_dir) / "jobs" / job / "checkpoints" / kServerFile).string();
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Unavailable("its server has not started yet");
  struct stat st {};
  std::string text;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < 4096) {
    text.resize(static_cast<std::size_t>(st.st_size));
    ssize_t n = ::read(fd, text.data(), text.size());
    text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  }
  ::close(fd);
  json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("port") || !j["port"].is_number_integer() ||
      !j.contains("base_url") || !j["base_url"].is_string() ||
      !j["base_url"].get<std::string>().starts_with("/")) {
    return Unavailable("its server's start-up file is not readable yet");
  }
  int port = j["port"].get<int>();
  if (port < 1 || port > 65535) return Unavailable("its server gave no usable port");
  return j;
}

std::string Seconds(Duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(d.count()) / 1000.0);
  return text;
}

}  // namespace

std::vector<std::string> NotebookCommand(const std::string& python, const std::string& notebook,
                                         bool jupyterhub, bool every_interface) {
  return {python,
          "-c",
          kLauncher,
          notebook,
          jupyterhub ? "jupyterhub" : "headway",
          every_interface ? "0.0.0.0" : "127.0.0.1"};
}

NotebookController::NotebookController(Store& store, api::JobService& jobs, const Clock& clock,
                                       NotebookControllerOptions options)
    : store_(store), jobs_(jobs), clock_(clock), options_(std::move(options)) {}

const NotebookProfile* NotebookController::ProfileNamed(const std::string& name) const {
  for (const NotebookProfile& p : options_.profiles) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

api::NotebookView NotebookController::View(const NotebookRecord& record) {
  api::NotebookView view;
  view.record = record;
  if (!record.job.empty()) {
    auto job = jobs_.Get(record.job);
    if (job.ok()) {
      view.job_state = job->state;
      if (job->state == JobState::kQueued) {
        view.pending_reason = jobs_.PendingReason(record.job);
        view.place = jobs_.QueuePlaceOf(record.job);
      }
    }
  }
  std::lock_guard lock(mu_);
  auto it = live_.find(record.name);
  if (record.state == NotebookState::kRunning && it != live_.end() &&
      it->second.job == record.job) {
    view.ready = it->second.ready;
    if (view.ready && !record.hub_user.empty()) {
      view.server_url =
          "http://" + it->second.endpoint.host + ":" + std::to_string(it->second.endpoint.port);
    }
    view.idle_since = it->second.idle_since;
    view.cull_at = it->second.cull_at;
  }
  return view;
}

Result<api::NotebookView> NotebookController::Start(const api::NotebookStartRequest& request,
                                                    const std::string& created_by) {
  if (!IsValidJobName(request.name) || request.name.size() > 40) {
    return InvalidArgument("notebook name must be 1-40 lowercase letters, digits or '-', got '" +
                           request.name + "'");
  }
  const NotebookProfile* profile =
      request.profile.empty() ? &options_.profiles.front() : ProfileNamed(request.profile);
  if (profile == nullptr) {
    std::string names;
    for (const NotebookProfile& p : options_.profiles)
      names += (names.empty() ? "" : ", ") + p.name;
    return InvalidArgument("unknown notebook profile '" + request.profile +
                           "' (profiles: " + names + ")");
  }
  if (!request.hub_user.empty() &&
      (!IsValidJobName(request.hub_user) || request.hub_user.size() > 40)) {
    return InvalidArgument(
        "a JupyterHub user must be 1-40 lowercase letters, digits or '-' "
        "(the spawner maps hub names to these), got '" +
        request.hub_user + "'");
  }
  if (request.hub_user.empty() && !request.server_env.empty()) {
    return InvalidArgument("a server environment is for JupyterHub notebooks only");
  }
  std::size_t env_bytes = 0;
  for (const auto& [key, value] : request.server_env) {
    bool good =
        !key.empty() && key.size() <= 128 && !std::isdigit(static_cast<unsigned char>(key[0]));
    for (char c : key)
      good = good && (std::isupper(static_cast<unsigned char>(c)) ||
                      std::isdigit(static_cast<unsigned char>(c)) || c == '_');
    if (!good) return InvalidArgument("environment variable name '" + key + "' is not valid");
    env_bytes += key.size() + value.size();
  }
  if (request.server_env.size() > 100 || env_bytes > 64 * 1024) {
    return InvalidArgument("the server environment is limited to 100 variables and 64 KiB");
  }
  // A hub notebook's home is its hub user's (whoever's token the spawner holds).
  const std::string creator =
      request.hub_user.empty() ? created_by : "jupyterhub/" + request.hub_user;
  int gpus = request.gpus.value_or(profile->gpus);
  if (gpus < 0 || gpus > profile->gpus) {
    return InvalidArgument("profile '" + profile->name + "' allows at most " +
                           std::to_string(profile->gpus) + " GPU(s), asked for " +
                           std::to_string(gpus));
  }
  // On a cluster engine's node the server listens on every interface, for
  // the proxy to reach it from here (its token still guards it); on this
  // machine on loopback only.
  const std::string queue = profile->queue.empty() ? request.team : profile->queue;
  bool remote = false;
  for (const api::QueueStatus& q : jobs_.Queues()) {
    if (q.name == queue && q.executor != "local") remote = true;
  }
  NotebookRecord record;
  {
    std::lock_guard lock(mu_);
    auto existing = store_.GetNotebook(request.name);
    bool create = false;
    if (existing.ok()) {
      record = *existing;
      if (record.team != request.team) {
        return Conflict("notebook '" + request.name + "' belongs to team '" + record.team + "'");
      }
      if (record.state == NotebookState::kRunning) {
        return Conflict("notebook '" + request.name + "' is already running");
      }
      if (record.hub_user != request.hub_user) {
        return Conflict("notebook '" + request.name + "' is " +
                        (record.hub_user.empty() ? "Headway's, not JupyterHub's"
                                                 : "JupyterHub user " + record.hub_user + "'s"));
      }
    } else if (existing.status().code() == StatusCode::kNotFound) {
      create = true;
      record.name = request.name;
      record.team = request.team;
      record.created_by = creator;
      record.hub_user = request.hub_user;
      record.created_at = clock_.Now();
    } else {
      return existing.status();
    }
    NotebookRecord before = record;
    record.profile = profile->name;
    record.gpus = gpus;
    record.state = NotebookState::kRunning;
    record.starts += 1;
    record.job = NotebookJobName(record.name, record.starts);
    record.message.clear();
    record.cull_warned_at.reset();
    // Headway's own notebooks get a fresh Jupyter token per start; the
    // proxy sends it, and no one else ever sees it.
    std::map<std::string, std::string> server_env = request.server_env;
    if (record.hub_user.empty()) server_env = {{"JUPYTER_TOKEN", api::NewSecret()}};
    record.server_env_json = json(server_env).dump();

    JobSpec spec;
    spec.name = record.job;
    spec.team = record.team;
    spec.queue = profile->queue;
    spec.command = NotebookCommand(options_.python, record.name, !record.hub_user.empty(), remote);
    spec.env = profile->env;
    spec.resources.gpus_per_process = gpus;
    spec.resources.cpus = profile->cpus;
    spec.resources.memory_bytes = profile->memory_bytes;
    spec.time_limit = profile->time_limit;
    spec.termination_grace = std::chrono::seconds(10);
    spec.labels[std::string(kNotebookLabel)] = record.name;
    spec.persistent_home = true;
    // JupyterHub's proxy reaches a hub user's server at its host and port
    // itself, so that server shares the host's network; Headway's own
    // notebooks are reached through their job's network.
    spec.host_network = !record.hub_user.empty();

    // The record names the job before the job exists, so a crash between
    // the two leaves a notebook whose job is missing (Failed by the loop),
    // never a job no notebook knows.
    Status saved = create ? store_.CreateNotebook(record) : store_.SaveNotebook(record);
    HEADWAY_RETURN_IF_ERROR(saved);
    // The home is the creator's: whoever restarts it, it is the same home.
    auto job = jobs_.Submit(spec, record.created_by);
    // A job already has the name (one left from an earlier server, or taken
    // on purpose by someone else): the next start's name, a few times over,
    // so no one can keep a notebook from starting by taking one name.
    for (int tries = 0; !job.ok() && job.status().code() == StatusCode::kConflict && tries < 8;
         ++tries) {
      record.starts += 1;
      record.job = NotebookJobName(record.name, record.starts);
      spec.name = record.job;
      spec.labels[std::string(kNotebookLabel)] = record.name;
      HEADWAY_RETURN_IF_ERROR(store_.SaveNotebook(record));
      job = jobs_.Submit(spec, record.created_by);
    }
    if (!job.ok()) {
      if (create) {
        (void)store_.DeleteNotebook(record.name);
      } else {
        (void)store_.SaveNotebook(before);
      }
      return job.status();
    }
    live_.erase(record.name);
  }
  return View(record);
}

Result<api::NotebookView> NotebookController::Get(std::string_view name) {
  auto record = store_.GetNotebook(name);
  if (!record.ok()) return record.status();
  return View(*record);
}

Result<std::vector<api::NotebookView>> NotebookController::List(std::string_view team) {
  auto records = store_.ListNotebooks(team);
  if (!records.ok()) return records.status();
  std::vector<api::NotebookView> out;
  out.reserve(records->size());
  for (const NotebookRecord& r : *records) out.push_back(View(r));
  return out;
}

Result<api::NotebookView> NotebookController::Stop(std::string_view name) {
  NotebookRecord record;
  {
    std::lock_guard lock(mu_);
    auto stored = store_.GetNotebook(name);
    if (!stored.ok()) return stored.status();
    record = *stored;
    if (record.state != NotebookState::kRunning) {
      return Conflict("notebook '" + record.name + "' is not running (" +
                      std::string(NotebookStateName(record.state)) + ")");
    }
    record.state = NotebookState::kStopped;
    record.message = "stopped by its owner; its home is kept";
    HEADWAY_RETURN_IF_ERROR(store_.SaveNotebook(record));
    live_.erase(record.name);
  }
  auto stopped = jobs_.Stop(record.job, "notebook stopped");
  if (!stopped.ok() && stopped.status().code() != StatusCode::kConflict &&
      stopped.status().code() != StatusCode::kNotFound) {
    return stopped.status();
  }
  return View(record);
}

Status NotebookController::Delete(std::string_view name) {
  auto record = store_.GetNotebook(name);
  if (!record.ok()) return record.status();
  if (record->state == NotebookState::kRunning) {
    auto stopped = Stop(name);
    if (!stopped.ok() && stopped.status().code() != StatusCode::kConflict) return stopped.status();
  }
  std::lock_guard lock(mu_);
  live_.erase(std::string(name));
  return store_.DeleteNotebook(name);
}

Result<api::NotebookEndpoint> NotebookController::Endpoint(std::string_view name) {
  std::lock_guard lock(mu_);
  auto record = store_.GetNotebook(name);
  if (!record.ok()) return record.status();
  if (!record->hub_user.empty()) {
    return Conflict("notebook '" + record->name + "' belongs to JupyterHub user " +
                    record->hub_user + ": open it through the hub");
  }
  auto it = live_.find(std::string(name));
  if (it != live_.end() && it->second.ready && it->second.job == record->job) {
    return it->second.endpoint;
  }
  if (record->state != NotebookState::kRunning) {
    return Unavailable("notebook '" + record->name + "' is " +
                       std::string(NotebookStateName(record->state)) +
                       ": start it with `headway notebook start " + record->name + "`");
  }
  return Unavailable("notebook '" + record->name + "' is starting: its server is not up yet");
}

std::string NotebookController::OwnCustomScript(std::string_view name) {
  auto endpoint = Endpoint(name);
  if (!endpoint.ok()) return {};
  const std::string target = "/notebooks/" + std::string(name) + "/custom/custom.js";
  api::HttpClient jupyter("http://" + endpoint->host + ":" + std::to_string(endpoint->port));
  jupyter.set_timeout(std::chrono::seconds(5));
  if (endpoint->connect) jupyter.set_connector(endpoint->connect);
  auto own = jupyter.Request("GET", target, "", "text/plain",
                             {{"Authorization", "token " + endpoint->token}});
  return own.ok() && own->status == 200 ? own->body : std::string();
}

Result<std::map<std::string, std::string>> NotebookController::ServerEnv(std::string_view name,
                                                                         std::string_view job) {
  auto record = store_.GetNotebook(name);
  if (!record.ok()) return record.status();
  if (record->job != job || record->state != NotebookState::kRunning) {
    return PermissionDenied("only the server job of notebook '" + record->name +
                            "' may read its environment");
  }
  std::map<std::string, std::string> env;
  if (!record->server_env_json.empty()) {
    json j = json::parse(record->server_env_json, nullptr, false);
    if (!j.is_object()) return Internal("the stored server environment is not readable");
    for (const auto& [key, value] : j.items()) {
      if (value.is_string()) env[key] = value.get<std::string>();
    }
  }
  return env;
}

void NotebookController::Opened(std::string_view name) {
  std::lock_guard lock(mu_);
  auto it = live_.find(std::string(name));
  if (it == live_.end()) return;
  // Opening it is using it: the idle spell (and its warning) ends now, not
  // at the next check.
  it->second.activity.opened_at = clock_.Now();
  it->second.idle_since.reset();
  it->second.cull_at.reset();
}

Status NotebookController::Probe(const NotebookRecord& record, const Job& job, Live& live) {
  auto file = ReadServerFile(options_.data_dir, job.name());
  if (!file.ok()) return file.status();
  api::NotebookEndpoint endpoint;
  // On this machine: loopback. On a cluster node: the node's address, asked
  // of the executor once per server.
  endpoint.host = "127.0.0.1";
  if (job.executor != "local") {
    if (!live.endpoint.host.empty() && live.endpoint.port == (*file)["port"].get<int>()) {
      endpoint.host = live.endpoint.host;
    } else {
      auto host = jobs_.PrimaryHost(job.name());
      if (!host.ok()) return host.status();
      endpoint.host = *host;
    }
  }
  endpoint.port = (*file)["port"].get<int>();
  if (job.executor == "local") {
    // Inside the job's own network (where it has one): the port is the
    // notebook's to choose, and no other job's or the host's.
    endpoint.connect = [this, job = job.name(), port = endpoint.port] {
      return jobs_.ConnectToJob(job, port);
    };
  }
  // The token the server was given: Headway's own, or the hub's for its server.
  json env = json::parse(record.server_env_json, nullptr, false);
  if (env.is_object()) {
    endpoint.token =
        env.value(record.hub_user.empty() ? "JUPYTER_TOKEN" : "JUPYTERHUB_API_TOKEN", "");
  }
  if (endpoint.token.empty()) return Internal("the notebook's server token is not recorded");
  endpoint.team = record.team;
  api::HttpClient client("http://" + endpoint.host + ":" + std::to_string(endpoint.port));
  client.set_timeout(std::chrono::seconds(2));
  if (endpoint.connect) client.set_connector(endpoint.connect);
  // /api/kernels: Jupyter's own activity record of each kernel. (A hub
  // server checks its hub token with the hub, which lets it see its own.)
  auto answer = client.Request("GET", (*file)["base_url"].get<std::string>() + "api/kernels", {},
                               "application/json", {{"Authorization", "token " + endpoint.token}});
  if (!answer.ok()) return answer.status();
  if (answer->status != 200) {
    return Unavailable("its server answered " + std::to_string(answer->status));
  }
  json kernels = json::parse(answer->body, nullptr, false);
  if (!kernels.is_array()) return Unavailable("its server's kernel list is not a list");
  live.endpoint = endpoint;
  live.activity.kernel_busy = false;
  for (const json& k : kernels) {
    if (!k.is_object()) continue;
    if (k.value("execution_state", "") == "busy") live.activity.kernel_busy = true;
    if (auto t = ParseRfc3339(k.value("last_activity", ""))) {
      if (!live.activity.kernel_activity || *t > *live.activity.kernel_activity) {
        live.activity.kernel_activity = *t;
      }
    }
  }
  return Status::Ok();
}

void NotebookController::CheckIdle(NotebookRecord& record, const Job& job, Live& live, Time now) {
  const NotebookProfile* profile = ProfileNamed(record.profile);
  if (profile == nullptr) return;  // a profile the admin has since removed: never culled
  bool gpu_signal = false;
  live.activity.gpu_busy = false;
  if (!job.gpu_ids.empty() && options_.gpu_utilization) {
    std::map<int, double> utilization = options_.gpu_utilization();
    for (int id : job.gpu_ids) {
      auto it = utilization.find(id);
      if (it == utilization.end()) continue;
      gpu_signal = true;
      if (it->second >= profile->gpu_idle_below_percent) live.activity.gpu_busy = true;
    }
    if (live.activity.gpu_busy) live.activity.gpu_busy_at = now;
  }
  IdleVerdict verdict = DecideIdle(live.activity, record.cull_warned_at, *profile, now);
  live.idle_since = verdict.idle_since;
  live.cull_at.reset();
  if (profile->idle_timeout.count() > 0 && verdict.idle_for.count() > 0) {
    live.cull_at = verdict.idle_since + profile->idle_timeout;
    if (record.cull_warned_at && *record.cull_warned_at >= verdict.idle_since) {
      live.cull_at = std::max(*live.cull_at, *record.cull_warned_at + profile->cull_warning);
    }
  }
  const std::string gpus_said = job.gpu_ids.empty() ? "no GPUs"
                                : gpu_signal        ? "GPUs idle"
                                             : "GPU utilisation unknown, judged by its kernels";
  if (verdict.action == IdleVerdict::Action::kWarn) {
    record.cull_warned_at = now;
    if (!store_.SaveNotebook(record).ok()) return;
    (void)jobs_.AddEvent(
        job.name(), "NotebookIdle",
        "notebook " + record.name + " has been idle for " + FormatDuration(verdict.idle_for) +
            " (kernels idle, " + gpus_said + "): it will be culled at " +
            FormatRfc3339(live.cull_at.value_or(now)) + " unless used; its home is kept");
  } else if (verdict.action == IdleVerdict::Action::kCull) {
    record.state = NotebookState::kCulled;
    record.message = "culled after " + FormatDuration(verdict.idle_for) + " idle (" + gpus_said +
                     "); its home is kept: start it again with `headway notebook start " +
                     record.name + "`";
    if (!store_.SaveNotebook(record).ok()) return;
    (void)jobs_.Stop(job.name(), "notebook culled: idle for " + FormatDuration(verdict.idle_for));
  }
}

void NotebookController::Tick() {
  auto records = store_.ListNotebooks("");
  if (!records.ok()) return;
  for (const NotebookRecord& listed : *records) {
    if (listed.state != NotebookState::kRunning) continue;
    Live live;
    Job job;
    NotebookRecord record;
    {
      std::lock_guard lock(mu_);
      auto stored = store_.GetNotebook(listed.name);
      if (!stored.ok() || stored->state != NotebookState::kRunning) continue;
      record = *stored;
      auto found = jobs_.Get(record.job);
      if (!found.ok() || IsTerminal(found->state)) {
        record.state = NotebookState::kFailed;
        record.message = !found.ok()
                             ? "its server's job " + record.job + " is gone"
                             : "its server ended (" + std::string(JobStateName(found->state)) +
                                   (found->reason.empty() ? "" : ": " + found->reason) +
                                   (found->message.empty() ? "" : ", " + found->message) + ")";
        (void)store_.SaveNotebook(record);
        live_.erase(record.name);
        continue;
      }
      job = std::move(*found);
      Live& current = live_[record.name];
      if (current.job != record.job) {
        current = Live();
        current.job = record.job;
      }
      live = current;
    }
    if (job.state != JobState::kRunning) continue;
    const Time now = clock_.Now();
    const bool due =
        !live.ready || !live.last_check || now - *live.last_check >= options_.check_interval;
    if (!due) continue;
    // Outside the lock: the server may take its timeout to answer, and the
    // proxy asks for endpoints all the while.
    Status probed = Probe(record, job, live);
    std::lock_guard lock(mu_);
    auto it = live_.find(record.name);
    if (it == live_.end() || it->second.job != record.job) continue;  // stopped meanwhile
    auto stored = store_.GetNotebook(record.name);
    if (!stored.ok() || stored->state != NotebookState::kRunning || stored->job != record.job) {
      continue;
    }
    record = *stored;
    live.activity.opened_at = it->second.activity.opened_at;
    if (!probed.ok()) {
      // Not up yet; a server that stops answering keeps its endpoint (the
      // proxy then reports the failure) and is not judged idle meanwhile.
      it->second = live;
      if (live.ready) it->second.last_check = now;
      continue;
    }
    if (!live.ready) {
      live.ready = true;
      live.activity.started_at = now;
      (void)jobs_.AddEvent(job.name(), "NotebookReady",
                           "notebook " + record.name + " is ready at /notebooks/" + record.name +
                               "/, " + Seconds(now - job.created_at) + " after it was queued");
    }
    live.last_check = now;
    CheckIdle(record, job, live, now);
    if (record.state == NotebookState::kRunning) {
      it->second = live;
    } else {
      live_.erase(it);
    }
  }
}

void NotebookController::RunLoop(Duration period) {
  loop_.Run(period, [this] { Tick(); });
}

void NotebookController::Shutdown() { loop_.Stop(); }

}  // namespace headway
