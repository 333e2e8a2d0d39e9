// Runs Argo-compatible workflows: keeps each workflow's state in the store,
// advances it with the workflow engine (workflow/engine.h) whenever one of
// its jobs changes or a timer it asked for comes due, and turns the engine's
// decisions into jobs, stops and memoized results.
//
// Every pod node is an ordinary Headway job (queue, quota, GPUs, progress,
// health policies), created by "workflow/<name>" in the workflow's team,
// and wrapped by a small shell step (StepCommand) that writes a script's
// source to a file, copies staged input artifacts into place, keeps the
// first 256 kB of stdout (outputs.result) and copies the files named by
// outputs.parameters[].valueFrom.path and outputs.artifacts[].path (a
// directory as a tar) into the job's home (`.headway-step/`), where the
// controller reads them after the job ends without following links the job
// may have planted. Output artifacts go to the artifact store as versions
// named JOB.ARTIFACT with the step as their producer (lineage); input
// artifacts are recorded as read by the step's job.
//
// Crash safety: the engine's state is saved before its jobs are created,
// and job names are derived from the workflow and node, so a restart
// re-creates exactly the jobs that were not created yet and never runs a
// step twice.
//
// Thread safety: all public methods are thread-safe; Tick() runs on one
// background loop.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "api/artifact_service.h"
#include "api/job_service.h"
#include "api/watch_cache.h"
#include "api/workflow_service.h"
#include "core/time.h"
#include "server/control_loop.h"
#include "store/store.h"
#include "workflow/engine.h"
#include "workflow/workflow.h"

namespace headway {

// The command line that runs a pod node's job (see the file comment).
// Pure: exposed for tests.
// `step_dir` is where the step leaves its outputs, `inputs_dir` where its
// input artifacts were staged; `in_image`: the job runs in the step's image,
// and the wrapper uses the busybox at kContainerBusybox instead of the host's tools.
std::vector<std::string> StepCommand(const workflow::JobToCreate& job, const std::string& step_dir,
                                     const std::string& inputs_dir, bool in_image = false);

// How much of the pool's bookkeeping one team's workflows may take, so that
// one member's workflows cannot stall the engine for every team.
struct WorkflowBounds {
  // Waiting jobs a team may have (--max-queued-jobs): past it, its steps
  // wait to be started, as members' own submits are refused. 0: unbounded.
  int max_queued_jobs_per_team = 0;
  // Nodes a team's unfinished workflows may have in all (--max-workflow-nodes).
  std::size_t max_nodes_per_team = 100000;
  // Steps one workflow may start in one pass; the others start next pass.
  std::size_t max_new_pods_per_pass = 200;
  // Bytes of one workflow's status (its nodes, with their outputs): past
  // it, the workflow is stopped as a terminate stops it, and says why.
  std::size_t max_status_bytes = 64u << 20;
};

class WorkflowController final : public api::WorkflowService {
 public:
  // `data_dir` is the server's (jobs' homes are under it). Without
  // `artifacts`, steps that pass artifacts end in Error.
  WorkflowController(Store& store, api::JobService& jobs, const Clock& clock, std::string data_dir,
                     api::ArtifactService* artifacts = nullptr);

  // One pass: every unfinished workflow whose jobs changed, whose timer is
  // due, or that was just created, loaded or changed through the API; and
  // every unfinished workflow once every kFullPassEvery, in case a change
  // went unseen. Without FollowJobChanges, every unfinished workflow.
  void Tick();
  // Where the pass learns which jobs changed (the watch cache the job
  // controller feeds). Call before the loop starts; `changes` must outlive
  // the controller.
  void FollowJobChanges(api::WatchCache* changes);
  // Call before the loop starts.
  void SetBounds(const WorkflowBounds& bounds);
  // Whether container and script steps run in their image (--workflow-images=run)
  // or record it and run on the host (record). Set before the loop starts.
  void SetRunStepImages(bool run) { run_step_images_ = run; }
  static constexpr Duration kFullPassEvery = std::chrono::seconds(10);
  void RunLoop(Duration period);
  void Shutdown();
  void Wake();

  Result<api::WorkflowView> CreateWorkflow(std::string_view manifest, std::string_view namespace_,
                                           const api::TeamAdmission& admit,
                                           const std::string& created_by, bool dry_run) override;
  Result<api::WorkflowView> GetWorkflow(std::string_view name) override;
  Result<std::vector<api::WorkflowView>> ListWorkflows(const WorkflowFilter& filter) override;
  Status DeleteWorkflow(std::string_view name) override;
  Result<api::WorkflowView> SuspendWorkflow(std::string_view name) override;
  Result<api::WorkflowView> ResumeWorkflow(std::string_view name) override;
  Result<api::WorkflowView> StopWorkflow(std::string_view name, bool terminate) override;
  Result<api::WorkflowView> RetryWorkflow(std::string_view name,
                                          const api::WorkflowRetry& retry) override;
  Result<api::WorkflowView> ResubmitWorkflow(std::string_view name,
                                             const api::WorkflowResubmit& how,
                                             const std::string& created_by) override;
  // WorkflowTemplates and CronWorkflows.
  Result<api::ManifestView> CreateManifest(std::string_view kind, std::string_view manifest,
                                           std::string_view namespace_,
                                           const api::TeamAdmission& admit, bool dry_run) override;
  Result<api::ManifestView> UpdateManifest(std::string_view kind, std::string_view name,
                                           std::string_view manifest,
                                           const api::TeamAdmission& admit) override;
  Result<api::ManifestView> GetManifest(std::string_view kind, std::string_view name) override;
  Result<std::vector<api::ManifestView>> ListManifests(std::string_view kind,
                                                       const std::string& team) override;
  Status DeleteManifest(std::string_view kind, std::string_view name) override;
  Result<api::ManifestView> SuspendCron(std::string_view name, bool suspend) override;
  Result<api::WorkflowView> SubmitFrom(std::string_view kind, std::string_view name,
                                       const api::SubmitOptions& options,
                                       const std::string& created_by) override;

