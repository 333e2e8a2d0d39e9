#include "test_databases.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>

namespace headway::testing {
namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Runs one statement on the server's admin database; "" or the error.
std::string AdminExec(const std::string& admin_url, const std::string& sql) {
  PGconn* conn = PQconnectdb(admin_url.c_str());
  std::string error;
  if (PQstatus(conn) != CONNECTION_OK) {
    error = PQerrorMessage(conn);
  } else {
    PGresult* res = PQexec(conn, sql.c_str());
    if (PQresultStatus(res) != PGRES_COMMAND_OK) error = PQresultErrorMessage(res);
    PQclear(res);
  }
  PQfinish(conn);
  return error;
}

std::string PostgresAdminUrl() {
  return ReadFirstLine(std::string(HEADWAY_TEST_DATABASES) + "/postgresql.url");
}

}  // namespace

std::string CreateTestDatabase(const std::string& backend, const std::string& test) {
  static std::atomic<int> counter{0};
  const std::string name = "t" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  if (backend == "sqlite") {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "headway-store-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp failed";
      return "";
    }
    return "sqlite://" + pattern + "/headway.db";
  }
  if (backend == "postgresql") {
    const std::string admin = PostgresAdminUrl();
    if (admin.empty()) {
      ADD_FAILURE() << "no PostgreSQL server for " << test << ": run the suite with ctest, "
                    << "whose fixture starts one (tests/store/databases start)";
      return "";
    }
    std::string error = AdminExec(admin, "CREATE DATABASE " + name);
    if (!error.empty()) {
      ADD_FAILURE() << "CREATE DATABASE: " << error;
      return "";
    }
    return admin.substr(0, admin.rfind('/') + 1) + name;
  }
  ADD_FAILURE() << "unknown backend " << backend;
  return "";
}

void DropTestDatabase(const std::string& backend, const std::string& url) {
  if (url.empty()) return;
  if (backend == "sqlite") {
    std::filesystem::remove_all(std::filesystem::path(url.substr(9)).parent_path());
  } else if (backend == "postgresql") {
    const std::string name = url.substr(url.rfind('/') + 1);
    AdminExec(PostgresAdminUrl(), "DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
  }
}

}  // namespace headway::testing
