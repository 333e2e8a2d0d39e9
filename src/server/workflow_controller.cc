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
#include "core/job_spec_json.h"
#include "core/job_spec_parser.h"
#include "core/terminal_text.h"
#include "workflow/cron.h"
#include "workflow/manifest.h"
#include "workflow/progress.h"
#include "workflow/substitute.h"

namespace headway {
namespace {

using nlohmann::json;
namespace wf = workflow;

// Where a step leaves its outputs, under the job's home.
constexpr const char* kStepDir = ".headway-step";
// Where its input artifacts are staged, under the job's home.
constexpr const char* kInputsDir = ".headway-inputs";
// Argo's limit on outputs.result and parameters, plus one byte to tell a
// value that is too large.
constexpr std::size_t kMaxOutputRead = 256 * 1024 + 1;
// One argument carries a script's source (Linux bounds one at 128 kB).
constexpr std::size_t kMaxScriptBytes = 120 * 1024;

std::string RandomNameSuffix() {
  static thread_local std::mt19937 rng(std::random_device{}());
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  for (int i = 0; i < 5; ++i) out += kChars[rng() % 36];
  return out;
}

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

int OpenDirNoFollow(int dirfd, const char* name) {
  return ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
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

std::string ArgoTime(Time t) { return wf::FormatRfc3339(ToUnixMillis(t) / 1000); }

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
}

// A workflow whose written-out loops alone make more nodes than a workflow
// may have is refused before it is stored: 1000 x 1000 steps would otherwise
// queue a million jobs, and stall every team's workflows while expanding.
Status CheckPlannedNodes(const wf::WorkflowSpec& spec) {
  const std::size_t planned = wf::PlannedNodes(spec);
  if (planned <= wf::kMaxWorkflowNodes) return Status::Ok();
  return InvalidArgument("its loops would make more than " + std::to_string(wf::kMaxWorkflowNodes) +
                         " nodes, the most a workflow may have (nested loops multiply); "
                         "split it into several workflows")
      .WithField("spec.templates");
}

const wf::WorkflowSpec& SpecOf(const wf::Manifest& manifest) {
  return std::visit(
      [](const auto& resource) -> const wf::WorkflowSpec& {
        if constexpr (std::is_same_v<std::decay_t<decltype(resource)>, wf::CronWorkflow>) {
          return resource.spec.workflow_spec;
        } else {
          return resource.spec;
        }
      },
      manifest.resource);
}

// What a manifest's jobs will ask of the pool: its team, and the highest
// priority any of them asks for (a CronWorkflow's workflowMetadata included).
api::PoolRequest PoolRequestOf(const wf::Manifest& manifest) {
  return std::visit(
      [](const auto& resource) {
        using T = std::decay_t<decltype(resource)>;
        api::PoolRequest pool{
            wf::HeadwayValue(resource.metadata, nullptr, wf::kTeamKey).value_or(JobSpec().team)};
        if constexpr (std::is_same_v<T, wf::CronWorkflow>) {
          const auto& extra = resource.spec.workflow_metadata;
          pool.priority = wf::HighestPriority(resource.metadata, resource.spec.workflow_spec,
                                              extra ? &*extra : nullptr);
        } else {
          pool.priority = wf::HighestPriority(resource.metadata, resource.spec);
        }
        return pool;
      },
      manifest.resource);
}

}  // namespace

std::vector<std::string> StepCommand(const wf::JobToCreate& job, const std::string& step_dir,
                                     const std::string& inputs_dir) {
  // $1 is the step's folder, made afresh; $2 "script" when $3 is a script's
  // source, written to a file whose path goes after the command. The step's
  // stdout goes to the log through tee and, its first 256 kB, to a file
  // (tee -p goes on writing the log once head has what it needs); then the
  // output parameters' files are copied in. The step's own exit status is
  // the job's.
  std::string script =
      "d=\"$1\"; kind=\"$2\"; source=\"$3\"; in=\"$4\"; shift 4\n"
      "rm -rf \"$d\" && mkdir -p \"$d/parameters\" \"$d/artifacts\" || exit 1\n";
  // Input artifacts: a directory comes as NAME.tar, a file as NAME.
  for (const wf::InputArtifact& a : job.input_artifacts) {
    const std::string path = ShellQuote(a.path), staged = "\"$in/\"" + ShellQuote(a.name);
    script += "if [ -f " + staged + ".tar ]; then mkdir -p " + path + " && tar -xf " + staged +
              ".tar -C " + path + " || exit 1; else mkdir -p \"$(dirname " + path +
              ")\" && cp -- " + staged + " " + path + " || exit 1; fi\n";
  }
  script +=
      "if [ \"$kind\" = script ]; then\n"
      "  printf '%s' \"$source\" > \"$d/script\" || exit 1\n"
      "  set -- \"$@\" \"$d/script\"\n"
      "fi\n"
      "unset source\n"
      "mkfifo \"$d/stdout.fifo\" || exit 1\n"
      "head -c " +
      std::to_string(kMaxOutputRead) +
      " < \"$d/stdout.fifo\" > \"$d/stdout\" & h=$!\n"
      "{ \"$@\"; echo $? > \"$d/exit-code\"; } | tee -p \"$d/stdout.fifo\"\n"
      "wait $h\n"
      "rc=$(cat \"$d/exit-code\" 2>/dev/null || echo 1)\n";
  for (const auto& [name, path] : job.output_paths) {
    script += "[ -f " + ShellQuote(path) + " ] && cp -- " + ShellQuote(path) +
              " \"$d/parameters/\"" + ShellQuote(name) + "\n";
  }
  for (const wf::OutputArtifact& a : job.output_artifacts) {
    const std::string path = ShellQuote(a.path), kept = "\"$d/artifacts/\"" + ShellQuote(a.name);
    script += "if [ $rc = 0 ]; then if [ -d " + path + " ]; then tar -cf " + kept + ".tar -C " +
              path + " . || rc=1; elif [ -f " + path + " ]; then cp -- " + path + " " + kept +
              " || rc=1; fi; fi\n";
  }
  script += "exit $rc\n";
  std::vector<std::string> argv = {"/bin/sh",
                                   "-c",
                                   script,
                                   "headway-step",
                                   step_dir,
                                   job.script_source ? "script" : "container",
                                   job.script_source.value_or(""),
                                   inputs_dir};
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

void WorkflowController::IngestArtifacts(const Live& live, const std::string& job, int step_fd,
                                         wf::JobObservation& seen) {
  int dir_fd = OpenDirNoFollow(step_fd, "artifacts");
  if (dir_fd < 0) return;
  DIR* dir = ::fdopendir(dir_fd);
  if (dir == nullptr) {
    ::close(dir_fd);
    return;
  }
  std::string node_name;
  std::map<std::string, std::string> names_by_key;  // outputs with an s3.key
  for (const auto& [id, node] : live.state.nodes) {
    if (node.job != job) continue;
    node_name = node.name;
    names_by_key = node.artifact_names;
  }
  std::vector<std::string> entries;
  while (dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") entries.push_back(name);
  }
  for (const std::string& entry : entries) {
    const bool tar = entry.size() > 4 && entry.compare(entry.size() - 4, 4, ".tar") == 0;
    const std::string artifact = tar ? entry.substr(0, entry.size() - 4) : entry;
    if (!wf::IsValidParameterName(artifact)) continue;
    if (artifacts_ == nullptr) {
      seen.artifact_error = "outputs.artifacts." + artifact + ": this server keeps no artifacts";
      break;
    }
    std::string stored_name;
    if (auto key = names_by_key.find(artifact); key != names_by_key.end()) {
      stored_name = key->second;
    } else {
      for (char c : job + "." + artifact) {
        stored_name += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
      }
    }
    // Stored already (a pass that stored it and then crashed): the same version.
    ArtifactFilter mine;
    mine.name = stored_name;
    mine.job = job;
    mine.ready_only = true;
    if (auto found = artifacts_->List(mine); found.ok() && !found->empty()) {
      seen.artifacts[artifact] = found->back().Ref();
      continue;
    }
    // A copy the job cannot change or point elsewhere: read through the
    // descriptor (never a link), written to a file of the server's.
    std::error_code ec;
    std::filesystem::create_directories(data_dir_ + "/uploads", ec);
    const std::string copy = data_dir_ + "/uploads/" + stored_name + "." + RandomNameSuffix();
    int in = ::openat(::dirfd(dir), entry.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st {};
    bool copied = false;
    const bool regular = in >= 0 && ::fstat(in, &st) == 0 && S_ISREG(st.st_mode);
    // The quota is checked before the bytes are copied: a step cannot fill
    // the server's disk with an output its team has no room for.
    Status room =
        regular ? artifacts_->CheckRoom(live.record.team, static_cast<std::uint64_t>(st.st_size))
                : Status::Ok();
    if (!room.ok()) {
      ::close(in);
      seen.artifact_error = "outputs.artifacts." + artifact + ": " + room.message();
      break;
    }
    if (regular) {
      int out = ::open(copy.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (out >= 0) {
        copied = true;
        char buffer[1 << 16];
        for (;;) {
          ssize_t n = ::read(in, buffer, sizeof buffer);
          if (n == 0) break;
          if (n < 0 || ::write(out, buffer, static_cast<std::size_t>(n)) != n) {
            copied = false;
            break;
          }
        }
        ::close(out);
      }
    }
    if (in >= 0) ::close(in);
    auto fail = [&](const std::string& why) {
      std::filesystem::remove(copy, ec);
      seen.artifact_error = "outputs.artifacts." + artifact + ": " + why;
    };
    if (!copied) {
      fail("cannot read what the step left (not a plain file)");
      break;
    }
    auto digest = DigestFile(copy);
    if (!digest.ok()) {
      fail(digest.status().message());
      break;
    }
    Artifact draft;
    draft.name = stored_name;
    draft.kind = ArtifactKind::kOutput;
    draft.team = live.record.team;
    draft.created_by = "job/" + job;
    draft.size = digest->size;
    draft.digest = digest->digest;
    draft.content_md5 = digest->content_md5;
    draft.producer.job = job;
    draft.producer.pipeline_node = node_name;
    draft.labels["headway.dev/workflow"] = live.record.name;
    draft.labels["headway.dev/archive"] = tar ? "tar" : "none";
    auto created = artifacts_->Create(draft, /*client_multipart=*/false);
    if (!created.ok()) {
      fail(created.status().message());
      break;
    }
    Artifact stored = created->artifact;
    if (stored.state != ArtifactState::kReady) {
      auto received = artifacts_->Receive(stored.name, stored.version, copy);
      if (!received.ok()) {
        fail(received.status().message());
        break;
      }
      stored = *received;
    }
    std::filesystem::remove(copy, ec);
    seen.artifacts[artifact] = stored.Ref();
  }
  ::closedir(dir);
}

Status WorkflowController::StageInputs(const Live& live, const wf::JobToCreate& job) {
  if (job.input_artifacts.empty()) return Status::Ok();
  const std::string dir = data_dir_ + "/jobs/" + job.spec.name + "/home/" + kInputsDir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Unavailable("cannot stage input artifacts in " + dir + ": " + ec.message());
  for (const wf::InputArtifact& in : job.input_artifacts) {
    const std::string where = "inputs.artifacts." + in.name + ": ";
    if (in.raw) {
      std::ofstream out(dir + "/" + in.name, std::ios::binary | std::ios::trunc);
      out << *in.raw;
      if (!out) return Unavailable(where + "cannot write it");
      continue;
    }
    if (artifacts_ == nullptr) return Unavailable(where + "this server keeps no artifacts");
    auto ref = ParseArtifactRef(in.ref);
    if (!ref.ok()) return InvalidArgument(where + ref.status().message());
    auto artifact = artifacts_->Get(ref->name, ref->version);
    if (!artifact.ok())
      return artifact.status().code() == StatusCode::kNotFound
                 ? NotFound(where + "no artifact " + in.ref)
                 : artifact.status();
    // A workflow reads its own team's artifacts only.
    if (artifact->team != live.record.team) return NotFound(where + "no artifact " + in.ref);
    const bool tar = artifact->labels.count("headway.dev/archive") &&
                     artifact->labels.at("headway.dev/archive") == "tar";
    ArtifactUse use;
    use.job = job.spec.name;
    HEADWAY_RETURN_IF_ERROR(artifacts_->Fetch(artifact->name, artifact->version,
                                              dir + "/" + in.name + (tar ? ".tar" : ""), use));
  }
  // Readable by the job's account (the job's home, 0700 and its own, keeps
  // everyone else out); not writable: they stay as the store gave them.
  std::filesystem::permissions(dir, std::filesystem::perms(0755), ec);
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::filesystem::permissions(entry.path(), std::filesystem::perms(0644), ec);
  }
  return Status::Ok();
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
    spec.command = StepCommand(create, home + kStepDir, home + kInputsDir);
    spec.args.clear();
    spec.labels["headway.dev/workflow"] = workflow_name;
    // Recorded, and said in the job's Submitted event: no container runs it.
    if (!create.image.empty()) {
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
  if (status.contains("outputs")) out["outputs"] = {{"parameters", status["outputs"]}};
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
  std::lock_guard lock(mu_);
  return CreateLocked(std::move(workflow), team, created_by, ns, dry_run);
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
  return Mutate(name, [&](wf::WorkflowState& s, std::string& e) {
    return wf::Retry(s, retry.restart_successful, filter, &e);
  });
}

Result<api::WorkflowView> WorkflowController::ResubmitWorkflow(std::string_view name, bool memoized,
                                                               const std::string& created_by) {
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

// ---------------------------------------------------------------------------
// WorkflowTemplates and CronWorkflows

namespace {

// The stored body: the manifest (Argo's JSON) and, for a CronWorkflow, its
// status beside it.
json ManifestJson(const wf::Manifest& manifest) {
  return std::visit([](const auto& resource) { return wf::ToJson(resource); }, manifest.resource);
}

std::string KindOf(const wf::Manifest& manifest) {
  if (std::holds_alternative<wf::WorkflowTemplate>(manifest.resource)) return "WorkflowTemplate";
  if (std::holds_alternative<wf::CronWorkflow>(manifest.resource)) return "CronWorkflow";
  return "Workflow";
}

wf::ObjectMeta& MetadataOf(wf::Manifest& manifest) {
  return std::visit([](auto& resource) -> wf::ObjectMeta& { return resource.metadata; },
                    manifest.resource);
}

Result<wf::Manifest> ParseStored(const WorkflowManifestRecord& record) {
  json body = json::parse(record.body, nullptr, false);
  if (!body.is_object())
    return Internal("stored " + record.kind + " '" + record.name + "' is unreadable");
  body.erase("status");
  auto manifest = wf::ParseManifest(body.dump());
  if (!manifest.ok()) {
    return Internal("stored " + record.kind + " '" + record.name +
                    "' is unreadable: " + manifest.status().message());
  }
  return manifest;
}

const char* const kCronLabel = "workflows.argoproj.io/cron-workflow";

}  // namespace

api::ManifestView WorkflowController::ManifestViewOf(const WorkflowManifestRecord& record) const {
  api::ManifestView view;
  view.team = record.team;
  json body = json::parse(record.body, nullptr, false);
  if (!body.is_object()) body = json::object();
  json& meta = body["metadata"];
  if (!meta.is_object()) meta = json::object();
  meta["name"] = record.name;
  meta["resourceVersion"] = std::to_string(record.revision);
  meta["creationTimestamp"] = ArgoTime(record.created_at);
  if (!meta.contains("namespace")) meta["namespace"] = "default";
  json& labels = meta["labels"];
  if (!labels.is_object()) labels = json::object();
  labels[std::string(wf::kTeamKey)] = record.team;
  // Older Hera models require all three of a CronWorkflow's status fields:
  // send a status only once it has them.
  if (body.contains("status") &&
      !(body["status"].is_object() && body["status"].contains("lastScheduledTime"))) {
    body.erase("status");
  }
  view.body = std::move(body);
  return view;
}

Result<api::ManifestView> WorkflowController::CreateManifest(std::string_view kind,
                                                             std::string_view text,
                                                             std::string_view namespace_,
                                                             const api::TeamAdmission& admit,
                                                             bool dry_run) {
  auto manifest = wf::ParseManifest(text);
  if (!manifest.ok()) return manifest.status();
  if (KindOf(*manifest) != kind) {
    return InvalidArgument("kind: expected a " + std::string(kind)).WithField("kind");
  }
  wf::ObjectMeta& meta = MetadataOf(*manifest);
  api::PoolRequest pool = PoolRequestOf(*manifest);
  if (admit) HEADWAY_RETURN_IF_ERROR(admit(pool));
  HEADWAY_RETURN_IF_ERROR(CheckPlannedNodes(SpecOf(*manifest)));
  const std::string team = pool.team;
  if (meta.name.empty()) {
    if (meta.generate_name.empty()) {
      return InvalidArgument("metadata.name or metadata.generateName is required")
          .WithField("metadata.name");
    }
    meta.name = meta.generate_name.substr(0, 47) + RandomNameSuffix();
    meta.generate_name.clear();
  }
  meta.annotations[std::string(wf::kTeamKey)] = team;
  if (!namespace_.empty()) meta.namespace_ = std::string(namespace_);
  if (auto* cron = std::get_if<wf::CronWorkflow>(&manifest->resource)) {
    for (const std::string& schedule : cron->spec.schedules) {
      auto parsed = wf::CronSchedule::Parse(schedule);
      if (!parsed.ok()) return InvalidArgument("spec.schedule: " + parsed.status().message());
    }
    auto zone = wf::LookupTimeZone(cron->spec.timezone);
    if (!zone.ok()) return InvalidArgument("spec.timezone: " + zone.status().message());
  }
  WorkflowManifestRecord record;
  record.kind = std::string(kind);
  record.name = meta.name;
  record.team = team;
  record.body = ManifestJson(*manifest).dump();
  record.created_at = record.updated_at = clock_.Now();
  if (dry_run) return ManifestViewOf(record);
  HEADWAY_RETURN_IF_ERROR(store_.CreateWorkflowManifest(record));
  Wake();
  return ManifestViewOf(record);
}

Result<api::ManifestView> WorkflowController::UpdateManifest(std::string_view kind,
                                                             std::string_view name,
                                                             std::string_view text,
                                                             const api::TeamAdmission& admit) {
  auto current = store_.GetWorkflowManifest(kind, name);
  if (!current.ok()) return current.status();
  auto manifest = wf::ParseManifest(text);
  if (!manifest.ok()) return manifest.status();
  if (KindOf(*manifest) != kind) {
    return InvalidArgument("kind: expected a " + std::string(kind)).WithField("kind");
  }
  // Bounded as when it was created, in the team it stays in.
  api::PoolRequest pool = PoolRequestOf(*manifest);
  pool.team = current->team;
  if (admit) HEADWAY_RETURN_IF_ERROR(admit(pool));
  HEADWAY_RETURN_IF_ERROR(CheckPlannedNodes(SpecOf(*manifest)));
  wf::ObjectMeta& meta = MetadataOf(*manifest);
  if (!meta.name.empty() && meta.name != name) {
    return InvalidArgument("metadata.name: '" + meta.name + "' is not '" + std::string(name) + "'");
  }
  meta.name = std::string(name);
  // The team stays the one it was created in.
  meta.annotations[std::string(wf::kTeamKey)] = current->team;
  json text_json = json::parse(text, nullptr, false);
  if (text_json.is_object() && text_json.contains("metadata") &&
      text_json["metadata"].is_object() && text_json["metadata"].contains("resourceVersion")) {
    std::string given = text_json["metadata"].value("resourceVersion", "");
    if (given != std::to_string(current->revision)) {
      return Conflict("the " + std::string(kind) + " was changed since resourceVersion " + given +
                      " (now " + std::to_string(current->revision) + "): read it again");
    }
  }
  json body = ManifestJson(*manifest);
  json old_body = json::parse(current->body, nullptr, false);
  if (old_body.is_object() && old_body.contains("status")) body["status"] = old_body["status"];
  current->body = body.dump();
  current->updated_at = clock_.Now();
  HEADWAY_RETURN_IF_ERROR(store_.UpdateWorkflowManifest(*current));
  Wake();
  return ManifestViewOf(*current);
}

Result<api::ManifestView> WorkflowController::GetManifest(std::string_view kind,
                                                          std::string_view name) {
  auto record = store_.GetWorkflowManifest(kind, name);
  if (!record.ok()) return record.status();
  return ManifestViewOf(*record);
}

Result<std::vector<api::ManifestView>> WorkflowController::ListManifests(std::string_view kind,
                                                                         const std::string& team) {
  auto records = store_.ListWorkflowManifests(kind, team);
  if (!records.ok()) return records.status();
  std::vector<api::ManifestView> out;
  for (const WorkflowManifestRecord& r : *records) out.push_back(ManifestViewOf(r));
  return out;
}

Status WorkflowController::DeleteManifest(std::string_view kind, std::string_view name) {
  return store_.DeleteWorkflowManifest(kind, name);
}

Result<api::ManifestView> WorkflowController::SuspendCron(std::string_view name, bool suspend) {
  std::lock_guard lock(mu_);
  auto record = store_.GetWorkflowManifest(api::kCronWorkflowKind, name);
  if (!record.ok()) return record.status();
  json body = json::parse(record->body, nullptr, false);
  if (!body.is_object())
    return Internal("stored CronWorkflow '" + std::string(name) + "' is unreadable");
  body["spec"]["suspend"] = suspend;
  record->body = body.dump();
  record->updated_at = clock_.Now();
  HEADWAY_RETURN_IF_ERROR(store_.UpdateWorkflowManifest(*record));
  return ManifestViewOf(*record);
}

Status WorkflowController::MergeTemplateRef(wf::Workflow& workflow, const std::string& team) {
  const wf::WorkflowTemplateRef ref = *workflow.spec.workflow_template_ref;
  if (ref.cluster_scope) {
    return InvalidArgument(
               "spec.workflowTemplateRef.clusterScope: ClusterWorkflowTemplates are "
               "not supported; use a WorkflowTemplate")
        .WithField("spec.workflowTemplateRef");
  }
  auto record = store_.GetWorkflowManifest(api::kWorkflowTemplateKind, ref.name);
  if (!record.ok() || record->team != team) {
    return NotFound("spec.workflowTemplateRef: no WorkflowTemplate '" + ref.name + "' in team '" +
                    team + "'");
  }
  auto manifest = ParseStored(*record);
  if (!manifest.ok()) return manifest.status();
  wf::WorkflowSpec merged = std::get<wf::WorkflowTemplate>(manifest->resource).spec;
  const wf::WorkflowSpec& own = workflow.spec;
  if (!own.entrypoint.empty()) merged.entrypoint = own.entrypoint;
  for (const wf::Parameter& p : own.arguments.parameters) {
    auto it = std::find_if(merged.arguments.parameters.begin(), merged.arguments.parameters.end(),
                           [&](const wf::Parameter& q) { return q.name == p.name; });
    if (it == merged.arguments.parameters.end()) {
      merged.arguments.parameters.push_back(p);
    } else {
      *it = p;
    }
  }
  for (const wf::Template& t : own.templates) {
    auto it = std::find_if(merged.templates.begin(), merged.templates.end(),
                           [&](const wf::Template& u) { return u.name == t.name; });
    if (it == merged.templates.end()) {
      merged.templates.push_back(t);
    } else {
      *it = t;
    }
  }
  if (!own.on_exit.empty()) merged.on_exit = own.on_exit;
  if (own.parallelism) merged.parallelism = own.parallelism;
  if (own.active_deadline_seconds) merged.active_deadline_seconds = own.active_deadline_seconds;
  if (own.suspend) merged.suspend = own.suspend;
  if (own.priority) merged.priority = own.priority;
  merged.workflow_template_ref.reset();
  HEADWAY_RETURN_IF_ERROR(wf::ValidateWorkflowSpec(merged, wf::SpecOwner::kWorkflow, "spec"));
  workflow.spec = std::move(merged);
  workflow.metadata.labels["workflows.argoproj.io/workflow-template"] = ref.name;
  return Status::Ok();
}

const wf::Template* WorkflowController::ResolveRef(const wf::TemplateRef& ref,
                                                   const std::string& team) {
  if (ref.cluster_scope) return nullptr;
  auto it = templates_.find(ref.name);
  if (it == templates_.end()) {
    auto record = store_.GetWorkflowManifest(api::kWorkflowTemplateKind, ref.name);
    if (!record.ok() || record->team != team) return nullptr;
    auto manifest = ParseStored(*record);
    if (!manifest.ok()) return nullptr;
    it = templates_.emplace(ref.name, std::get<wf::WorkflowTemplate>(manifest->resource)).first;
  }
  if (it->second.metadata.annotations[std::string(wf::kTeamKey)] != team) return nullptr;
  return it->second.spec.FindTemplate(ref.template_name);
}

Result<api::WorkflowView> WorkflowController::SubmitFrom(std::string_view kind,
                                                         std::string_view name,
                                                         const api::SubmitOptions& options,
                                                         const std::string& created_by) {
  auto record = store_.GetWorkflowManifest(kind, name);
  if (!record.ok()) return record.status();
  auto manifest = ParseStored(*record);
  if (!manifest.ok()) return manifest.status();
  wf::Workflow workflow;
  if (kind == api::kWorkflowTemplateKind) {
    workflow.spec.workflow_template_ref = wf::WorkflowTemplateRef{std::string(name), false};
  } else {
    const auto& cron = std::get<wf::CronWorkflow>(manifest->resource);
    workflow.spec = cron.spec.workflow_spec;
    if (cron.spec.workflow_metadata) {
      workflow.metadata.labels = cron.spec.workflow_metadata->labels;
      workflow.metadata.annotations = cron.spec.workflow_metadata->annotations;
    }
    workflow.metadata.labels[kCronLabel] = std::string(name);
  }
  for (const std::string& assignment : options.parameters) {
    auto eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("submitOptions.parameters: '" + assignment + "' is not NAME=VALUE");
    }
    wf::Parameter p;
    p.name = assignment.substr(0, eq);
    p.value = assignment.substr(eq + 1);
    auto& params = workflow.spec.arguments.parameters;
    auto it = std::find_if(params.begin(), params.end(),
                           [&](const wf::Parameter& q) { return q.name == p.name; });
    if (it == params.end()) {
      params.push_back(p);
    } else {
      it->value = p.value;
    }
  }
  std::size_t start = 0;
  while (start < options.labels.size()) {
    std::size_t end = options.labels.find(',', start);
    if (end == std::string::npos) end = options.labels.size();
    std::string term = options.labels.substr(start, end - start);
    start = end + 1;
    if (term.empty()) continue;
    auto eq = term.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument("submitOptions.labels: '" + term + "' is not key=value");
    }
    // The template, admitted for its team when it was created, decides
    // where its jobs run and at what priority; a submitter does not.
    const std::string key = term.substr(0, eq);
    if (key == wf::kPriorityKey || key == wf::kTeamKey || key == wf::kQueueKey) {
      return InvalidArgument("submitOptions.labels: '" + key +
                             "' is the template's to set, not the submitter's");
    }
    workflow.metadata.labels[key] = term.substr(eq + 1);
  }
  workflow.metadata.name = options.name;
  workflow.metadata.generate_name =
      options.generate_name.empty() ? std::string(name) + "-" : options.generate_name;
  json body = json::parse(record->body, nullptr, false);
  std::string ns = body.is_object() && body.contains("metadata")
                       ? body["metadata"].value("namespace", "default")
                       : "default";
  std::lock_guard lock(mu_);
  return CreateLocked(std::move(workflow), record->team, created_by, ns, false);
}

void WorkflowController::RunCrons() {
  auto crons = store_.ListWorkflowManifests(api::kCronWorkflowKind, "");
  if (!crons.ok()) return;
  const Time now = clock_.Now();
  for (WorkflowManifestRecord& record : *crons) {
    auto manifest = ParseStored(record);
    if (!manifest.ok()) continue;
    const auto& cron = std::get<wf::CronWorkflow>(manifest->resource);
    std::vector<wf::CronSchedule> schedules;
    for (const std::string& text : cron.spec.schedules) {
      auto parsed = wf::CronSchedule::Parse(text);
      if (parsed.ok()) schedules.push_back(*parsed);
    }
    auto zone = wf::LookupTimeZone(cron.spec.timezone);
    if (!zone.ok()) continue;
    json body = json::parse(record.body, nullptr, false);
    json status = body.is_object() && body.contains("status") && body["status"].is_object()
                      ? body["status"]
                      : json::object();
    std::optional<Time> last;
    if (status.contains("lastScheduledTime"))
      last = ParseRfc3339(status.value("lastScheduledTime", ""));
    // Its workflows, newest first: the running ones count for the policy.
    WorkflowFilter mine;
    mine.labels[kCronLabel] = record.name;
    auto runs = store_.ListWorkflows(mine);
    if (!runs.ok()) continue;
    std::vector<std::string> active;
    for (const WorkflowRecord& r : *runs) {
      if (!r.finished_at) active.push_back(r.name);
    }
    wf::CronDecision decision =
        wf::DecideCron(schedules, *zone, cron.spec.suspend, cron.spec.concurrency_policy,
                       cron.spec.starting_deadline_seconds, record.created_at, last, now,
                       static_cast<int>(active.size()));
    if (decision.run) {
      if (decision.stop_active) {
        for (const std::string& name : active) {
          auto live = Load(name);
          if (!live.ok()) continue;
          std::string error;
          if (wf::RequestShutdown((*live)->state, wf::Shutdown::kTerminate, &error)) {
            (void)Save(**live);
            Advance(**live);
          }
        }
      }
      wf::Workflow workflow;
      workflow.spec = cron.spec.workflow_spec;
      if (cron.spec.workflow_metadata) {
        workflow.metadata.labels = cron.spec.workflow_metadata->labels;
        workflow.metadata.annotations = cron.spec.workflow_metadata->annotations;
      }
      workflow.metadata.labels[kCronLabel] = record.name;
      // Named for its fire time, so a pass repeated after a crash finds it made.
      workflow.metadata.name =
          record.name + "-" + std::to_string(ToUnixMillis(*decision.run) / 1000);
      auto created = CreateLocked(std::move(workflow), record.team, "cron/" + record.name,
                                  cron.metadata.namespace_, false);
      if (created.ok()) {
        active.push_back(created->body["metadata"].value("name", ""));
      } else if (created.status().code() != StatusCode::kConflict) {
        status["lastError"] = created.status().message();
      }
    }
    if (decision.scheduled && decision.scheduled != last) {
      status["lastScheduledTime"] = ArgoTime(*decision.scheduled);
      if (!decision.skipped.empty()) status["lastSkipped"] = decision.skipped;
    }
    json active_refs = json::array();
    for (const std::string& name : active) {
      active_refs.push_back(
          {{"kind", "Workflow"}, {"name", name}, {"apiVersion", "argoproj.io/v1alpha1"}});
    }
    status["active"] = active_refs;
    if (!status.contains("conditions")) status["conditions"] = json::array();
    // History: the newest successful and failed runs are kept, the rest deleted.
    int succeeded = 0, failed = 0;
    const int keep_succeeded = cron.spec.successful_jobs_history_limit.value_or(3);
    const int keep_failed = cron.spec.failed_jobs_history_limit.value_or(1);
    for (const WorkflowRecord& r : *runs) {
      if (!r.finished_at) continue;
      const bool ok = r.phase == "Succeeded";
      int& count = ok ? succeeded : failed;
      if (++count > (ok ? keep_succeeded : keep_failed)) {
        live_.erase(r.name);
        (void)store_.DeleteWorkflow(r.name);
      }
    }
    if (!body.is_object()) continue;
    if (body.value("status", json()) != status) {
      body["status"] = status;
      record.body = body.dump();
      record.updated_at = now;
      (void)store_.UpdateWorkflowManifest(record);  // a concurrent update wins; next pass redoes
    }
  }
}

}  // namespace headway
