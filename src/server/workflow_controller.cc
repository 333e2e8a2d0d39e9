#include "server/workflow_controller.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <type_traits>
#include <variant>

#include "artifact/file_digest.h"
#include "core/artifact.h"
#include "core/container_tools.h"
#include "core/job_spec_json.h"
#include "core/job_spec_parser.h"
#include "core/terminal_text.h"
#include "server/workflow_shared.h"
#include "workflow/cron.h"
#include "workflow/manifest.h"
#include "workflow/progress.h"
#include "workflow/substitute.h"

namespace headway {
namespace {

using nlohmann::json;
namespace wf = workflow;
using workflow_shared::ArgoTime;
using workflow_shared::CheckPlannedNodes;
using workflow_shared::kInputsDir;
using workflow_shared::OpenDirNoFollow;
using workflow_shared::PoolRequestOf;
using workflow_shared::RandomNameSuffix;
using workflow_shared::SpecOf;

// Where a step leaves its outputs, under the job's home.
constexpr const char* kStepDir = ".headway-step";
// Argo's limit on outputs.result and parameters, plus one byte to tell a
// value that is too large.
constexpr std::size_t kMaxOutputRead = 256 * 1024 + 1;
// One argument carries a script's source (Linux bounds one at 128 kB).
constexpr std::size_t kMaxScriptBytes = 120 * 1024;

std::string RandomUid() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  char buf[37];
  std::uint64_t a = rng(), b = rng();
  std::snprintf(buf, sizeof buf, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                static_cast<unsigned>(((b >> 48) & 0x3fff) | 0x8000),
                static_cast<unsigned long long>(b & 0xffffffffffffull));
  return buf;
}

std::string WorkflowCreator(std::string_view name) { return "workflow/" + std::string(name); }

// Reads `dirfd/name` if it is a regular file (never through a link), at
// most kMaxOutputRead bytes.
std::optional<std::string> ReadPlainFile(int dirfd, const char* name) {
  int fd = ::openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::optional<std::string> out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    std::string text(kMaxOutputRead, '\0');
    std::size_t got = 0;
    while (got < text.size()) {
      ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    text.resize(got);
    out = std::move(text);
  }
  ::close(fd);
  return out;
}

const char* ShutdownName(wf::Shutdown s) {
  switch (s) {
    case wf::Shutdown::kStop:
      return "Stop";
    case wf::Shutdown::kTerminate:
      return "Terminate";
    case wf::Shutdown::kNone:
      return "";
  }
  return "";
}

// Argo's phase for a workflow: Hera's wait() knows Running, Succeeded,
// Failed and Error only, so a workflow not yet started reads Running.
std::string ArgoPhase(wf::NodePhase phase) {
  if (phase == wf::NodePhase::kPending) return "Running";
  return std::string(wf::NodePhaseName(phase));
}

json StatusJson(const wf::WorkflowState& state, const std::string& namespace_,
                const std::string& progress) {
  json s = {{"phase", ArgoPhase(state.phase)}, {"namespace", namespace_}};
  if (!state.message.empty()) s["message"] = state.message;
  if (state.started_at) s["startedAt"] = headway::FormatRfc3339(*state.started_at);
  if (state.finished_at) s["finishedAt"] = headway::FormatRfc3339(*state.finished_at);
  if (state.suspended) s["suspended"] = true;
  if (state.shutdown != wf::Shutdown::kNone) s["shutdown"] = ShutdownName(state.shutdown);
  if (state.generation != 0) s["generation"] = state.generation;
  if (!progress.empty()) s["progress"] = progress;
  if (!state.outputs.empty()) {
    json params = json::array();
    for (const auto& p : state.outputs) params.push_back({{"name", p.name}, {"value", p.value}});
    s["outputs"] = params;
  }
  if (!state.output_artifacts.empty()) {
    json artifacts = json::array();
    for (const auto& a : state.output_artifacts)
      artifacts.push_back({{"name", a.name}, {"headway", {{"artifact", a.ref}}}});
    s["outputArtifacts"] = artifacts;
  }
  return s;
}

void StateFromStatusJson(const json& s, wf::WorkflowState& state) {
  if (!s.is_object()) return;
  auto phase = wf::ParseNodePhase(s.value("phase", "Running"));
  state.phase = phase.value_or(wf::NodePhase::kRunning);
  state.message = s.value("message", "");
  if (s.contains("startedAt")) state.started_at = ParseRfc3339(s.value("startedAt", ""));
  // Argo's phase reads Running before the first pass; the engine starts it.
  if (!state.started_at && state.phase == wf::NodePhase::kRunning)
    state.phase = wf::NodePhase::kPending;
  if (s.contains("finishedAt")) state.finished_at = ParseRfc3339(s.value("finishedAt", ""));
  state.suspended = s.value("suspended", false);
  std::string shutdown = s.value("shutdown", "");
  state.shutdown = shutdown == "Stop"        ? wf::Shutdown::kStop
                   : shutdown == "Terminate" ? wf::Shutdown::kTerminate
                                             : wf::Shutdown::kNone;
  state.generation = s.value("generation", 0);
  if (s.contains("outputs") && s["outputs"].is_array()) {
    for (const json& p : s["outputs"]) {
      if (p.is_object()) state.outputs.push_back({p.value("name", ""), p.value("value", "")});
    }
  }
  if (s.contains("outputArtifacts") && s["outputArtifacts"].is_array()) {
    for (const json& a : s["outputArtifacts"]) {
      if (!a.is_object()) continue;
      const json headway = a.value("headway", json::object());
      state.output_artifacts.push_back(
          {a.value("name", ""), "", headway.is_object() ? headway.value("artifact", "") : ""});
    }
  }
}

}  // namespace

