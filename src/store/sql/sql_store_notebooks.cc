// The SQL store's notebooks. The class is in sql_store_internal.h.
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/sql/sql_store_internal.h"

namespace headway::sql_internal {

Status SqlStore::CreateNotebook(const NotebookRecord& n) {
  std::lock_guard lock(mu_);
  Statement q(*db_,
              "INSERT INTO notebooks (name, team, created_by, profile, gpus, state, job, "
              "starts, message, created_at, cull_warned_at, hub_user, server_env) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  BindNotebook(q, n);
  if (!q.Run()) {
    if (q.broken_constraint() == Constraint::kUnique) {
      return Conflict("notebook '" + n.name + "' already exists");
    }
    return Unavailable("create notebook: " + LastError());
  }
  return Status::Ok();
}

Status SqlStore::SaveNotebook(const NotebookRecord& n) {
  std::lock_guard lock(mu_);
  Statement q(*db_,
              "UPDATE notebooks SET name=?, team=?, created_by=?, profile=?, gpus=?, "
              "state=?, job=?, starts=?, message=?, created_at=?, cull_warned_at=?, "
              "hub_user=?, server_env=? WHERE name=?");
  BindNotebook(q, n);
  q.Bind(14, n.name);
  if (!q.Run()) return Unavailable("save notebook: " + LastError());
  if (q.changes() == 0) return NotFound("notebook '" + n.name + "' not found");
  return Status::Ok();
}

Result<NotebookRecord> SqlStore::GetNotebook(std::string_view name) {
  std::lock_guard lock(mu_);
  Statement q(*db_, std::string(kSelectNotebook) + " WHERE name = ?");
  q.Bind(1, std::string(name));
  if (!q.Step()) {
    if (q.failed()) return Unavailable("read notebook: " + LastError());
    return NotFound("notebook '" + std::string(name) + "' not found");
  }
  return ReadNotebook(q);
}

Result<std::vector<NotebookRecord>> SqlStore::ListNotebooks(std::string_view team) {
  std::lock_guard lock(mu_);
  Statement q(*db_, std::string(kSelectNotebook) +
                        (team.empty() ? " ORDER BY name" : " WHERE team = ? ORDER BY name"));
  if (!team.empty()) q.Bind(1, std::string(team));
  std::vector<NotebookRecord> out;
  while (q.Step()) {
    auto n = ReadNotebook(q);
    if (!n.ok()) return n.status();
    out.push_back(std::move(n.value()));
  }
  if (q.failed()) return Unavailable("list notebooks: " + LastError());
  return out;
}

Status SqlStore::DeleteNotebook(std::string_view name) {
  std::lock_guard lock(mu_);
  Statement q(*db_, "DELETE FROM notebooks WHERE name = ?");
  q.Bind(1, std::string(name));
  if (!q.Run()) return Unavailable("delete notebook: " + LastError());
  if (q.changes() == 0) return NotFound("notebook '" + std::string(name) + "' not found");
  return Status::Ok();
}

void SqlStore::BindNotebook(Statement& q, const NotebookRecord& n) {
  q.Bind(1, n.name);
  q.Bind(2, n.team);
  q.Bind(3, n.created_by);
  q.Bind(4, n.profile);
  q.Bind(5, n.gpus);
  q.Bind(6, std::string(NotebookStateName(n.state)));
  q.Bind(7, n.job);
  q.Bind(8, n.starts);
  q.Bind(9, n.message);
  q.Bind(10, ToUnixMillis(n.created_at));
  q.BindOptional(11, Millis(n.cull_warned_at));
  q.Bind(12, n.hub_user);
  q.Bind(13, n.server_env_json);
}

Result<NotebookRecord> SqlStore::ReadNotebook(Statement& q) {
  NotebookRecord n;
  n.name = q.ColumnText(0);
  n.team = q.ColumnText(1);
  n.created_by = q.ColumnText(2);
  n.profile = q.ColumnText(3);
  n.gpus = q.ColumnInt(4);
  auto state = ParseNotebookState(q.ColumnText(5));
  if (!state) return Internal("stored notebook state is unknown: " + q.ColumnText(5));
  n.state = *state;
  n.job = q.ColumnText(6);
  n.starts = q.ColumnInt(7);
  n.message = q.ColumnText(8);
  n.created_at = FromUnixMillis(q.ColumnInt64(9));
  if (!q.IsNull(10)) n.cull_warned_at = FromUnixMillis(q.ColumnInt64(10));
  n.hub_user = q.ColumnText(11);
  n.server_env_json = q.ColumnText(12);
  return n;
}

}  // namespace headway::sql_internal
