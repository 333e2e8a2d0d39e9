// The SQLite backend of the store: the embedded default. One file in WAL
// mode, synchronous=FULL, migrated by PRAGMA user_version.
#include <sqlite3.h>

#include <iterator>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/sql/connection.h"
#include "store/sql/migrate_progress_rows.h"
#include "store/sql/open_connection.h"
#include "store/store.h"

namespace headway {
namespace {

// Each entry upgrades the schema by one version; never edit a released entry.
const char* const kSqliteMigrations[] = {
    // v1: jobs, events, log index.
    R"sql(
    CREATE TABLE jobs (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      name TEXT NOT NULL UNIQUE,
      team TEXT NOT NULL,
      spec TEXT NOT NULL,
      state TEXT NOT NULL,
      reason TEXT NOT NULL DEFAULT '',
      message TEXT NOT NULL DEFAULT '',
      exit_code INTEGER,
      restarts INTEGER NOT NULL DEFAULT 0,
      gpu_ids TEXT NOT NULL DEFAULT '[]',
      executor TEXT NOT NULL DEFAULT '',
      executor_handle TEXT NOT NULL DEFAULT '',
      token_hash TEXT NOT NULL DEFAULT '',
      created_at INTEGER NOT NULL,
      started_at INTEGER,
      finished_at INTEGER,
      stop_requested_at INTEGER,
      stop_reason TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX jobs_state ON jobs(state);
    CREATE TABLE job_events (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      job TEXT NOT NULL,
      time INTEGER NOT NULL,
      type TEXT NOT NULL,
      message TEXT NOT NULL
    );
    CREATE INDEX job_events_job ON job_events(job, id);
    CREATE TABLE job_logs (
      job TEXT NOT NULL,
      attempt INTEGER NOT NULL,
      rank INTEGER NOT NULL,
      path TEXT NOT NULL,
      PRIMARY KEY (job, attempt, rank)
    );
    )sql",
    // v2: progress series. Non-finite values are kept in `special` because
    // SQLite stores NaN as NULL.
    R"sql(
    CREATE TABLE progress_steps (
      job TEXT NOT NULL,
      step INTEGER NOT NULL,
      time INTEGER NOT NULL,
      total_steps INTEGER,
      epoch REAL,
      total_epochs REAL,
      PRIMARY KEY (job, step)
    ) WITHOUT ROWID;
    CREATE TABLE metric_points (
      job TEXT NOT NULL,
      metric TEXT NOT NULL,
      step INTEGER NOT NULL,
      value REAL,
      special TEXT,
      PRIMARY KEY (job, metric, step)
    ) WITHOUT ROWID;
    )sql",
    // v3: preemption (requeues that do not use up max_restarts).
    R"sql(
    ALTER TABLE jobs ADD COLUMN preemptions INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE jobs ADD COLUMN preempt_requested_at INTEGER;
    ALTER TABLE jobs ADD COLUMN preempt_message TEXT NOT NULL DEFAULT '';
    ALTER TABLE jobs ADD COLUMN requeued_at INTEGER;
    )sql",
    // v4: hyperparameter experiments; a trial's job is an ordinary job.
    R"sql(
    CREATE TABLE experiments (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      name TEXT NOT NULL UNIQUE,
      spec TEXT NOT NULL,
      state TEXT NOT NULL,
      message TEXT NOT NULL DEFAULT '',
      created_at INTEGER NOT NULL,
      finished_at INTEGER
    );
    CREATE TABLE trials (
      experiment TEXT NOT NULL REFERENCES experiments(name),
      idx INTEGER NOT NULL,
      job TEXT NOT NULL,
      params TEXT NOT NULL,
      state TEXT NOT NULL,
      stop_requested INTEGER NOT NULL DEFAULT 0,
      objective REAL,
      message TEXT NOT NULL DEFAULT '',
      PRIMARY KEY (experiment, idx)
    ) WITHOUT ROWID;
    )sql",
    // v5: user tokens for the API (only their hashes).
    R"sql(
    CREATE TABLE user_tokens (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      name TEXT NOT NULL UNIQUE,
      team TEXT NOT NULL,
      role TEXT NOT NULL,
      hash TEXT NOT NULL UNIQUE,
      created_at INTEGER NOT NULL,
      revoked_at INTEGER
    );
    )sql",
    // v6: tokens that expire, and dashboard sessions made from another token.
    R"sql(
    ALTER TABLE user_tokens ADD COLUMN expires_at INTEGER;
    ALTER TABLE user_tokens ADD COLUMN parent TEXT NOT NULL DEFAULT '';
    )sql",
    // v7: who created a job (a user token or a controller such as an
    // experiment), so controllers never take over a job they did not create.
    // Existing trial jobs are credited to their experiment when the trial's
    // job carries the experiment's labels and is in the experiment's team;
    // any other job a trial names stays unowned.
    R"sql(
    ALTER TABLE jobs ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
    UPDATE jobs SET created_by = 'experiment/' || (
        SELECT t.experiment FROM trials t WHERE t.job = jobs.name LIMIT 1)
      WHERE EXISTS (
        SELECT 1 FROM trials t JOIN experiments e ON e.name = t.experiment
        WHERE t.job = jobs.name
          AND json_extract(jobs.spec, '$.labels.experiment') = t.experiment
          AND json_extract(jobs.spec, '$.labels.trial') = CAST(t.idx AS TEXT)
          AND json_extract(e.spec, '$.trial_template.team') = jobs.team);
    )sql",
    // v8: webhook outbox: per endpoint (a hash of its URL), the id of the
    // last event delivered to it or given up on.
    R"sql(
    CREATE TABLE webhook_cursors (
      endpoint TEXT PRIMARY KEY,
      last_event_id INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    )sql",
    // v9: the health last announced for a job's running attempt, so a
    // restart neither announces it again nor reads the events to find it.
    R"sql(
    ALTER TABLE jobs ADD COLUMN health TEXT NOT NULL DEFAULT 'Unknown';
    )sql",
    // v10: why the job has its health (kept as the final verdict once it
    // ended), and deletes that wait for a job to end.
    R"sql(
    ALTER TABLE jobs ADD COLUMN health_reason TEXT NOT NULL DEFAULT '';
    ALTER TABLE jobs ADD COLUMN delete_requested_at INTEGER;
    )sql",
    // v11: artifacts, their names (owner team, last version given out, so a
    // version is never reused) and which jobs used them.
    R"sql(
    CREATE TABLE artifact_names (
      name TEXT PRIMARY KEY,
      team TEXT NOT NULL,
      last_version INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE artifacts (
      name TEXT NOT NULL,
      version INTEGER NOT NULL,
      kind TEXT NOT NULL,
      state TEXT NOT NULL,
      team TEXT NOT NULL,
      created_by TEXT NOT NULL,
      size INTEGER NOT NULL,
      digest TEXT NOT NULL,
      producer_job TEXT NOT NULL DEFAULT '',
      producer_attempt INTEGER,
      producer_step INTEGER,
      producer_node TEXT NOT NULL DEFAULT '',
      metrics TEXT NOT NULL DEFAULT '{}',
      labels TEXT NOT NULL DEFAULT '{}',
      created_at INTEGER NOT NULL,
      ready_at INTEGER,
      PRIMARY KEY (name, version)
    ) WITHOUT ROWID;
    CREATE INDEX artifacts_by_digest ON artifacts(digest);
    CREATE INDEX artifacts_by_producer ON artifacts(producer_job);
    CREATE INDEX artifacts_by_team ON artifacts(team);
    CREATE TABLE artifact_uses (
      name TEXT NOT NULL,
      version INTEGER NOT NULL,
      job TEXT NOT NULL,
      attempt INTEGER NOT NULL,
      used_at INTEGER NOT NULL,
      PRIMARY KEY (name, version, job, attempt)
    ) WITHOUT ROWID;
    CREATE INDEX artifact_uses_by_job ON artifact_uses(job);
    )sql",
    // v12: workflows (manifest and status as JSON, the columns queries need,
    // and labels for selectors), their nodes one row each, and the
    // WorkflowTemplates and CronWorkflows.
    R"sql(
    CREATE TABLE workflows (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      name TEXT NOT NULL UNIQUE,
      team TEXT NOT NULL,
      uid TEXT NOT NULL,
      created_by TEXT NOT NULL,
      phase TEXT NOT NULL,
      manifest TEXT NOT NULL,
      status TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      started_at INTEGER,
      finished_at INTEGER,
      revision INTEGER NOT NULL
    );
    CREATE INDEX workflows_by_team ON workflows(team, seq);
    CREATE INDEX workflows_by_phase ON workflows(phase, seq);
    CREATE INDEX workflows_by_created ON workflows(created_at);
    CREATE TABLE workflow_labels (
      workflow TEXT NOT NULL,
      key TEXT NOT NULL,
      value TEXT NOT NULL,
      PRIMARY KEY (workflow, key)
    ) WITHOUT ROWID;
    CREATE INDEX workflow_labels_by_pair ON workflow_labels(key, value);
    CREATE TABLE workflow_nodes (
      workflow TEXT NOT NULL,
      id TEXT NOT NULL,
      phase TEXT NOT NULL,
      job TEXT NOT NULL DEFAULT '',
      body TEXT NOT NULL,
      PRIMARY KEY (workflow, id)
    ) WITHOUT ROWID;
    CREATE INDEX workflow_nodes_by_job ON workflow_nodes(job) WHERE job != '';
    CREATE TABLE workflow_manifests (
      kind TEXT NOT NULL,
      name TEXT NOT NULL,
      team TEXT NOT NULL,
      body TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      revision INTEGER NOT NULL,
      PRIMARY KEY (kind, name)
    ) WITHOUT ROWID;
    )sql",
    // v13: the archive's lookups: a workflow by uid, finished ones newest first.
    R"sql(
    CREATE INDEX workflows_by_uid ON workflows(uid);
    CREATE INDEX workflows_finished ON workflows(seq) WHERE finished_at IS NOT NULL;
    )sql",
    // v14: notebooks; each server they run is an ordinary job.
    R"sql(
    CREATE TABLE notebooks (
      name TEXT PRIMARY KEY,
      team TEXT NOT NULL,
      created_by TEXT NOT NULL,
      profile TEXT NOT NULL,
      gpus INTEGER NOT NULL,
      state TEXT NOT NULL,
      job TEXT NOT NULL,
      starts INTEGER NOT NULL,
      message TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      cull_warned_at INTEGER,
      hub_user TEXT NOT NULL,
      server_env TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX notebooks_by_team ON notebooks(team, name);
    )sql",
    // v15: which server leads, where several share a database (not SQLite's
    // case, but the schema is the same everywhere).
    R"sql(
    CREATE TABLE server_leader (
      id INTEGER PRIMARY KEY,
      address TEXT NOT NULL,
      since INTEGER NOT NULL
    );
    )sql",
    // v16: progress reports as acknowledged, before they are folded into
    // progress_steps and metric_points (store/sql/progress_log.h). A rowid
    // key without AUTOINCREMENT: only the order of the rows present matters.
    R"sql(
    CREATE TABLE progress_log (
      seq INTEGER PRIMARY KEY,
      job TEXT NOT NULL,
      reports TEXT NOT NULL
    );
    )sql",
    // v17: progress series in chunks of points (store/sql/progress_chunks.h).
    // A rowid table: rows of a few KiB sit whole on its pages, appended in
    // order, while a WITHOUT ROWID table keeps under 1 KiB of each in its
    // key's leaf and the rest on overflow pages, and inserts them all over
    // the tree. The key is a unique index of small entries.
    R"sql(
    CREATE TABLE progress_chunks (
      id INTEGER PRIMARY KEY,
      job TEXT NOT NULL,
      series TEXT NOT NULL,
      first_step INTEGER NOT NULL,
      last_step INTEGER NOT NULL,
      point_count INTEGER NOT NULL,
      points TEXT NOT NULL,
      UNIQUE (job, series, first_step)
    );
    )sql",
    // v18: the rows of progress_steps and metric_points move into chunks.
    sql::kMoveProgressRowsIntoChunks,
    // v19: and their tables go.
    R"sql(
    DROP TABLE progress_steps;
    DROP TABLE metric_points;
    )sql",
};