std::vector<std::string> StepCommand(const wf::JobToCreate& job, const std::string& step_dir,
                                     const std::string& inputs_dir, bool in_image) {
  // $1 is the step's folder, made afresh; $2 "script" when $3 is a script's
  // source, written to a file whose path goes after the command (0755, as
  // Argo's executor stages it: `command: [sh, -c]` runs it as a program). The step's
  // stdout goes to the log through tee and, its first 256 kB, to a file (the
  // rest is read and dropped, so tee never writes into a closed pipe); then
  // the output parameters' files are copied in. The step's own exit status
  // is the job's. In an image the wrapper needs nothing of it: it runs its
  // own tools from the static busybox every container is given (as Argo
  // gives each pod its executor), and the step's command with the image's.
  const std::string t = in_image ? std::string(kContainerBusybox) + " " : "";
  std::string script =
      "d=\"$1\"; kind=\"$2\"; source=\"$3\"; in=\"$4\"; shift 4\n"
      "" +
      t + "rm -rf \"$d\" && " + t + "mkdir -p \"$d/parameters\" \"$d/artifacts\" || exit 1\n";
  // Input artifacts: a directory comes as NAME.tar, a file as NAME.
  for (const wf::InputArtifact& a : job.input_artifacts) {
    const std::string path = ShellQuote(a.path), staged = "\"$in/\"" + ShellQuote(a.name);
    script += "if [ -f " + staged + ".tar ]; then " + t + "mkdir -p " + path + " && " + t +
              "tar -xf " + staged + ".tar -C " + path + " || exit 1; else " + t + "mkdir -p \"$(" +
              t + "dirname " + path + ")\" && " + t + "cp -- " + staged + " " + path +
              " || exit 1; fi\n";
  }
  script +=
      "if [ \"$kind\" = script ]; then\n"
      "  printf '%s' \"$source\" > \"$d/script\" && " +
      t +
      "chmod 0755 \"$d/script\" || exit 1\n"
      "  set -- \"$@\" \"$d/script\"\n"
      "fi\n"
      "unset source\n" +
      t +
      "mkfifo \"$d/stdout.fifo\" || exit 1\n"
      "{ " +
      t + "head -c " + std::to_string(kMaxOutputRead) + " > \"$d/stdout\"; " + t +
      "cat > /dev/null; } < \"$d/stdout.fifo\" & h=$!\n"
      "{ \"$@\"; echo $? > \"$d/exit-code\"; } | " +
      t +
      "tee \"$d/stdout.fifo\"\n"
      "wait $h\n"
      "rc=$(" +
      t + "cat \"$d/exit-code\" 2>/dev/null || echo 1)\n";
  for (const auto& [name, path] : job.output_paths) {
    script += "[ -f " + ShellQuote(path) + " ] && " + t + "cp -- " + ShellQuote(path) +
              " \"$d/parameters/\"" + ShellQuote(name) + "\n";
  }
  for (const wf::OutputArtifact& a : job.output_artifacts) {
    const std::string path = ShellQuote(a.path), kept = "\"$d/artifacts/\"" + ShellQuote(a.name);
    script += "if [ $rc = 0 ]; then if [ -d " + path + " ]; then " + t + "tar -cf " + kept +
              ".tar -C " + path + " . || rc=1; elif [ -f " + path + " ]; then " + t + "cp -- " +
              path + " " + kept + " || rc=1; fi; fi\n";
  }
  script += "exit $rc\n";
  std::vector<std::string> argv;
  if (in_image) {
    argv = {std::string(kContainerBusybox), "sh"};
  } else {
    argv = {"/bin/sh"};
  }
  argv.insert(argv.end(),
              {"-c", script, "headway-step", step_dir, job.script_source ? "script" : "container",
               job.script_source.value_or(""), inputs_dir});
  argv.insert(argv.end(), job.spec.command.begin(), job.spec.command.end());
  argv.insert(argv.end(), job.spec.args.begin(), job.spec.args.end());
  return argv;
}

WorkflowController::WorkflowController(Store& store, api::JobService& jobs, const Clock& clock,
                                       std::string data_dir, api::ArtifactService* artifacts)
    : store_(store),
      jobs_(jobs),
      clock_(clock),
      data_dir_(std::move(data_dir)),
      artifacts_(artifacts) {}

void WorkflowController::Wake() { loop_.Wake(); }

void WorkflowController::Shutdown() { loop_.Stop(); }

void WorkflowController::RunLoop(Duration period) {
  loop_.Run(period, [this] { Tick(); });
}

