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

// Schemas before v17 kept a row per progress point in these two tables.
constexpr const char* kDropChunks = "DROP TABLE progress_chunks";
constexpr const char* kCreateProgressSteps =
    "CREATE TABLE progress_steps (job TEXT NOT NULL, step INTEGER NOT NULL, time INTEGER NOT NULL, "
    "total_steps INTEGER, epoch REAL, total_epochs REAL, PRIMARY KEY (job, step)) WITHOUT ROWID";
constexpr const char* kCreateMetricPoints =
    "CREATE TABLE metric_points (job TEXT NOT NULL, metric TEXT NOT NULL, step INTEGER NOT NULL, "
    "value REAL, special TEXT, PRIMARY KEY (job, metric, step)) WITHOUT ROWID";

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "headway-store-XXXXXX").string();
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

  JobEvent Submitted(const std::string& name) {
    return {0, name, FromUnixMillis(1000), "Submitted", "job submitted"};
  }

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
                          kDropChunks,
                          kCreateProgressSteps,
                          kCreateMetricPoints,
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
    ExperimentRecord e{"btrain",
                       R"({"name":"btrain","trial_template":{"team":"a"}})",
                       ExperimentState::kRunning,
                       "",
                       FromUnixMillis(1000),
                       {}};
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
      TrialRecord t{"btrain", i, "btrain-" + std::to_string(i), "{}", TrialState::kRunning, false,
                    {},       ""};
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
        "DROP TABLE notebooks", "DROP TABLE server_leader", "DROP TABLE progress_log", kDropChunks,
        kCreateProgressSteps, kCreateMetricPoints, "PRAGMA user_version=6"}) {
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
        "DROP TABLE notebooks", "DROP TABLE server_leader", "DROP TABLE progress_log", kDropChunks,
        kCreateProgressSteps, kCreateMetricPoints, "PRAGMA user_version=7"}) {
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
        "DROP TABLE notebooks", "DROP TABLE server_leader", "DROP TABLE progress_log", kDropChunks,
        kCreateProgressSteps, kCreateMetricPoints, "PRAGMA user_version=9"}) {
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

// A v16 file kept progress as a row per point; opening it moves them into
// chunks (three of 128, 128 and 44 steps here), values bit for bit.
TEST_F(SqliteStoreTest, UpgradesAVersion16DatabaseMovingProgressRowsIntoChunks) {
  {
    auto store = Open();
    Job old = MakeJob("old"), other = MakeJob("other");
    ASSERT_TRUE(store->CreateJob(old, Submitted("old")).ok());
    ASSERT_TRUE(store->CreateJob(other, Submitted("other")).ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  std::string sql =
      std::string(kDropChunks) + ";" + kCreateProgressSteps + ";" + kCreateMetricPoints + ";";
  for (int step = 1; step <= 300; ++step) {
    const std::string s = std::to_string(step);
    sql += "INSERT INTO progress_steps VALUES ('old', " + s + ", " + std::to_string(1000 + step) +
           (step % 2 ? ", 300, 0.25, 3.0);" : ", NULL, NULL, NULL);");
    sql += "INSERT INTO metric_points VALUES ('old', 'loss', " + s + ", " +
           (step == 7   ? "NULL, 'nan'"
            : step == 8 ? "NULL, 'inf'"
            : step == 9 ? "NULL, '-inf'"
                        : "0.1, NULL") +
           ");";
  }
  sql +=
      "INSERT INTO metric_points VALUES ('old', 'acc', 5, 0.5, NULL);"
      "INSERT INTO progress_steps VALUES ('other', 1, 5000, NULL, NULL, NULL);"
      "PRAGMA user_version=16;";
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);

  auto store = Open();
  auto steps = store->RecentSteps("old", 1000);
  ASSERT_TRUE(steps.ok()) << steps.status().ToString();
  ASSERT_EQ(steps->size(), 300u);
  EXPECT_EQ(steps->at(0).step, 1);
  EXPECT_EQ(steps->at(0).time, FromUnixMillis(1001));
  EXPECT_EQ(steps->at(0).total_steps, 300);
  EXPECT_EQ(steps->at(0).epoch, 0.25);
  EXPECT_EQ(steps->at(0).total_epochs, 3.0);
  EXPECT_EQ(steps->at(299).step, 300);
  EXPECT_FALSE(steps->at(299).total_steps);
  EXPECT_FALSE(steps->at(299).epoch);
  std::vector<MetricPoint> loss;
  ASSERT_TRUE(
      store->ScanMetric("old", "loss", [&](const MetricPoint& p) { loss.push_back(p); }).ok());
  ASSERT_EQ(loss.size(), 300u);
  EXPECT_TRUE(std::isnan(loss[6].value));
  EXPECT_EQ(loss[7].value, std::numeric_limits<double>::infinity());
  EXPECT_EQ(loss[8].value, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(loss[9].value, 0.1);
  EXPECT_EQ(store->MetricNames("old").value(), (std::vector<std::string>{"acc", "loss"}));
  EXPECT_EQ(store->CountProgressPoints("old").value(), 601u);
  EXPECT_EQ(store->RecentSteps("other", 10).value().at(0).time, FromUnixMillis(5000));
  // The old tables are gone, and new reports go on from where the rows ended.
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  EXPECT_NE(sqlite3_exec(db, "SELECT 1 FROM metric_points", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  ProgressReport next;
  next.step = 301;
  next.metrics["loss"] = 0.05;
  ASSERT_TRUE(store->AppendProgress({{"old", {next}, FromUnixMillis(9000)}}).ok());
  auto recent = store->RecentMetric("old", "loss", 2);
  ASSERT_TRUE(recent.ok());
  ASSERT_EQ(recent->size(), 2u);
  EXPECT_EQ(recent->at(0).step, 300);
  EXPECT_EQ(recent->at(1).step, 301);
  EXPECT_EQ(recent->at(1).value, 0.05);
}

}  // namespace
}  // namespace headway
