// The store's tables as every backend has them: the same names, columns and
// keys (each backend's own DDL gives the types), for copying a store from one
// database to another (store/sql/copy.h). Internal to store/.
#pragma once

#include <string>
#include <vector>

namespace headway::sql {

enum class ColumnKind { kInt, kReal, kText };

struct ColumnSchema {
  std::string name;
  ColumnKind kind;
};

struct TableSchema {
  std::string name;
  std::vector<ColumnSchema> columns;
  std::vector<std::string> key;  // the primary key, in order
  std::string identity;          // the column the database numbers, if any
};

// Parents before the tables that refer to them (trials after experiments).
const std::vector<TableSchema>& StoreTables();

}  // namespace headway::sql