void WorkflowController::Tick() {
  std::lock_guard lock(mu_);
  templates_.clear();  // WorkflowTemplates are read again once per pass
  RunCrons();
  if (!loaded_) {
    WorkflowFilter active;
    active.active_only = true;
    auto records = store_.ListWorkflows(active);
    if (!records.ok()) return;  // the store is down: try again next pass
    for (const WorkflowRecord& r : *records) (void)Load(r.name);
    loaded_ = true;
  }
  const Time now = clock_.Now();
  bool everything = job_changes_ == nullptr || now - last_full_pass_ >= kFullPassEvery;
  if (everything) last_full_pass_ = now;
  std::set<std::string> changed;  // workflows one of whose jobs changed
  if (job_changes_ != nullptr) {
    std::vector<std::shared_ptr<const api::WatchCache::Entry>> jobs;
    seen_changes_ = job_changes_->ChangesSince(seen_changes_, "", jobs);
    for (const auto& job : jobs) {
      if (auto owner = job_owner_.find(job->name); owner != job_owner_.end()) {
        changed.insert(owner->second);
      }
    }
  }
  std::vector<std::string> finished;
  for (auto& [name, live] : live_) {
    const bool due = everything || live.dirty || (live.wake_at && *live.wake_at <= now) ||
                     changed.count(name) > 0;
    if (due && !live.state.Finished()) Advance(live);
    if (live.stale) loaded_ = false;  // read it again from the store next pass
    if (live.state.Finished() || live.stale) finished.push_back(name);
  }
  for (const std::string& name : finished) {
    for (const auto& [id, node] : live_.at(name).state.nodes) {
      if (!node.job.empty()) job_owner_.erase(node.job);
    }
    live_.erase(name);
  }
}

void WorkflowController::SetBounds(const WorkflowBounds& bounds) {
  std::lock_guard lock(mu_);
  bounds_ = bounds;
}

std::size_t WorkflowController::TeamNodes(const std::string& team, std::string_view except) const {
  std::size_t nodes = 0;
  for (const auto& [name, live] : live_) {
    if (live.record.team == team && name != except) nodes += live.state.nodes.size();
  }
  return nodes;
}

void WorkflowController::FollowJobChanges(api::WatchCache* changes) {
  std::lock_guard lock(mu_);
  job_changes_ = changes;
  seen_changes_ = 0;
}

Result<WorkflowController::Live*> WorkflowController::Load(std::string_view name) {
  auto it = live_.find(std::string(name));
  if (it != live_.end()) return &it->second;
  auto record = store_.GetWorkflow(name);
  if (!record.ok()) return record.status();
  auto manifest = wf::ParseManifest(record->manifest);
  if (!manifest.ok() || !std::holds_alternative<wf::Workflow>(manifest->resource)) {
    return Internal("stored workflow '" + std::string(name) + "' is unreadable");
  }
  auto nodes = store_.ListWorkflowNodes(name);
  if (!nodes.ok()) return nodes.status();
  Live live;
  live.record = std::move(*record);
  live.manifest = std::get<wf::Workflow>(std::move(manifest->resource));
  live.state.name = live.record.name;
  live.state.uid = live.record.uid;
  StateFromStatusJson(json::parse(live.record.status, nullptr, false), live.state);
  for (const WorkflowNodeRecord& n : *nodes) {
    auto node = wf::NodeFromJson(json::parse(n.body, nullptr, false));
    if (!node.ok()) return Internal("stored node " + n.id + ": " + node.status().message());
    live.saved_bodies[n.id] = n.body;
    live.status_bytes += n.body.size();
    if (!node->job.empty()) job_owner_[node->job] = live.record.name;
    live.state.nodes.emplace(node->id, std::move(*node));
  }
  return &live_.emplace(live.record.name, std::move(live)).first->second;
}

std::optional<wf::JobObservation> WorkflowController::Observe(const Live& live,
                                                              const std::string& job_name) {
  auto job = jobs_.Get(job_name);
  if (!job.ok()) return std::nullopt;
  wf::JobObservation seen;
  seen.state = job->state;
  seen.started_at = job->started_at;
  seen.finished_at = job->finished_at;
  seen.exit_code = job->exit_code;
  seen.reason = job->reason;
  seen.message = job->message;
  if (!IsTerminal(job->state)) return seen;
  // What the step left: read without following links the job may have
  // planted (it owns its home).
  const std::string home = data_dir_ + "/jobs/" + job_name + "/home";
  int home_fd = ::open(home.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (home_fd < 0) return seen;
  int step_fd = OpenDirNoFollow(home_fd, kStepDir);
  ::close(home_fd);
  if (step_fd < 0) return seen;
  seen.stdout_text = ReadPlainFile(step_fd, "stdout");
  if (job->state == JobState::kSucceeded) IngestArtifacts(live, job_name, step_fd, seen);
  int params_fd = OpenDirNoFollow(step_fd, "parameters");
  ::close(step_fd);
  if (params_fd < 0) return seen;
  if (DIR* dir = ::fdopendir(params_fd)) {
    while (dirent* entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name == "." || name == ".." || !wf::IsValidParameterName(name)) continue;
      if (auto value = ReadPlainFile(::dirfd(dir), entry->d_name)) seen.parameters[name] = *value;
    }
    ::closedir(dir);
  } else {
    ::close(params_fd);
  }
  return seen;
}

std::optional<wf::MemoEntry> WorkflowController::MemoLookup(const std::string& team,
                                                            const std::string& cache,
                                                            const std::string& key) {
  auto found = store_.GetWorkflowManifest("Memo", team + "/" + cache + "/" + key);
  if (!found.ok()) return std::nullopt;
  json body = json::parse(found->body, nullptr, false);
  if (!body.is_object()) return std::nullopt;
  wf::MemoEntry entry;
  entry.cache = cache;
  entry.key = key;
  entry.saved_at = found->updated_at;
  for (const json& p : body.value("outputs", json::array())) {
    if (p.is_object()) entry.outputs.push_back({p.value("name", ""), p.value("value", "")});
  }
  if (body.contains("result") && body["result"].is_string()) entry.result = body["result"];
  return entry;
}

