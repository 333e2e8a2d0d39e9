// Runs hyperparameter experiments: proposes each trial's parameters with the
// experiment's sampler, submits the trial as an ordinary job (so the
// scheduler, quotas and progress tracking apply), applies the early-stopping
// rule to live metrics through the normal stop path, and ends the experiment
// when its trials are done, its goal is reached, or too many trials failed.
//
// Trial jobs are submitted as created by "experiment/<name>" (Job::created_by),
// and a trial binds only to a job so created, in the experiment's team: when
// the trial's job name is taken by anyone else's job (another team's
// included), the trial fails and that job is never read, shown or stopped.
//
// A trial may be a workflow (hpo::ExperimentSpec::trial_workflow), run by
// the workflow controller under the same rules (created by
// "experiment/<name>", in the experiment's team); its objective is read from
// the job of the step the objective names, and stopping it stops the whole
// workflow.
//
// Everything is persisted before it is acted on (the trial record before its
// job is submitted), and samplers are deterministic, so after a restart the
// controller picks up where it left off without doubling a trial.
//
// Thread safety: all public methods are thread-safe; Tick() runs on one
// background loop.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "api/experiment_service.h"
#include "api/job_service.h"
#include "api/workflow_service.h"
#include "core/time.h"
#include "hpo/experiment_spec.h"
#include "server/control_loop.h"
#include "store/store.h"

namespace headway {

class ExperimentController final : public api::ExperimentService {
 public:
  // `store`, `jobs`, `clock` and `workflows` must outlive the controller.
  // Without `workflows`, experiments whose trials are workflows are refused.
  ExperimentController(Store& store, api::JobService& jobs, const Clock& clock,
                       api::WorkflowService* workflows = nullptr);

  // One pass over every running experiment.
  void Tick();
  // Runs Tick until Shutdown(), every `period` or sooner when woken.
  void RunLoop(Duration period);
  void Shutdown();

  Result<api::ExperimentView> CreateExperiment(
      std::string_view document, std::string_view submit_dir,
      const std::function<Status(JobSpec&)>& admit = nullptr) override;
  Result<api::ExperimentView> GetExperiment(std::string_view name) override;
  Result<std::vector<api::ExperimentView>> ListExperiments() override;
  Result<api::ExperimentView> StopExperiment(std::string_view name) override;
  Result<api::ExperimentView> DeleteExperiment(std::string_view name) override;

 private:
  // Callers hold mu_.
  void Advance(ExperimentRecord& experiment, const hpo::ExperimentSpec& spec);
  // Stops a running trial whose job's confirmed verdict is one the spec's
  // early_stopping.health names.
  void StopIfUnhealthy(const hpo::ExperimentSpec& spec, TrialRecord& trial,
                       const std::string& metrics_job);
  void Finish(ExperimentRecord& experiment, ExperimentState state, std::string message,
              std::vector<TrialRecord>& trials);
  void LaunchTrial(const hpo::ExperimentSpec& spec, std::int64_t index,
                   const std::vector<TrialRecord>& trials);
  // What became of a trial's job or workflow.
  struct TrialRun {
    bool found = false;  // its job or workflow exists
    bool owned = false;  // and this experiment created it, in its team
    bool ended = false;
    bool succeeded = false;
    std::string state;        // the job's state or the workflow's phase
    std::string failure;      // why it ended without succeeding
    std::string metrics_job;  // the job whose metrics are the trial's; "" none yet
  };
  Result<TrialRun> ObserveTrial(const hpo::ExperimentSpec& spec, const std::string& name);
  // Submits the trial's job or workflow (Conflict: the name is taken).
  Status SubmitTrial(const hpo::ExperimentSpec& spec, std::int64_t index,
                     const hpo::Assignment& params);
  void StopTrial(const hpo::ExperimentSpec& spec, const std::string& name,
                 const std::string& reason);
  Result<const hpo::ExperimentSpec*> SpecOf(const ExperimentRecord& experiment);
  Result<api::ExperimentView> View(const ExperimentRecord& experiment);

  Store& store_;
  api::JobService& jobs_;
  const Clock& clock_;
  api::WorkflowService* workflows_;
  std::mutex mu_;  // serialises experiment mutations
  ControlLoop loop_;
  std::map<std::string, hpo::ExperimentSpec> specs_;  // guarded by mu_: parsed specs by name
};

}  // namespace headway
