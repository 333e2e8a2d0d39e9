// The Store's conformance suite: every test runs against each backend, a
// real SQLite file and real PostgreSQL and MariaDB servers on loopback
// (started for the suite by tests/store/databases as a ctest fixture), each
// test on a fresh database. A backend passes when it behaves as the Store interface says.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "store/sql/open_connection.h"
#include "store/store.h"
#include "test_databases.h"

namespace headway {
namespace {

class StoreConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    url_ = testing::CreateTestDatabase(GetParam(),
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
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

  JobEvent Submitted(const std::string& name) { return {0, name, FromUnixMillis(1000), "Submitted", "job submitted"}; }

  std::string url_;
};

Artifact MakeArtifact(const std::string& name, const std::string& team, char digest_char) {
  Artifact a;
  a.name = name;
  a.team = team;
  a.kind = ArtifactKind::kCheckpoint;
  a.created_by = "job/train";
  a.size = 100;
  a.digest = "sha256:" + std::string(64, digest_char);
  a.producer = {"train", 0, 40, ""};
  a.metrics = {{"eval_loss", 0.5}, {"loss", std::numeric_limits<double>::quiet_NaN()}};
  a.labels = {{"framework", "jax"}};
  a.created_at = FromUnixMillis(5000);
  return a;
}

WorkflowRecord MakeWorkflow(const std::string& name, const std::string& team, std::int64_t at) {
  WorkflowRecord w;
  w.name = name;
  w.team = team;
  w.uid = "uid-" + name;
  w.created_by = "user/ann";
  w.phase = "Pending";
  w.manifest = R"({"metadata":{"name":")" + name + R"("},"spec":{"entrypoint":"main"}})";
  w.status = R"({"phase":"Pending"})";
  w.created_at = FromUnixMillis(at);
  return w;
}

TEST_P(StoreConformance, JobsSurviveReopening) {
  {
    auto store = Open();
    Job job = MakeJob("a");
    job.spec.labels = {{"exp", "1"}};
    ASSERT_TRUE(store->CreateJob(job, Submitted("a")).ok());
    job.state = JobState::kRunning;
    job.gpu_ids = {2, 3};
    job.exit_code = 0;
    job.started_at = FromUnixMillis(2000);
    job.executor_handle = R"({"pid":1})";
    ASSERT_TRUE(store->SaveJob(job, {{0, "a", FromUnixMillis(2000), "StateChanged", "x"}}).ok());
  }
  auto store = Open();
  auto job = store->GetJob("a");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kRunning);
  EXPECT_EQ(job->gpu_ids, (std::vector<int>{2, 3}));
  EXPECT_EQ(job->exit_code, 0);
  EXPECT_EQ(job->started_at, FromUnixMillis(2000));
  EXPECT_FALSE(job->finished_at.has_value());
  EXPECT_EQ(job->executor_handle, R"({"pid":1})");
  EXPECT_EQ(job->spec.labels.at("exp"), "1");
  auto events = store->ListEvents("a");
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].type, "Submitted");
  EXPECT_EQ((*events)[1].type, "StateChanged");
  auto later = store->ListEvents("a", (*events)[0].id);
  EXPECT_EQ(later->size(), 1u);
}

TEST_P(StoreConformance, DuplicateNameIsAConflictAndChangesNothing) {
  auto store = Open();
  Job a = MakeJob("a");
  ASSERT_TRUE(store->CreateJob(a, Submitted("a")).ok());
  Job again = MakeJob("a", "other");
  Status s = store->CreateJob(again, Submitted("a"));
  EXPECT_EQ(s.code(), StatusCode::kConflict);
  EXPECT_EQ(store->GetJob("a")->spec.team, "default");
  EXPECT_EQ(store->ListEvents("a")->size(), 1u);
}

TEST_P(StoreConformance, UnknownJobIsNotFound) {
  auto store = Open();
  EXPECT_EQ(store->GetJob("nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->SaveJob(MakeJob("nope"), {}).code(), StatusCode::kNotFound);
}

TEST_P(StoreConformance, ListFiltersAndKeepsSubmissionOrder) {
  auto store = Open();
  for (auto [name, team] : {std::pair{"c", "t1"}, {"a", "t2"}, {"b", "t1"}}) {
    Job j = MakeJob(name, team);
    j.spec.labels = {{"team", team}};
    ASSERT_TRUE(store->CreateJob(j, Submitted(name)).ok());
  }
  Job b = *store->GetJob("b");
  b.state = JobState::kSucceeded;
  ASSERT_TRUE(store->SaveJob(b, {}).ok());
  auto names = [](const std::vector<Job>& jobs) {
    std::vector<std::string> out;
    for (const auto& j : jobs) out.push_back(j.name());
    return out;
  };
  EXPECT_EQ(names(*store->ListJobs({})), (std::vector<std::string>{"c", "a", "b"}));
  JobFilter team;
  team.team = "t1";
  EXPECT_EQ(names(*store->ListJobs(team)), (std::vector<std::string>{"c", "b"}));
  JobFilter active;
  active.active_only = true;
  EXPECT_EQ(names(*store->ListJobs(active)), (std::vector<std::string>{"c", "a"}));
  JobFilter ended;
  ended.ended_only = true;
  EXPECT_EQ(names(*store->ListJobs(ended)), (std::vector<std::string>{"b"}));
  ended.team = "t2";
  EXPECT_TRUE(store->ListJobs(ended)->empty());
  JobFilter state;
  state.state = JobState::kSucceeded;
  EXPECT_EQ(names(*store->ListJobs(state)), (std::vector<std::string>{"b"}));
  JobFilter labels;
  labels.labels = {{"team", "t2"}};
  EXPECT_EQ(names(*store->ListJobs(labels)), (std::vector<std::string>{"a"}));
}

// Label selectors run in the database: keys and values with dots, quotes,
// spaces, non-ASCII text and numbers written as text match exactly, and a
// job must carry every label asked for.
TEST_P(StoreConformance, LabelSelectorsMatchEveryLabelExactly) {
  auto store = Open();
  const std::vector<std::pair<std::string, std::map<std::string, std::string>>> jobs = {
      {"one", {{"exp", "1"}, {"trial", "7"}, {"a.b", "x\"y"}}},
      {"two", {{"exp", "1"}, {"trial", "8"}, {"naïve key", "été"}}},
      {"three", {{"exp", "10"}, {"trial", "7"}}},
      {"four", {}},
  };
  for (const auto& [name, labels] : jobs) {
    Job j = MakeJob(name);
    j.spec.labels = labels;
    ASSERT_TRUE(store->CreateJob(j, Submitted(name)).ok());
  }
  auto select = [&](std::map<std::string, std::string> labels) {
    JobFilter f;
    f.labels = std::move(labels);
    auto listed = store->ListJobs(f);
    EXPECT_TRUE(listed.ok()) << listed.status().ToString();
    std::vector<std::string> out;
    if (listed.ok()) {
      for (const Job& j : *listed) out.push_back(j.name());
    }
    return out;
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(select({{"exp", "1"}}), (Names{"one", "two"}));
  EXPECT_EQ(select({{"exp", "1"}, {"trial", "7"}}), (Names{"one"}));
  EXPECT_EQ(select({{"trial", "7"}}), (Names{"one", "three"}));
  EXPECT_EQ(select({{"a.b", "x\"y"}}), (Names{"one"}));
  EXPECT_EQ(select({{"naïve key", "été"}}), (Names{"two"}));
  EXPECT_EQ(select({{"exp", "01"}}), (Names{}));
  EXPECT_EQ(select({{"missing", ""}}), (Names{}));
  EXPECT_EQ(select({{"exp", "1"}, {"trial", "9"}}), (Names{}));
}

TEST_P(StoreConformance, KeepsPreemptionState) {
  {
    auto store = Open();
    Job job = MakeJob("a");
    ASSERT_TRUE(store->CreateJob(job, Submitted("a")).ok());
    job.preemptions = 2;
    job.restarts = 1;
    job.preempt_requested_at = FromUnixMillis(5000);
    job.preempt_message = "preempted by higher-priority b";
    job.requeued_at = FromUnixMillis(6000);
    ASSERT_TRUE(store->SaveJob(job, {}).ok());
  }
  auto job = Open()->GetJob("a");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->preemptions, 2);
  EXPECT_EQ(job->attempt(), 3);
  EXPECT_EQ(job->preempt_requested_at, FromUnixMillis(5000));
  EXPECT_EQ(job->preempt_message, "preempted by higher-priority b");
  EXPECT_EQ(job->requeued_at, FromUnixMillis(6000));
}

TEST_P(StoreConformance, KeepsWhoCreatedAJob) {
  {
    auto store = Open();
    Job job = MakeJob("a");
    job.created_by = "experiment/sweep";
    ASSERT_TRUE(store->CreateJob(job, Submitted("a")).ok());
    job.created_by = "user/mallory";  // set once, at creation
    ASSERT_TRUE(store->SaveJob(job, {}).ok());
  }
  auto job = Open()->GetJob("a");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->created_by, "experiment/sweep");
}

TEST_P(StoreConformance, SpecsWithControlCharactersReadBack) {
  auto store = Open();
  Job job = MakeJob("ctl", "t\x1b]0;x\x07");
  job.spec.labels = {{"k\x7f", "\xc2\x9b" "31m"}, {"x", "\x1b[2J"}};
  ASSERT_TRUE(store->CreateJob(job, Submitted("ctl")).ok());
  auto read = store->GetJob("ctl");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->spec.team, job.spec.team);
  EXPECT_EQ(read->spec.labels, job.spec.labels);
  EXPECT_EQ(store->ListJobs({})->size(), 1u);
}

