// The SQL store: its construction, transactions, jobs with their events,
// webhook cursors and log files. The class is declared in
// sql_store_internal.h; its other concerns have a file each (sql_store_*.cc).
#include "store/sql/sql_store.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/job_spec_json.h"
#include "core/job_spec_parser.h"
#include "store/sql/sql_store_internal.h"

namespace headway::sql_internal {
namespace {

// "('Succeeded', 'Failed', 'Stopped')": the ended states, as core/job.h says.
const std::string& EndedStatesSql() {
  static const std::string list = [] {
    std::string out;
    for (JobState state : kAllJobStates) {
      if (!IsTerminal(state)) continue;
      out += (out.empty() ? "('" : ", '") + std::string(JobStateName(state)) + "'";
    }
    return out + ")";
  }();
  return list;
}

bool IsActive(JobState s) { return !IsTerminal(s); }

// A spec as stored: JSON in ASCII only. nlohmann writes DEL and C1 controls
// raw, which the spec parser refuses on reading back (a label holding YAML's
// "\x7f" made the job, and so every listing, unreadable); as \u escapes they
// read back as the same characters.
std::string StoredSpec(const JobSpec& spec) {
  return JobSpecToJson(spec).dump(-1, ' ', /*ensure_ascii=*/true);
}

}  // namespace

Status SqlStore::CreateJob(Job& job, const JobEvent& submitted) {
  std::lock_guard lock(mu_);
  HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
  Statement exists(*db_, "SELECT 1 FROM jobs WHERE name = ?");
  exists.Bind(1, job.name());
  if (exists.Step()) {
    (void)Exec("ROLLBACK");
    return Conflict("job '" + job.name() + "' already exists");
  }
  Statement insert(*db_,
                   "INSERT INTO jobs (name, team, spec, state, created_at, token_hash, created_by) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING seq");
  insert.Bind(1, job.name());
  insert.Bind(2, job.spec.team);
  insert.Bind(3, StoredSpec(job.spec));
  insert.Bind(4, std::string(JobStateName(job.state)));
  insert.Bind(5, ToUnixMillis(job.created_at));
  insert.Bind(6, job.token_hash);
  insert.Bind(7, job.created_by);
  if (!insert.Step()) return Rollback("insert job");
  job.submit_seq = insert.ColumnInt64(0);
  insert.Reset();
  Status s = WriteJob(job);
  if (s.ok()) s = WriteEvents({submitted});
  if (!s.ok()) return Rollback(s.message());
  return Commit();
}

Status SqlStore::SaveJob(const Job& job, const std::vector<JobEvent>& events) {
  std::lock_guard lock(mu_);
  HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
  Status s = WriteJob(job);
  if (s.ok()) s = WriteEvents(events);
  if (!s.ok()) {
    (void)Exec("ROLLBACK");
    return s;
  }
  return Commit();
}

Status SqlStore::DeleteJob(std::string_view name) {
  std::lock_guard lock(mu_);
  const std::string job(name);
  ForgetTails(job);
  HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
  Statement del(*db_, "DELETE FROM jobs WHERE name = ?");
  del.Bind(1, job);
  if (!del.Run()) return Rollback("delete job");
  if (del.changes() == 0) {
    (void)Exec("ROLLBACK");
    return NotFound("job '" + job + "' not found");
  }
  for (const char* table : {"job_events", "job_logs", "progress_chunks", "progress_log"}) {
    Statement q(*db_, std::string("DELETE FROM ") + table + " WHERE job = ?");
    q.Bind(1, job);
    if (!q.Run()) return Rollback(std::string("delete from ") + table);
  }
  return Commit();
}

Result<Job> SqlStore::GetJob(std::string_view name) {
  std::lock_guard lock(mu_);
  Statement q(*db_, std::string(kSelectJob) + " WHERE name = ?");
  q.Bind(1, std::string(name));
  if (!q.Step()) {
    if (q.failed()) return Unavailable("read job: " + LastError());
    return NotFound("job '" + std::string(name) + "' not found");
  }
  return ReadJob(q);
}

Result<std::vector<Job>> SqlStore::ListJobs(const JobFilter& filter) {
  std::lock_guard lock(mu_);
  Query sql(std::string(kSelectJob) + " WHERE 1=1");
  if (filter.state) sql.Add(" AND state = ?", std::string(JobStateName(*filter.state)));
  if (!filter.team.empty()) sql.Add(" AND team = ?", filter.team);
  if (filter.active_only) sql.Add(" AND state NOT IN " + EndedStatesSql());
  if (filter.ended_only) sql.Add(" AND state IN " + EndedStatesSql());
  if (filter.submitted_after > 0) sql.Add(" AND seq > ?", filter.submitted_after);
  if (!filter.labels.empty()) {
    // Escaped as the stored specs are, for a backend that compares the
    // JSON text of keys (MariaDB).
    sql.Add(" AND " + db_->JobLabelsContain(),
            nlohmann::json(filter.labels).dump(-1, ' ', /*ensure_ascii=*/true));
  }
  sql.Add(" ORDER BY seq");
  Statement q = sql.Prepare(*db_);
  std::vector<Job> jobs;
  while (q.Step()) {
    auto job = ReadJob(q);
    if (!job.ok()) return job.status();
    if (filter.active_only && !IsActive(job->state)) continue;
    if (filter.ended_only && IsActive(job->state)) continue;
    jobs.push_back(std::move(job.value()));
  }
  if (q.failed()) return Unavailable("list jobs: " + LastError());
  return jobs;
}

Result<std::vector<JobEvent>> SqlStore::ListEvents(std::string_view job, std::int64_t after_id) {
  std::lock_guard lock(mu_);
  Statement q(*db_,
              "SELECT id, job, time, type, message FROM job_events WHERE job = ? AND id > ? "
              "ORDER BY id");
  q.Bind(1, std::string(job));
  q.Bind(2, after_id);
  std::vector<JobEvent> events;
  while (q.Step()) {
    events.push_back({q.ColumnInt64(0), q.ColumnText(1), FromUnixMillis(q.ColumnInt64(2)),
                      q.ColumnText(3), q.ColumnText(4)});
  }
  if (q.failed()) return Unavailable("list events: " + LastError());
  return events;
}

Result<std::vector<JobEvent>> SqlStore::ListEventsAfter(std::int64_t after_id,
                                                        const std::vector<std::string>& types,
                                                        std::size_t limit) {
  std::lock_guard lock(mu_);
  Query sql("SELECT id, job, time, type, message FROM job_events WHERE id > ?", after_id);
  if (!types.empty()) {
    sql.Add(" AND type IN (");
    for (std::size_t i = 0; i < types.size(); ++i) sql.Add(i == 0 ? "?" : ", ?", types[i]);
    sql.Add(")");
  }
  sql.Add(" ORDER BY id LIMIT ?",
          static_cast<std::int64_t>(std::min<std::size_t>(
              limit, static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max()))));
  Statement q = sql.Prepare(*db_);
  std::vector<JobEvent> events;
  while (q.Step()) {
    events.push_back({q.ColumnInt64(0), q.ColumnText(1), FromUnixMillis(q.ColumnInt64(2)),
                      q.ColumnText(3), q.ColumnText(4)});
  }
  if (q.failed()) return Unavailable("list events: " + LastError());
  return events;
}