constexpr int kSqliteSchemaVersion = static_cast<int>(std::size(kSqliteMigrations));

// Compiled statements kept for reuse, by their SQL: compiling one took
// 15-20 us, about an eighth of the ingest writer's time, and the store runs
// the same few statements over and over. Not thread-safe, like the
// connection that owns it.
class StatementCache {
 public:
  explicit StatementCache(sqlite3* db) : db_(db) {}
  ~StatementCache() {
    for (auto& [sql, statements] : idle_) {
      for (sqlite3_stmt* s : statements) sqlite3_finalize(s);
    }
  }
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;

  // A statement for `sql`, or nullptr if it does not compile.
  sqlite3_stmt* Take(const std::string& sql) {
    auto it = idle_.find(sql);
    if (it != idle_.end() && !it->second.empty()) {
      sqlite3_stmt* s = it->second.back();
      it->second.pop_back();
      --idle_count_;
      return s;
    }
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) !=
        SQLITE_OK) {
      sqlite3_finalize(s);
      return nullptr;
    }
    return s;
  }

  // Takes `s` back, reset, for the next Take of `sql`.
  void Give(const std::string& sql, sqlite3_stmt* s) {
    if (s == nullptr) return;
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    // Statements built with varying filters or row counts are many; only so
    // many are kept.
    if (idle_count_ >= kMaxIdle) {
      sqlite3_finalize(s);
      return;
    }
    idle_[sql].push_back(s);
    ++idle_count_;
  }

 private:
  static constexpr std::size_t kMaxIdle = 256;
  sqlite3* db_;
  std::unordered_map<std::string, std::vector<sqlite3_stmt*>> idle_;
  std::size_t idle_count_ = 0;
};