void WorkflowController::SaveMemo(const std::string& team, const wf::MemoEntry& entry) {
  json outputs = json::array();
  for (const auto& p : entry.outputs) outputs.push_back({{"name", p.name}, {"value", p.value}});
  json body = {{"cache", entry.cache}, {"key", entry.key}, {"outputs", outputs}};
  if (entry.result) body["result"] = *entry.result;
  WorkflowManifestRecord record;
  record.kind = "Memo";
  record.name = team + "/" + entry.cache + "/" + entry.key;
  record.team = team;
  record.body = body.dump();
  record.created_at = record.updated_at = entry.saved_at;
  auto existing = store_.GetWorkflowManifest(record.kind, record.name);
  if (existing.ok()) {
    record.revision = existing->revision;
    record.created_at = existing->created_at;
    (void)store_.UpdateWorkflowManifest(record);
  } else {
    (void)store_.CreateWorkflowManifest(record);
  }
}

Status WorkflowController::Save(Live& live) {
  std::vector<WorkflowNodeRecord> changed;
  for (const auto& [id, node] : live.state.nodes) {
    std::string body = wf::ToJson(node).dump();
    auto saved = live.saved_bodies.find(id);
    if (saved != live.saved_bodies.end() && saved->second == body) continue;
    changed.push_back({live.record.name, id, std::string(wf::NodePhaseName(node.phase)), node.job,
                       std::move(body)});
  }
  const wf::Node* root = live.state.FindByName(live.state.name);
  WorkflowRecord record = live.record;
  record.phase = ArgoPhase(live.state.phase);
  record.started_at = live.state.started_at;
  record.finished_at = live.state.finished_at;
  json previous = json::parse(live.record.status, nullptr, false);
  std::string namespace_ =
      previous.is_object() ? previous.value("namespace", "default") : "default";
  record.status = StatusJson(live.state, namespace_, root ? root->progress : "").dump();
  // Nodes a retry removed go from the store too, or a restart would bring them back.
  std::vector<std::string> removed;
  for (const auto& [id, body] : live.saved_bodies) {
    if (!live.state.nodes.count(id)) removed.push_back(id);
  }
  HEADWAY_RETURN_IF_ERROR(store_.SaveWorkflow(record, changed, removed));
  for (const std::string& id : removed) live.saved_bodies.erase(id);
  live.record = std::move(record);
  for (const WorkflowNodeRecord& n : changed) {
    const wf::Node& node = live.state.nodes.at(n.id);
    if (node.type == wf::NodeType::kPod && node.phase == wf::NodePhase::kSucceeded &&
        node.started_at && node.finished_at && !node.memo_hit.value_or(false)) {
      Duration took = *node.finished_at - *node.started_at;
      auto [it, fresh] = typical_.emplace(live.record.team + "/" + node.template_name, took);
      if (!fresh) it->second = (it->second * 3 + took) / 4;
    }
  }
  for (WorkflowNodeRecord& n : changed) live.saved_bodies[n.id] = std::move(n.body);
  live.status_bytes = 0;
  for (const auto& [id, body] : live.saved_bodies) live.status_bytes += body.size();
  return Status::Ok();
}