Result<std::int64_t> SqlStore::LastEventId() {
  std::lock_guard lock(mu_);
  Statement q(*db_, "SELECT COALESCE(MAX(id), 0) FROM job_events");
  if (!q.Step()) return Unavailable("last event id: " + LastError());
  return q.ColumnInt64(0);
}

Result<std::optional<std::int64_t>> SqlStore::GetWebhookCursor(std::string_view endpoint) {
  std::lock_guard lock(mu_);
  Statement q(*db_, "SELECT last_event_id FROM webhook_cursors WHERE endpoint = ?");
  q.Bind(1, std::string(endpoint));
  if (q.Step()) return std::optional<std::int64_t>(q.ColumnInt64(0));
  if (q.failed()) return Unavailable("read webhook cursor: " + LastError());
  return std::optional<std::int64_t>();
}

Status SqlStore::SetWebhookCursor(std::string_view endpoint, std::int64_t event_id,
                                  Time updated_at) {
  std::lock_guard lock(mu_);
  Statement q(*db_, db_->Upsert("webhook_cursors", {"endpoint", "last_event_id", "updated_at"},
                                {"endpoint"}, /*replace=*/true));
  q.Bind(1, std::string(endpoint));
  q.Bind(2, event_id);
  q.Bind(3, ToUnixMillis(updated_at));
  if (!q.Run()) return Unavailable("write webhook cursor: " + LastError());
  return Status::Ok();
}