TEST_P(StoreConformance, ExperimentsAndTrialsSurviveReopening) {
  {
    auto store = Open();
    ExperimentRecord e{"sweep", R"({"name":"sweep"})", ExperimentState::kRunning, "", FromUnixMillis(1000), {}};
    ASSERT_TRUE(store->CreateExperiment(e).ok());
    EXPECT_EQ(store->CreateExperiment(e).code(), StatusCode::kConflict);
    TrialRecord t{"sweep", 0, "sweep-0", R"({"lr":0.1})", TrialState::kRunning, false, {}, ""};
    ASSERT_TRUE(store->CreateTrial(t).ok());
    EXPECT_EQ(store->CreateTrial(t).code(), StatusCode::kConflict);  // never doubled on resume
    t.state = TrialState::kEarlyStopped;
    t.stop_requested = true;
    t.objective = 0.25;
    ASSERT_TRUE(store->SaveTrial(t).ok());
    TrialRecord orphan{"nope", 0, "nope-0", "{}", TrialState::kRunning, false, {}, ""};
    EXPECT_EQ(store->CreateTrial(orphan).code(), StatusCode::kNotFound);
    e.state = ExperimentState::kSucceeded;
    e.message = "goal reached";
    e.finished_at = FromUnixMillis(9000);
    ASSERT_TRUE(store->SaveExperiment(e).ok());
  }
  auto store = Open();
  auto e = store->GetExperiment("sweep");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->state, ExperimentState::kSucceeded);
  EXPECT_EQ(e->finished_at, FromUnixMillis(9000));
  auto trials = store->ListTrials("sweep");
  ASSERT_TRUE(trials.ok());
  ASSERT_EQ(trials->size(), 1u);
  EXPECT_EQ((*trials)[0].state, TrialState::kEarlyStopped);
  EXPECT_TRUE((*trials)[0].stop_requested);
  EXPECT_EQ((*trials)[0].objective, 0.25);
  EXPECT_EQ(store->GetExperiment("other").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->ListExperiments()->size(), 1u);
}

TEST_P(StoreConformance, LogIndex) {
  auto store = Open();
  Job a = MakeJob("a");
  ASSERT_TRUE(store->CreateJob(a, Submitted("a")).ok());
  ASSERT_TRUE(store->AddLogFile({"a", 1, 0, "/x/1-0"}).ok());
  ASSERT_TRUE(store->AddLogFile({"a", 0, 1, "/x/0-1"}).ok());
  ASSERT_TRUE(store->AddLogFile({"a", 0, 0, "/x/0-0"}).ok());
  auto logs = store->ListLogFiles("a");
  ASSERT_EQ(logs->size(), 3u);
  EXPECT_EQ((*logs)[0].path, "/x/0-0");
  EXPECT_EQ((*logs)[1].path, "/x/0-1");
  EXPECT_EQ((*logs)[2].path, "/x/1-0");
}

TEST_P(StoreConformance, UserTokensKeepOnlyHashesAndRevocation) {
  {
    auto store = Open();
    UserToken t{"alice", "vision", Role::kMember, "hash-a", FromUnixMillis(5000), std::nullopt,
                {},      {}};
    ASSERT_TRUE(store->CreateUserToken(t).ok());
    EXPECT_EQ(store->CreateUserToken(t).code(), StatusCode::kConflict);
    t.name = "other";
    EXPECT_EQ(store->CreateUserToken(t).code(), StatusCode::kConflict) << "hashes are unique";
    ASSERT_TRUE(store
                    ->CreateUserToken(
                        {"root", "", Role::kAdmin, "hash-r", FromUnixMillis(6000), {}, {}, {}})
                    .ok());
    ASSERT_TRUE(store->RevokeUserToken("alice", FromUnixMillis(7000)).ok());
    EXPECT_EQ(store->RevokeUserToken("alice", FromUnixMillis(8000)).code(), StatusCode::kNotFound);
    EXPECT_EQ(store->RevokeUserToken("nobody", FromUnixMillis(8000)).code(), StatusCode::kNotFound);
  }
  auto tokens = Open()->ListUserTokens();
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[0].name, "alice");
  EXPECT_EQ((*tokens)[0].role, Role::kMember);
  EXPECT_EQ((*tokens)[0].team, "vision");
  EXPECT_EQ((*tokens)[0].hash, "hash-a");
  EXPECT_EQ((*tokens)[0].revoked_at, FromUnixMillis(7000));
  EXPECT_EQ((*tokens)[1].role, Role::kAdmin);
  EXPECT_FALSE((*tokens)[1].revoked_at);
}

TEST_P(StoreConformance, TokensKeepTheirExpiryAndOnlyExpiredSessionsAreDeleted) {
  auto store = Open();
  auto token = [](std::string name, std::string hash, std::optional<Time> expires,
                  std::string parent) {
    UserToken t{name, "vision", Role::kMember, hash, FromUnixMillis(1000), {}, expires, parent};
    return t;
  };
  ASSERT_TRUE(store->CreateUserToken(token("brief", "h1", FromUnixMillis(5000), "")).ok());
  ASSERT_TRUE(
      store->CreateUserToken(token("old-session", "h2", FromUnixMillis(5000), "brief")).ok());
  ASSERT_TRUE(
      store->CreateUserToken(token("new-session", "h3", FromUnixMillis(9000), "brief")).ok());
  ASSERT_TRUE(store->DeleteExpiredSessions(FromUnixMillis(6000)).ok());
  auto tokens = Open()->ListUserTokens();
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 2u) << "an expired token stays listed; an expired session goes";
  EXPECT_EQ((*tokens)[0].name, "brief");
  EXPECT_EQ((*tokens)[0].expires_at, FromUnixMillis(5000));
  EXPECT_EQ((*tokens)[0].parent, "");
  EXPECT_EQ((*tokens)[1].name, "new-session");
  EXPECT_EQ((*tokens)[1].parent, "brief");
}