void WorkflowController::Advance(Live& live) {
  wf::Environment env;
  env.now = clock_.Now();
  env.team = live.record.team;
  env.metadata = live.manifest.metadata;
  const std::string created_by = WorkflowCreator(live.record.name);
  const std::string workflow_name = live.record.name;
  const std::string team = live.record.team;
  env.observe = [&](const std::string& job) { return Observe(live, job); };
  env.memo_lookup = [&](const std::string& cache, const std::string& key) {
    return MemoLookup(team, cache, key);
  };
  env.resolve_ref = [&](const wf::TemplateRef& ref) { return ResolveRef(ref, team); };
  env.max_new_pods = bounds_.max_new_pods_per_pass;
  bool held_by_team_bound = false;
  if (bounds_.max_queued_jobs_per_team > 0) {
    const int room = bounds_.max_queued_jobs_per_team - jobs_.QueuedJobsOf(team);
    const std::size_t team_room = static_cast<std::size_t>(std::max(0, room));
    if (team_room < env.max_new_pods) {
      env.max_new_pods = team_room;
      held_by_team_bound = true;
    }
  }
  const std::size_t others = TeamNodes(team, workflow_name);
  env.max_nodes = others >= bounds_.max_nodes_per_team ? 0 : bounds_.max_nodes_per_team - others;
  env.node_limit_reason = "what its team's workflows may still hold (--max-workflow-nodes " +
                          std::to_string(bounds_.max_nodes_per_team) + " in all)";
  if (env.max_nodes >= wf::kMaxWorkflowNodes) {
    env.node_limit_reason = "a workflow's limit";
  }
  if (live.status_bytes > bounds_.max_status_bytes) {
    env.stop_reason = "its status (its steps' outputs) holds " + std::to_string(live.status_bytes) +
                      " bytes, more than a workflow may (" +
                      std::to_string(bounds_.max_status_bytes) + "): stopped";
  }
  wf::Actions actions = wf::Operate(live.manifest.spec, live.state, env);
  // What changed may let more happen (a finished step frees its dependents):
  // look again next pass. Otherwise only a job's change or a timer will.
  live.dirty = actions.changed || !actions.create.empty() || !actions.stop.empty();
  live.wake_at = actions.wake_at;
  // Steps held by the team's queued-job bound start as the team's queue
  // drains, which other workflows' jobs may do: look again soon.
  if (held_by_team_bound) {
    const Time soon = env.now + std::chrono::seconds(1);
    if (!live.wake_at || soon < *live.wake_at) live.wake_at = soon;
  }
  for (const wf::JobToCreate& create : actions.create) job_owner_[create.spec.name] = workflow_name;
  if (actions.changed) {
    Status saved = Save(live);
    if (!saved.ok()) {
      // Someone else wrote it (or the store is down): read it again next pass.
      live.stale = true;
      return;
    }
  }
  for (const wf::JobToCreate& create : actions.create) {
    JobSpec spec = create.spec;
    if (create.script_source && create.script_source->size() > kMaxScriptBytes) {
      wf::Node& node = live.state.nodes.at(create.node_id);
      node.phase = wf::NodePhase::kError;
      node.message = "script source is larger than 120 kB";
      node.finished_at = env.now;
      (void)Save(live);
      continue;
    }
    if (Status staged = StageInputs(live, create); !staged.ok()) {
      wf::Node& node = live.state.nodes.at(create.node_id);
      node.phase = wf::NodePhase::kError;
      node.message = staged.message();
      node.finished_at = env.now;
      (void)Save(live);
      continue;
    }
    const std::string home = data_dir_ + "/jobs/" + spec.name + "/home/";
    const bool in_image = run_step_images_ && !create.image.empty();
    spec.command = StepCommand(create, home + kStepDir, home + kInputsDir, in_image);
    spec.args.clear();
    spec.labels["headway.dev/workflow"] = workflow_name;
    if (in_image) {
      spec.image = create.image;
      auto policy = ParseImagePullPolicy(create.image_pull_policy);
      spec.image_pull_policy = policy.value_or(ImagePullPolicy::kDefault);
    } else if (!create.image.empty()) {
      // Recorded, and said in the job's Submitted event: no container runs it.
      spec.labels[std::string(kStepImageLabel)] = EscapeForTerminal(create.image.substr(0, 256));
    }
    // As in a container: concurrent steps writing /tmp/out must not collide.
    spec.private_tmp = true;
    // Only a spec the job store reads back is submitted (env names, ...).
    Result<Job> submitted = InvalidArgument("not submitted");
    if (auto readable = ParseJobSpec(JobSpecToJson(spec).dump()); !readable.ok()) {
      submitted = readable.status();
    } else {
      submitted = jobs_.Submit(spec, created_by);
    }
    if (!submitted.ok() && submitted.status().code() != StatusCode::kConflict) {
      wf::Node& node = live.state.nodes.at(create.node_id);
      node.phase = wf::NodePhase::kError;
      node.message = "could not queue its job: " +
                     (submitted.status().field().empty() ? "" : submitted.status().field() + ": ") +
                     submitted.status().message();
      node.finished_at = env.now;
      (void)Save(live);
    }
  }
  for (const std::string& job : actions.stop) {
    (void)jobs_.Stop(job, "workflow " + workflow_name + " is stopping");
  }
  for (const wf::MemoEntry& entry : actions.memoize) SaveMemo(team, entry);
}

api::WorkflowView WorkflowController::View(const Live& live, bool with_nodes) {
  api::WorkflowView view = ViewOfRecord(live.record);
  json nodes = json::object();
  if (with_nodes) {
    for (const auto& [id, node] : live.state.nodes) nodes[id] = wf::ToJson(node);
  }
  if (!live.state.Finished()) {
    view.body["status"]["headway"] = LiveProgress(live, with_nodes ? &nodes : nullptr);
  }
  if (with_nodes) view.body["status"]["nodes"] = std::move(nodes);
  return view;
}

json WorkflowController::LiveProgress(const Live& live, json* nodes) {
  std::vector<Health> healths;
  const std::string team = live.record.team;
  wf::StepKnowledge know;
  know.live_eta = [&](const wf::Node& pod) -> std::optional<Duration> {
    auto job = jobs_.Get(pod.job);
    if (!job.ok()) return std::nullopt;
    ProgressView p = jobs_.Progress(*job);
    healths.push_back(p.health);
    if (nodes != nullptr && nodes->contains(pod.id)) {
      json& h = (*nodes)[pod.id]["headway"];
      if (p.percent) h["percent"] = *p.percent;
      if (p.eta_seconds) h["eta_seconds"] = *p.eta_seconds;
      h["health"] = std::string(HealthName(p.health));
    }
    if (p.eta_seconds) return Duration(static_cast<std::int64_t>(*p.eta_seconds * 1000));
    // No rate yet, but a percent: the time so far, scaled to what is left.
    if (p.percent && *p.percent > 0 && *p.percent < 100 && pod.started_at) {
      double elapsed = static_cast<double>((clock_.Now() - *pod.started_at).count());
      return Duration(static_cast<std::int64_t>(elapsed * (100 - *p.percent) / *p.percent));
    }
    return std::nullopt;
  };
  know.typical = [&](const std::string& template_name) -> std::optional<Duration> {
    auto it = typical_.find(team + "/" + template_name);
    if (it == typical_.end()) return std::nullopt;
    return it->second;
  };
  know.resolve_ref = [&](const wf::TemplateRef& ref) { return ResolveRef(ref, team); };
  auto steps = wf::PlanTimings(live.manifest.spec, live.state, clock_.Now(), know);
  json out = json::object();
  out["health"] = std::string(HealthName(wf::WorkflowHealth(healths)));
  auto eta = wf::EstimateWorkflow(steps);
  if (!eta.ok()) return out;
  out["percent"] = std::round(eta->fraction_done * 1000) / 10;
  out["eta_seconds"] = static_cast<double>(eta->remaining.count()) / 1000.0;
  if (eta->lower_bound) out["eta_is_lower_bound"] = true;
  out["critical_path"] = eta->critical_path;
  out["steps_finished"] = eta->steps_finished;
  out["steps_total"] = eta->steps_total;
  return out;
}

