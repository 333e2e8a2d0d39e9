#include "store/sql/connection.h"

#include <algorithm>

namespace headway::sql {

std::string ReplacePlaceholders(const std::string& sql,
                                const std::function<std::string(int)>& with) {
  std::string out;
  out.reserve(sql.size() + 16);
  int next = 1;
  bool quoted = false;
  for (char c : sql) {
    if (c == '\'') quoted = !quoted;
    if (c == '?' && !quoted) {
      out += with(next++);
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<std::string> NonKeyColumns(const std::vector<std::string>& columns,
                                       const std::vector<std::string>& key) {
  std::vector<std::string> out;
  for (const std::string& column : columns) {
    if (std::find(key.begin(), key.end(), column) == key.end()) out.push_back(column);
  }
  return out;
}

std::string ValuesPlaceholders(std::size_t columns, std::size_t rows) {
  std::string row = "(";
  for (std::size_t i = 0; i < columns; ++i) row += i ? ", ?" : "?";
  row += ")";
  std::string out;
  out.reserve(rows * (row.size() + 2));
  for (std::size_t r = 0; r < rows; ++r) out += (r ? ", " : "") + row;
  return out;
}

std::string OnConflictUpsert(const std::string& table, const std::vector<std::string>& columns,
                             const std::vector<std::string>& key, bool replace, std::size_t rows) {
  std::string sql = "INSERT INTO " + table + " (";
  for (std::size_t i = 0; i < columns.size(); ++i) sql += (i ? ", " : "") + columns[i];
  sql += ") VALUES " + ValuesPlaceholders(columns.size(), rows) + " ON CONFLICT (";
  for (std::size_t i = 0; i < key.size(); ++i) sql += (i ? ", " : "") + key[i];
  sql += ")";
  std::string updates;
  for (const std::string& column : NonKeyColumns(columns, key)) {
    updates += (updates.empty() ? "" : ", ") + column + " = excluded." + column;
  }
  if (!replace || updates.empty()) return sql + " DO NOTHING";
  return sql + " DO UPDATE SET " + updates;
}

}  // namespace headway::sql
