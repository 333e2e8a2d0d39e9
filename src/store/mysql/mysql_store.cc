// The MySQL/MariaDB backend of the store, over libmariadb (Debian's client
// library; the server must run INSERT ... RETURNING: MariaDB 10.5 or later).
//  - Parameters are sent as literals the client library escapes for the
//    connection's character set (utf8mb4), as MySQL's own connectors do
//    without server-side prepares; `?` outside quotes is replaced in order.
//  - Write transactions lock the one row of headway_write_lock FOR UPDATE:
//    writers on every server take turns, as SQLite's do, and the lock goes
//    with the commit or rollback.
//  - Sessions run READ COMMITTED with ANSI_QUOTES (the store's SQL quotes
//    identifiers as standard SQL does), and ask for matched rather than
//    changed rows, so an UPDATE that writes the same values still counts.
//  - Text columns are utf8mb4_bin: compared bytewise, as SQLite's are.
#include <mysql.h>
#include <mysqld_error.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/sql/connection.h"
#include "store/sql/migrate_progress_rows.h"
#include "store/sql/open_connection.h"
#include "store/store.h"

namespace headway {
namespace {

// Each entry upgrades the schema by one version; never edit a released entry.
// v1 is the schema SQLite reached in its v14, in MariaDB's types: keys are
// VARCHARs (an index takes no TEXT), large documents LONGTEXT.
const char* const kMySqlMigrations[] = {
    R"sql(
    CREATE TABLE headway_write_lock (id INT PRIMARY KEY) ENGINE=InnoDB;
    INSERT INTO headway_write_lock (id) VALUES (1);
    CREATE TABLE jobs (
      seq BIGINT AUTO_INCREMENT PRIMARY KEY,
      name VARCHAR(255) NOT NULL UNIQUE,
      team VARCHAR(255) NOT NULL,
      spec LONGTEXT NOT NULL,
      state VARCHAR(32) NOT NULL,
      reason TEXT NOT NULL DEFAULT '',
      message TEXT NOT NULL DEFAULT '',
      exit_code BIGINT,
      restarts BIGINT NOT NULL DEFAULT 0,
      gpu_ids TEXT NOT NULL DEFAULT '[]',
      executor VARCHAR(255) NOT NULL DEFAULT '',
      executor_handle TEXT NOT NULL DEFAULT '',
      token_hash VARCHAR(255) NOT NULL DEFAULT '',
      created_at BIGINT NOT NULL,
      started_at BIGINT,
      finished_at BIGINT,
      stop_requested_at BIGINT,
      stop_reason VARCHAR(64) NOT NULL DEFAULT '',
      preemptions BIGINT NOT NULL DEFAULT 0,
      preempt_requested_at BIGINT,
      preempt_message TEXT NOT NULL DEFAULT '',
      requeued_at BIGINT,
      created_by VARCHAR(255) NOT NULL DEFAULT '',
      health VARCHAR(32) NOT NULL DEFAULT 'Unknown',
      health_reason TEXT NOT NULL DEFAULT '',
      delete_requested_at BIGINT,
      labels LONGTEXT AS (JSON_EXTRACT(spec, '$.labels')) PERSISTENT,
      INDEX jobs_state (state),
      INDEX jobs_team (team, seq)
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    CREATE TABLE job_events (
      id BIGINT AUTO_INCREMENT PRIMARY KEY,
      job VARCHAR(255) NOT NULL,
      "time" BIGINT NOT NULL,
      "type" VARCHAR(64) NOT NULL,
      message MEDIUMTEXT NOT NULL,
      INDEX job_events_job (job, id)
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    CREATE TABLE job_logs (
      job VARCHAR(255) NOT NULL,
      attempt BIGINT NOT NULL,
      "rank" BIGINT NOT NULL,
      path TEXT NOT NULL,
      PRIMARY KEY (job, attempt, "rank")
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    CREATE TABLE progress_steps (
      job VARCHAR(255) NOT NULL,
      step BIGINT NOT NULL,
      "time" BIGINT NOT NULL,
      total_steps BIGINT,
      epoch DOUBLE,
      total_epochs DOUBLE,
      PRIMARY KEY (job, step)
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    CREATE TABLE metric_points (
      job VARCHAR(255) NOT NULL,
      metric VARCHAR(255) NOT NULL,
      step BIGINT NOT NULL,
      value DOUBLE,
      special VARCHAR(8),
      PRIMARY KEY (job, metric, step)
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    CREATE TABLE experiments (
      seq BIGINT AUTO_INCREMENT PRIMARY KEY,
      name VARCHAR(255) NOT NULL UNIQUE,
      spec LONGTEXT NOT NULL,
      state VARCHAR(32) NOT NULL,
      message TEXT NOT NULL DEFAULT '',
      created_at BIGINT NOT NULL,
      finished_at BIGINT
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    CREATE TABLE trials (
      experiment VARCHAR(255) NOT NULL,
      idx BIGINT NOT NULL,
      job VARCHAR(255) NOT NULL,
      params TEXT NOT NULL,
      state VARCHAR(32) NOT NULL,
      stop_requested BIGINT NOT NULL DEFAULT 0,
      objective DOUBLE,
      message TEXT NOT NULL DEFAULT '',
      PRIMARY KEY (experiment, idx),
      FOREIGN KEY (experiment) REFERENCES experiments(name)
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    CREATE TABLE user_tokens (
      seq BIGINT AUTO_INCREMENT PRIMARY KEY,
      name VARCHAR(255) NOT NULL UNIQUE,
      team VARCHAR(255) NOT NULL,
      role VARCHAR(32) NOT NULL,
      hash VARCHAR(255) NOT NULL UNIQUE,
      created_at BIGINT NOT NULL,
      revoked_at BIGINT,
      expires_at BIGINT,
      parent VARCHAR(255) NOT NULL DEFAULT ''
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    CREATE TABLE webhook_cursors (
      endpoint VARCHAR(255) PRIMARY KEY,
      last_event_id BIGINT NOT NULL,
      updated_at BIGINT NOT NULL
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    CREATE TABLE artifact_names (
      name VARCHAR(255) PRIMARY KEY,
      team VARCHAR(255) NOT NULL,
      last_version BIGINT NOT NULL
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    CREATE TABLE artifacts (
      name VARCHAR(255) NOT NULL,
      version BIGINT NOT NULL,
      kind VARCHAR(32) NOT NULL,
      state VARCHAR(32) NOT NULL,
      team VARCHAR(255) NOT NULL,
      created_by VARCHAR(255) NOT NULL,
      size BIGINT NOT NULL,
      digest VARCHAR(255) NOT NULL,
      producer_job VARCHAR(255) NOT NULL DEFAULT '',
      producer_attempt BIGINT,
      producer_step BIGINT,
      producer_node VARCHAR(255) NOT NULL DEFAULT '',
      metrics TEXT NOT NULL DEFAULT '{}',
      labels TEXT NOT NULL DEFAULT '{}',
      created_at BIGINT NOT NULL,
      ready_at BIGINT,
      PRIMARY KEY (name, version),
      INDEX artifacts_by_digest (digest),
      INDEX artifacts_by_producer (producer_job),
      INDEX artifacts_by_team (team)
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    CREATE TABLE artifact_uses (
      name VARCHAR(255) NOT NULL,
      version BIGINT NOT NULL,
      job VARCHAR(255) NOT NULL,
      attempt BIGINT NOT NULL,
      used_at BIGINT NOT NULL,
      PRIMARY KEY (name, version, job, attempt),
      INDEX artifact_uses_by_job (job)
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    CREATE TABLE workflows (
      seq BIGINT AUTO_INCREMENT PRIMARY KEY,
      name VARCHAR(255) NOT NULL UNIQUE,
      team VARCHAR(255) NOT NULL,
      uid VARCHAR(255) NOT NULL,
      created_by VARCHAR(255) NOT NULL,
      phase VARCHAR(32) NOT NULL,
      manifest LONGTEXT NOT NULL,
      status LONGTEXT NOT NULL,
      created_at BIGINT NOT NULL,
      started_at BIGINT,
      finished_at BIGINT,
      revision BIGINT NOT NULL,
      INDEX workflows_by_team (team, seq),
      INDEX workflows_by_phase (phase, seq),
      INDEX workflows_by_created (created_at),
      INDEX workflows_by_uid (uid),
      INDEX workflows_finished (finished_at, seq)
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    CREATE TABLE workflow_labels (
      workflow VARCHAR(255) NOT NULL,
      "key" VARCHAR(255) NOT NULL,
      value VARCHAR(255) NOT NULL,
      PRIMARY KEY (workflow, "key"),
      INDEX workflow_labels_by_pair ("key", value)
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    CREATE TABLE workflow_nodes (
      workflow VARCHAR(255) NOT NULL,
      id VARCHAR(255) NOT NULL,
      phase VARCHAR(32) NOT NULL,
      job VARCHAR(255) NOT NULL DEFAULT '',
      body LONGTEXT NOT NULL,
      PRIMARY KEY (workflow, id),
      INDEX workflow_nodes_by_job (job)
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    CREATE TABLE workflow_manifests (
      kind VARCHAR(64) NOT NULL,
      name VARCHAR(255) NOT NULL,
      team VARCHAR(255) NOT NULL,
      body LONGTEXT NOT NULL,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      revision BIGINT NOT NULL,
      PRIMARY KEY (kind, name)
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    CREATE TABLE notebooks (
      name VARCHAR(255) PRIMARY KEY,
      team VARCHAR(255) NOT NULL,
      created_by VARCHAR(255) NOT NULL,
      profile VARCHAR(255) NOT NULL,
      gpus BIGINT NOT NULL,
      state VARCHAR(32) NOT NULL,
      job VARCHAR(255) NOT NULL,
      starts BIGINT NOT NULL,
      message TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      cull_warned_at BIGINT,
      hub_user VARCHAR(255) NOT NULL,
      server_env TEXT NOT NULL,
      INDEX notebooks_by_team (team, name)
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    )sql",
    // v2: which server leads.
    R"sql(
    CREATE TABLE server_leader (
      id BIGINT PRIMARY KEY,
      address TEXT NOT NULL,
      since BIGINT NOT NULL
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    )sql",
    // v3: progress reports as acknowledged, before they are folded.
    R"sql(
    CREATE TABLE progress_log (
      seq BIGINT AUTO_INCREMENT PRIMARY KEY,
      job VARCHAR(255) NOT NULL,
      reports LONGTEXT NOT NULL
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    )sql",
    // v4: progress series in chunks of points (store/sql/progress_chunks.h).
    R"sql(
    CREATE TABLE progress_chunks (
      job VARCHAR(255) NOT NULL,
      series VARCHAR(255) NOT NULL,
      first_step BIGINT NOT NULL,
      last_step BIGINT NOT NULL,
      point_count BIGINT NOT NULL,
      points MEDIUMTEXT NOT NULL,
      PRIMARY KEY (job, series, first_step)
    ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
    )sql",
    // v5: the rows of progress_steps and metric_points move into chunks.
    sql::kMoveProgressRowsIntoChunks,
    // v6: and their tables go.
    R"sql(
    DROP TABLE progress_steps;
    DROP TABLE metric_points;
    )sql",
};

constexpr int kMySqlSchemaVersion = static_cast<int>(std::size(kMySqlMigrations));

class MysqlConnection;

class MysqlStatement final : public sql::StatementImpl {
 public:
  MysqlStatement(MysqlConnection& db, std::string sql) : db_(db), sql_(std::move(sql)) {}
  ~MysqlStatement() override { Free(); }

  void BindText(int i, const std::string& v) override;
  void BindInt64(int i, std::int64_t v) override { Set(i, std::to_string(v)); }
  void BindDouble(int i, double v) override {
    if (!std::isfinite(v)) return BindNull(i);  // MariaDB has no NaN or infinity
    char buffer[32];
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v);
    Set(i, ec == std::errc() ? std::string(buffer, end) : std::to_string(v));
  }
  void BindNull(int i) override { Set(i, "NULL"); }

  bool Step() override;
  void Reset() override {
    Free();
    literals_.clear();
    ran_ = false;
    failed_ = false;
    changes_ = 0;
    constraint_ = sql::Constraint::kNone;
  }
  bool failed() const override { return failed_; }
  std::int64_t changes() const override { return changes_; }
  sql::Constraint broken_constraint() const override { return constraint_; }

  bool IsNull(int col) const override { return row_[col] == nullptr; }
  std::int64_t ColumnInt64(int col) const override {
    return row_[col] ? std::strtoll(row_[col], nullptr, 10) : 0;
  }
  double ColumnDouble(int col) const override {
    return row_[col] ? std::strtod(row_[col], nullptr) : 0.0;
  }
  std::string ColumnText(int col) const override {
    return row_[col] ? std::string(row_[col], lengths_[col]) : std::string();
  }

 private:
  void Set(int i, std::string literal) {
    if (static_cast<int>(literals_.size()) < i)
      literals_.resize(static_cast<std::size_t>(i), "NULL");
    literals_[static_cast<std::size_t>(i - 1)] = std::move(literal);
  }
  void Free() {
    if (result_) mysql_free_result(result_);
    result_ = nullptr;
    row_ = nullptr;
  }
  std::string Interpolated() const {
    return sql::ReplacePlaceholders(sql_, [this](int n) {
      return static_cast<std::size_t>(n) <= literals_.size()
                 ? literals_[static_cast<std::size_t>(n - 1)]
                 : std::string("NULL");
    });
  }

  MysqlConnection& db_;
  std::string sql_;
  std::vector<std::string> literals_;
  MYSQL_RES* result_ = nullptr;
  MYSQL_ROW row_ = nullptr;
  unsigned long* lengths_ = nullptr;
  bool ran_ = false;
  bool failed_ = false;
  std::int64_t changes_ = 0;
  sql::Constraint constraint_ = sql::Constraint::kNone;
};

class MysqlConnection final : public sql::Connection {
 public:
  explicit MysqlConnection(MYSQL* mysql) : mysql_(mysql) {}
  ~MysqlConnection() override { mysql_close(mysql_); }

  std::unique_ptr<sql::StatementImpl> Prepare(const std::string& sql) override {
    return std::make_unique<MysqlStatement>(*this, sql);
  }

  Status Exec(const std::string& sql) override {
    if (mysql_real_query(mysql_, sql.data(), sql.size()) != 0) return Failed();
    // Drain every result of a multi-statement text.
    for (;;) {
      if (MYSQL_RES* res = mysql_store_result(mysql_)) mysql_free_result(res);
      const int more = mysql_next_result(mysql_);
      if (more > 0) return Failed();
      if (more < 0) break;
    }
    return Status::Ok();
  }

  Status BeginWrite() override {
    HEADWAY_RETURN_IF_ERROR(Exec("START TRANSACTION"));
    Status locked = Exec("SELECT id FROM headway_write_lock WHERE id = 1 FOR UPDATE");
    if (!locked.ok()) (void)Exec("ROLLBACK");
    return locked;
  }

  std::string LastError() override { return mysql_error(mysql_); }

  std::string Upsert(const std::string& table, const std::vector<std::string>& columns,
                     const std::vector<std::string>& key, bool replace,
                     std::size_t rows) const override {
    std::string columns_sql;
    for (std::size_t i = 0; i < columns.size(); ++i) columns_sql += (i ? ", " : "") + columns[i];
    const std::string values = sql::ValuesPlaceholders(columns.size(), rows);
    std::string updates;
    for (const std::string& column :
         replace ? sql::NonKeyColumns(columns, key) : std::vector<std::string>{}) {
      updates += (updates.empty() ? "" : ", ") + column + " = VALUES(" + column + ")";
    }
    // Nothing to replace: a duplicate is skipped, and counts as no change.
    if (updates.empty()) {
      return "INSERT IGNORE INTO " + table + " (" + columns_sql + ") VALUES " + values;
    }
    return "INSERT INTO " + table + " (" + columns_sql + ") VALUES " + values +
           " ON DUPLICATE KEY UPDATE " + updates;
  }

  // MariaDB indexes no JSON document: the generated column spares parsing
  // the spec per row, and the filter runs in the server.
  std::string JobLabelsContain() const override { return "JSON_CONTAINS(jobs.labels, ?)"; }

  // A named lock of the session; a reconnected session does not hold it.
  Result<bool> TryLockSession() override {
    return SingleBool("SELECT COALESCE(GET_LOCK('headway-leader', 0), 0)");
  }
  Result<bool> SessionLockHeld() override {
    return SingleBool("SELECT COALESCE(IS_USED_LOCK('headway-leader') = CONNECTION_ID(), 0)");
  }

  Result<std::int64_t> IdentityHighWater(const std::string& table,
                                         const std::string& column) override {
    sql::Statement q(*this, "SELECT GREATEST(COALESCE((SELECT MAX(\"" + column + "\") FROM \"" +
                                table +
                                "\"), 0), COALESCE((SELECT AUTO_INCREMENT - 1 FROM "
                                "information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND "
                                "TABLE_NAME = ?), 0))");
    q.Bind(1, table);
    if (!q.Step()) return Unavailable("read the ids of " + table + ": " + LastError());
    return q.ColumnInt64(0);
  }
  Status RaiseIdentity(const std::string& table, const std::string&,
                       std::int64_t high_water) override {
    // MariaDB never sets it below the table's largest id plus one.
    return Exec("ALTER TABLE \"" + table + "\" AUTO_INCREMENT = " + std::to_string(high_water + 1));
  }

  MYSQL* mysql() { return mysql_; }

  Result<bool> SingleBool(const std::string& sql) {
    sql::Statement q(*this, sql);
    if (!q.Step()) return Unavailable("mariadb: " + LastError());
    return q.ColumnInt64(0) != 0;
  }

  Status Migrate() {
    HEADWAY_RETURN_IF_ERROR(
        Exec("CREATE TABLE IF NOT EXISTS headway_schema (version BIGINT NOT NULL)"));
    // Two servers starting at once: one migrates, the other waits its turn.
    HEADWAY_RETURN_IF_ERROR(Exec("SELECT GET_LOCK('headway-migrate', 60)"));
    Status s = MigrateLocked();
    (void)Exec("DO RELEASE_LOCK('headway-migrate')");
    return s;
  }

 private:
  Status MigrateLocked() {
    int current = 0;
    {
      sql::Statement version(*this, "SELECT MAX(version) FROM headway_schema");
      if (!version.Step()) return Unavailable("cannot read schema version: " + LastError());
      if (!version.IsNull(0)) current = version.ColumnInt(0);
    }
    if (current > kMySqlSchemaVersion) {
      return Internal("database schema v" + std::to_string(current) +
                      " is newer than this Headway (v" + std::to_string(kMySqlSchemaVersion) + ")");
    }
    // MariaDB commits DDL as it goes: each version's statements are written
    // to be run once, and its number is recorded right after them.
    for (int v = current; v < kMySqlSchemaVersion; ++v) {
      if (kMySqlMigrations[v] == sql::kMoveProgressRowsIntoChunks) {
        // DML, unlike the DDL around it: one transaction.
        HEADWAY_RETURN_IF_ERROR(BeginWrite());
        Status s = sql::MoveProgressRowsIntoChunks(*this);
        if (s.ok()) s = Exec("COMMIT");
        if (!s.ok()) {
          (void)Exec("ROLLBACK");
          return s;
        }
      } else {
        HEADWAY_RETURN_IF_ERROR(Exec(kMySqlMigrations[v]));
      }
      HEADWAY_RETURN_IF_ERROR(
          Exec("INSERT INTO headway_schema (version) VALUES (" + std::to_string(v + 1) + ")"));
    }
    return Status::Ok();
  }

  Status Failed() { return Unavailable("mariadb: " + LastError()); }

  MYSQL* mysql_;
};

void MysqlStatement::BindText(int i, const std::string& v) {
  std::string literal(v.size() * 2 + 3, '\0');
  literal[0] = '\'';
  const unsigned long n =
      mysql_real_escape_string(db_.mysql(), literal.data() + 1, v.data(), v.size());
  literal.resize(n + 1);
  literal += '\'';
  Set(i, std::move(literal));
}

bool MysqlStatement::Step() {
  if (failed_) return false;
  if (!ran_) {
    ran_ = true;
    const std::string text = Interpolated();
    MYSQL* mysql = db_.mysql();
    if (mysql_real_query(mysql, text.data(), text.size()) != 0) {
      failed_ = true;
      const unsigned code = mysql_errno(mysql);
      constraint_ = code == ER_DUP_ENTRY ? sql::Constraint::kUnique
                    : code == ER_NO_REFERENCED_ROW_2 || code == ER_NO_REFERENCED_ROW
                        ? sql::Constraint::kForeignKey
                        : sql::Constraint::kNone;
      return false;
    }
    result_ = mysql_store_result(mysql);
    if (result_ == nullptr) {
      if (mysql_field_count(mysql) != 0) {
        failed_ = true;
        return false;
      }
      changes_ = static_cast<std::int64_t>(mysql_affected_rows(mysql));
      return false;
    }
    changes_ = static_cast<std::int64_t>(mysql_affected_rows(mysql));
  }
  if (result_ == nullptr) return false;
  row_ = mysql_fetch_row(result_);
  if (row_ == nullptr) return false;
  lengths_ = mysql_fetch_lengths(result_);
  return true;
}

// mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?option_file=PATH]
struct MysqlUrl {
  std::string user, password, host = "127.0.0.1", database, option_file;
  unsigned port = 3306;
};

Result<MysqlUrl> ParseMysqlUrl(const std::string& url) {
  const std::string scheme = "mysql://";
  if (url.rfind(scheme, 0) != 0) return InvalidArgument("not a mysql:// URL");
  MysqlUrl out;
  std::string rest = url.substr(scheme.size());
  if (auto q = rest.find('?'); q != std::string::npos) {
    std::string query = rest.substr(q + 1);
    rest.resize(q);
    for (std::size_t start = 0; start <= query.size();) {
      std::size_t end = query.find('&', start);
      if (end == std::string::npos) end = query.size();
      std::string pair = query.substr(start, end - start);
      if (pair.rfind("option_file=", 0) == 0) {
        out.option_file = pair.substr(12);
      } else if (!pair.empty()) {
        return InvalidArgument("unknown mysql:// option '" + pair.substr(0, pair.find('=')) +
                               "' (option_file=PATH only)");
      }
      start = end + 1;
    }
  }
  const std::size_t slash = rest.find('/');
  if (slash == std::string::npos || slash + 1 >= rest.size()) {
    return InvalidArgument("a mysql:// URL names its database: mysql://USER@HOST:PORT/DATABASE");
  }
  out.database = rest.substr(slash + 1);
  std::string authority = rest.substr(0, slash);
  if (auto at = authority.rfind('@'); at != std::string::npos) {
    std::string userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    if (auto colon = userinfo.find(':'); colon != std::string::npos) {
      out.password = userinfo.substr(colon + 1);
      userinfo.resize(colon);
    }
    out.user = userinfo;
  }
  if (auto colon = authority.rfind(':'); colon != std::string::npos) {
    const std::string port = authority.substr(colon + 1);
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return InvalidArgument("bad port in mysql:// URL");
    }
    out.port = value;
    authority.resize(colon);
  }
  if (!authority.empty()) out.host = authority;
  return out;
}

}  // namespace

Result<std::unique_ptr<sql::Connection>> sql::OpenMysqlConnection(const std::string& url) {
  auto parsed = ParseMysqlUrl(url);
  if (!parsed.ok()) return parsed.status();
  MYSQL* mysql = mysql_init(nullptr);
  if (mysql == nullptr) return Unavailable("cannot connect to MariaDB: out of memory");
  if (!parsed->option_file.empty()) {
    mysql_options(mysql, MYSQL_READ_DEFAULT_FILE, parsed->option_file.c_str());
  }
  mysql_options(mysql, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  unsigned int timeout = 10;
  mysql_options(mysql, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
  // A connection lost (a database restart, a failover) is made again on the
  // next query.
  my_bool reconnect = 1;
  mysql_options(mysql, MYSQL_OPT_RECONNECT, &reconnect);
  mysql_options(mysql, MYSQL_INIT_COMMAND,
                "SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES'), "
                "SESSION tx_isolation = 'READ-COMMITTED', "
                "collation_connection = 'utf8mb4_bin'");
  if (mysql_real_connect(
          mysql, parsed->host.c_str(), parsed->user.empty() ? nullptr : parsed->user.c_str(),
          parsed->password.empty() ? nullptr : parsed->password.c_str(), parsed->database.c_str(),
          parsed->port, nullptr, CLIENT_FOUND_ROWS | CLIENT_MULTI_STATEMENTS) == nullptr) {
    std::string message = mysql_error(mysql);
    mysql_close(mysql);
    return Unavailable("cannot connect to MariaDB: " + message);
  }
  auto connection = std::make_unique<MysqlConnection>(mysql);
  HEADWAY_RETURN_IF_ERROR(connection->Migrate());
  return std::unique_ptr<sql::Connection>(std::move(connection));
}

}  // namespace headway