api::WorkflowView WorkflowController::ViewOfRecord(const WorkflowRecord& record) const {
  api::WorkflowView view;
  view.team = record.team;
  view.created_by = record.created_by;
  view.seq = record.seq;
  json manifest = json::parse(record.manifest, nullptr, false);
  json status = json::parse(record.status, nullptr, false);
  if (!status.is_object()) status = json::object();
  json body = manifest.is_object() ? manifest : json::object();
  body["apiVersion"] = std::string(wf::kApiVersion);
  body["kind"] = "Workflow";
  json& meta = body["metadata"];
  if (!meta.is_object()) meta = json::object();
  meta.erase("generateName");
  meta["name"] = record.name;
  meta["namespace"] = status.value("namespace", "default");
  meta["uid"] = record.uid;
  meta["resourceVersion"] = std::to_string(record.revision);
  meta["creationTimestamp"] = ArgoTime(record.created_at);
  json& labels = meta["labels"];
  if (!labels.is_object()) labels = json::object();
  labels["workflows.argoproj.io/phase"] = record.phase;
  labels["workflows.argoproj.io/completed"] = record.finished_at ? "true" : "false";
  labels[std::string(wf::kTeamKey)] = record.team;
  if (!body.contains("spec") || !body["spec"].is_object()) body["spec"] = json::object();
  if (status.value("suspended", false)) body["spec"]["suspend"] = true;
  if (status.contains("shutdown")) body["spec"]["shutdown"] = status["shutdown"];
  json out = {{"phase", record.phase}};
  if (record.started_at) out["startedAt"] = headway::FormatRfc3339(*record.started_at);
  out["finishedAt"] =
      record.finished_at ? json(headway::FormatRfc3339(*record.finished_at)) : json(nullptr);
  if (status.contains("message")) out["message"] = status["message"];
  if (status.contains("progress")) out["progress"] = status["progress"];
  if (status.contains("outputs")) out["outputs"]["parameters"] = status["outputs"];
  if (status.contains("outputArtifacts")) out["outputs"]["artifacts"] = status["outputArtifacts"];
  body["status"] = std::move(out);
  view.body = std::move(body);
  return view;
}

Result<api::WorkflowView> WorkflowController::CreateWorkflow(std::string_view text,
                                                             std::string_view namespace_,
                                                             const api::TeamAdmission& admit,
                                                             const std::string& created_by,
                                                             bool dry_run) {
  auto manifest = wf::ParseManifest(text);
  if (!manifest.ok()) return manifest.status();
  if (!std::holds_alternative<wf::Workflow>(manifest->resource)) {
    return InvalidArgument("kind: expected a Workflow").WithField("kind");
  }
  api::PoolRequest pool = PoolRequestOf(*manifest);
  wf::Workflow workflow = std::get<wf::Workflow>(std::move(manifest->resource));
  if (admit) HEADWAY_RETURN_IF_ERROR(admit(pool));
  const std::string team = pool.team;
  std::string ns = namespace_.empty() ? workflow.metadata.namespace_ : std::string(namespace_);
  std::vector<std::string> warnings;
  for (const wf::Warning& w : manifest->warnings) {
    warnings.push_back(w.field + (w.line > 0 ? " (line " + std::to_string(w.line) + ")" : "") +
                       ": " + w.message);
  }
  std::lock_guard lock(mu_);
  auto view = CreateLocked(std::move(workflow), team, created_by, ns, dry_run);
  if (view.ok()) view->warnings = std::move(warnings);
  return view;
}

