// `headway migrate`: a store copied between backends (SQLite, PostgreSQL,
// MariaDB) holds the same rows with the same ids, goes on numbering where the
// source would have, and an interrupted copy finishes when run again.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <cmath>
#include <limits>

#include "store/store.h"
#include "test_databases.h"
#include "test_server.h"

namespace headway {
namespace {

using Pair = std::pair<std::string, std::string>;

class StoreMigration : public ::testing::TestWithParam<Pair> {
 protected:
  void SetUp() override {
    from_ = testing::CreateTestDatabase(GetParam().first, "from");
    to_ = testing::CreateTestDatabase(GetParam().second, "to");
    ASSERT_FALSE(from_.empty());
    ASSERT_FALSE(to_.empty());
  }
  void TearDown() override {
    testing::DropTestDatabase(GetParam().first, from_);
    testing::DropTestDatabase(GetParam().second, to_);
  }
  std::unique_ptr<Store> Open(const std::string& url) {
    auto store = OpenStore(url);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store.value()) : nullptr;
  }

  // A store with something of every kind, and a deleted job and artifact
  // version at the end, whose ids must never be given out again.
  void Fill() {
    auto store = Open(from_);
    for (const std::string name : {"alpha", "beta", "gamma"}) {
      Job job;
      job.spec.name = name;
      job.spec.team = "vision";
      job.spec.command = {"python", "train.py"};
      job.spec.labels = {{"exp", "one"}};
      job.created_at = FromUnixMillis(1000);
      ASSERT_TRUE(store->CreateJob(job, {0, name, FromUnixMillis(1000), "Submitted", "é ✓"}).ok());
      std::vector<ProgressReport> reports;
      for (int step = 1; step <= 300; ++step) {
        ProgressReport r;
        r.step = step;
        r.total_steps = 300;
        r.epoch = step / 100.0;
        r.metrics = {{"loss", 1.0 / step}, {"lr", 0.1}};
        if (step == 7) r.metrics["loss"] = std::numeric_limits<double>::quiet_NaN();
        if (step == 8) r.metrics["grad_norm"] = std::numeric_limits<double>::infinity();
        reports.push_back(r);
      }
      ASSERT_TRUE(store->AppendProgress({{name, reports, FromUnixMillis(2000)}}).ok());
    }
    ASSERT_TRUE(store->DeleteJob("gamma").ok());
    // Filed into the keyed tables, but for one report still in the log.
    while (*store->FoldProgress(1000) > 0) {
    }
    ProgressReport unfiled;
    unfiled.step = 301;
    unfiled.metrics = {{"loss", 0.125}};
    ASSERT_TRUE(store->AppendProgress({{"beta", {unfiled}, FromUnixMillis(2500)}}).ok());
    ASSERT_TRUE(store->SetWebhookCursor("hook", 2, FromUnixMillis(3000)).ok());
    for (int i = 0; i < 3; ++i) {
      Artifact a;
      a.name = "weights";
      a.team = "vision";
      a.kind = ArtifactKind::kCheckpoint;
      a.created_by = "job/alpha";
      a.size = 10;
      a.digest = "sha256:" + std::string(64, 'a');
      a.metrics = {{"eval_loss", 0.25}};
      a.created_at = FromUnixMillis(4000);
      ASSERT_TRUE(store->CreateArtifact(a).ok());
    }
    ASSERT_TRUE(store->DeleteArtifact("weights", 3).ok());
    WorkflowRecord w;
    w.name = "pipe";
    w.team = "vision";
    w.uid = "u1";
    w.created_by = "user/ann";
    w.phase = "Running";
    w.manifest = R"({"spec":{"entrypoint":"main"}})";
    w.status = R"({"phase":"Running"})";
    w.labels = {{"key", "value"}};
    w.created_at = FromUnixMillis(5000);
    ASSERT_TRUE(store->CreateWorkflow(w).ok());
  }

