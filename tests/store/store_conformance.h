// The fixture of the Store's conformance suite: every test runs against
// each backend, a real SQLite file and real PostgreSQL and MariaDB servers
// on loopback (started for the suite by tests/store/databases as a ctest
// fixture), each test on a fresh database. The tests are in
// store_conformance_test.cc (which instantiates the suite for each backend)
// and store_progress_conformance_test.cc.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "store/store.h"
#include "test_databases.h"

namespace headway {

class StoreConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    url_ = testing::CreateTestDatabase(
        GetParam(), ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_FALSE(url_.empty());
  }
  void TearDown() override { testing::DropTestDatabase(GetParam(), url_); }

  // A new connection to the test's database, as a restarted server opens it.
  std::unique_ptr<Store> Open() {
    auto store = OpenStore(url_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store.value()) : nullptr;
  }

  static Job MakeJob(const std::string& name, const std::string& team = "default") {
    Job job;
    job.spec.name = name;
    job.spec.team = team;
    job.spec.command = {"true"};
    job.created_at = FromUnixMillis(1000);
    return job;
  }

  JobEvent Submitted(const std::string& name) {
    return {0, name, FromUnixMillis(1000), "Submitted", "job submitted"};
  }

  std::string url_;
};

}  // namespace headway