Result<api::WorkflowView> WorkflowController::CreateLocked(wf::Workflow workflow,
                                                           const std::string& team,
                                                           const std::string& created_by,
                                                           const std::string& namespace_,
                                                           bool dry_run) {
  if (workflow.spec.workflow_template_ref) {
    HEADWAY_RETURN_IF_ERROR(MergeTemplateRef(workflow, team));
  }
  HEADWAY_RETURN_IF_ERROR(CheckPlannedNodes(workflow.spec));
  if (!dry_run) {
    const std::size_t held = TeamNodes(team, "");
    const std::size_t planned = wf::PlannedNodes(workflow.spec);
    if (held + planned > bounds_.max_nodes_per_team) {
      return Status(StatusCode::kResourceExhausted,
                    "team " + team + "'s unfinished workflows hold " + std::to_string(held) +
                        " nodes and this one plans " + std::to_string(planned) +
                        ", past the team's limit (--max-workflow-nodes " +
                        std::to_string(bounds_.max_nodes_per_team) +
                        "): submit it once some finish");
    }
  }
  WorkflowRecord record;
  record.name = workflow.metadata.name;
  if (record.name.empty()) {
    if (workflow.metadata.generate_name.empty()) {
      return InvalidArgument("metadata.name or metadata.generateName is required")
          .WithField("metadata.name");
    }
    record.name = workflow.metadata.generate_name.substr(0, 58) + RandomNameSuffix();
  }
  workflow.metadata.name = record.name;
  workflow.metadata.generate_name.clear();
  workflow.metadata.annotations[std::string(wf::kTeamKey)] = team;
  const std::string ns = namespace_.empty() ? "default" : namespace_;
  workflow.metadata.namespace_ = ns;
  record.team = team;
  record.uid = RandomUid();
  record.created_by = created_by;
  record.phase = "Running";
  record.labels = workflow.metadata.labels;
  // Selectable by team, as the views label it.
  record.labels[std::string(wf::kTeamKey)] = team;
  record.manifest = wf::ToJson(workflow).dump();
  record.created_at = clock_.Now();
  wf::WorkflowState initial;
  initial.suspended = workflow.spec.suspend.value_or(false);  // Argo: starts suspended
  record.status = StatusJson(initial, ns, "").dump();
  if (dry_run) return ViewOfRecord(record);
  HEADWAY_RETURN_IF_ERROR(store_.CreateWorkflow(record));
  auto live = Load(record.name);
  if (!live.ok()) return live.status();
  Advance(**live);
  auto view = View(**live, true);
  if ((*live)->state.Finished() || (*live)->stale) live_.erase(record.name);
  return view;
}

Result<api::WorkflowView> WorkflowController::GetWorkflow(std::string_view name) {
  std::lock_guard lock(mu_);
  const bool cached = live_.count(std::string(name)) > 0;
  auto live = Load(name);
  if (!live.ok()) return live.status();
  api::WorkflowView view = View(**live, true);
  if (!cached && (*live)->state.Finished()) live_.erase(std::string(name));
  return view;
}

Result<std::vector<api::WorkflowView>> WorkflowController::ListWorkflows(
    const WorkflowFilter& filter) {
  auto records = store_.ListWorkflows(filter);
  if (!records.ok()) return records.status();
  std::vector<api::WorkflowView> out;
  out.reserve(records->size());
  std::lock_guard lock(mu_);
  for (const WorkflowRecord& r : *records) {
    out.push_back(ViewOfRecord(r));
    auto live = live_.find(r.name);
    if (!r.finished_at && live != live_.end() && !live->second.state.Finished()) {
      out.back().body["status"]["headway"] = LiveProgress(live->second, nullptr);
    }
  }
  return out;
}

Status WorkflowController::DeleteWorkflow(std::string_view name) {
  std::lock_guard lock(mu_);
  auto live = Load(name);
  if (!live.ok()) return live.status();
  for (const auto& [id, node] : (*live)->state.nodes) {
    if (node.type == wf::NodeType::kPod && !node.job.empty() && !node.Fulfilled()) {
      (void)jobs_.Stop(node.job, "workflow " + std::string(name) + " was deleted");
    }
  }
  live_.erase(std::string(name));
  return store_.DeleteWorkflow(name);
}

template <typename Change>
Result<api::WorkflowView> WorkflowController::Mutate(std::string_view name, Change change) {
  std::lock_guard lock(mu_);
  auto live = Load(name);
  if (!live.ok()) return live.status();
  std::string error;
  if (!change((*live)->state, error)) {
    if (!live_.at(std::string(name)).state.Finished()) {
      // keep it
    } else {
      live_.erase(std::string(name));
    }
    return Conflict(error);
  }
  // Saved before anything acts on it.
  if (Status s = Save(**live); !s.ok()) {
    live_.erase(std::string(name));
    return s;
  }
  Advance(**live);
  auto again = live_.find(std::string(name));
  if (again == live_.end()) return GetWorkflowUnlocked(name);
  api::WorkflowView view = View(again->second, true);
  if (again->second.state.Finished() || again->second.stale) live_.erase(again);
  return view;
}

Result<api::WorkflowView> WorkflowController::GetWorkflowUnlocked(std::string_view name) {
  auto live = Load(name);
  if (!live.ok()) return live.status();
  api::WorkflowView view = View(**live, true);
  if ((*live)->state.Finished()) live_.erase(std::string(name));
  return view;
}

Result<api::WorkflowView> WorkflowController::SuspendWorkflow(std::string_view name) {
  return Mutate(name, [](wf::WorkflowState& s, std::string& e) { return wf::Suspend(s, &e); });
}

Result<api::WorkflowView> WorkflowController::ResumeWorkflow(std::string_view name) {
  Time now = clock_.Now();
  return Mutate(name,
                [now](wf::WorkflowState& s, std::string& e) { return wf::Resume(s, now, &e); });
}

Result<api::WorkflowView> WorkflowController::StopWorkflow(std::string_view name, bool terminate) {
  return Mutate(name, [terminate](wf::WorkflowState& s, std::string& e) {
    return wf::RequestShutdown(s, terminate ? wf::Shutdown::kTerminate : wf::Shutdown::kStop, &e);
  });
}

