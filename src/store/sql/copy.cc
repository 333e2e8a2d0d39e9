#include "store/sql/copy.h"

#include <openssl/evp.h>

#include <charconv>
#include <memory>
#include <optional>
#include <variant>

#include "store/sql/tables.h"

namespace headway::sql {
namespace {

constexpr std::int64_t kBatchRows = 2000;

std::string Quoted(const std::string& identifier) { return "\"" + identifier + "\""; }

std::string ColumnList(const TableSchema& table) {
  std::string out;
  for (const ColumnSchema& c : table.columns) out += (out.empty() ? "" : ", ") + Quoted(c.name);
  return out;
}

using Row = std::vector<Value>;

Row ReadRow(const Statement& q, const TableSchema& table) {
  Row row;
  row.reserve(table.columns.size());
  for (std::size_t i = 0; i < table.columns.size(); ++i) {
    const int col = static_cast<int>(i);
    if (q.IsNull(col)) {
      row.emplace_back(std::monostate{});
      continue;
    }
    switch (table.columns[i].kind) {
      case ColumnKind::kInt:
        row.emplace_back(q.ColumnInt64(col));
        break;
      case ColumnKind::kReal:
        row.emplace_back(q.ColumnDouble(col));
        break;
      case ColumnKind::kText:
        row.emplace_back(q.ColumnText(col));
        break;
    }
  }
  return row;
}

// A SHA-256 of a table's rows in key order, over typed values (a real as its
// shortest round-trip text), so equal contents hash alike on every backend.
class TableHash {
 public:
  TableHash() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr); }
  void Add(const Row& row) {
    for (const Value& v : row) {
      std::string field;
      if (std::holds_alternative<std::monostate>(v)) {
        field = "N";
      } else if (const auto* n = std::get_if<std::int64_t>(&v)) {
        field = "I" + std::to_string(*n);
      } else if (const auto* d = std::get_if<double>(&v)) {
        char buffer[32];
        auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, *d);
        field = "R" + std::string(buffer, ec == std::errc() ? end : buffer);
      } else {
        const std::string& text = std::get<std::string>(v);
        field = "T" + std::to_string(text.size()) + ":" + text;
      }
      field += '\x1f';
      EVP_DigestUpdate(ctx_.get(), field.data(), field.size());
    }
    EVP_DigestUpdate(ctx_.get(), "\x1e", 1);
  }
  std::string Hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    EVP_DigestFinal_ex(ctx_.get(), digest, &size);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < size; ++i) {
      out += kHex[digest[i] >> 4];
      out += kHex[digest[i] & 15];
    }
    return out;
  }

 private:
  struct Free {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> ctx_;
};

// Visits a table's rows in key order, a batch at a time (keyset paging, so a
// table of millions of points never sits in memory at once).
Status ScanTable(Connection& db, const TableSchema& table,
                 const std::function<Status(const std::vector<Row>&)>& visit) {
  std::vector<std::size_t> key_index;
  for (const std::string& k : table.key) {
    for (std::size_t i = 0; i < table.columns.size(); ++i) {
      if (table.columns[i].name == k) key_index.push_back(i);
    }
  }
  std::string keys;
  std::string placeholders;
  for (const std::string& k : table.key) {
    keys += (keys.empty() ? "" : ", ") + Quoted(k);
    placeholders += placeholders.empty() ? "?" : ", ?";
  }
  const std::string select = "SELECT " + ColumnList(table) + " FROM " + Quoted(table.name);
  const std::string order = " ORDER BY " + keys + " LIMIT " + std::to_string(kBatchRows);
  std::optional<Row> last;
  for (;;) {
    Statement q(db, last ? select + " WHERE (" + keys + ") > (" + placeholders + ")" + order
                         : select + order);
    if (last) {
      for (std::size_t i = 0; i < key_index.size(); ++i) {
        q.BindValue(static_cast<int>(i + 1), (*last)[key_index[i]]);
      }
    }
    std::vector<Row> rows;
    while (q.Step()) rows.push_back(ReadRow(q, table));
    if (q.failed()) return Unavailable("read " + table.name + ": " + db.LastError());
    if (rows.empty()) return Status::Ok();
    HEADWAY_RETURN_IF_ERROR(visit(rows));
    if (static_cast<std::int64_t>(rows.size()) < kBatchRows) return Status::Ok();
    last = rows.back();
  }
}

struct Summary {
  std::int64_t rows = 0;
  std::string checksum;
};

Result<Summary> Summarise(Connection& db, const TableSchema& table) {
  Summary summary;
  TableHash hash;
  HEADWAY_RETURN_IF_ERROR(ScanTable(db, table, [&](const std::vector<Row>& rows) {
    for (const Row& row : rows) hash.Add(row);
    summary.rows += static_cast<std::int64_t>(rows.size());
    return Status::Ok();
  }));
  summary.checksum = hash.Hex();
  return summary;
}

}  // namespace

Result<std::vector<TableCopyReport>> CopyDatabase(
    Connection& from, Connection& to, const std::function<void(const TableCopyReport&)>& progress) {
  std::vector<TableCopyReport> reports;
  for (const TableSchema& table : StoreTables()) {
    TableCopyReport report;
    report.table = table.name;
    auto source = Summarise(from, table);
    if (!source.ok()) return source.status();
    auto target = Summarise(to, table);
    if (!target.ok()) return target.status();
    report.source_rows = source->rows;
    report.source_checksum = source->checksum;
    if (target->rows != source->rows || target->checksum != source->checksum) {
      // Rows already there (an earlier, interrupted run) are left alone.
      std::vector<std::string> columns;
      for (const ColumnSchema& c : table.columns) columns.push_back(Quoted(c.name));
      std::vector<std::string> key;
      for (const std::string& k : table.key) key.push_back(Quoted(k));
      const std::string insert = to.Upsert(Quoted(table.name), columns, key, /*replace=*/false);
      HEADWAY_RETURN_IF_ERROR(ScanTable(from, table, [&](const std::vector<Row>& rows) {
        HEADWAY_RETURN_IF_ERROR(to.BeginWrite());
        Statement q(to, insert);
        for (const Row& row : rows) {
          q.Reset();
          for (std::size_t i = 0; i < row.size(); ++i) q.BindValue(static_cast<int>(i + 1), row[i]);
          if (!q.Run()) {
            const std::string error = to.LastError();
            (void)to.Exec("ROLLBACK");
            return Unavailable("write " + table.name + ": " + error);
          }
          report.copied += q.changes() > 0 ? 1 : 0;
        }
        return to.Exec("COMMIT");
      }));
      target = Summarise(to, table);
      if (!target.ok()) return target.status();
    }
    if (!table.identity.empty()) {
      // Ids never come round again: the target numbers on from where the
      // source would have, even past rows deleted at the end.
      auto high = from.IdentityHighWater(table.name, table.identity);
      if (!high.ok()) return high.status();
      HEADWAY_RETURN_IF_ERROR(to.RaiseIdentity(table.name, table.identity, *high));
    }
    report.target_rows = target->rows;
    report.target_checksum = target->checksum;
    if (progress) progress(report);
    reports.push_back(report);
    if (!report.verified()) {
      return Internal(table.name + " differs after copying: " + std::to_string(report.source_rows) +
                      " rows (sha256 " + report.source_checksum + ") in the source, " +
                      std::to_string(report.target_rows) + " (sha256 " + report.target_checksum +
                      ") in the target");
    }
  }
  return reports;
}

}  // namespace headway::sql