 private:
  // A workflow as the controller holds it between passes.
  struct Live {
    WorkflowRecord record;
    workflow::Workflow manifest;
    workflow::WorkflowState state;
    std::map<std::string, std::string> saved_bodies;  // node id -> JSON last saved
    bool stale = false;                               // a save failed: read it again from the store
    bool dirty = true;                                // advance it next pass, whatever its jobs did
    std::optional<Time> wake_at;   // a timer of the engine's (backoff, deadline, ...)
    std::size_t status_bytes = 0;  // of the nodes as last saved
  };

  // Callers hold mu_.
  Result<Live*> Load(std::string_view name);
  // Runs the engine and acts on it; a workflow it could not save is marked
  // stale (to be read again), never erased here.
  void Advance(Live& live);
  Result<api::WorkflowView> GetWorkflowUnlocked(std::string_view name);
  Status Save(Live& live);
  // With the workflow's live progress (status.headway: percent, ETA from
  // its critical path, health) while it runs.
  api::WorkflowView View(const Live& live, bool with_nodes);
  // status.headway of a running workflow, and per running step in `nodes`.
  nlohmann::json LiveProgress(const Live& live, nlohmann::json* nodes);
  api::WorkflowView ViewOfRecord(const WorkflowRecord& record) const;
  std::optional<workflow::JobObservation> Observe(const Live& live, const std::string& job);
  // Stores what a finished step left under its `artifacts/` folder, read
  // through `step_fd`; fills seen.artifacts or seen.artifact_error.
  void IngestArtifacts(const Live& live, const std::string& job, int step_fd,
                       workflow::JobObservation& seen);
  // Puts a step's input artifacts where its wrapper copies them from.
  Status StageInputs(const Live& live, const workflow::JobToCreate& job);
  std::optional<workflow::MemoEntry> MemoLookup(const std::string& team, const std::string& cache,
                                                const std::string& key);
  void SaveMemo(const std::string& team, const workflow::MemoEntry& entry);
  template <typename Change>
  Result<api::WorkflowView> Mutate(std::string_view name, Change change);
  // Stores a new workflow and runs its first pass (callers hold mu_).
  Result<api::WorkflowView> CreateLocked(workflow::Workflow workflow, const std::string& team,
                                         const std::string& created_by, const std::string& ns,
                                         bool dry_run);
  // A workflowTemplateRef merged in: the template's spec, with what the
  // workflow sets on top (Argo's precedence). Callers hold mu_.
  Status MergeTemplateRef(workflow::Workflow& workflow, const std::string& team);
  // The template a templateRef names, from this pass's cache of the team's
  // WorkflowTemplates; nullptr when there is none. Callers hold mu_.
  const workflow::Template* ResolveRef(const workflow::TemplateRef& ref, const std::string& team);
  // Nodes of the team's unfinished workflows but `except` (callers hold mu_).
  std::size_t TeamNodes(const std::string& team, std::string_view except) const;
  // Starts the CronWorkflows that are due, prunes their history.
  void RunCrons();
  api::ManifestView ManifestViewOf(const WorkflowManifestRecord& record) const;

  Store& store_;
  api::JobService& jobs_;
  const Clock& clock_;
  const std::string data_dir_;
  api::ArtifactService* artifacts_;
  std::mutex mu_;  // serialises workflow mutations
  ControlLoop loop_;
  std::map<std::string, Live> live_;  // guarded by mu_: unfinished workflows by name
  // Which workflow each job belongs to, for the jobs of workflows in live_
  // (entries of workflows gone since are harmless: nothing acts on them).
  std::map<std::string, std::string> job_owner_;  // guarded by mu_
  WorkflowBounds bounds_;                         // guarded by mu_
  bool run_step_images_ = false;                  // set before the loop starts
  api::WatchCache* job_changes_ = nullptr;
  std::uint64_t seen_changes_ = 0;  // guarded by mu_: the watch cache version read so far
  Time last_full_pass_{};           // guarded by mu_
  // When this controller first ran the CronWorkflows: fire times before it
  // were missed while it was down (startingDeadlineSeconds decides those).
  std::optional<Time> crons_since_;  // guarded by mu_
  bool loaded_ = false;              // guarded by mu_: live_ read from the store
  // WorkflowTemplates read this pass (cleared at each Tick), by name.
  std::map<std::string, workflow::WorkflowTemplate> templates_;  // guarded by mu_
  // How long each team's templates' steps took lately (moving average), by
  // "TEAM/TEMPLATE": the expected duration of steps not started yet.
  std::map<std::string, Duration> typical_;  // guarded by mu_
};

}  // namespace headway