TEST_P(StoreConformance, MetricAfterReturnsOnlyLaterPointsInOrder) {
  auto store = Open();
  Job a = MakeJob("a");
  ASSERT_TRUE(store->CreateJob(a, Submitted("a")).ok());
  ProgressBatch batch{"a", {}, FromUnixMillis(1000)};
  for (std::int64_t step : {5, 1, 3, 9, 7}) {
    ProgressReport r;
    r.step = step;
    r.metrics["loss"] = static_cast<double>(step) / 10;
    batch.reports.push_back(r);
  }
  ASSERT_TRUE(store->AppendProgress({batch}).ok());
  auto after = store->MetricAfter("a", "loss", 3, 2);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 2u);
  EXPECT_EQ((*after)[0].step, 5);
  EXPECT_EQ((*after)[1].step, 7);
  EXPECT_TRUE(store->MetricAfter("a", "loss", 9, 10)->empty());
}

// A step reported again (a retried request, a job resumed from a
// checkpoint) replaces the earlier values, within one commit and across
// commits; many points in one commit all land, non-finite ones included.
TEST_P(StoreConformance, ARepeatedStepReplacesItsValuesAndEveryPointOfABigCommitLands) {
  auto store = Open();
  for (const char* name : {"a", "b"}) {
    Job j = MakeJob(name);
    ASSERT_TRUE(store->CreateJob(j, Submitted(name)).ok());
  }
  auto report = [](std::int64_t step, double loss) {
    ProgressReport r;
    r.step = step;
    r.total_steps = 1000;
    r.epoch = step / 100.0;
    r.metrics = {{"loss", loss}, {"lr", 0.5}};
    return r;
  };
  ProgressBatch a{"a", {}, FromUnixMillis(1000)};
  for (std::int64_t step = 1; step <= 700; ++step) a.reports.push_back(report(step, 1.0 / step));
  a.reports.push_back(report(5, 42.0));  // the same step again, later in the same commit
  a.reports.push_back(report(6, std::numeric_limits<double>::infinity()));
  ProgressBatch b{"b", {report(5, 1.0)}, FromUnixMillis(1000)};
  ASSERT_TRUE(store->AppendProgress({a, b}).ok());
  ASSERT_TRUE(store->AppendProgress({{"b", {report(5, 2.0)}, FromUnixMillis(2000)}}).ok());

  EXPECT_EQ(*store->CountProgressPoints("a"), 700u * 3);
  auto loss = store->RecentMetric("a", "loss", 1000).value();
  ASSERT_EQ(loss.size(), 700u);
  EXPECT_EQ(loss[4].value, 42.0);
  EXPECT_TRUE(std::isinf(loss[5].value));
  EXPECT_DOUBLE_EQ(loss[699].value, 1.0 / 700);
  EXPECT_EQ(store->RecentSteps("a", 1000).value().size(), 700u);
  EXPECT_EQ(store->RecentMetric("b", "loss", 10).value().at(0).value, 2.0);
  EXPECT_EQ(*store->CountProgressPoints("b"), 3u);
}

// Reports are stored as they come and filed by key later (FoldProgress):
// a read sees every acknowledged report whether filed or not, also after
// reopening, and filing keeps the order they came in.
TEST_P(StoreConformance, ReportsAreReadAtOnceAndFiledLaterInTheOrderTheyCame) {
  auto store = Open();
  Job a = MakeJob("a");
  ASSERT_TRUE(store->CreateJob(a, Submitted("a")).ok());
  auto report = [](std::int64_t step, double loss) {
    ProgressReport r;
    r.step = step;
    r.metrics = {{"loss", loss}};
    return r;
  };
  ProgressBatch first{"a", {}, FromUnixMillis(1000)};
  for (std::int64_t step = 1; step <= 10; ++step) first.reports.push_back(report(step, step));
  ASSERT_TRUE(store->AppendProgress({first}).ok());
  ASSERT_TRUE(store->AppendProgress({{"a", {report(5, 50)}, FromUnixMillis(2000)}}).ok());
  ASSERT_TRUE(store->AppendProgress({{"a", {report(5, 500)}, FromUnixMillis(3000)}}).ok());

  // A request is filed whole: asking for 3 files the first one's 10.
  EXPECT_EQ(*store->FoldProgress(3), 10u);
  EXPECT_EQ(store->RecentMetric("a", "loss", 100)->at(4).value, 500.0);  // the read filed the rest
  EXPECT_EQ(*store->FoldProgress(100), 0u);
  // Filed or not, a later report of a step replaces the earlier one.
  ASSERT_TRUE(store->AppendProgress({{"a", {report(5, 5000)}, FromUnixMillis(4000)}}).ok());
  EXPECT_EQ(*store->FoldProgress(100), 1u);
  ASSERT_TRUE(store->AppendProgress({{"a", {report(5, 7)}, FromUnixMillis(5000)}}).ok());
  auto steps = store->RecentSteps("a", 100).value();
  ASSERT_EQ(steps.size(), 10u);
  EXPECT_EQ(steps[4].time, FromUnixMillis(5000));
  EXPECT_EQ(*store->CountProgressPoints("a"), 20u);

  // Unfiled reports are as durable as filed ones.
  ASSERT_TRUE(store->AppendProgress({{"a", {report(11, 11)}, FromUnixMillis(6000)}}).ok());
  store.reset();
  store = Open();
  auto loss = store->RecentMetric("a", "loss", 100).value();
  ASSERT_EQ(loss.size(), 11u);
  EXPECT_EQ(loss[4].value, 7.0);
  EXPECT_EQ(loss[10].value, 11.0);
  EXPECT_EQ(*store->FoldProgress(100), 0u);

  // Many short requests are filed in one call, oldest first.
  for (std::int64_t step = 100; step < 250; ++step) {
    ASSERT_TRUE(store->AppendProgress({{"a", {report(step, step)}, FromUnixMillis(7000)}}).ok());
  }
  EXPECT_EQ(*store->FoldProgress(140), 140u);
  EXPECT_EQ(*store->FoldProgress(1000), 10u);
  EXPECT_EQ(store->RecentMetric("a", "loss", 1).value().at(0).value, 249.0);
}

