// Each backend's connection, opened and migrated, for what works below the
// Store interface (copying a store between databases). Internal to store/.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "store/sql/connection.h"

namespace headway::sql {

Result<std::unique_ptr<Connection>> OpenSqliteConnection(const std::string& path);
Result<std::unique_ptr<Connection>> OpenPostgresConnection(const std::string& url);
Result<std::unique_ptr<Connection>> OpenMysqlConnection(const std::string& url);
// By --store URL (see OpenStore in store/store.h).
Result<std::unique_ptr<Connection>> OpenConnection(const std::string& url);

}  // namespace headway::sql
