// The Store's queries, written once over sql::Connection: every backend
// (SQLite, PostgreSQL, MySQL/MariaDB) answers them alike. Internal to store/;
// callers open a store with OpenStore (store/store.h).
#pragma once

#include <memory>

#include "store/sql/connection.h"
#include "store/store.h"

namespace headway::sql {

// `db` is open, its schema up to date.
std::unique_ptr<Store> MakeSqlStore(std::unique_ptr<Connection> db);

}  // namespace headway::sql
