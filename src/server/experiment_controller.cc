#include "server/experiment_controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "workflow/workflow.h"

namespace headway {
namespace {

nlohmann::json ParamsToJson(const hpo::Assignment& params) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : params) {
    if (const double* d = std::get_if<double>(&value)) {
      if (std::floor(*d) == *d && std::fabs(*d) < 9e15) {
        j[name] = static_cast<std::int64_t>(*d);
      } else {
        j[name] = *d;
      }
    } else {
      j[name] = std::get<std::string>(value);
    }
  }
  return j;
}

hpo::Assignment ParamsFromJson(const std::string& text) {
  hpo::Assignment params;
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return params;
  for (const auto& [name, value] : j.items()) {
    if (value.is_number()) params[name] = value.get<double>();
    if (value.is_string()) params[name] = value.get<std::string>();
  }
  return params;
}

// The best finite value of the objective metric, or nothing.
std::optional<double> BestOf(const std::vector<MetricPoint>& series,
                             const hpo::Objective& objective) {
  std::optional<double> best;
  for (const MetricPoint& p : series) {
    if (!std::isfinite(p.value)) continue;
    if (!best || objective.Minimised(p.value) < objective.Minimised(*best)) best = p.value;
  }
  return best;
}

// The creator recorded on the jobs of an experiment's trials.
std::string TrialCreator(std::string_view experiment) {
  return "experiment/" + std::string(experiment);
}

// Whether `job` is one this experiment created for a trial. A job that merely
// has the trial's name (another team's `btrain-0` when experiment `btrain`
// reaches trial 0) is never bound: its state, metrics and stop are not ours.
bool IsOwnTrialJob(const Job& job, const hpo::ExperimentSpec& spec) {
  return job.created_by == TrialCreator(spec.name) && job.spec.team == spec.trial_template.team;
}

std::string TakenMessage(const hpo::ExperimentSpec& spec, const std::string& name) {
  const char* what = spec.trial_workflow ? "workflow" : "job";
  return std::string(what) + " name " + name + " is taken by a " + what +
         " this experiment did not create";
}

