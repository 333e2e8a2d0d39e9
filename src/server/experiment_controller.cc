#include "server/experiment_controller.h"

#include <cmath>

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
std::optional<double> BestOf(const std::vector<MetricPoint>& series, const hpo::Objective& objective) {
  std::optional<double> best;
  for (const MetricPoint& p : series) {
    if (!std::isfinite(p.value)) continue;
    if (!best || objective.Minimised(p.value) < objective.Minimised(*best)) best = p.value;
  }
  return best;
}

// The creator recorded on the jobs of an experiment's trials.
std::string TrialCreator(std::string_view experiment) { return "experiment/" + std::string(experiment); }

// Whether `job` is one this experiment created for a trial. A job that merely
// has the trial's name (another team's `btrain-0` when experiment `btrain`
// reaches trial 0) is never bound: its state, metrics and stop are not ours.
bool IsOwnTrialJob(const Job& job, const hpo::ExperimentSpec& spec) {
  return job.created_by == TrialCreator(spec.name) && job.spec.team == spec.trial_template.team;
}

std::string TakenMessage(const std::string& job) {
  return "job name " + job + " is taken by a job this experiment did not create";
}

}  // namespace

ExperimentController::ExperimentController(Store& store, api::JobService& jobs, const Clock& clock)
    : store_(store), jobs_(jobs), clock_(clock) {}

Result<const hpo::ExperimentSpec*> ExperimentController::SpecOf(const ExperimentRecord& e) {
  auto it = specs_.find(e.name);
  if (it != specs_.end()) return &it->second;
  auto spec = hpo::ParseExperimentSpec(e.spec_json);
  if (!spec.ok()) return Internal("stored spec of '" + e.name + "' is unreadable: " + spec.status().ToString());
  return &specs_.emplace(e.name, std::move(spec.value())).first->second;
}