class SqliteStatement final : public sql::StatementImpl {
 public:
  SqliteStatement(sqlite3* db, StatementCache& cache, const std::string& sql)
      : db_(db), cache_(cache), sql_(sql), stmt_(cache.Take(sql)) {
    if (stmt_ == nullptr) failed_ = true;
  }
  ~SqliteStatement() override { cache_.Give(sql_, stmt_); }

  void BindText(int i, const std::string& v) override {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void BindInt64(int i, std::int64_t v) override { sqlite3_bind_int64(stmt_, i, v); }
  void BindDouble(int i, double v) override { sqlite3_bind_double(stmt_, i, v); }
  void BindNull(int i) override { sqlite3_bind_null(stmt_, i); }

  bool Step() override {
    if (failed_ || stmt_ == nullptr || done_) return false;
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    done_ = true;
    if (rc == SQLITE_DONE) {
      changes_ = sqlite3_changes64(db_);
    } else {
      failed_ = true;
      int code = sqlite3_extended_errcode(db_);
      constraint_ = code == SQLITE_CONSTRAINT_UNIQUE || code == SQLITE_CONSTRAINT_PRIMARYKEY
                        ? sql::Constraint::kUnique
                    : code == SQLITE_CONSTRAINT_FOREIGNKEY ? sql::Constraint::kForeignKey
                                                           : sql::Constraint::kNone;
    }
    return false;
  }
  void Reset() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    done_ = false;
    changes_ = 0;
    constraint_ = sql::Constraint::kNone;
  }
  bool failed() const override { return failed_; }
  std::int64_t changes() const override { return changes_; }
  sql::Constraint broken_constraint() const override { return constraint_; }