// One fold files the reports of many jobs, interleaved as they came,
// series by series: within each series the report that came last wins.
TEST_P(StoreConformance, AFoldOfInterleavedJobsKeepsTheLastReportOfEachStep) {
  auto store = Open();
  for (const char* name : {"a", "b"}) {
    Job j = MakeJob(name);
    ASSERT_TRUE(store->CreateJob(j, Submitted(name)).ok());
  }
  auto report = [](std::int64_t step, std::map<std::string, double> metrics) {
    ProgressReport r;
    r.step = step;
    r.metrics = std::move(metrics);
    return r;
  };
  std::int64_t millis = 1000;
  auto append = [&](const std::string& job, ProgressReport r) {
    ASSERT_TRUE(
        store->AppendProgress({{job, {std::move(r)}, FromUnixMillis(millis += 1000)}}).ok());
  };
  append("a", report(1, {{"loss", 1}}));
  append("b", report(1, {{"loss", 10}, {"acc", 0.1}}));
  append("a", report(2, {{"loss", 2}}));
  append("b", report(1, {{"loss", 11}}));  // b's step 1 again: loss replaced, acc kept
  append("a", report(1, {{"loss", 3}, {"acc", 0.3}}));
  append("b", report(2, {{"acc", 0.2}}));
  append("a", report(1, {{"loss", 4}}));
  EXPECT_EQ(*store->FoldProgress(100), 7u);

  auto values = [&](const std::string& job, const std::string& metric) {
    std::vector<std::pair<std::int64_t, double>> out;
    const std::vector<MetricPoint> points = store->RecentMetric(job, metric, 10).value();
    for (const MetricPoint& p : points) {
      out.emplace_back(p.step, p.value);
    }
    return out;
  };
  using Points = std::vector<std::pair<std::int64_t, double>>;
  EXPECT_EQ(values("a", "loss"), (Points{{1, 4}, {2, 2}}));
  EXPECT_EQ(values("a", "acc"), (Points{{1, 0.3}}));
  EXPECT_EQ(values("b", "loss"), (Points{{1, 11}}));
  EXPECT_EQ(values("b", "acc"), (Points{{1, 0.1}, {2, 0.2}}));
  const std::vector<StepPoint> a_steps = store->RecentSteps("a", 10).value();
  ASSERT_EQ(a_steps.size(), 2u);
  EXPECT_EQ(a_steps[0].time, FromUnixMillis(8000));  // step 1's last report
  EXPECT_EQ(a_steps[1].time, FromUnixMillis(4000));
}

// A series is kept in chunks of 128 points: steps that arrive out of
// order, across chunk boundaries, in long and short requests, and steps
// reported again all read back as one series in step order, the last
// report of each step kept, by every read.
TEST_P(StoreConformance, ASeriesOfManyChunksReadsBackInStepOrderWhateverOrderItCameIn) {
  auto store = Open();
  Job a = MakeJob("a");
  ASSERT_TRUE(store->CreateJob(a, Submitted("a")).ok());
  // Steps 1..1000 in a fixed shuffle, sent as requests of 1 to 150 reports.
  std::vector<std::int64_t> order(1000);
  for (std::int64_t i = 0; i < 1000; ++i) order[i] = i + 1;
  std::uint64_t seed = 42;
  for (std::size_t i = order.size() - 1; i > 0; --i) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    std::swap(order[i], order[(seed >> 33) % (i + 1)]);
  }
  auto report = [](std::int64_t step, double loss) {
    ProgressReport r;
    r.step = step;
    r.time = FromUnixMillis(100000 + step);
    r.metrics = {{"loss", loss}};
    return r;
  };
  std::size_t next = 0;
  for (std::size_t size : {150u, 1u, 70u, 3u, 200u, 64u, 1u, 1u, 10u, 500u}) {
    ProgressBatch batch{"a", {}, FromUnixMillis(1000)};
    for (std::size_t i = 0; i < size && next < order.size(); ++i, ++next) {
      batch.reports.push_back(report(order[next], -1.0));  // replaced below
    }
    ASSERT_TRUE(store->AppendProgress({batch}).ok());
  }
  ASSERT_EQ(next, order.size());
  // Every step again with its final value, newest steps first, short and long.
  ProgressBatch again{"a", {}, FromUnixMillis(1000)};
  for (std::int64_t step = 1000; step >= 1; --step) {
    again.reports.push_back(report(step, step == 500 ? std::nan("") : 1.0 / step));
    if (again.reports.size() == (step > 600 ? 1u : 100u)) {
      ASSERT_TRUE(store->AppendProgress({again}).ok());
      again.reports.clear();
    }
  }
  ASSERT_TRUE(store->AppendProgress({again}).ok() || again.reports.empty());

  const std::vector<StepPoint> steps = store->RecentSteps("a", 5000).value();
  ASSERT_EQ(steps.size(), 1000u);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    ASSERT_EQ(steps[i].step, static_cast<std::int64_t>(i) + 1);
    ASSERT_EQ(steps[i].time, FromUnixMillis(100000 + steps[i].step));
  }
  std::vector<MetricPoint> scanned;
  ASSERT_TRUE(
      store->ScanMetric("a", "loss", [&](const MetricPoint& p) { scanned.push_back(p); }).ok());
  ASSERT_EQ(scanned.size(), 1000u);
  for (const MetricPoint& p : scanned) {
    if (p.step == 500) {
      EXPECT_TRUE(std::isnan(p.value));
    } else {
      ASSERT_EQ(p.value, 1.0 / p.step) << p.step;
    }
  }
  const std::vector<MetricPoint> last = store->RecentMetric("a", "loss", 3).value();
  ASSERT_EQ(last.size(), 3u);
  EXPECT_EQ(last[0].step, 998);
  EXPECT_EQ(last[2].step, 1000);
  const std::vector<MetricPoint> after = store->MetricAfter("a", "loss", 127, 3).value();
  ASSERT_EQ(after.size(), 3u);
  EXPECT_EQ(after[0].step, 128);
  EXPECT_EQ(after[2].step, 130);
  EXPECT_TRUE(store->MetricAfter("a", "loss", 1000, 3).value().empty());
  EXPECT_EQ(store->MetricAfter("a", "loss", -5, 2).value().at(0).step, 1);
  EXPECT_EQ(*store->CountProgressPoints("a"), 2000u);
  EXPECT_EQ(store->StoredSteps("a", {0, 1, 129, 500, 1000, 1001}).value(),
            (std::set<std::int64_t>{1, 129, 500, 1000}));
  EXPECT_EQ(store->MetricNames("a").value(), std::vector<std::string>{"loss"});
}

// A store opened again knows nothing of the series it wrote before: a
// late step filed into the middle of a series, then a step of its newest
// chunk reported again, each stays one point.
TEST_P(StoreConformance, AStoreOpenedAgainFilesIntoTheSeriesItWroteBefore) {
  auto report = [](std::int64_t step, double loss) {
    ProgressReport r;
    r.step = step;
    r.metrics = {{"loss", loss}};
    return r;
  };
  {
    auto store = Open();
    Job a = MakeJob("a");
    ASSERT_TRUE(store->CreateJob(a, Submitted("a")).ok());
    ProgressBatch batch{"a", {}, FromUnixMillis(1000)};
    for (std::int64_t step = 1; step <= 300; ++step) {
      if (step != 50) batch.reports.push_back(report(step, 1.0));
    }
    ASSERT_TRUE(store->AppendProgress({batch}).ok());
  }
  auto store = Open();
  ASSERT_TRUE(store->AppendProgress({{"a", {report(50, 2.0)}, FromUnixMillis(2000)}}).ok());
  ASSERT_EQ(*store->FoldProgress(100), 1u);
  ASSERT_TRUE(store->AppendProgress({{"a", {report(290, 3.0)}, FromUnixMillis(3000)}}).ok());
  ASSERT_EQ(*store->FoldProgress(100), 1u);
  ASSERT_TRUE(store->AppendProgress({{"a", {report(301, 4.0)}, FromUnixMillis(4000)}}).ok());
  const std::vector<MetricPoint> loss = store->RecentMetric("a", "loss", 1000).value();
  ASSERT_EQ(loss.size(), 301u);
  for (std::size_t i = 0; i < loss.size(); ++i) {
    ASSERT_EQ(loss[i].step, static_cast<std::int64_t>(i) + 1);
  }
  EXPECT_EQ(loss[49].value, 2.0);
  EXPECT_EQ(loss[289].value, 3.0);
  EXPECT_EQ(loss[300].value, 4.0);
  EXPECT_EQ(*store->CountProgressPoints("a"), 602u);
}

