// What the SQL store needs of a database: prepared statements with `?`
// placeholders, transactions, and the few places SQL dialects differ. One
// implementation per backend (store/sqlite, store/postgres, store/mysql), so
// the store's queries (sql_store*.cc) are written once and behave alike on
// each. Internal to store/.
//
// A connection is not thread-safe: its owner serialises calls (the store
// holds a mutex around each operation).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"

namespace headway::sql {

// Which constraint a failed statement broke, for the store's own errors
// (Conflict for a taken name, NotFound for a missing parent row).
enum class Constraint { kNone, kUnique, kForeignKey };

// One prepared statement of a backend. Parameters are numbered from 1 in the
// order their `?` appear; columns from 0.
class StatementImpl {
 public:
  virtual ~StatementImpl() = default;
  virtual void BindText(int i, const std::string& v) = 0;
  virtual void BindInt64(int i, std::int64_t v) = 0;
  virtual void BindDouble(int i, double v) = 0;
  virtual void BindNull(int i) = 0;
  // Executes on the first call after a (re)bind; true while a row is
  // available. After false, failed() says whether it ended in an error.
  virtual bool Step() = 0;
  // Clears the bindings and the result, ready to run again.
  virtual void Reset() = 0;
  virtual bool failed() const = 0;
  // Rows the last run inserted, updated or deleted.
  virtual std::int64_t changes() const = 0;
  virtual Constraint broken_constraint() const = 0;

  virtual bool IsNull(int col) const = 0;
  virtual std::int64_t ColumnInt64(int col) const = 0;
  virtual double ColumnDouble(int col) const = 0;
  virtual std::string ColumnText(int col) const = 0;
};

class Connection;

// A value to bind, for rows built before their statement.
using Value = std::variant<std::monostate, std::int64_t, double, std::string>;

// The store's handle on a statement: `Statement q(*db, "SELECT ...")`.
class Statement {
 public:
  Statement(Connection& db, const std::string& sql);
  Statement(Statement&&) = default;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  void Bind(int i, const std::string& v) { impl_->BindText(i, v); }
  void Bind(int i, std::int64_t v) { impl_->BindInt64(i, v); }
  void Bind(int i, int v) { impl_->BindInt64(i, v); }
  void Bind(int i, double v) { impl_->BindDouble(i, v); }
  void BindNull(int i) { impl_->BindNull(i); }
  void BindOptional(int i, const std::optional<std::int64_t>& v) {
    if (v) {
      Bind(i, *v);
    } else {
      BindNull(i);
    }
  }
  void BindOptional(int i, const std::optional<double>& v) {
    if (v) {
      Bind(i, *v);
    } else {
      BindNull(i);
    }
  }

  void BindValue(int i, const Value& v) {
    if (const auto* n = std::get_if<std::int64_t>(&v)) {
      Bind(i, *n);
    } else if (const auto* d = std::get_if<double>(&v)) {
      Bind(i, *d);
    } else if (const auto* s = std::get_if<std::string>(&v)) {
      Bind(i, *s);
    } else {
      BindNull(i);
    }
  }

  bool Step() { return impl_->Step(); }
  // For statements without rows: true on success.
  bool Run() {
    while (impl_->Step()) {
    }
    return !impl_->failed();
  }
  void Reset() { impl_->Reset(); }
  bool failed() const { return impl_->failed(); }
  std::int64_t changes() const { return impl_->changes(); }
  Constraint broken_constraint() const { return impl_->broken_constraint(); }

  bool IsNull(int col) const { return impl_->IsNull(col); }
  int ColumnInt(int col) const { return static_cast<int>(impl_->ColumnInt64(col)); }
  std::int64_t ColumnInt64(int col) const { return impl_->ColumnInt64(col); }
  double ColumnDouble(int col) const { return impl_->ColumnDouble(col); }
  std::string ColumnText(int col) const { return impl_->ColumnText(col); }

 private:
  std::unique_ptr<StatementImpl> impl_;
};

class Connection {
 public:
  virtual ~Connection() = default;
  // Never null: a statement that fails to prepare reports failed() when run,
  // with the reason in LastError().
  virtual std::unique_ptr<StatementImpl> Prepare(const std::string& sql) = 0;
  // Runs SQL without parameters or rows (several statements allowed).
  virtual Status Exec(const std::string& sql) = 0;
  // Starts a write transaction that holds the database's write lock from
  // its start, as SQLite's BEGIN IMMEDIATE does: writers on every server
  // sharing the database take turns, so ids (events, jobs) become visible
  // in the order they were given out.
  virtual Status BeginWrite() = 0;
  virtual std::string LastError() = 0;

  // Servers sharing a database elect their leader with a lock a session (a
  // connection) holds: it goes with the session, so a leader that dies or
  // loses the database loses it at once. TryLockSession takes it without
  // waiting; SessionLockHeld says whether this connection still holds it
  // (false once the connection was lost, even if made again since).
  virtual Result<bool> TryLockSession() = 0;
  virtual Result<bool> SessionLockHeld() = 0;

  // The highest id `column` of `table` has given out (or holds), deleted
  // rows included where the database remembers them; 0 for none.
  virtual Result<std::int64_t> IdentityHighWater(const std::string& table,
                                                 const std::string& column) = 0;
  // Makes `table` number `column` from above `high_water` on (never lower).
  virtual Status RaiseIdentity(const std::string& table, const std::string& column,
                               std::int64_t high_water) = 0;

  // A condition on `jobs` that holds when the job's spec labels include
  // every key and value of the JSON object bound to its one `?`: filtered
  // in the database (PostgreSQL: a GIN-indexed jsonb column), not by
  // reading every job's spec.
  virtual std::string JobLabelsContain() const = 0;

  // How many rows a multi-row INSERT (below) should carry: many for a
  // server a round trip away, one for SQLite, where a statement reused row
  // after row is cheaper than preparing a long one.
  virtual std::size_t RowsPerStatement() const { return 128; }

  // INSERT of `rows` rows (one `?` per column each, row after row) that
  // replaces a row with the same `key` columns, or (`replace` false) leaves
  // it as it is. The rows of one statement must have distinct keys.
  virtual std::string Upsert(const std::string& table, const std::vector<std::string>& columns,
                             const std::vector<std::string>& key, bool replace,
                             std::size_t rows = 1) const = 0;
};

inline Statement::Statement(Connection& db, const std::string& sql) : impl_(db.Prepare(sql)) {}

// ON CONFLICT (key) DO UPDATE / DO NOTHING, which SQLite and PostgreSQL share.
std::string OnConflictUpsert(const std::string& table, const std::vector<std::string>& columns,
                             const std::vector<std::string>& key, bool replace, std::size_t rows);

// `sql` with its n-th `?` (from 1, outside quoted literals) replaced by
// `with(n)`: PostgreSQL's $n, MariaDB's escaped literals.
std::string ReplacePlaceholders(const std::string& sql,
                                const std::function<std::string(int)>& with);

// The columns an upsert updates: those not in `key`.
std::vector<std::string> NonKeyColumns(const std::vector<std::string>& columns,
                                       const std::vector<std::string>& key);

// "(?, ?, ?), (?, ?, ?)": `rows` rows of `columns` placeholders.
std::string ValuesPlaceholders(std::size_t columns, std::size_t rows);

}  // namespace headway::sql