  bool IsNull(int col) const override { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::int64_t ColumnInt64(int col) const override { return sqlite3_column_int64(stmt_, col); }
  double ColumnDouble(int col) const override { return sqlite3_column_double(stmt_, col); }
  std::string ColumnText(int col) const override {
    const unsigned char* text = sqlite3_column_text(stmt_, col);
    return text ? std::string(reinterpret_cast<const char*>(text),
                              static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)))
                : std::string();
  }

 private:
  sqlite3* db_;
  StatementCache& cache_;
  std::string sql_;
  sqlite3_stmt* stmt_ = nullptr;
  bool failed_ = false;
  bool done_ = false;
  std::int64_t changes_ = 0;
  sql::Constraint constraint_ = sql::Constraint::kNone;
};

class SqliteConnection final : public sql::Connection {
 public:
  explicit SqliteConnection(sqlite3* db)
      : db_(db), statements_(std::make_unique<StatementCache>(db)) {}
  ~SqliteConnection() override {
    statements_.reset();  // finalized before the close
    sqlite3_close(db_);
  }

  std::unique_ptr<sql::StatementImpl> Prepare(const std::string& sql) override {
    return std::make_unique<SqliteStatement>(db_, *statements_, sql);
  }
  Status Exec(const std::string& sql) override {
    if (sql.find(';') == std::string::npos) {
      // One statement (BEGIN, COMMIT, a PRAGMA): compiled once.
      SqliteStatement q(db_, *statements_, sql);
      while (q.Step()) {
      }
      if (q.failed()) return Unavailable("sqlite: " + LastError());
      return Status::Ok();
    }
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string message = err ? err : "unknown error";
      sqlite3_free(err);
      return Unavailable("sqlite: " + message);
    }
    return Status::Ok();
  }
  Status BeginWrite() override { return Exec("BEGIN IMMEDIATE"); }
  std::string LastError() override { return sqlite3_errmsg(db_); }
  std::string Upsert(const std::string& table, const std::vector<std::string>& columns,
                     const std::vector<std::string>& key, bool replace,
                     std::size_t rows) const override {
    return sql::OnConflictUpsert(table, columns, key, replace, rows);
  }

  std::size_t RowsPerStatement() const override { return 1; }

  // SQLite's JSON functions read the spec in place.
  std::string JobLabelsContain() const override {
    // json_each decodes keys and values on both sides (specs are stored
    // with \u escapes, which a JSON path would have to spell alike).
    return "NOT EXISTS (SELECT 1 FROM json_each(?) AS wanted WHERE NOT EXISTS ("
           "SELECT 1 FROM json_each(jobs.spec, '$.labels') AS have "
           "WHERE have.key = wanted.key AND have.value = wanted.value))";
  }

  // One server per SQLite file (its data directory's lock): it leads.
  Result<bool> TryLockSession() override { return true; }
  Result<bool> SessionLockHeld() override { return true; }

  Result<std::int64_t> IdentityHighWater(const std::string& table,
                                         const std::string& column) override {
    sql::Statement q(*this, "SELECT MAX(COALESCE((SELECT MAX(\"" + column + "\") FROM \"" + table +
                                "\"), 0), COALESCE((SELECT seq FROM sqlite_sequence "
                                "WHERE name = ?), 0))");
    q.Bind(1, table);
    if (!q.Step()) return Unavailable("read the ids of " + table + ": " + LastError());
    return q.ColumnInt64(0);
  }
  Status RaiseIdentity(const std::string& table, const std::string&,
                       std::int64_t high_water) override {
    sql::Statement update(*this, "UPDATE sqlite_sequence SET seq = ? WHERE name = ? AND seq < ?");
    update.Bind(1, high_water);
    update.Bind(2, table);
    update.Bind(3, high_water);
    if (!update.Run()) return Unavailable("number " + table + ": " + LastError());
    sql::Statement insert(*this,
                          "INSERT INTO sqlite_sequence (name, seq) SELECT ?, ? "
                          "WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = ?)");
    insert.Bind(1, table);
    insert.Bind(2, high_water);
    insert.Bind(3, table);
    if (!insert.Run()) return Unavailable("number " + table + ": " + LastError());
    return Status::Ok();
  }

  Status Migrate() {
    HEADWAY_RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL"));
    // FULL: a committed submit survives power loss, not just a process crash.
    HEADWAY_RETURN_IF_ERROR(Exec("PRAGMA synchronous=FULL"));
    HEADWAY_RETURN_IF_ERROR(Exec("PRAGMA foreign_keys=ON"));
    int current = 0;
    {
      // Finalized before the migrations: an open statement keeps DROP TABLE out.
      sql::Statement version(*this, "PRAGMA user_version");
      if (!version.Step()) return Unavailable("cannot read schema version: " + LastError());
      current = version.ColumnInt(0);
    }
    if (current > kSqliteSchemaVersion) {
      return Internal("database schema v" + std::to_string(current) +
                      " is newer than this Headway (v" + std::to_string(kSqliteSchemaVersion) +
                      ")");
    }
    for (int v = current; v < kSqliteSchemaVersion; ++v) {
      HEADWAY_RETURN_IF_ERROR(BeginWrite());
      Status s = kSqliteMigrations[v] == sql::kMoveProgressRowsIntoChunks
                     ? sql::MoveProgressRowsIntoChunks(*this)
                     : Exec(kSqliteMigrations[v]);
      if (s.ok()) s = Exec("PRAGMA user_version=" + std::to_string(v + 1));
      if (!s.ok()) {
        (void)Exec("ROLLBACK");
        return s;
      }
      HEADWAY_RETURN_IF_ERROR(Exec("COMMIT"));
    }
    return Status::Ok();
  }

 private:
  sqlite3* db_;
  std::unique_ptr<StatementCache> statements_;
};

}  // namespace

Result<std::unique_ptr<sql::Connection>> sql::OpenSqliteConnection(const std::string& path) {
  // Memory statistics take one process-wide mutex on every allocation
  // SQLite makes; nothing reads them. Only possible before SQLite starts
  // (later it answers SQLITE_MISUSE and changes nothing).
  static const bool kNoMemoryStatistics = [] {
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    return true;
  }();
  (void)kNoMemoryStatistics;
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Unavailable("cannot open database " + path + ": " + message);
  }
  sqlite3_busy_timeout(db, 5000);
  auto connection = std::make_unique<SqliteConnection>(db);
  HEADWAY_RETURN_IF_ERROR(connection->Migrate());

  return std::unique_ptr<sql::Connection>(std::move(connection));
}

}  // namespace headway
