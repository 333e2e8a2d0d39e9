#include "test_databases.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <mysql.h>
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
    if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK) {
      error = PQresultErrorMessage(res);
    }
    PQclear(res);
  }
  PQfinish(conn);
  return error;
}

// The same on the MariaDB server (as its admin, over TCP).
std::string MysqlAdminExec(const std::string& admin_url, const std::string& sql) {
  // mysql://headway@127.0.0.1:PORT/mysql
  const std::string rest = admin_url.substr(admin_url.find('@') + 1);
  const std::string host = rest.substr(0, rest.find(':'));
  const unsigned port = static_cast<unsigned>(std::stoul(rest.substr(rest.find(':') + 1)));
  MYSQL* mysql = mysql_init(nullptr);
  std::string error;
  if (mysql_real_connect(mysql, host.c_str(), "headway", nullptr, nullptr, port, nullptr, 0) ==
      nullptr) {
    error = mysql_error(mysql);
  } else if (mysql_query(mysql, sql.c_str()) != 0) {
    error = mysql_error(mysql);
  } else if (MYSQL_RES* res = mysql_store_result(mysql)) {
    mysql_free_result(res);
  }
  mysql_close(mysql);
  return error;
}

std::string MysqlAdminUrl() {
  return ReadFirstLine(std::string(HEADWAY_TEST_DATABASES) + "/mysql.url");
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
  if (backend == "mysql") {
    const std::string admin = MysqlAdminUrl();
    if (admin.empty()) {
      ADD_FAILURE() << "no MariaDB server for " << test << ": run the suite with ctest, "
                    << "whose fixture starts one (tests/store/databases start)";
      return "";
    }
    std::string error = MysqlAdminExec(admin, "CREATE DATABASE " + name);
    if (!error.empty()) {
      ADD_FAILURE() << "CREATE DATABASE: " << error;
      return "";
    }
    return admin.substr(0, admin.rfind('/') + 1) + name;
  }
  ADD_FAILURE() << "unknown backend " << backend;
  return "";
}

std::string ExecAsAdmin(const std::string& backend, const std::string& sql) {
  if (backend == "postgresql") return AdminExec(PostgresAdminUrl(), sql);
  if (backend == "mysql") return MysqlAdminExec(MysqlAdminUrl(), sql);
  return "no administrator for " + backend;
}

void DropTestDatabase(const std::string& backend, const std::string& url) {
  if (url.empty()) return;
  if (backend == "sqlite") {
    std::filesystem::remove_all(std::filesystem::path(url.substr(9)).parent_path());
  } else if (backend == "postgresql") {
    const std::string name = url.substr(url.rfind('/') + 1);
    AdminExec(PostgresAdminUrl(), "DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
  } else if (backend == "mysql") {
    const std::string name = url.substr(url.rfind('/') + 1);
    MysqlAdminExec(MysqlAdminUrl(), "DROP DATABASE IF EXISTS " + name);
  }
}

}  // namespace headway::testing
