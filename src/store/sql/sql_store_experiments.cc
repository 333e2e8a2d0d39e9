// The SQL store's experiments (hyperparameter searches) and their trials.
// The class is in sql_store_internal.h.
#include <cmath>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/sql/sql_store_internal.h"

namespace headway::sql_internal {

Status SqlStore::CreateExperiment(const ExperimentRecord& e) {
  std::lock_guard lock(mu_);
  Statement q(*db_,
              "INSERT INTO experiments (name, spec, state, message, created_at, finished_at) "
              "VALUES (?, ?, ?, ?, ?, ?)");
  BindExperiment(q, e);
  if (!q.Run()) {
    if (q.broken_constraint() == Constraint::kUnique) {
      return Conflict("experiment '" + e.name + "' already exists");
    }
    return Unavailable("create experiment: " + LastError());
  }
  return Status::Ok();
}

Status SqlStore::SaveExperiment(const ExperimentRecord& e) {
  std::lock_guard lock(mu_);
  Statement q(*db_,
              "UPDATE experiments SET name=?, spec=?, state=?, message=?, created_at=?, "
              "finished_at=? WHERE name=?");
  BindExperiment(q, e);
  q.Bind(7, e.name);
  if (!q.Run()) return Unavailable("save experiment: " + LastError());
  if (q.changes() == 0) return NotFound("experiment '" + e.name + "' not found");
  return Status::Ok();
}

Result<ExperimentRecord> SqlStore::GetExperiment(std::string_view name) {
  std::lock_guard lock(mu_);
  Statement q(*db_, std::string(kSelectExperiment) + " WHERE name = ?");
  q.Bind(1, std::string(name));
  if (!q.Step()) {
    if (q.failed()) return Unavailable("read experiment: " + LastError());
    return NotFound("experiment '" + std::string(name) + "' not found");
  }
  return ReadExperiment(q);
}

Result<std::vector<ExperimentRecord>> SqlStore::ListExperiments() {
  std::lock_guard lock(mu_);
  Statement q(*db_, std::string(kSelectExperiment) + " ORDER BY seq");
  std::vector<ExperimentRecord> out;
  while (q.Step()) {
    auto e = ReadExperiment(q);
    if (!e.ok()) return e.status();
    out.push_back(std::move(e.value()));
  }
  if (q.failed()) return Unavailable("list experiments: " + LastError());
  return out;
}

Status SqlStore::CreateTrial(const TrialRecord& t) {
  std::lock_guard lock(mu_);
  Statement q(*db_,
              "INSERT INTO trials (experiment, idx, job, params, state, stop_requested, "
              "objective, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  BindTrial(q, t);
  if (!q.Run()) {
    Constraint code = q.broken_constraint();
    if (code == Constraint::kUnique) {
      return Conflict("trial " + std::to_string(t.index) + " of '" + t.experiment + "' exists");
    }
    if (code == Constraint::kForeignKey) {
      return NotFound("experiment '" + t.experiment + "' not found");
    }
    return Unavailable("create trial: " + LastError());
  }
  return Status::Ok();
}

Status SqlStore::SaveTrial(const TrialRecord& t) {
  std::lock_guard lock(mu_);
  Statement q(*db_,
              "UPDATE trials SET experiment=?, idx=?, job=?, params=?, state=?, "
              "stop_requested=?, objective=?, message=? WHERE experiment=? AND idx=?");
  BindTrial(q, t);
  q.Bind(9, t.experiment);
  q.Bind(10, t.index);
  if (!q.Run()) return Unavailable("save trial: " + LastError());
  if (q.changes() == 0) return NotFound("trial not found");
  return Status::Ok();
}

Result<std::vector<TrialRecord>> SqlStore::ListTrials(std::string_view experiment) {
  std::lock_guard lock(mu_);
  Statement q(*db_,
              "SELECT experiment, idx, job, params, state, stop_requested, objective, "
              "message FROM trials WHERE experiment = ? ORDER BY idx");
  q.Bind(1, std::string(experiment));
  std::vector<TrialRecord> out;
  while (q.Step()) {
    TrialRecord t;
    t.experiment = q.ColumnText(0);
    t.index = q.ColumnInt64(1);
    t.job = q.ColumnText(2);
    t.params_json = q.ColumnText(3);
    auto state = ParseTrialState(q.ColumnText(4));
    if (!state) return Internal("stored trial state is unknown: " + q.ColumnText(4));
    t.state = *state;
    t.stop_requested = q.ColumnInt(5) != 0;
    if (!q.IsNull(6)) t.objective = q.ColumnDouble(6);
    t.message = q.ColumnText(7);
    out.push_back(std::move(t));
  }
  if (q.failed()) return Unavailable("list trials: " + LastError());
  return out;
}

Status SqlStore::DeleteExperiment(std::string_view name) {
  std::lock_guard lock(mu_);
  const std::string experiment(name);
  HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
  // Its trials first: they refer to it.
  Statement trials(*db_, "DELETE FROM trials WHERE experiment = ?");
  trials.Bind(1, experiment);
  if (!trials.Run()) return Rollback("delete trials");
  Statement del(*db_, "DELETE FROM experiments WHERE name = ?");
  del.Bind(1, experiment);
  if (!del.Run()) return Rollback("delete experiment");
  if (del.changes() == 0) {
    (void)Exec("ROLLBACK");
    return NotFound("experiment '" + experiment + "' not found");
  }
  return Commit();
}

void SqlStore::BindExperiment(Statement& q, const ExperimentRecord& e) {
  q.Bind(1, e.name);
  q.Bind(2, e.spec_json);
  q.Bind(3, std::string(ExperimentStateName(e.state)));
  q.Bind(4, e.message);
  q.Bind(5, ToUnixMillis(e.created_at));
  q.BindOptional(6, Millis(e.finished_at));
}

Result<ExperimentRecord> SqlStore::ReadExperiment(Statement& q) {
  ExperimentRecord e;
  e.name = q.ColumnText(0);
  e.spec_json = q.ColumnText(1);
  auto state = ParseExperimentState(q.ColumnText(2));
  if (!state) return Internal("stored experiment state is unknown: " + q.ColumnText(2));
  e.state = *state;
  e.message = q.ColumnText(3);
  e.created_at = FromUnixMillis(q.ColumnInt64(4));
  if (!q.IsNull(5)) e.finished_at = FromUnixMillis(q.ColumnInt64(5));
  return e;
}

void SqlStore::BindTrial(Statement& q, const TrialRecord& t) {
  q.Bind(1, t.experiment);
  q.Bind(2, t.index);
  q.Bind(3, t.job);
  q.Bind(4, t.params_json);
  q.Bind(5, std::string(TrialStateName(t.state)));
  q.Bind(6, t.stop_requested ? 1 : 0);
  if (t.objective && std::isfinite(*t.objective)) {
    q.Bind(7, *t.objective);
  } else {
    q.BindNull(7);
  }
  q.Bind(8, t.message);
}

}  // namespace headway::sql_internal