  std::string from_, to_;
};

TEST_P(StoreMigration, CopiesEveryRowWithItsIdsAndTheTargetNumbersOnFromTheSource) {
  Fill();
  auto copied = CopyStore(from_, to_);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  std::int64_t rows = 0;
  for (const StoreTableCopy& t : *copied) {
    EXPECT_EQ(t.source_rows, t.target_rows) << t.table;
    rows += t.source_rows;
  }
  // 2 jobs and their 2 events; per job 300 steps and 300 points of loss and
  // of lr in 3 chunks each (128, 128, 44) and grad_norm's one point in one;
  // a report not yet filed, a webhook cursor, an artifact name with 2
  // versions, a workflow and its label.
  EXPECT_EQ(rows, 2 + 2 + 2 * (3 + 3 + 3 + 1) + 1 + 1 + 1 + 2 + 1 + 1);
  auto source = Open(from_);
  auto target = Open(to_);
  auto jobs = target->ListJobs({});
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].name(), "alpha");
  EXPECT_EQ((*jobs)[1].submit_seq, source->GetJob("beta")->submit_seq);
  EXPECT_EQ(*target->LastEventId(), *source->LastEventId());
  EXPECT_EQ(target->ListEvents("alpha").value()[0].message, "é ✓");
  auto loss = target->RecentMetric("beta", "loss", 400).value();
  ASSERT_EQ(loss.size(), 301u);
  EXPECT_EQ(loss[300].value, 0.125);
  EXPECT_TRUE(std::isnan(loss[6].value));
  EXPECT_DOUBLE_EQ(loss[2].value, 1.0 / 3);
  EXPECT_TRUE(std::isinf(target->RecentMetric("beta", "grad_norm", 1).value()[0].value));
  EXPECT_EQ(target->GetWebhookCursor("hook").value(), 2);
  EXPECT_EQ(target->GetWorkflow("pipe")->labels.at("key"), "value");

  // The deleted job's seq and the deleted version are not given out again.
  Job next;
  next.spec.name = "delta";
  next.spec.team = "vision";
  next.spec.command = {"true"};
  ASSERT_TRUE(target->CreateJob(next, {0, "delta", FromUnixMillis(6000), "Submitted", ""}).ok());
  Job deleted_seq_source;
  deleted_seq_source.spec = next.spec;
  ASSERT_TRUE(
      source->CreateJob(deleted_seq_source, {0, "delta", FromUnixMillis(6000), "Submitted", ""})
          .ok());
  EXPECT_EQ(next.submit_seq, deleted_seq_source.submit_seq);
  EXPECT_EQ(*target->LastEventId(), *source->LastEventId());
  Artifact again;
  again.name = "weights";
  again.team = "vision";
  again.kind = ArtifactKind::kCheckpoint;
  again.digest = "sha256:" + std::string(64, 'b');
  ASSERT_TRUE(target->CreateArtifact(again).ok());
  EXPECT_EQ(again.version, 4);
}

TEST_P(StoreMigration, AnInterruptedCopyFinishesWhenRunAgainAndAChangedTargetIsReported) {
  Fill();
  ASSERT_TRUE(CopyStore(from_, to_).ok());
  // Run again over a complete copy: nothing to write.
  auto again = CopyStore(from_, to_);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  for (const StoreTableCopy& t : *again) EXPECT_EQ(t.copied, 0) << t.table;

  // A copy that stopped part way: the target lacks the newer points.
  {
    auto target = Open(to_);
    ASSERT_TRUE(target->DeleteJob("beta").ok());
  }
  auto resumed = CopyStore(from_, to_);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  std::int64_t written = 0;
  for (const StoreTableCopy& t : *resumed) written += t.copied;
  // The job, its event, its 10 chunks and the report not yet filed.
  EXPECT_EQ(written, 1 + 1 + 10 + 1);
  EXPECT_EQ(Open(to_)->RecentMetric("beta", "loss", 300).value().size(), 300u);

  // A target that holds what the source does not is never made to match
  // by deleting: the copy says which table differs.
  {
    auto target = Open(to_);
    Job extra;
    extra.spec.name = "stranger";
    extra.spec.team = "vision";
    extra.spec.command = {"true"};
    ASSERT_TRUE(target->CreateJob(extra, {0, "stranger", FromUnixMillis(1), "Submitted", ""}).ok());
  }
  auto differs = CopyStore(from_, to_);
  ASSERT_FALSE(differs.ok());
  EXPECT_NE(differs.status().message().find("jobs differs after copying"), std::string::npos)
      << differs.status().message();
  EXPECT_TRUE(Open(to_)->GetJob("stranger").ok());
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreMigration,
                         ::testing::Values(Pair{"sqlite", "postgresql"}, Pair{"sqlite", "mysql"},
                                           Pair{"postgresql", "mysql"}, Pair{"mysql", "sqlite"}),
                         [](const ::testing::TestParamInfo<Pair>& info) {
                           return info.param.first + "_to_" + info.param.second;
                         });

TEST(StoreMigrationCommand, PrintsEveryTableAndRefusesToCopyAStoreOntoItself) {
  const std::string dir = testing::MakeTempDir("migrate");
  const std::string from = "sqlite://" + dir + "/from.db";
  ASSERT_TRUE(OpenStore(from).ok());
  const std::string to = testing::CreateTestDatabase("postgresql", "command");
  auto result = testing::RunCommand({HEADWAY_BIN, "migrate", "--from", from, "--to", to});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("progress_chunks"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("verified: 17 tables, 0 rows"), std::string::npos) << result.out;
  auto same = testing::RunCommand({HEADWAY_BIN, "migrate", "--from", from, "--to", from});
  EXPECT_EQ(same.exit_code, 2);
  EXPECT_NE(same.err.find("the same store"), std::string::npos) << same.err;
  testing::DropTestDatabase("postgresql", to);
}

}  // namespace
}  // namespace headway