// One group commit holding short requests (logged, filed later) and long
// ones (filed at once) of the same jobs: each step keeps the value of the
// request that came last, and every short one is stored, however many.
TEST_P(StoreConformance, AGroupOfShortAndLongRequestsKeepsTheLastValueOfEachStep) {
  auto store = Open();
  for (const char* name : {"a", "b"}) {
    Job job = MakeJob(name);
    ASSERT_TRUE(store->CreateJob(job, Submitted(name)).ok());
  }
  auto request = [](const std::string& job, std::int64_t first, std::int64_t count, double loss) {
    ProgressBatch batch{job, {}, FromUnixMillis(1000)};
    for (std::int64_t step = first; step < first + count; ++step) {
      ProgressReport r;
      r.step = step;
      r.metrics = {{"loss", loss}};
      batch.reports.push_back(r);
    }
    return batch;
  };
  std::vector<ProgressBatch> group;
  for (int i = 0; i < 300; ++i) group.push_back(request("b", i, 1, 1.0));  // many short ones
  group.push_back(request("a", 10, 1, 1.0));                               // short, then
  group.push_back(request("a", 0, 100, 2.0));                              // long, over it, then
  group.push_back(request("a", 20, 1, 3.0));                               // short again
  group.push_back(request("b", 250, 100, 4.0));  // long, over some short ones
  ASSERT_TRUE(store->AppendProgress(group).ok());
  const std::vector<MetricPoint> a = store->RecentMetric("a", "loss", 1000).value();
  ASSERT_EQ(a.size(), 100u);
  for (const MetricPoint& p : a) {
    EXPECT_EQ(p.value, p.step == 20 ? 3.0 : 2.0) << "a, step " << p.step;
  }
  const std::vector<MetricPoint> b = store->RecentMetric("b", "loss", 1000).value();
  ASSERT_EQ(b.size(), 350u);
  for (const MetricPoint& p : b) {
    EXPECT_EQ(p.value, p.step >= 250 ? 4.0 : 1.0) << "b, step " << p.step;
  }
}

// Before chunks a store kept a row per point (progress_steps and
// metric_points); opening one moves them into chunks, values exact.
TEST_P(StoreConformance, AStoreWrittenWithARowPerPointKeepsItsProgress) {
  {
    auto store = Open();
    Job a = MakeJob("a");
    ASSERT_TRUE(store->CreateJob(a, Submitted("a")).ok());
  }
  {
    auto db = sql::OpenConnection(url_);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    const bool sqlite = GetParam() == "sqlite";
    std::vector<std::string> statements = {
        "DROP TABLE progress_chunks",
        "CREATE TABLE progress_steps (job VARCHAR(255) NOT NULL, step BIGINT NOT NULL, "
        "\"time\" BIGINT NOT NULL, total_steps BIGINT, epoch DOUBLE PRECISION, "
        "total_epochs DOUBLE PRECISION, PRIMARY KEY (job, step))",
        "CREATE TABLE metric_points (job VARCHAR(255) NOT NULL, metric VARCHAR(255) NOT NULL, "
        "step BIGINT NOT NULL, value DOUBLE PRECISION, special VARCHAR(8), "
        "PRIMARY KEY (job, metric, step))",
        sqlite ? "PRAGMA user_version=16" : "DELETE FROM headway_schema WHERE version > 3"};
    for (int step = 1; step <= 200; ++step) {
      const std::string s = std::to_string(step);
      statements.push_back("INSERT INTO progress_steps VALUES ('a', " + s + ", " +
                           std::to_string(5000 + step) + ", 200, NULL, 2.5)");
      statements.push_back("INSERT INTO metric_points VALUES ('a', 'loss', " + s + ", " +
                           (step == 3   ? "NULL, 'nan'"
                            : step == 4 ? "NULL, '-inf'"
                                        : "0.1, NULL") +
                           ")");
    }
    for (const std::string& sql : statements) {
      Status s = (*db)->Exec(sql);
      ASSERT_TRUE(s.ok()) << sql << ": " << s.ToString();
    }
  }
  auto store = Open();
  const std::vector<StepPoint> steps = store->RecentSteps("a", 500).value();
  ASSERT_EQ(steps.size(), 200u);
  EXPECT_EQ(steps[0].time, FromUnixMillis(5001));
  EXPECT_EQ(steps[0].total_steps, 200);
  EXPECT_FALSE(steps[0].epoch);
  EXPECT_EQ(steps[199].total_epochs, 2.5);
  const std::vector<MetricPoint> loss = store->RecentMetric("a", "loss", 500).value();
  ASSERT_EQ(loss.size(), 200u);
  EXPECT_TRUE(std::isnan(loss[2].value));
  EXPECT_EQ(loss[3].value, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(loss[199].value, 0.1);
  EXPECT_EQ(*store->CountProgressPoints("a"), 400u);
}

// Long requests are filed at once, short ones later; whichever way each
// went, the report that came last is the one kept.
TEST_P(StoreConformance, ShortAndLongRequestsForOneStepKeepTheLastReport) {
  auto store = Open();
  Job a = MakeJob("a");
  ASSERT_TRUE(store->CreateJob(a, Submitted("a")).ok());
  auto batch = [](std::size_t reports, double loss) {
    ProgressBatch b{"a", {}, FromUnixMillis(1000)};
    for (std::size_t i = 0; i < reports; ++i) {
      ProgressReport r;
      r.step = static_cast<std::int64_t>(i) + 5 - (reports > 1 ? 1 : 0);  // step 5 in each
      r.metrics = {{"loss", loss}};
      b.reports.push_back(r);
    }
    return b;
  };
  auto loss_at_5 = [&] {
    const std::vector<MetricPoint> points = store->RecentMetric("a", "loss", 1000).value();
    for (const MetricPoint& p : points) {
      if (p.step == 5) return p.value;
    }
    return -1.0;
  };
  ASSERT_TRUE(store->AppendProgress({batch(1, 1)}).ok());
  ASSERT_TRUE(store->AppendProgress({batch(500, 2)}).ok());
  EXPECT_EQ(loss_at_5(), 2.0);
  ASSERT_TRUE(store->AppendProgress({batch(1, 3)}).ok());
  EXPECT_EQ(loss_at_5(), 3.0);
  // In one commit.
  ASSERT_TRUE(store->AppendProgress({batch(1, 4), batch(500, 5)}).ok());
  EXPECT_EQ(loss_at_5(), 5.0);
  ASSERT_TRUE(store->AppendProgress({batch(1, 6), batch(500, 7), batch(1, 8)}).ok());
  EXPECT_EQ(loss_at_5(), 8.0);
  EXPECT_EQ(*store->CountProgressPoints("a"), 1000u);
}

TEST_P(StoreConformance, ListsEventsOfEveryJobAfterAnIdByTypeWithALimit) {
  auto store = Open();
  EXPECT_EQ(*store->LastEventId(), 0);
  Job a = MakeJob("a"), b = MakeJob("b");
  ASSERT_TRUE(store->CreateJob(a, Submitted("a")).ok());
  ASSERT_TRUE(store->CreateJob(b, Submitted("b")).ok());
  auto event = [](const std::string& job, const std::string& type, const std::string& message) {
    return JobEvent{0, job, FromUnixMillis(2000), type, message};
  };
  ASSERT_TRUE(store->SaveJob(a, {event("a", "StateChanged", "Queued -> Starting"),
                                 event("a", "Launched", "pid 1")}).ok());
  ASSERT_TRUE(store->SaveJob(b, {event("b", "HealthChanged", "Unknown -> Progressing")}).ok());
  ASSERT_TRUE(store->SaveJob(a, {event("a", "StateChanged", "Starting -> Running")}).ok());
  auto last = store->LastEventId();
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, 6);  // 2 submitted + 4 above

  const std::vector<std::string> changes = {"StateChanged", "HealthChanged"};
  auto all = store->ListEventsAfter(0, changes, 100);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);  // neither Submitted nor Launched
  EXPECT_EQ((*all)[0].job, "a");
  EXPECT_EQ((*all)[0].message, "Queued -> Starting");
  EXPECT_EQ((*all)[1].job, "b");
  EXPECT_EQ((*all)[1].type, "HealthChanged");
  EXPECT_EQ((*all)[2].message, "Starting -> Running");
  EXPECT_LT((*all)[0].id, (*all)[1].id);
  EXPECT_LT((*all)[1].id, (*all)[2].id);
  EXPECT_EQ((*all)[2].time, FromUnixMillis(2000));

  // After an id, and at most `limit`.
  auto after = store->ListEventsAfter((*all)[0].id, changes, 1);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].id, (*all)[1].id);
  EXPECT_TRUE(store->ListEventsAfter(*last, changes, 100)->empty());
  // No types: every type.
  EXPECT_EQ(store->ListEventsAfter(0, {}, 100)->size(), 6u);
  EXPECT_EQ(store->ListEventsAfter(0, {"Launched"}, 100)->size(), 1u);
}

