// The SQL store's workflows, their nodes and labels, and the stored
// manifests (WorkflowTemplates, CronWorkflows). The class is in
// sql_store_internal.h.
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/sql/sql_store_internal.h"

namespace headway::sql_internal {

Status SqlStore::CreateWorkflow(WorkflowRecord& w) {
  std::lock_guard lock(mu_);
  HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
  Statement exists(*db_, "SELECT 1 FROM workflows WHERE name = ?");
  exists.Bind(1, w.name);
  if (exists.Step()) {
    (void)Exec("ROLLBACK");
    return Conflict("workflow '" + w.name + "' already exists");
  }
  Statement insert(*db_,
                   "INSERT INTO workflows (name, team, uid, created_by, phase, manifest, status, "
                   "created_at, started_at, finished_at, revision) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1) RETURNING seq");
  BindWorkflow(insert, w);
  if (!insert.Step()) return Rollback("insert workflow");
  w.seq = insert.ColumnInt64(0);
  insert.Reset();
  w.revision = 1;
  Status s = WriteWorkflowLabels(w);
  if (!s.ok()) return Rollback(s.message());
  return Commit();
}

Status SqlStore::SaveWorkflow(WorkflowRecord& w, const std::vector<WorkflowNodeRecord>& nodes,
                              const std::vector<std::string>& removed) {
  std::lock_guard lock(mu_);
  HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
  Statement update(*db_,
                   "UPDATE workflows SET name = ?, team = ?, uid = ?, created_by = ?, "
                   "phase = ?, manifest = ?, status = ?, created_at = ?, started_at = ?, "
                   "finished_at = ?, revision = revision + 1 WHERE name = ? AND revision = ?");
  BindWorkflow(update, w);
  update.Bind(11, w.name);
  update.Bind(12, w.revision);
  if (!update.Run()) return Rollback("save workflow");
  if (update.changes() == 0) {
    Statement exists(*db_, "SELECT revision FROM workflows WHERE name = ?");
    exists.Bind(1, w.name);
    const bool found = exists.Step();
    (void)Exec("ROLLBACK");
    if (!found) return NotFound("workflow '" + w.name + "' not found");
    return Conflict("workflow '" + w.name + "' changed since it was read (revision " +
                    std::to_string(w.revision) + ", now " + std::to_string(exists.ColumnInt64(0)) +
                    ")");
  }
  Status s = WriteWorkflowLabels(w);
  Statement node(*db_, db_->Upsert("workflow_nodes", {"workflow", "id", "phase", "job", "body"},
                                   {"workflow", "id"}, /*replace=*/true));
  for (const WorkflowNodeRecord& n : nodes) {
    if (!s.ok()) break;
    if (n.workflow != w.name) {
      s = InvalidArgument("node '" + n.id + "' is of workflow '" + n.workflow + "', not '" +
                          w.name + "'");
      break;
    }
    node.Reset();
    node.Bind(1, n.workflow);
    node.Bind(2, n.id);
    node.Bind(3, n.phase);
    node.Bind(4, n.job);
    node.Bind(5, n.body);
    if (!node.Run()) s = Unavailable("save workflow node: " + LastError());
  }
  Statement drop(*db_, "DELETE FROM workflow_nodes WHERE workflow = ? AND id = ?");
  for (const std::string& id : removed) {
    if (!s.ok()) break;
    drop.Reset();
    drop.Bind(1, w.name);
    drop.Bind(2, id);
    if (!drop.Run()) s = Unavailable("remove workflow node: " + LastError());
  }
  if (!s.ok()) {
    (void)Exec("ROLLBACK");
    return s;
  }
  HEADWAY_RETURN_IF_ERROR(Commit());
  ++w.revision;
  return Status::Ok();
}

Result<WorkflowRecord> SqlStore::GetWorkflow(std::string_view name) {
  std::lock_guard lock(mu_);
  Statement q(*db_, std::string(kSelectWorkflow) + " WHERE name = ?");
  q.Bind(1, std::string(name));
  if (!q.Step()) {
    if (q.failed()) return Unavailable("read workflow: " + LastError());
    return NotFound("workflow '" + std::string(name) + "' not found");
  }
  WorkflowRecord w = ReadWorkflow(q);
  HEADWAY_RETURN_IF_ERROR(ReadWorkflowLabels(w));
  return w;
}

Result<std::vector<WorkflowRecord>> SqlStore::ListWorkflows(const WorkflowFilter& filter) {
  std::lock_guard lock(mu_);
  Query sql(std::string(kSelectWorkflow) + " WHERE 1=1");
  if (!filter.team.empty()) sql.Add(" AND team = ?", filter.team);
  if (filter.phase) sql.Add(" AND phase = ?", *filter.phase);
  if (filter.finished_only) sql.Add(" AND finished_at IS NOT NULL");
  if (filter.active_only) sql.Add(" AND finished_at IS NULL");
  if (filter.created_after) sql.Add(" AND created_at > ?", ToUnixMillis(*filter.created_after));
  if (filter.created_before) sql.Add(" AND created_at < ?", ToUnixMillis(*filter.created_before));
  if (filter.before_seq > 0) sql.Add(" AND seq < ?", filter.before_seq);
  if (!filter.uid.empty()) sql.Add(" AND uid = ?", filter.uid);
  // A range on the name, so the name's index serves it. U+10FFFF is the
  // last code point: no UTF-8 text with the prefix sorts after the prefix
  // followed by it, bytewise (names are compared bytewise on every backend).
  if (!filter.name_prefix.empty()) {
    sql.Add(" AND name >= ?", filter.name_prefix);
    sql.Add(" AND name < ?", filter.name_prefix + "\xf4\x8f\xbf\xbf");
  }
  for (const auto& [key, value] : filter.labels) {
    sql.Add(
        " AND EXISTS (SELECT 1 FROM workflow_labels l WHERE l.workflow = workflows.name "
        "AND l.\"key\" = ?",
        key);
    sql.Add(" AND l.value = ?)", value);
  }
  sql.Add(" ORDER BY seq DESC");
  if (filter.limit > 0) sql.Add(" LIMIT ?", static_cast<std::int64_t>(filter.limit));
  Statement q = sql.Prepare(*db_);
  std::vector<WorkflowRecord> out;
  while (q.Step()) out.push_back(ReadWorkflow(q));
  if (q.failed()) return Unavailable("list workflows: " + LastError());
  for (WorkflowRecord& w : out) HEADWAY_RETURN_IF_ERROR(ReadWorkflowLabels(w));
  return out;
}

Status SqlStore::DeleteWorkflow(std::string_view name) {
  std::lock_guard lock(mu_);
  HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
  const std::string workflow(name);
  Statement del(*db_, "DELETE FROM workflows WHERE name = ?");
  del.Bind(1, workflow);
  if (!del.Run()) return Rollback("delete workflow");
  if (del.changes() == 0) {
    (void)Exec("ROLLBACK");
    return NotFound("workflow '" + workflow + "' not found");
  }
  for (const char* table : {"workflow_labels", "workflow_nodes"}) {
    Statement q(*db_, std::string("DELETE FROM ") + table + " WHERE workflow = ?");
    q.Bind(1, workflow);
    if (!q.Run()) return Rollback(std::string("delete from ") + table);
  }
  return Commit();
}

Result<std::vector<WorkflowNodeRecord>> SqlStore::ListWorkflowNodes(std::string_view workflow) {
  std::lock_guard lock(mu_);
  Statement q(*db_,
              "SELECT workflow, id, phase, job, body FROM workflow_nodes "
              "WHERE workflow = ? ORDER BY id");
  q.Bind(1, std::string(workflow));
  std::vector<WorkflowNodeRecord> out;
  while (q.Step()) out.push_back(ReadWorkflowNode(q));
  if (q.failed()) return Unavailable("list workflow nodes: " + LastError());
  return out;
}

Result<std::optional<WorkflowNodeRecord>> SqlStore::WorkflowNodeOfJob(std::string_view job) {
  std::lock_guard lock(mu_);
  if (job.empty()) return std::optional<WorkflowNodeRecord>();
  Statement q(*db_,
              "SELECT workflow, id, phase, job, body FROM workflow_nodes WHERE job = ? "
              "LIMIT 1");
  q.Bind(1, std::string(job));
  if (!q.Step()) {
    if (q.failed()) return Unavailable("find workflow node: " + LastError());
    return std::optional<WorkflowNodeRecord>();
  }
  return std::optional<WorkflowNodeRecord>(ReadWorkflowNode(q));
}

Status SqlStore::CreateWorkflowManifest(WorkflowManifestRecord& m) {
  std::lock_guard lock(mu_);
  Statement q(*db_,
              "INSERT INTO workflow_manifests (kind, name, team, body, created_at, "
              "updated_at, revision) VALUES (?, ?, ?, ?, ?, ?, 1)");
  q.Bind(1, m.kind);
  q.Bind(2, m.name);
  q.Bind(3, m.team);
  q.Bind(4, m.body);
  q.Bind(5, ToUnixMillis(m.created_at));
  q.Bind(6, ToUnixMillis(m.updated_at));
  if (!q.Run()) {
    if (q.broken_constraint() == Constraint::kUnique) {
      return Conflict(m.kind + " '" + m.name + "' already exists");
    }
    return Unavailable("create " + m.kind + ": " + LastError());
  }
  m.revision = 1;
  return Status::Ok();
}

Status SqlStore::UpdateWorkflowManifest(WorkflowManifestRecord& m) {
  std::lock_guard lock(mu_);
  Statement q(*db_,
              "UPDATE workflow_manifests SET team = ?, body = ?, updated_at = ?, "
              "revision = revision + 1 WHERE kind = ? AND name = ? AND revision = ?");
  q.Bind(1, m.team);
  q.Bind(2, m.body);
  q.Bind(3, ToUnixMillis(m.updated_at));
  q.Bind(4, m.kind);
  q.Bind(5, m.name);
  q.Bind(6, m.revision);
  if (!q.Run()) return Unavailable("update " + m.kind + ": " + LastError());
  if (q.changes() == 0) {
    Statement exists(*db_, "SELECT 1 FROM workflow_manifests WHERE kind = ? AND name = ?");
    exists.Bind(1, m.kind);
    exists.Bind(2, m.name);
    if (!exists.Step()) return NotFound(m.kind + " '" + m.name + "' not found");
    return Conflict(m.kind + " '" + m.name + "' changed since it was read");
  }
  ++m.revision;
  return Status::Ok();
}

Result<WorkflowManifestRecord> SqlStore::GetWorkflowManifest(std::string_view kind,
                                                             std::string_view name) {
  std::lock_guard lock(mu_);
  Statement q(*db_, std::string(kSelectManifest) + " WHERE kind = ? AND name = ?");
  q.Bind(1, std::string(kind));
  q.Bind(2, std::string(name));
  if (!q.Step()) {
    if (q.failed()) return Unavailable("read " + std::string(kind) + ": " + LastError());
    return NotFound(std::string(kind) + " '" + std::string(name) + "' not found");
  }
  return ReadManifest(q);
}

Result<std::vector<WorkflowManifestRecord>> SqlStore::ListWorkflowManifests(std::string_view kind,
                                                                            std::string_view team) {
  std::lock_guard lock(mu_);
  Statement q(*db_, std::string(kSelectManifest) + " WHERE kind = ?" +
                        (team.empty() ? "" : " AND team = ?") + " ORDER BY name");
  q.Bind(1, std::string(kind));
  if (!team.empty()) q.Bind(2, std::string(team));
  std::vector<WorkflowManifestRecord> out;
  while (q.Step()) out.push_back(ReadManifest(q));
  if (q.failed()) return Unavailable("list " + std::string(kind) + ": " + LastError());
  return out;
}

Status SqlStore::DeleteWorkflowManifest(std::string_view kind, std::string_view name) {
  std::lock_guard lock(mu_);
  Statement q(*db_, "DELETE FROM workflow_manifests WHERE kind = ? AND name = ?");
  q.Bind(1, std::string(kind));
  q.Bind(2, std::string(name));
  if (!q.Run()) return Unavailable("delete " + std::string(kind) + ": " + LastError());
  if (q.changes() == 0) {
    return NotFound(std::string(kind) + " '" + std::string(name) + "' not found");
  }
  return Status::Ok();
}

void SqlStore::BindWorkflow(Statement& q, const WorkflowRecord& w) {
  q.Bind(1, w.name);
  q.Bind(2, w.team);
  q.Bind(3, w.uid);
  q.Bind(4, w.created_by);
  q.Bind(5, w.phase);
  q.Bind(6, w.manifest);
  q.Bind(7, w.status);
  q.Bind(8, ToUnixMillis(w.created_at));
  q.BindOptional(9, Millis(w.started_at));
  q.BindOptional(10, Millis(w.finished_at));
}

WorkflowRecord SqlStore::ReadWorkflow(const Statement& q) {
  WorkflowRecord w;
  w.seq = q.ColumnInt64(0);
  w.name = q.ColumnText(1);
  w.team = q.ColumnText(2);
  w.uid = q.ColumnText(3);
  w.created_by = q.ColumnText(4);
  w.phase = q.ColumnText(5);
  w.manifest = q.ColumnText(6);
  w.status = q.ColumnText(7);
  w.created_at = FromUnixMillis(q.ColumnInt64(8));
  if (!q.IsNull(9)) w.started_at = FromUnixMillis(q.ColumnInt64(9));
  if (!q.IsNull(10)) w.finished_at = FromUnixMillis(q.ColumnInt64(10));
  w.revision = q.ColumnInt64(11);
  return w;
}

WorkflowNodeRecord SqlStore::ReadWorkflowNode(const Statement& q) {
  return {q.ColumnText(0), q.ColumnText(1), q.ColumnText(2), q.ColumnText(3), q.ColumnText(4)};
}

WorkflowManifestRecord SqlStore::ReadManifest(const Statement& q) {
  WorkflowManifestRecord m;
  m.kind = q.ColumnText(0);
  m.name = q.ColumnText(1);
  m.team = q.ColumnText(2);
  m.body = q.ColumnText(3);
  m.created_at = FromUnixMillis(q.ColumnInt64(4));
  m.updated_at = FromUnixMillis(q.ColumnInt64(5));
  m.revision = q.ColumnInt64(6);
  return m;
}

Status SqlStore::WriteWorkflowLabels(const WorkflowRecord& w) {
  Statement clear(*db_, "DELETE FROM workflow_labels WHERE workflow = ?");
  clear.Bind(1, w.name);
  if (!clear.Run()) return Unavailable("write workflow labels: " + LastError());
  Statement insert(*db_, "INSERT INTO workflow_labels (workflow, \"key\", value) VALUES (?, ?, ?)");
  for (const auto& [key, value] : w.labels) {
    insert.Reset();
    insert.Bind(1, w.name);
    insert.Bind(2, key);
    insert.Bind(3, value);
    if (!insert.Run()) return Unavailable("write workflow labels: " + LastError());
  }
  return Status::Ok();
}

Status SqlStore::ReadWorkflowLabels(WorkflowRecord& w) {
  Statement q(*db_, "SELECT \"key\", value FROM workflow_labels WHERE workflow = ?");
  q.Bind(1, w.name);
  while (q.Step()) w.labels[q.ColumnText(0)] = q.ColumnText(1);
  if (q.failed()) return Unavailable("read workflow labels: " + LastError());
  return Status::Ok();
}

}  // namespace headway::sql_internal