Status SqlStore::AddLogFile(const LogFile& log) {
  std::lock_guard lock(mu_);
  Statement q(*db_, db_->Upsert("job_logs", {"job", "attempt", "rank", "path"},
                                {"job", "attempt", "rank"}, /*replace=*/true));
  q.Bind(1, log.job);
  q.Bind(2, log.attempt);
  q.Bind(3, log.rank);
  q.Bind(4, log.path);
  if (!q.Run()) return Unavailable("add log file: " + LastError());
  return Status::Ok();
}

Result<std::vector<LogFile>> SqlStore::ListLogFiles(std::string_view job) {
  std::lock_guard lock(mu_);
  Statement q(*db_,
              "SELECT job, attempt, rank, path FROM job_logs WHERE job = ? "
              "ORDER BY attempt, rank");
  q.Bind(1, std::string(job));
  std::vector<LogFile> logs;
  while (q.Step()) {
    logs.push_back({q.ColumnText(0), q.ColumnInt(1), q.ColumnInt(2), q.ColumnText(3)});
  }
  if (q.failed()) return Unavailable("list log files: " + LastError());
  return logs;
}

Result<Job> SqlStore::ReadJob(Statement& q) {
  Job job;
  job.submit_seq = q.ColumnInt64(0);
  auto spec = ParseStoredSpec(q.ColumnText(1));
  if (!spec.ok()) return spec.status();
  job.spec = std::move(spec.value());
  auto state = ParseJobState(q.ColumnText(2));
  if (!state) return Internal("stored state is unknown: " + q.ColumnText(2));
  job.state = *state;
  job.reason = q.ColumnText(3);
  job.message = q.ColumnText(4);
  if (!q.IsNull(5)) job.exit_code = q.ColumnInt(5);
  job.restarts = q.ColumnInt(6);
  job.gpu_ids = nlohmann::json::parse(q.ColumnText(7)).get<std::vector<int>>();
  job.executor = q.ColumnText(8);
  job.executor_handle = q.ColumnText(9);
  job.token_hash = q.ColumnText(10);
  job.created_at = FromUnixMillis(q.ColumnInt64(11));
  if (!q.IsNull(12)) job.started_at = FromUnixMillis(q.ColumnInt64(12));
  if (!q.IsNull(13)) job.finished_at = FromUnixMillis(q.ColumnInt64(13));
  if (!q.IsNull(14)) job.stop_requested_at = FromUnixMillis(q.ColumnInt64(14));
  auto stop_reason = ParseStopReason(q.ColumnText(15));
  if (!stop_reason) return Internal("stored stop reason is unknown: " + q.ColumnText(15));
  job.stop_reason = *stop_reason;
  job.preemptions = q.ColumnInt(16);
  if (!q.IsNull(17)) job.preempt_requested_at = FromUnixMillis(q.ColumnInt64(17));
  job.preempt_message = q.ColumnText(18);
  if (!q.IsNull(19)) job.requeued_at = FromUnixMillis(q.ColumnInt64(19));
  job.created_by = q.ColumnText(20);
  job.health = ParseHealth(q.ColumnText(21)).value_or(Health::kUnknown);
  job.health_reason = q.ColumnText(22);
  if (!q.IsNull(23)) job.delete_requested_at = FromUnixMillis(q.ColumnInt64(23));
  return job;
}

