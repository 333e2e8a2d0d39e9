// What only the SQLite backend does: WAL, its schema version, and upgrades
// of files written by earlier versions. Everything else the Store promises is
// checked on every backend by tests/store/store_conformance_test.cc.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "store/store.h"

namespace headway {
namespace {

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "headway-store-XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
    path_ = dir_ + "/headway.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Store> Open() {
    auto store = OpenSqliteStore(path_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return std::move(store.value());
  }

  static Job MakeJob(const std::string& name, const std::string& team = "default") {
    Job job;
    job.spec.name = name;
    job.spec.team = team;
    job.spec.command = {"true"};
    job.created_at = FromUnixMillis(1000);
    return job;
  }

  JobEvent Submitted(const std::string& name) { return {0, name, FromUnixMillis(1000), "Submitted", "job submitted"}; }

  std::string dir_, path_;
};

TEST_F(SqliteStoreTest, UsesWalAndRecordsTheSchemaVersion) {
  { auto store = Open(); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, nullptr);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "wal");
  sqlite3_finalize(stmt);
  sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, nullptr);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_GE(sqlite3_column_int(stmt, 0), 1);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST_F(SqliteStoreTest, RefusesADatabaseFromANewerVersion) {
  { auto store = Open(); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "PRAGMA user_version=999", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto store = OpenSqliteStore(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("newer"), std::string::npos);
}

// The store keeps the specs it has read, but the row decides: a spec changed
// in the file behind its back (a repair in SQL) is read as it now is.
TEST_F(SqliteStoreTest, ASpecRewrittenInTheFileIsReadAsItNowIs) {
  auto store = Open();
  Job job = MakeJob("a");
  ASSERT_TRUE(store->CreateJob(job, Submitted("a")).ok());
  ASSERT_EQ(store->GetJob("a").value().spec.command, std::vector<std::string>{"true"});
  ASSERT_EQ(store->ListJobs({}).value().at(0).spec.command, std::vector<std::string>{"true"});
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  const char* repair =
      "UPDATE jobs SET spec = replace(spec, '[\"true\"]', '[\"false\"]') WHERE name = 'a'";
  ASSERT_EQ(sqlite3_exec(db, repair, nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_EQ(sqlite3_changes(db), 1);
  sqlite3_close(db);
  EXPECT_EQ(store->GetJob("a").value().spec.command, std::vector<std::string>{"false"});
  EXPECT_EQ(store->ListJobs({}).value().at(0).spec.command, std::vector<std::string>{"false"});
}

TEST_F(SqliteStoreTest, UpgradesADatabaseWrittenBeforePreemption) {
  {
    auto store = Open();
    Job old = MakeJob("old");
    ASSERT_TRUE(store->CreateJob(old, Submitted("old")).ok());
  }
  // Turn it back into a v2 database, as an earlier release left it.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  for (const char* sql : {"ALTER TABLE jobs DROP COLUMN preemptions",
                          "ALTER TABLE jobs DROP COLUMN preempt_requested_at",
                          "ALTER TABLE jobs DROP COLUMN preempt_message",
                          "ALTER TABLE jobs DROP COLUMN requeued_at",
                          "ALTER TABLE jobs DROP COLUMN created_by",
                          "DROP TABLE trials",
                          "DROP TABLE experiments",
                          "DROP TABLE user_tokens",
                          "DROP TABLE webhook_cursors",
                          "ALTER TABLE jobs DROP COLUMN health",
                          "ALTER TABLE jobs DROP COLUMN health_reason",
                          "ALTER TABLE jobs DROP COLUMN delete_requested_at",
                          "DROP TABLE artifact_names",
                          "DROP TABLE artifacts",
                          "DROP TABLE artifact_uses",
                          "DROP TABLE workflows",
                          "DROP TABLE workflow_labels",
                          "DROP TABLE workflow_nodes",
                          "DROP TABLE workflow_manifests",
                          "DROP TABLE notebooks",
                          "DROP TABLE server_leader",
                          "DROP TABLE progress_log",
                          "PRAGMA user_version=2"}) {
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  }
  sqlite3_close(db);
  auto job = Open()->GetJob("old");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->preemptions, 0);
  EXPECT_FALSE(job->preempt_requested_at);
}