TEST_P(StoreConformance, DeletingAJobRemovesEverythingKeptOfItAndFreesItsName) {
  auto store = Open();
  for (const char* name : {"gone", "kept"}) {
    Job job = MakeJob(name);
    ASSERT_TRUE(store->CreateJob(job, Submitted(name)).ok());
    ASSERT_TRUE(store->AddLogFile({name, 0, 0, std::string("/x/") + name}).ok());
    ProgressReport r;
    r.step = 1;
    r.metrics["loss"] = 0.5;
    ASSERT_TRUE(store->AppendProgress({{name, {r}, FromUnixMillis(1000)}}).ok());
  }
  ASSERT_TRUE(store->DeleteJob("gone").ok());
  EXPECT_EQ(store->GetJob("gone").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store->ListEvents("gone")->empty());
  EXPECT_TRUE(store->ListLogFiles("gone")->empty());
  EXPECT_TRUE(store->MetricNames("gone")->empty());
  EXPECT_TRUE(store->RecentSteps("gone", 10)->empty());
  EXPECT_EQ(store->DeleteJob("gone").code(), StatusCode::kNotFound);
  // The other job is untouched, and the name can be taken again.
  EXPECT_EQ(store->ListEvents("kept")->size(), 1u);
  EXPECT_EQ(store->MetricNames("kept")->size(), 1u);
  Job again = MakeJob("gone");
  EXPECT_TRUE(store->CreateJob(again, Submitted("gone")).ok());
}

TEST_P(StoreConformance, WebhookCursorsSurviveReopening) {
  {
    auto store = Open();
    auto unset = store->GetWebhookCursor("sha256:aa");
    ASSERT_TRUE(unset.ok());
    EXPECT_FALSE(unset->has_value());
    ASSERT_TRUE(store->SetWebhookCursor("sha256:aa", 5, FromUnixMillis(1000)).ok());
    ASSERT_TRUE(store->SetWebhookCursor("sha256:aa", 9, FromUnixMillis(2000)).ok());
    ASSERT_TRUE(store->SetWebhookCursor("sha256:bb", 1, FromUnixMillis(2000)).ok());
  }
  auto store = Open();
  EXPECT_EQ(store->GetWebhookCursor("sha256:aa")->value_or(-1), 9);
  EXPECT_EQ(store->GetWebhookCursor("sha256:bb")->value_or(-1), 1);
  EXPECT_FALSE(store->GetWebhookCursor("sha256:cc")->has_value());
}

TEST_P(StoreConformance, ArtifactVersionsCountUpAndAreNeverReused) {
  auto store = Open();
  Artifact a = MakeArtifact("ckpt", "vision", 'a');
  ASSERT_TRUE(store->CreateArtifact(a).ok());
  EXPECT_EQ(a.version, 1);
  Artifact b = MakeArtifact("ckpt", "vision", 'b');
  ASSERT_TRUE(store->CreateArtifact(b).ok());
  EXPECT_EQ(b.version, 2);
  // No ready version yet: "latest" finds none.
  EXPECT_EQ(store->GetArtifact("ckpt", std::nullopt).status().code(), StatusCode::kNotFound);
  a.state = ArtifactState::kReady;
  a.ready_at = FromUnixMillis(6000);
  ASSERT_TRUE(store->SaveArtifact(a).ok());
  auto latest = store->GetArtifact("ckpt", std::nullopt);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->version, 1);
  EXPECT_EQ(latest->producer.step, 40);
  EXPECT_EQ(latest->producer.attempt, 0);
  EXPECT_EQ(latest->metrics.at("eval_loss"), 0.5);
  EXPECT_TRUE(std::isnan(latest->metrics.at("loss"))) << "a diverged checkpoint says so";
  EXPECT_EQ(latest->labels.at("framework"), "jax");
  // Deleting the newest does not give its number out again.
  ASSERT_TRUE(store->DeleteArtifact("ckpt", 2).ok());
  Artifact c = MakeArtifact("ckpt", "vision", 'c');
  ASSERT_TRUE(store->CreateArtifact(c).ok());
  EXPECT_EQ(c.version, 3);
  EXPECT_EQ(store->DeleteArtifact("ckpt", 2).code(), StatusCode::kNotFound);
  // A name is its first team's.
  Artifact theirs = MakeArtifact("ckpt", "nlp", 'd');
  EXPECT_EQ(store->CreateArtifact(theirs).code(), StatusCode::kConflict);
}