// A trial workflow runs in the experiment's team and no other; `admit`,
// when set, bounds the priorities its jobs ask for as the caller's jobs are.
api::TeamAdmission TrialTeam(std::string team, std::function<Status(JobSpec&)> admit = nullptr) {
  return [team, admit](api::PoolRequest& asked) -> Status {
    if (asked.team.empty()) asked.team = team;
    if (asked.team != team) return PermissionDenied("a trial workflow runs in team " + team);
    if (!admit) return Status::Ok();
    JobSpec bounds;
    bounds.team = team;
    bounds.priority = static_cast<int>(std::clamp<std::int64_t>(
        asked.priority, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
    return admit(bounds);
  };
}

// The job that ran the workflow's `step` last (a retried step's latest
// attempt): its metrics are the trial's. "" when it has not started.
std::string StepJob(const nlohmann::json& workflow, const std::string& step) {
  auto status = workflow.find("status");
  if (status == workflow.end() || !status->contains("nodes")) return "";
  std::string job, started;
  for (const auto& [id, node] : (*status)["nodes"].items()) {
    if (node.value("type", "") != "Pod") continue;
    const std::string name = node.value("displayName", "");
    if (name != step && name.rfind(step + "(", 0) != 0) continue;
    auto headway = node.find("headway");
    std::string node_job = headway != node.end() ? headway->value("job", "") : "";
    if (node_job.empty()) continue;
    std::string node_started = node.value("startedAt", "");
    if (job.empty() || node_started >= started) {
      job = node_job;
      started = node_started;
    }
  }
  return job;
}

}  // namespace

ExperimentController::ExperimentController(Store& store, api::JobService& jobs, const Clock& clock,
                                           api::WorkflowService* workflows)
    : store_(store), jobs_(jobs), clock_(clock), workflows_(workflows) {}

Result<ExperimentController::TrialRun> ExperimentController::ObserveTrial(
    const hpo::ExperimentSpec& spec, const std::string& name) {
  TrialRun run;
  if (!spec.trial_workflow) {
    auto job = jobs_.Get(name);
    if (!job.ok()) {
      if (job.status().code() == StatusCode::kNotFound) return run;
      return job.status();
    }
    run.found = true;
    run.owned = IsOwnTrialJob(*job, spec);
    if (!run.owned) return run;
    run.state = std::string(JobStateName(job->state));
    run.ended = IsTerminal(job->state);
    run.succeeded = job->state == JobState::kSucceeded;
    run.failure =
        run.state + ": " + job->reason + (job->message.empty() ? "" : " (" + job->message + ")");
    run.metrics_job = name;
    return run;
  }
  if (workflows_ == nullptr) return Unavailable("workflows are not enabled on this server");
  auto wf = workflows_->GetWorkflow(name);
  if (!wf.ok()) {
    if (wf.status().code() == StatusCode::kNotFound) return run;
    return wf.status();
  }
  run.found = true;
  run.owned = wf->created_by == TrialCreator(spec.name) && wf->team == spec.trial_template.team;
  if (!run.owned) return run;
  const nlohmann::json& status = wf->body["status"];
  run.state = status.value("phase", "Pending");
  run.ended = run.state == "Succeeded" || run.state == "Failed" || run.state == "Error";
  run.succeeded = run.state == "Succeeded";
  run.failure = "workflow " + run.state;
  if (status.contains("message") && status["message"].is_string()) {
    run.failure += ": " + status["message"].get<std::string>();
  }
  run.metrics_job = StepJob(wf->body, spec.objective.step);
  return run;
}

Status ExperimentController::SubmitTrial(const hpo::ExperimentSpec& spec, std::int64_t index,
                                         const hpo::Assignment& params) {
  if (!spec.trial_workflow) {
    return jobs_.Submit(hpo::TrialJobSpec(spec, index, params), TrialCreator(spec.name)).status();
  }
  if (workflows_ == nullptr) return Unavailable("workflows are not enabled on this server");
  std::string manifest = workflow::ToJson(hpo::TrialWorkflow(spec, index, params)).dump();
  return workflows_
      ->CreateWorkflow(manifest, "default", TrialTeam(spec.trial_template.team),
                       TrialCreator(spec.name), /*dry_run=*/false)
      .status();
}

void ExperimentController::StopTrial(const hpo::ExperimentSpec& spec, const std::string& name,
                                     const std::string& reason) {
  // Conflict: it already ended; the next pass reads how.
  if (spec.trial_workflow) {
    if (workflows_ != nullptr) (void)workflows_->StopWorkflow(name, /*terminate=*/false);
    return;
  }
  (void)jobs_.Stop(name, reason);
}

Result<const hpo::ExperimentSpec*> ExperimentController::SpecOf(const ExperimentRecord& e) {
  auto it = specs_.find(e.name);
  if (it != specs_.end()) return &it->second;
  auto spec = hpo::ParseExperimentSpec(e.spec_json);
  if (!spec.ok())
    return Internal("stored spec of '" + e.name + "' is unreadable: " + spec.status().ToString());
  return &specs_.emplace(e.name, std::move(spec.value())).first->second;
}

Result<api::ExperimentView> ExperimentController::CreateExperiment(
    std::string_view document, std::string_view submit_dir,
    const std::function<Status(JobSpec&)>& admit) {
  auto spec = hpo::ParseExperimentSpec(document);
  if (!spec.ok()) return spec.status();
  if (admit) HEADWAY_RETURN_IF_ERROR(admit(spec->trial_template));
  if (spec->trial_workflow) {
    if (workflows_ == nullptr) {
      return Status(Unavailable("workflows are not enabled on this server"))
          .WithField("trial_workflow");
    }
    // The team admission settled is the one every trial workflow names.
    workflow::ObjectMeta& meta = spec->trial_workflow->metadata;
    meta.annotations.erase(std::string(workflow::kTeamKey));
    meta.labels[std::string(workflow::kTeamKey)] = spec->trial_template.team;
    // Checked as its trials will be (templateRefs resolved, ...), with any values.
    auto sampler = hpo::MakeSampler("random", spec->sampler);
    if (!sampler.ok()) return sampler.status();
    hpo::Assignment sample = (*sampler)->Suggest(spec->parameters, {}, 0);
    auto lint = workflows_->CreateWorkflow(
        workflow::ToJson(hpo::TrialWorkflow(*spec, 0, sample)).dump(), "default",
        TrialTeam(spec->trial_template.team, admit), TrialCreator(spec->name), /*dry_run=*/true);
    if (!lint.ok()) {
      const Status& s = lint.status();
      Status prefixed(s.code(), s.message());
      prefixed.WithField(s.field().empty() ? "trial_workflow" : "trial_workflow." + s.field());
      return prefixed;
    }
  } else {
    ApplySubmitDir(spec->trial_template, submit_dir);
  }
  ExperimentRecord record;
  record.name = spec->name;
  // ASCII only: DEL or C1 written raw would not parse back (see SpecOf).
  record.spec_json = hpo::ExperimentSpecToJson(*spec).dump(-1, ' ', /*ensure_ascii=*/true);
  record.state = ExperimentState::kRunning;
  record.created_at = clock_.Now();
  {
    std::lock_guard lock(mu_);
    HEADWAY_RETURN_IF_ERROR(store_.CreateExperiment(record));
    specs_[record.name] = std::move(spec.value());
    loop_.Wake();
  }
  return GetExperiment(record.name);
}

Result<api::ExperimentView> ExperimentController::GetExperiment(std::string_view name) {
  auto e = store_.GetExperiment(name);
  if (!e.ok()) return e.status();
  return View(*e);
}

Result<std::vector<api::ExperimentView>> ExperimentController::ListExperiments() {
  auto all = store_.ListExperiments();
  if (!all.ok()) return all.status();
  std::vector<api::ExperimentView> views;
  for (const ExperimentRecord& e : *all) {
    auto v = View(e);
    if (!v.ok()) return v.status();
    views.push_back(std::move(v.value()));
  }
  return views;
}

Result<api::ExperimentView> ExperimentController::StopExperiment(std::string_view name) {
  {
    std::lock_guard lock(mu_);
    auto e = store_.GetExperiment(name);
    if (!e.ok()) return e.status();
    if (e->state != ExperimentState::kRunning) {
      return Conflict("experiment '" + std::string(name) + "' already ended (" +
                      std::string(ExperimentStateName(e->state)) + ")");
    }
    auto trials = store_.ListTrials(name);
    if (!trials.ok()) return trials.status();
    Finish(*e, ExperimentState::kStopped, "stopped by user", *trials);
  }
  return GetExperiment(name);
}

Result<api::ExperimentView> ExperimentController::DeleteExperiment(std::string_view name) {
  auto before = GetExperiment(name);
  if (!before.ok()) return before.status();
  std::lock_guard lock(mu_);
  auto e = store_.GetExperiment(name);
  if (!e.ok()) return e.status();
  const std::string experiment(name);
  if (e->state == ExperimentState::kRunning) {
    return Conflict("experiment '" + experiment + "' is Running: stop it first (headway exp stop " +
                    experiment + "), then delete it");
  }
  auto spec = SpecOf(*e);
  if (!spec.ok()) return spec.status();
  auto trials = store_.ListTrials(experiment);
  if (!trials.ok()) return trials.status();
  // Every trial's job or workflow is checked before any is deleted, so a
  // refusal leaves the experiment whole.
  std::vector<std::string> owned;
  for (const TrialRecord& t : *trials) {
    auto run = ObserveTrial(**spec, t.job);
    if (!run.ok()) return run.status();
    if (!run->found || !run->owned) continue;
    if (!run->ended) {
      return Conflict("experiment '" + experiment + "': its trial " + t.job + " is still " +
                      run->state + "; delete the experiment once it has ended");
    }
    owned.push_back(t.job);
  }
  for (const std::string& trial : owned) {
    Status deleted = (*spec)->trial_workflow ? workflows_->DeleteWorkflow(trial)
                                             : jobs_.Delete(trial, /*when_ended=*/false).status();
    if (!deleted.ok() && deleted.code() != StatusCode::kNotFound) return deleted;
  }
  HEADWAY_RETURN_IF_ERROR(store_.DeleteExperiment(experiment));
  specs_.erase(experiment);
  return before;
}

Result<api::ExperimentView> ExperimentController::View(const ExperimentRecord& e) {
  api::ExperimentView view;
  view.record = e;
  view.spec = nlohmann::json::parse(e.spec_json, nullptr, false);
  hpo::ExperimentSpec spec;
  {
    std::lock_guard lock(mu_);
    auto stored = SpecOf(e);
    if (!stored.ok()) return stored.status();
    spec = **stored;
  }
  const hpo::Objective& objective = spec.objective;
  auto trials = store_.ListTrials(e.name);
  if (!trials.ok()) return trials.status();
  for (const TrialRecord& t : *trials) {
    api::TrialView tv;
    tv.record = t;
    tv.params = nlohmann::json::parse(t.params_json, nullptr, false);
    auto run = ObserveTrial(spec, t.job);
    if (run.ok() && run->found && run->owned) {
      tv.job_state = run->state;
      auto job =
          run->metrics_job.empty() ? Result<Job>(NotFound(t.job)) : jobs_.Get(run->metrics_job);
      if (job.ok()) {
        ProgressView progress = jobs_.Progress(*job);
        tv.step = progress.step;
        if (auto it = progress.metrics.find(objective.metric); it != progress.metrics.end()) {
          tv.latest = it->second;
        }
      }
    }
    bool finished = t.state == TrialState::kCompleted || t.state == TrialState::kEarlyStopped;
    if (finished && t.objective) {
      if (!view.best || objective.Minimised(*t.objective) <
                            objective.Minimised(*view.trials[*view.best].record.objective)) {
        view.best = view.trials.size();
      }
    }
    view.trials.push_back(std::move(tv));
  }
  return view;
}

void ExperimentController::Finish(ExperimentRecord& e, ExperimentState state, std::string message,
                                  std::vector<TrialRecord>& trials) {
  auto spec = SpecOf(e);
  for (TrialRecord& t : trials) {
    if (t.state != TrialState::kRunning || !spec.ok()) continue;
    auto run = ObserveTrial(**spec, t.job);
    if (!run.ok() || !run->found || !run->owned) continue;
    StopTrial(**spec, t.job, "experiment " + e.name + " ended: " + message);
  }
  e.state = state;
  e.message = std::move(message);
  e.finished_at = clock_.Now();
  Status s = store_.SaveExperiment(e);
  if (!s.ok()) spdlog::error("cannot save experiment {}: {}", e.name, s.ToString());
}

void ExperimentController::LaunchTrial(const hpo::ExperimentSpec& spec, std::int64_t index,
                                       const std::vector<TrialRecord>& trials) {
  std::vector<hpo::Observation> history;
  for (const TrialRecord& t : trials) {
    hpo::Observation o;
    o.params = ParamsFromJson(t.params_json);
    if (t.state == TrialState::kRunning) {
      // Known parameters, unknown result: TPE spreads parallel trials out.
      o.outcome = hpo::TrialOutcome::kRunning;
      history.push_back(std::move(o));
      continue;
    }
    o.outcome = t.state == TrialState::kCompleted      ? hpo::TrialOutcome::kCompleted
                : t.state == TrialState::kEarlyStopped ? hpo::TrialOutcome::kPruned
                                                       : hpo::TrialOutcome::kFailed;
    if (t.objective) o.objective = spec.objective.Minimised(*t.objective);
    if (!o.objective) o.outcome = hpo::TrialOutcome::kFailed;
    history.push_back(std::move(o));
  }
  auto sampler = hpo::MakeSampler(spec.algorithm, spec.sampler);
  if (!sampler.ok()) return;  // validated at creation
  hpo::Assignment params = (*sampler)->Suggest(spec.parameters, history, index);
  TrialRecord trial;
  trial.experiment = spec.name;
  trial.index = index;
  trial.job = spec.name + "-" + std::to_string(index);
  trial.params_json = ParamsToJson(params).dump();
  trial.state = TrialState::kRunning;
  // Recorded first: a crash before the submit is repaired by Advance.
  if (!store_.CreateTrial(trial).ok()) return;
  Status submitted = SubmitTrial(spec, index, params);
  if (submitted.ok()) return;
  if (submitted.code() == StatusCode::kConflict) {
    // Ours only if this experiment created it; anyone else's is left alone.
    auto existing = ObserveTrial(spec, trial.job);
    if (!existing.ok() || !existing->found || existing->owned)
      return;  // not found: Advance resubmits
    trial.state = TrialState::kFailed;
    trial.message = TakenMessage(spec, trial.job);
  } else {
    trial.state = TrialState::kFailed;
    trial.message = "cannot submit: " + submitted.message();
  }
  (void)store_.SaveTrial(trial);
}

void ExperimentController::StopIfUnhealthy(const hpo::ExperimentSpec& spec, TrialRecord& t,
                                           const std::string& metrics_job) {
  if (t.stop_requested || metrics_job.empty() || spec.early_stopping.stop_on_health.empty()) {
    return;
  }
  auto job = jobs_.Get(metrics_job);
  if (!job.ok()) return;
  // The confirmed verdict: the one announced, never a single report's.
  const ProgressView progress = jobs_.Progress(*job);
  hpo::StopDecision d =
      hpo::ShouldStopOnHealth(progress.health, progress.health_reason, spec.early_stopping);
  if (!d.stop) return;
  t.stop_requested = true;
  t.message = d.reason;
  (void)store_.SaveTrial(t);  // before the stop, so its end is read as EarlyStopped
  StopTrial(spec, t.job, "early stopped: " + d.reason);
}

void ExperimentController::Advance(ExperimentRecord& e, const hpo::ExperimentSpec& spec) {
  auto listed = store_.ListTrials(e.name);
  if (!listed.ok()) return;
  std::vector<TrialRecord> trials = std::move(listed.value());
  const hpo::Objective& objective = spec.objective;

  // 1. Trials whose jobs (or workflows) ended.
  std::map<std::string, std::vector<MetricPoint>> series;
  for (TrialRecord& t : trials) {
    if (t.state != TrialState::kRunning) continue;
    auto run = ObserveTrial(spec, t.job);
    if (!run.ok()) continue;
    if (!run->found) {
      // Recorded but never submitted (the server stopped in between).
      Status again = SubmitTrial(spec, t.index, ParamsFromJson(t.params_json));
      if (!again.ok() && again.code() != StatusCode::kConflict) {
        t.state = TrialState::kFailed;
        t.message = "cannot submit: " + again.message();
        (void)store_.SaveTrial(t);
      }
      continue;
    }
    if (!run->owned) {
      t.state = TrialState::kFailed;
      t.message = TakenMessage(spec, t.job);
      (void)store_.SaveTrial(t);
      continue;
    }
    auto points = run->metrics_job.empty() ? Result<std::vector<MetricPoint>>(NotFound(t.job))
                                           : jobs_.MetricSeries(run->metrics_job, objective.metric);
    series[t.job] = points.ok() ? std::move(points.value()) : std::vector<MetricPoint>{};
    if (!run->ended) {
      StopIfUnhealthy(spec, t, run->metrics_job);
      continue;
    }
    t.objective = BestOf(series[t.job], objective);
    if (t.stop_requested) {
      t.state = TrialState::kEarlyStopped;
    } else if (run->succeeded && t.objective) {
      t.state = TrialState::kCompleted;
    } else {
      t.state = TrialState::kFailed;
      t.message = !run->succeeded ? run->failure
                  : spec.trial_workflow
                      ? "succeeded without step '" + spec.objective.step +
                            "' reporting a finite '" + objective.metric + "'"
                      : "succeeded without reporting a finite '" + objective.metric + "'";
    }
    (void)store_.SaveTrial(t);
  }

  // 2. Early stopping from the live curves.
  if (spec.early_stopping.rule != hpo::StoppingRule::kNone) {
    std::vector<hpo::TrialCurve> curves;
    for (const TrialRecord& t : trials) {
      auto it = series.find(t.job);
      if (it == series.end()) {
        // Finished trials: read only what this experiment's own job reported.
        auto run = ObserveTrial(spec, t.job);
        auto points = run.ok() && run->owned && !run->metrics_job.empty()
                          ? jobs_.MetricSeries(run->metrics_job, objective.metric)
                          : Result<std::vector<MetricPoint>>(NotFound(t.job));
        it = series
                 .emplace(t.job,
                          points.ok() ? std::move(points.value()) : std::vector<MetricPoint>{})
                 .first;
      }
      hpo::TrialCurve curve{t.job, {}};
      for (const MetricPoint& p : it->second) {
        double v = std::isfinite(p.value) ? objective.Minimised(p.value) : INFINITY;
        curve.points.push_back({p.step, v});
      }
      curves.push_back(std::move(curve));
    }
    for (std::size_t i = 0; i < trials.size(); ++i) {
      TrialRecord& t = trials[i];
      if (t.state != TrialState::kRunning || t.stop_requested || curves[i].points.empty()) continue;
      std::vector<hpo::TrialCurve> others;
      for (std::size_t j = 0; j < curves.size(); ++j) {
        if (j != i) others.push_back(curves[j]);
      }
      hpo::StopDecision d = hpo::ShouldStop(curves[i], others, spec.early_stopping);
      if (!d.stop) continue;
      t.stop_requested = true;
      t.message = d.reason;
      (void)store_.SaveTrial(t);  // before the stop, so its end is read as EarlyStopped
      StopTrial(spec, t.job, "early stopped: " + d.reason);
    }
  }

  // 3. Is the experiment done?
  int running = 0, failed = 0;
  for (const TrialRecord& t : trials) {
    if (t.state == TrialState::kRunning) ++running;
    if (t.state == TrialState::kFailed) ++failed;
    if (t.state == TrialState::kCompleted && t.objective && objective.Reached(*t.objective)) {
      Finish(e, ExperimentState::kSucceeded, "goal reached by " + t.job, trials);
      return;
    }
  }
  if (failed > spec.max_failed_trials) {
    Finish(e, ExperimentState::kFailed,
           std::to_string(failed) + " trials failed (max_failed_trials " +
               std::to_string(spec.max_failed_trials) + ")",
           trials);
    return;
  }
  auto total = static_cast<std::int64_t>(trials.size());
  if (total >= spec.max_trials && running == 0) {
    std::optional<std::size_t> best;
    for (std::size_t i = 0; i < trials.size(); ++i) {
      const TrialRecord& t = trials[i];
      if (t.state == TrialState::kFailed || !t.objective) continue;
      if (!best ||
          objective.Minimised(*t.objective) < objective.Minimised(*trials[*best].objective))
        best = i;
    }
    std::string message = "all " + std::to_string(total) + " trials ended";
    if (best) {
      char value[32];
      std::snprintf(value, sizeof value, "%.6g", *trials[*best].objective);
      message += "; best " + trials[*best].job + " (" + objective.metric + " " + value + ")";
    }
    Finish(e, best ? ExperimentState::kSucceeded : ExperimentState::kFailed, message, trials);
    return;
  }

  // 4. Start trials up to the parallelism.
  for (; running < spec.parallel_trials && total < spec.max_trials; ++running, ++total) {
    LaunchTrial(spec, total, trials);
  }
}

void ExperimentController::Tick() {
  std::lock_guard lock(mu_);
  auto all = store_.ListExperiments();
  if (!all.ok()) return;
  for (ExperimentRecord& e : *all) {
    if (e.state != ExperimentState::kRunning) continue;
    auto spec = SpecOf(e);
    if (!spec.ok()) {
      std::vector<TrialRecord> none;
      Finish(e, ExperimentState::kFailed, spec.status().message(), none);
      continue;
    }
    Advance(e, **spec);
  }
}

void ExperimentController::RunLoop(Duration period) {
  loop_.Run(period, [this] { Tick(); });
}

void ExperimentController::Shutdown() { loop_.Stop(); }

}  // namespace headway
