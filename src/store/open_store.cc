#include <string>

#include "store/store.h"

namespace headway {
namespace {

bool StartsWith(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

Result<std::unique_ptr<Store>> OpenStore(const std::string& url) {
  if (StartsWith(url, "sqlite://")) {
    std::string path = url.substr(std::string_view("sqlite://").size());
    if (path.empty() || path[0] != '/') {
      return InvalidArgument("--store " + url + ": a SQLite URL names an absolute path, as in "
                             "sqlite:///var/lib/headway/headway.db");
    }
    return OpenSqliteStore(path);
  }
  if (StartsWith(url, "postgresql://") || StartsWith(url, "postgres://")) {
    return OpenPostgresStore(url);
  }
  if (url.find("://") != std::string::npos) {
    return InvalidArgument("--store " + RedactedStoreUrl(url) +
                           ": unknown kind of store (sqlite:///PATH or postgresql://...)");
  }
  return OpenSqliteStore(url);
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