Result<api::WorkflowView> WorkflowController::RetryWorkflow(std::string_view name,
                                                            const api::WorkflowRetry& retry) {
  std::string filter = retry.node_field_selector;
  if (auto eq = filter.find('='); eq != std::string::npos) filter = filter.substr(eq + 1);
  // New arguments (Argo's FormulateRetryWorkflow): the nodes that run again
  // see them. Their form is checked before anything changes.
  if (wf::Arguments checked; !retry.parameters.empty()) {
    if (std::string error; !wf::OverrideParameters(checked, retry.parameters, &error)) {
      return InvalidArgument(error).WithField("parameters");
    }
  }
  return Mutate(name, [&](wf::WorkflowState& s, std::string& e) {
    if (!wf::Retry(s, retry.restart_successful, filter, &e)) return false;
    if (!retry.parameters.empty()) {
      Live& live = live_.at(std::string(name));
      (void)wf::OverrideParameters(live.manifest.spec.arguments, retry.parameters, &e);
      live.record.manifest = wf::ToJson(live.manifest).dump();
    }
    return true;
  });
}

Result<api::WorkflowView> WorkflowController::ResubmitWorkflow(std::string_view name,
                                                               const api::WorkflowResubmit& how,
                                                               const std::string& created_by) {
  const bool memoized = how.memoized;
  std::lock_guard lock(mu_);
  auto old = Load(name);
  if (!old.ok()) return old.status();
  const Live& from = **old;
  if (memoized && !from.state.Finished()) {
    return Conflict("workflow must have ended to be resubmitted with --memoized");
  }
  WorkflowRecord record;
  record.name = std::string(name).substr(0, 57) + "-" + RandomNameSuffix();
  wf::Workflow workflow = from.manifest;
  if (std::string error; !wf::OverrideParameters(workflow.spec.arguments, how.parameters, &error)) {
    return InvalidArgument(error).WithField("parameters");
  }
  workflow.metadata.name = record.name;
  workflow.metadata.generate_name.clear();
  record.team = from.record.team;
  record.uid = RandomUid();
  record.created_by = created_by;
  record.phase = "Running";
  record.labels = workflow.metadata.labels;
  record.labels["workflows.argoproj.io/resubmitted-from-workflow"] = std::string(name);
  workflow.metadata.labels = record.labels;
  record.manifest = wf::ToJson(workflow).dump();
  record.created_at = clock_.Now();
  json previous = json::parse(from.record.status, nullptr, false);
  std::string ns = previous.is_object() ? previous.value("namespace", "default") : "default";
  wf::WorkflowState initial;
  initial.name = record.name;
  if (memoized) {
    // Succeeded steps carry over, renamed into the new workflow (Argo's
    // FormulateResubmitWorkflow): pods, and retries with their attempts.
    const std::string old_prefix = std::string(name);
    auto rename = [&](const std::string& node_name) {
      return record.name + node_name.substr(old_prefix.size());
    };
    for (const auto& [id, node] : from.state.nodes) {
      if (node.phase != wf::NodePhase::kSucceeded || node.on_exit ||
          (node.type != wf::NodeType::kPod && node.type != wf::NodeType::kRetry) ||
          node.name.rfind(old_prefix, 0) != 0) {
        continue;
      }
      wf::Node copy = node;
      copy.name = rename(node.name);
      copy.id = wf::NodeIdFor(record.name, copy.name);
      copy.boundary_id.clear();
      copy.children.clear();
      for (const std::string& child : node.children) {
        auto c = from.state.nodes.find(child);
        if (c != from.state.nodes.end()) {
          copy.children.push_back(wf::NodeIdFor(record.name, rename(c->second.name)));
        }
      }
      initial.nodes.emplace(copy.id, std::move(copy));
    }
    // An attempt of a carried-over retry carries over too, failed ones included.
    for (const auto& [id, node] : from.state.nodes) {
      if (node.type != wf::NodeType::kRetry || node.phase != wf::NodePhase::kSucceeded) continue;
      for (const std::string& child : node.children) {
        auto c = from.state.nodes.find(child);
        if (c == from.state.nodes.end()) continue;
        wf::Node copy = c->second;
        copy.name = rename(copy.name);
        copy.id = wf::NodeIdFor(record.name, copy.name);
        copy.boundary_id.clear();
        initial.nodes.emplace(copy.id, std::move(copy));
      }
    }
  }
  record.status = StatusJson(initial, ns, "").dump();
  std::vector<WorkflowNodeRecord> carried;
  for (const auto& [id, node] : initial.nodes) {
    carried.push_back({record.name, id, std::string(wf::NodePhaseName(node.phase)), node.job,
                       wf::ToJson(node).dump()});
  }
  HEADWAY_RETURN_IF_ERROR(store_.CreateWorkflow(record));
  if (!carried.empty()) HEADWAY_RETURN_IF_ERROR(store_.SaveWorkflow(record, carried));
  auto live = Load(record.name);
  if (!live.ok()) return live.status();
  Advance(**live);
  api::WorkflowView view = View(**live, true);
  if ((*live)->state.Finished() || (*live)->stale) live_.erase(record.name);
  return view;
}

}  // namespace headway
