#include <string>

#include "store/sql/copy.h"
#include "store/sql/open_connection.h"
#include "store/sql/sql_store.h"
#include "store/store.h"

namespace headway {
namespace {

bool StartsWith(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

bool StoreIsShared(const std::string& url) {
  return StartsWith(url, "postgresql://") || StartsWith(url, "postgres://") ||
         StartsWith(url, "mysql://") || StartsWith(url, "mariadb://");
}

Result<std::unique_ptr<sql::Connection>> sql::OpenConnection(const std::string& url) {
  if (StartsWith(url, "sqlite://")) {
    std::string path = url.substr(std::string_view("sqlite://").size());
    if (path.empty() || path[0] != '/') {
      return InvalidArgument("--store " + url +
                             ": a SQLite URL names an absolute path, as in "
                             "sqlite:///var/lib/headway/headway.db");
    }
    return OpenSqliteConnection(path);
  }
  if (StartsWith(url, "postgresql://") || StartsWith(url, "postgres://")) {
    return OpenPostgresConnection(url);
  }
  if (StartsWith(url, "mysql://")) return OpenMysqlConnection(url);
  if (StartsWith(url, "mariadb://")) return OpenMysqlConnection("mysql://" + url.substr(10));
  if (url.find("://") != std::string::npos) {
    return InvalidArgument("--store " + RedactedStoreUrl(url) +
                           ": unknown kind of store (sqlite:///PATH, postgresql://... or "
                           "mysql://...)");
  }
  return OpenSqliteConnection(url);
}

namespace {

Result<std::unique_ptr<Store>> StoreOver(Result<std::unique_ptr<sql::Connection>> connection) {
  if (!connection.ok()) return connection.status();
  return sql::MakeSqlStore(std::move(connection.value()));
}

}  // namespace

Result<std::unique_ptr<Store>> OpenStore(const std::string& url) {
  return StoreOver(sql::OpenConnection(url));
}
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path) {
  return StoreOver(sql::OpenSqliteConnection(path));
}
Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url) {
  return StoreOver(sql::OpenPostgresConnection(url));
}
Result<std::unique_ptr<Store>> OpenMysqlStore(const std::string& url) {
  return StoreOver(sql::OpenMysqlConnection(url));
}

Result<std::vector<StoreTableCopy>> CopyStore(
    const std::string& from_url, const std::string& to_url,
    const std::function<void(const StoreTableCopy&)>& progress) {
  auto from = sql::OpenConnection(from_url);
  if (!from.ok()) return from.status();
  auto to = sql::OpenConnection(to_url);
  if (!to.ok()) return to.status();
  auto reports = sql::CopyDatabase(**from, **to, [&](const sql::TableCopyReport& r) {
    if (progress) progress({r.table, r.source_rows, r.target_rows, r.copied, r.source_checksum});
  });
  if (!reports.ok()) return reports.status();
  std::vector<StoreTableCopy> out;
  for (const auto& r : *reports) {
    out.push_back({r.table, r.source_rows, r.target_rows, r.copied, r.source_checksum});
  }
  return out;
}

std::string RedactedStoreUrl(const std::string& given) {
  // A password as a query parameter (?password=...&...).
  std::string url = given;
  for (std::size_t at = url.find("password="); at != std::string::npos;
       at = url.find("password=", at + 1)) {
    const std::size_t value = at + std::string_view("password=").size();
    const std::size_t end = url.find('&', value);
    url.replace(value, (end == std::string::npos ? url.size() : end) - value, "***");
  }
  // scheme://user:password@host/...: the password is between the first ':'
  // after the scheme and the last '@' before the path.
  const std::size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const std::size_t start = scheme + 3;
  const std::size_t path = url.find('/', start);
  const std::size_t at = url.rfind('@', path == std::string::npos ? url.size() : path);
  if (at == std::string::npos || at < start) return url;
  const std::size_t colon = url.find(':', start);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

}  // namespace headway
