// RAII wrapper over a prepared sqlite3 statement. Internal to store/sqlite.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>

namespace headway::internal {

class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) {
      failed_ = true;
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  void Bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void Bind(int i, std::int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void Bind(int i, int v) { sqlite3_bind_int64(stmt_, i, v); }
  void Bind(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  void BindNull(int i) { sqlite3_bind_null(stmt_, i); }
  void BindOptional(int i, const std::optional<std::int64_t>& v) {
    if (v) {
      Bind(i, *v);
    } else {
      BindNull(i);
    }
  }

  // True while a row is available; check failed() after it returns false.
  bool Step() {
    if (failed_ || stmt_ == nullptr) return false;
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) failed_ = true;
    return false;
  }
  // For statements without rows: true on success.
  bool Run() {
    Step();
    return !failed_;
  }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  bool failed() const { return failed_; }

  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int ColumnInt(int col) const { return sqlite3_column_int(stmt_, col); }
  std::int64_t ColumnInt64(int col) const { return sqlite3_column_int64(stmt_, col); }
  double ColumnDouble(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string ColumnText(int col) const {
    const unsigned char* text = sqlite3_column_text(stmt_, col);
    return text ? std::string(reinterpret_cast<const char*>(text),
                              static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)))
                : std::string();
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  bool failed_ = false;
};

}  // namespace headway::internal