TEST_F(SqliteStoreTest, UpgradeCreditsAnExperimentOnlyWithItsOwnTrialJobs) {
  {
    auto store = Open();
    ExperimentRecord e{"btrain", R"({"name":"btrain","trial_template":{"team":"a"}})",
                       ExperimentState::kRunning, "", FromUnixMillis(1000), {}};
    ASSERT_TRUE(store->CreateExperiment(e).ok());
    Job own = MakeJob("btrain-0", "a");
    own.spec.labels = {{"experiment", "btrain"}, {"trial", "0"}};
    Job foreign = MakeJob("btrain-1", "b");  // another team's job the trial collided with
    foreign.spec.labels = {{"experiment", "btrain"}, {"trial", "1"}};
    Job plain = MakeJob("other", "a");
    for (Job* j : {&own, &foreign, &plain}) {
      ASSERT_TRUE(store->CreateJob(*j, Submitted(j->name())).ok());
    }
    for (int i : {0, 1}) {
      TrialRecord t{"btrain", i, "btrain-" + std::to_string(i), "{}", TrialState::kRunning, false, {}, ""};
      ASSERT_TRUE(store->CreateTrial(t).ok());
    }
  }
  // Back to v6, as the release before owners left it.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  for (const char* sql :
       {"ALTER TABLE jobs DROP COLUMN created_by", "DROP TABLE webhook_cursors",
        "ALTER TABLE jobs DROP COLUMN health", "ALTER TABLE jobs DROP COLUMN health_reason",
        "ALTER TABLE jobs DROP COLUMN delete_requested_at", "DROP TABLE artifact_names",
        "DROP TABLE artifacts", "DROP TABLE artifact_uses", "DROP TABLE workflows",
        "DROP TABLE workflow_labels", "DROP TABLE workflow_nodes", "DROP TABLE workflow_manifests",
        "DROP TABLE notebooks", "DROP TABLE server_leader", "DROP TABLE progress_log",
        "PRAGMA user_version=6"}) {
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  }
  sqlite3_close(db);
  auto store = Open();
  EXPECT_EQ(store->GetJob("btrain-0")->created_by, "experiment/btrain");
  EXPECT_EQ(store->GetJob("btrain-1")->created_by, "") << "another team's job is never credited";
  EXPECT_EQ(store->GetJob("other")->created_by, "");
}

TEST_F(SqliteStoreTest, UpgradesAVersion7DatabaseWithWebhookCursors) {
  {
    auto store = Open();
    Job old = MakeJob("old");
    ASSERT_TRUE(store->CreateJob(old, Submitted("old")).ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  for (const char* sql :
       {"DROP TABLE webhook_cursors", "ALTER TABLE jobs DROP COLUMN health",
        "ALTER TABLE jobs DROP COLUMN health_reason",
        "ALTER TABLE jobs DROP COLUMN delete_requested_at", "DROP TABLE artifact_names",
        "DROP TABLE artifacts", "DROP TABLE artifact_uses", "DROP TABLE workflows",
        "DROP TABLE workflow_labels", "DROP TABLE workflow_nodes", "DROP TABLE workflow_manifests",
        "DROP TABLE notebooks", "DROP TABLE server_leader", "DROP TABLE progress_log",
        "PRAGMA user_version=7"}) {
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  }
  sqlite3_close(db);
  auto store = Open();
  EXPECT_FALSE(store->GetWebhookCursor("sha256:aa")->has_value());
  ASSERT_TRUE(store->SetWebhookCursor("sha256:aa", *store->LastEventId(), FromUnixMillis(1)).ok());
  EXPECT_EQ(store->GetWebhookCursor("sha256:aa")->value_or(-1), 1);
}

TEST_F(SqliteStoreTest, UpgradesAVersion9DatabaseKeepingJobsAndTheirHealth) {
  {
    auto store = Open();
    Job old = MakeJob("old");
    ASSERT_TRUE(store->CreateJob(old, Submitted("old")).ok());
    old.health = Health::kDiverging;
    ASSERT_TRUE(store->SaveJob(old, {}).ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  for (const char* sql :
       {"ALTER TABLE jobs DROP COLUMN health_reason",
        "ALTER TABLE jobs DROP COLUMN delete_requested_at", "DROP TABLE artifact_names",
        "DROP TABLE artifacts", "DROP TABLE artifact_uses", "DROP TABLE workflows",
        "DROP TABLE workflow_labels", "DROP TABLE workflow_nodes", "DROP TABLE workflow_manifests",
        "DROP TABLE notebooks", "DROP TABLE server_leader", "DROP TABLE progress_log",
        "PRAGMA user_version=9"}) {
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  }
  sqlite3_close(db);
  auto store = Open();
  auto job = store->GetJob("old");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->health, Health::kDiverging);
  EXPECT_EQ(job->health_reason, "");
  EXPECT_FALSE(job->delete_requested_at);
  job->health_reason = "loss is NaN at step 40";
  job->delete_requested_at = FromUnixMillis(7000);
  ASSERT_TRUE(store->SaveJob(*job, {}).ok());
  EXPECT_EQ(store->GetJob("old")->health_reason, "loss is NaN at step 40");
  EXPECT_EQ(store->GetJob("old")->delete_requested_at, FromUnixMillis(7000));
}

}  // namespace
}  // namespace headway