TEST_P(StoreConformance, ArtifactsAreListedCountedAndTheirUsesRecorded) {
  {
    auto store = Open();
    Artifact a = MakeArtifact("data-mnist", "vision", 'a');
    a.state = ArtifactState::kReady;
    Artifact b = MakeArtifact("model", "vision", 'a');  // the same bytes
    b.state = ArtifactState::kPending;
    b.kind = ArtifactKind::kModel;
    b.producer = {"other", 1, std::nullopt, "train-node"};
    Artifact c = MakeArtifact("nlp-model", "nlp", 'c');
    for (Artifact* x : {&a, &b, &c}) ASSERT_TRUE(store->CreateArtifact(*x).ok());
    ArtifactUse use{"data-mnist", 1, "train", 0, FromUnixMillis(7000)};
    ASSERT_TRUE(store->AddArtifactUse(use).ok());
    ASSERT_TRUE(store->AddArtifactUse(use).ok());  // idempotent
    ASSERT_TRUE(store->AddArtifactUse({"data-mnist", 1, "eval", std::nullopt, FromUnixMillis(8000)}).ok());
  }
  auto store = Open();  // all of it survives reopening
  EXPECT_EQ(*store->CountArtifactsWithDigest("vision", "sha256:" + std::string(64, 'a')), 2u);
  EXPECT_EQ(*store->CountArtifactsWithDigest("nlp", "sha256:" + std::string(64, 'a')), 0u);
  // `a` was made Ready, `b` is Pending.
  EXPECT_EQ(*store->CountReadyArtifactsWithDigest("vision", "sha256:" + std::string(64, 'a')), 1u);
  EXPECT_EQ(*store->TeamArtifactBytes("vision"), 200u);
  EXPECT_EQ(*store->TeamArtifactBytes("nobody"), 0u);
  ArtifactFilter vision;
  vision.team = "vision";
  auto listed = store->ListArtifacts(vision);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].name, "data-mnist");
  EXPECT_EQ((*listed)[1].producer.pipeline_node, "train-node");
  ArtifactFilter models;
  models.kind = ArtifactKind::kModel;
  EXPECT_EQ(store->ListArtifacts(models)->size(), 1u);
  ArtifactFilter by_job;
  by_job.job = "train";
  EXPECT_EQ(store->ListArtifacts(by_job)->size(), 2u);
  auto uses = store->ListArtifactUses("data-mnist", std::nullopt);
  ASSERT_TRUE(uses.ok());
  ASSERT_EQ(uses->size(), 2u);
  EXPECT_EQ((*uses)[0].job, "train");
  EXPECT_EQ((*uses)[0].attempt, 0);
  EXPECT_FALSE((*uses)[1].attempt);
  EXPECT_EQ(store->ListJobArtifactUses("eval")->size(), 1u);
  ASSERT_TRUE(store->DeleteArtifact("data-mnist", 1).ok());
  EXPECT_TRUE(store->ListArtifactUses("data-mnist", 1)->empty());
}

TEST_P(StoreConformance, WorkflowsAreListedNewestFirstByTeamPhaseLabelsAndPage) {
  auto store = Open();
  for (int i = 0; i < 5; ++i) {
    WorkflowRecord w = MakeWorkflow("wf-" + std::to_string(i), i % 2 ? "nlp" : "vision", 1000 + i);
    w.labels["app"] = i < 3 ? "etl" : "train";
    ASSERT_TRUE(store->CreateWorkflow(w).ok());
    EXPECT_EQ(w.revision, 1);
    EXPECT_GT(w.seq, 0);
  }
  WorkflowRecord taken = MakeWorkflow("wf-0", "vision", 1);
  EXPECT_EQ(store->CreateWorkflow(taken).code(), StatusCode::kConflict);

  auto names = [&](const WorkflowFilter& f) {
    std::vector<std::string> out;
    auto listed = store->ListWorkflows(f);
    EXPECT_TRUE(listed.ok()) << listed.status().ToString();
    for (const WorkflowRecord& w : *listed) out.push_back(w.name);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names({}), (V{"wf-4", "wf-3", "wf-2", "wf-1", "wf-0"}));
  WorkflowFilter vision;
  vision.team = "vision";
  EXPECT_EQ(names(vision), (V{"wf-4", "wf-2", "wf-0"}));
  WorkflowFilter etl_in_vision = vision;
  etl_in_vision.labels["app"] = "etl";
  EXPECT_EQ(names(etl_in_vision), (V{"wf-2", "wf-0"}));
  WorkflowFilter page;
  page.limit = 2;
  auto first = store->ListWorkflows(page);
  ASSERT_EQ(first->size(), 2u);
  page.before_seq = first->back().seq;
  EXPECT_EQ(names(page), (V{"wf-2", "wf-1"}));
  WorkflowFilter window;
  window.created_after = FromUnixMillis(1001);
  window.created_before = FromUnixMillis(1004);
  EXPECT_EQ(names(window), (V{"wf-3", "wf-2"}));
  WorkflowFilter by_uid;
  by_uid.uid = store->GetWorkflow("wf-2")->uid;
  EXPECT_EQ(names(by_uid), (V{"wf-2"}));
  WorkflowFilter by_prefix;
  by_prefix.name_prefix = "wf-";
  EXPECT_EQ(names(by_prefix).size(), 5u);
  by_prefix.name_prefix = "wf-1";
  EXPECT_EQ(names(by_prefix), (V{"wf-1"}));
  by_prefix.name_prefix = "wf_";
  EXPECT_EQ(names(by_prefix), (V{}));
  auto got = store->GetWorkflow("wf-3");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->labels.at("app"), "train");
  EXPECT_EQ(got->manifest, MakeWorkflow("wf-3", "nlp", 0).manifest);

  ASSERT_TRUE(store->DeleteWorkflow("wf-3").ok());
  EXPECT_EQ(store->GetWorkflow("wf-3").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->DeleteWorkflow("wf-3").code(), StatusCode::kNotFound);
  WorkflowFilter train;
  train.labels["app"] = "train";
  EXPECT_EQ(names(train), (V{"wf-4"})) << "a deleted workflow's labels go with it";
}

TEST_P(StoreConformance, ASaveFromAStaleReadIsRefusedAndWritesNothing) {
  auto store = Open();
  WorkflowRecord w = MakeWorkflow("diamond", "vision", 1000);
  ASSERT_TRUE(store->CreateWorkflow(w).ok());
  WorkflowRecord first = *store->GetWorkflow("diamond");
  WorkflowRecord second = first;

  first.phase = "Running";
  first.started_at = FromUnixMillis(2000);
  ASSERT_TRUE(store->SaveWorkflow(first, {{"diamond", "diamond-1", "Running", "diamond-a", "{}"}}).ok());
  EXPECT_EQ(first.revision, 2);

  second.phase = "Failed";
  Status stale = store->SaveWorkflow(second, {{"diamond", "diamond-2", "Failed", "", "{}"}});
  EXPECT_EQ(stale.code(), StatusCode::kConflict) << stale.ToString();
  auto now = store->GetWorkflow("diamond");
  EXPECT_EQ(now->phase, "Running");
  EXPECT_EQ(now->revision, 2);
  EXPECT_EQ(store->ListWorkflowNodes("diamond")->size(), 1u) << "the stale save's node is not written";

  WorkflowRecord ghost = MakeWorkflow("ghost", "vision", 1);
  ghost.revision = 1;
  EXPECT_EQ(store->SaveWorkflow(ghost, {}).code(), StatusCode::kNotFound);
}

TEST_P(StoreConformance, NodesARetryRemovedAreGoneAfterARestart) {
  {
    auto store = Open();
    WorkflowRecord w = MakeWorkflow("etl", "vision", 1000);
    ASSERT_TRUE(store->CreateWorkflow(w).ok());
    ASSERT_TRUE(store->SaveWorkflow(w, {{"etl", "etl", "Failed", "", "{}"},
                                        {"etl", "etl-1", "Failed", "etl-a", "{}"},
                                        {"etl", "etl-2", "Failed", "etl-b", "{}"}}).ok());
    ASSERT_TRUE(store->SaveWorkflow(w, {{"etl", "etl", "Running", "", "{}"}}, {"etl-1", "etl-2"}).ok());
  }
  auto store = Open();
  auto nodes = store->ListWorkflowNodes("etl");
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].phase, "Running");
  auto gone = store->WorkflowNodeOfJob("etl-a");
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
}

