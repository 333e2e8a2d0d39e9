// Fresh databases for the store conformance suite, one per test, on the
// servers tests/store/databases started (a ctest fixture).
#pragma once

#include <string>

namespace headway::testing {

// A store URL for an empty database of `backend` ("sqlite", "postgresql" or
// "mysql"), named after `test`. Fails the test (and returns "") when the
// backend's server is not running.
std::string CreateTestDatabase(const std::string& backend, const std::string& test);
// Runs one statement as the server's administrator (on PostgreSQL's admin
// database); "" or the error.
std::string ExecAsAdmin(const std::string& backend, const std::string& sql);
// Drops what CreateTestDatabase made.
void DropTestDatabase(const std::string& backend, const std::string& url);

}  // namespace headway::testing