Result<api::ExperimentView> ExperimentController::CreateExperiment(
    std::string_view document, std::string_view submit_dir,
    const std::function<Status(JobSpec&)>& admit) {
  auto spec = hpo::ParseExperimentSpec(document);
  if (!spec.ok()) return spec.status();
  if (admit) HEADWAY_RETURN_IF_ERROR(admit(spec->trial_template));
  ApplySubmitDir(spec->trial_template, submit_dir);
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
    woken_ = true;
    wake_.notify_all();
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

Result<api::ExperimentView> ExperimentController::View(const ExperimentRecord& e) {
  api::ExperimentView view;
  view.record = e;
  view.spec = nlohmann::json::parse(e.spec_json, nullptr, false);
  hpo::Objective objective;
  std::string team;
  {
    std::lock_guard lock(mu_);
    auto spec = SpecOf(e);
    if (!spec.ok()) return spec.status();
    objective = (*spec)->objective;
    team = (*spec)->trial_template.team;
  }
  auto trials = store_.ListTrials(e.name);
  if (!trials.ok()) return trials.status();
  for (const TrialRecord& t : *trials) {
    api::TrialView tv;
    tv.record = t;
    tv.params = nlohmann::json::parse(t.params_json, nullptr, false);
    auto job = jobs_.Get(t.job);
    if (job.ok() && job->created_by == TrialCreator(e.name) && job->spec.team == team) {
      tv.job_state = std::string(JobStateName(job->state));
      ProgressView progress = jobs_.Progress(*job);
      tv.step = progress.step;
      if (auto it = progress.metrics.find(objective.metric); it != progress.metrics.end()) {
        tv.latest = it->second;
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
    auto job = jobs_.Get(t.job);
    if (!job.ok() || !IsOwnTrialJob(*job, **spec)) continue;
    auto stopped = jobs_.Stop(t.job, "experiment " + e.name + " ended: " + message);
    (void)stopped;  // Conflict: the job already ended; the next view shows how
  }
  e.state = state;
  e.message = std::move(message);
  e.finished_at = clock_.Now();
  Status s = store_.SaveExperiment(e);
  if (!s.ok()) std::fprintf(stderr, "headway: cannot save experiment %s: %s\n", e.name.c_str(), s.ToString().c_str());
}

void ExperimentController::LaunchTrial(const hpo::ExperimentSpec& spec, std::int64_t index,
                                       const std::vector<TrialRecord>& trials) {
  std::vector<hpo::Observation> history;
  for (const TrialRecord& t : trials) {
    if (t.state == TrialState::kRunning) continue;
    hpo::Observation o;
    o.params = ParamsFromJson(t.params_json);
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
  auto job = jobs_.Submit(hpo::TrialJobSpec(spec, index, params), TrialCreator(spec.name));
  if (job.ok()) return;
  if (job.status().code() == StatusCode::kConflict) {
    // Ours only if this experiment created it; anyone else's is left alone.
    auto existing = jobs_.Get(trial.job);
    if (!existing.ok() || IsOwnTrialJob(*existing, spec)) return;  // not found: Advance resubmits
    trial.state = TrialState::kFailed;
    trial.message = TakenMessage(trial.job);
  } else {
    trial.state = TrialState::kFailed;
    trial.message = "cannot submit: " + job.status().message();
  }
  (void)store_.SaveTrial(trial);
}

void ExperimentController::Advance(ExperimentRecord& e, const hpo::ExperimentSpec& spec) {
  auto listed = store_.ListTrials(e.name);
  if (!listed.ok()) return;
  std::vector<TrialRecord> trials = std::move(listed.value());
  const hpo::Objective& objective = spec.objective;

  // 1. Trials whose jobs ended.
  std::map<std::string, std::vector<MetricPoint>> series;
  for (TrialRecord& t : trials) {
    if (t.state != TrialState::kRunning) continue;
    auto job = jobs_.Get(t.job);
    if (!job.ok()) {
      if (job.status().code() == StatusCode::kNotFound) {
        // Recorded but never submitted (the server stopped in between).
        auto again = jobs_.Submit(hpo::TrialJobSpec(spec, t.index, ParamsFromJson(t.params_json)),
                                  TrialCreator(spec.name));
        if (!again.ok() && again.status().code() != StatusCode::kConflict) {
          t.state = TrialState::kFailed;
          t.message = "cannot submit: " + again.status().message();
          (void)store_.SaveTrial(t);
        }
      }
      continue;
    }
    if (!IsOwnTrialJob(*job, spec)) {
      t.state = TrialState::kFailed;
      t.message = TakenMessage(t.job);
      (void)store_.SaveTrial(t);
      continue;
    }
    auto points = jobs_.MetricSeries(t.job, objective.metric);
    series[t.job] = points.ok() ? std::move(points.value()) : std::vector<MetricPoint>{};
    if (!IsTerminal(job->state)) continue;
    t.objective = BestOf(series[t.job], objective);
    if (t.stop_requested) {
      t.state = TrialState::kEarlyStopped;
    } else if (job->state == JobState::kSucceeded && t.objective) {
      t.state = TrialState::kCompleted;
    } else {
      t.state = TrialState::kFailed;
      t.message = job->state == JobState::kSucceeded
                      ? "succeeded without reporting a finite '" + objective.metric + "'"
                      : std::string(JobStateName(job->state)) + ": " + job->reason +
                            (job->message.empty() ? "" : " (" + job->message + ")");
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
        auto job = jobs_.Get(t.job);
        auto points = job.ok() && IsOwnTrialJob(*job, spec) ? jobs_.MetricSeries(t.job, objective.metric)
                                                            : Result<std::vector<MetricPoint>>(NotFound(t.job));
        it = series.emplace(t.job, points.ok() ? std::move(points.value()) : std::vector<MetricPoint>{}).first;
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
      auto stopped = jobs_.Stop(t.job, "early stopped: " + d.reason);
      (void)stopped;
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
      if (!best || objective.Minimised(*t.objective) < objective.Minimised(*trials[*best].objective)) best = i;
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
  std::unique_lock lock(mu_);
  while (!shutdown_) {
    lock.unlock();
    Tick();
    lock.lock();
    wake_.wait_for(lock, period, [this] { return shutdown_ || woken_; });
    woken_ = false;
  }
}

void ExperimentController::Shutdown() {
  std::lock_guard lock(mu_);
  shutdown_ = true;
  wake_.notify_all();
}

}  // namespace headway