TEST_P(StoreConformance, NodesAreReplacedOneByOneAndFoundByTheirJob) {
  {
    auto store = Open();
    WorkflowRecord w = MakeWorkflow("etl", "vision", 1000);
    ASSERT_TRUE(store->CreateWorkflow(w).ok());
    ASSERT_TRUE(store->SaveWorkflow(w, {{"etl", "etl", "Running", "", R"({"type":"DAG"})"},
                                        {"etl", "etl-1", "Running", "etl-extract", "{}"}}).ok());
    ASSERT_TRUE(store->SaveWorkflow(w, {{"etl", "etl-1", "Succeeded", "etl-extract", R"({"x":1})"}}).ok());
    WorkflowRecord other = MakeWorkflow("other", "vision", 1001);
    ASSERT_TRUE(store->CreateWorkflow(other).ok());
    EXPECT_EQ(store->SaveWorkflow(other, {{"etl", "etl-9", "Running", "", "{}"}}).code(),
              StatusCode::kInvalidArgument);
  }
  auto store = Open();  // as after a restart
  auto nodes = store->ListWorkflowNodes("etl");
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[1].phase, "Succeeded");
  EXPECT_EQ((*nodes)[1].body, R"({"x":1})");
  auto of_job = store->WorkflowNodeOfJob("etl-extract");
  ASSERT_TRUE(of_job.ok());
  ASSERT_TRUE(of_job->has_value());
  EXPECT_EQ((*of_job)->id, "etl-1");
  EXPECT_FALSE(store->WorkflowNodeOfJob("not-a-step")->has_value());
  EXPECT_FALSE(store->WorkflowNodeOfJob("")->has_value());
  ASSERT_TRUE(store->DeleteWorkflow("etl").ok());
  EXPECT_TRUE(store->ListWorkflowNodes("etl")->empty());
  EXPECT_FALSE(store->WorkflowNodeOfJob("etl-extract")->has_value());
}

TEST_P(StoreConformance, TemplatesAndCronWorkflowsAreKeptByKindAndName) {
  auto store = Open();
  WorkflowManifestRecord t{"WorkflowTemplate", "etl", "vision", "{}", FromUnixMillis(1),
                           FromUnixMillis(1), 0};
  ASSERT_TRUE(store->CreateWorkflowManifest(t).ok());
  EXPECT_EQ(store->CreateWorkflowManifest(t).code(), StatusCode::kConflict);
  WorkflowManifestRecord cron{"CronWorkflow", "etl", "nlp", "{}", FromUnixMillis(2),
                              FromUnixMillis(2), 0};
  ASSERT_TRUE(store->CreateWorkflowManifest(cron).ok()) << "the same name under another kind";
  WorkflowManifestRecord stale = *store->GetWorkflowManifest("WorkflowTemplate", "etl");
  t.body = R"({"spec":{}})";
  t.updated_at = FromUnixMillis(5);
  ASSERT_TRUE(store->UpdateWorkflowManifest(t).ok());
  EXPECT_EQ(t.revision, 2);
  stale.body = "{}";
  EXPECT_EQ(store->UpdateWorkflowManifest(stale).code(), StatusCode::kConflict);
  EXPECT_EQ(store->GetWorkflowManifest("WorkflowTemplate", "etl")->body, R"({"spec":{}})");
  EXPECT_EQ(store->ListWorkflowManifests("WorkflowTemplate", "")->size(), 1u);
  EXPECT_EQ(store->ListWorkflowManifests("CronWorkflow", "vision")->size(), 0u);
  ASSERT_TRUE(store->DeleteWorkflowManifest("CronWorkflow", "etl").ok());
  EXPECT_EQ(store->GetWorkflowManifest("CronWorkflow", "etl").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->DeleteWorkflowManifest("CronWorkflow", "etl").code(), StatusCode::kNotFound);
}

TEST_P(StoreConformance, NotebooksAreKeptWithTheirSecretEnvironmentAndListedByTeam) {
  auto store = Open();
  NotebookRecord lab;
  lab.name = "lab";
  lab.team = "vision";
  lab.created_by = "user/alice";
  lab.profile = "gpu";
  lab.gpus = 1;
  lab.job = "notebook-lab-1";
  lab.starts = 1;
  lab.created_at = FromUnixMillis(5000);
  lab.server_env_json = R"({"JUPYTER_TOKEN":"secret"})";
  ASSERT_TRUE(store->CreateNotebook(lab).ok());
  EXPECT_EQ(store->CreateNotebook(lab).code(), StatusCode::kConflict);
  NotebookRecord hub = lab;
  hub.name = "hub-bob";
  hub.team = "nlp";
  hub.hub_user = "bob";
  ASSERT_TRUE(store->CreateNotebook(hub).ok());

  lab.state = NotebookState::kCulled;
  lab.message = "culled after 1h idle";
  lab.cull_warned_at = FromUnixMillis(9000);
  ASSERT_TRUE(store->SaveNotebook(lab).ok());
  auto read = store->GetNotebook("lab");
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->state, NotebookState::kCulled);
  EXPECT_EQ(read->message, "culled after 1h idle");
  EXPECT_EQ(read->cull_warned_at, FromUnixMillis(9000));
  EXPECT_EQ(read->server_env_json, R"({"JUPYTER_TOKEN":"secret"})");
  EXPECT_EQ(read->gpus, 1);
  EXPECT_EQ(store->GetNotebook("hub-bob")->hub_user, "bob");

  auto vision = store->ListNotebooks("vision");
  ASSERT_TRUE(vision.ok());
  ASSERT_EQ(vision->size(), 1u);
  EXPECT_EQ(vision->front().name, "lab");
  EXPECT_EQ(store->ListNotebooks("")->size(), 2u);

  ASSERT_TRUE(store->DeleteNotebook("lab").ok());
  EXPECT_EQ(store->GetNotebook("lab").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->DeleteNotebook("lab").code(), StatusCode::kNotFound);
  NotebookRecord missing;
  missing.name = "missing";
  EXPECT_EQ(store->SaveNotebook(missing).code(), StatusCode::kNotFound);
}

TEST(StoreUrl, PasswordsNeverReachALog) {
  EXPECT_EQ(RedactedStoreUrl("postgresql://ann:s3cret@db.example:5432/headway"),
            "postgresql://ann:***@db.example:5432/headway");
  EXPECT_EQ(RedactedStoreUrl("postgresql://ann@db/headway?sslmode=require&password=s3cret&x=1"),
            "postgresql://ann@db/headway?sslmode=require&password=***&x=1");
  EXPECT_EQ(RedactedStoreUrl("postgresql://ann@db/headway"), "postgresql://ann@db/headway");
  EXPECT_EQ(RedactedStoreUrl("sqlite:///var/lib/headway/headway.db"),
            "sqlite:///var/lib/headway/headway.db");
}

TEST(StoreUrl, UnknownKindsAndRelativeSqlitePathsAreRefused) {
  auto unknown = OpenStore("mongodb://ann:s3cret@db/headway");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message().find("s3cret"), std::string::npos);
  auto relative = OpenStore("sqlite://headway.db");
  ASSERT_FALSE(relative.ok());
  EXPECT_NE(relative.status().message().find("absolute path"), std::string::npos);
}

TEST(StoreUrl, AnUnreachablePostgresqlIsUnavailable) {
  auto store = OpenStore("postgresql://headway@127.0.0.1:1/headway?connect_timeout=2");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable);
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreConformance, ::testing::Values("sqlite", "postgresql", "mysql"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace headway