Status SqlStore::WriteJob(const Job& job) {
  Statement q(
      *db_,
      "UPDATE jobs SET team=?, spec=?, state=?, reason=?, message=?, exit_code=?, "
      "restarts=?, gpu_ids=?, executor=?, executor_handle=?, token_hash=?, "
      "started_at=?, finished_at=?, stop_requested_at=?, stop_reason=?, preemptions=?, "
      "preempt_requested_at=?, preempt_message=?, requeued_at=?, health=?, health_reason=?, "
      "delete_requested_at=? WHERE name=?");
  q.Bind(1, job.spec.team);
  q.Bind(2, StoredSpec(job.spec));
  q.Bind(3, std::string(JobStateName(job.state)));
  q.Bind(4, job.reason);
  q.Bind(5, job.message);
  q.BindOptional(6, job.exit_code ? std::optional<std::int64_t>(*job.exit_code) : std::nullopt);
  q.Bind(7, job.restarts);
  q.Bind(8, nlohmann::json(job.gpu_ids).dump());
  q.Bind(9, job.executor);
  q.Bind(10, job.executor_handle);
  q.Bind(11, job.token_hash);
  q.BindOptional(12, Millis(job.started_at));
  q.BindOptional(13, Millis(job.finished_at));
  q.BindOptional(14, Millis(job.stop_requested_at));
  q.Bind(15, std::string(StopReasonName(job.stop_reason)));
  q.Bind(16, job.preemptions);
  q.BindOptional(17, Millis(job.preempt_requested_at));
  q.Bind(18, job.preempt_message);
  q.BindOptional(19, Millis(job.requeued_at));
  q.Bind(20, std::string(HealthName(job.health)));
  q.Bind(21, job.health_reason);
  q.BindOptional(22, Millis(job.delete_requested_at));
  q.Bind(23, job.name());
  if (!q.Run()) return Unavailable("write job: " + LastError());
  if (q.changes() == 0) return NotFound("job '" + job.name() + "' not found");
  return Status::Ok();
}

Status SqlStore::WriteEvents(const std::vector<JobEvent>& events) {
  for (const JobEvent& e : events) {
    Statement q(*db_, "INSERT INTO job_events (job, time, type, message) VALUES (?, ?, ?, ?)");
    q.Bind(1, e.job);
    q.Bind(2, ToUnixMillis(e.time));
    q.Bind(3, e.type);
    q.Bind(4, e.message);
    if (!q.Run()) return Unavailable("write event: " + LastError());
  }
  return Status::Ok();
}

std::optional<std::int64_t> SqlStore::Millis(const std::optional<Time>& t) {
  if (!t) return std::nullopt;
  return ToUnixMillis(*t);
}

Status SqlStore::Exec(const std::string& sql) { return db_->Exec(sql); }

Status SqlStore::Commit() {
  Status s = Exec("COMMIT");
  if (!s.ok()) (void)Exec("ROLLBACK");
  return s;
}

Status SqlStore::Rollback(const std::string& what) {
  std::string error = LastError();
  (void)Exec("ROLLBACK");
  return Unavailable(what + ": " + error);
}

std::string SqlStore::LastError() { return db_->LastError(); }

Result<JobSpec> SqlStore::ParseStoredSpec(const std::string& text) {
  auto it = spec_cache_.find(text);
  if (it != spec_cache_.end()) return it->second;
  if (spec_cache_.size() >= kSpecCacheSize) spec_cache_.clear();
  // The canonical JSON it was stored as, read as JSON: a listing of 100k
  // jobs spent most of its time in the YAML reader.
  auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_discarded()) {
    if (auto fast = JobSpecFromStoredJson(json))
      return spec_cache_.emplace(text, *fast).first->second;
  }
  auto spec = ParseJobSpec(text);
  if (!spec.ok()) return Internal("stored spec is unreadable: " + spec.status().ToString());
  spec_cache_.emplace(text, *spec);
  return spec;
}

}  // namespace headway::sql_internal

namespace headway {

std::unique_ptr<Store> sql::MakeSqlStore(std::unique_ptr<Connection> db) {
  return std::make_unique<sql_internal::SqlStore>(std::move(db));
}

}  // namespace headway
