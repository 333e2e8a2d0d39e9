// Copies a store from one database to another, table by table: every row
// with its ids (job order, event ids the webhook outbox counts from, artifact
// versions) kept as they were, then checks both sides by row counts and
// checksums. Run again after an interruption, it copies only what is
// missing. The source must not change meanwhile (its server stopped).
// Internal to store/; `headway migrate` calls it through store/store.h.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/sql/connection.h"

namespace headway::sql {

struct TableCopyReport {
  std::string table;
  std::int64_t source_rows = 0;
  std::int64_t target_rows = 0;
  std::int64_t copied = 0;      // rows written by this run
  std::string source_checksum;  // SHA-256 over the rows in key order
  std::string target_checksum;
  bool verified() const { return source_rows == target_rows && source_checksum == target_checksum; }
};

// `progress` is called after each table. Fails with Internal when a table
// does not match after copying (nothing is deleted from either side).
Result<std::vector<TableCopyReport>> CopyDatabase(
    Connection& from, Connection& to,
    const std::function<void(const TableCopyReport&)>& progress = {});

}  // namespace headway::sql
