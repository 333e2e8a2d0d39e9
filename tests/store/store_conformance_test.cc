// The Store's conformance suite (store_conformance.h): jobs, events,
// experiments, tokens, artifacts, workflows and notebooks, and store URLs.
// Progress and metrics are in store_progress_conformance_test.cc. A backend
// passes when it behaves as the Store interface says.
#include "store_conformance.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "store/store.h"

namespace headway {
namespace {

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
  job.spec.labels = {{"k\x7f",
                      "\xc2\x9b"
                      "31m"},
                     {"x", "\x1b[2J"}};
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
    ExperimentRecord e{"sweep", R"({"name":"sweep"})", ExperimentState::kRunning,
                       "",      FromUnixMillis(1000),  {}};
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

TEST_P(StoreConformance, DeletingAnExperimentTakesItsTrialsAndFreesTheName) {
  auto store = Open();
  ExperimentRecord e{"sweep", R"({"name":"sweep"})", ExperimentState::kStopped,
                     "",      FromUnixMillis(1000),  {}};
  ASSERT_TRUE(store->CreateExperiment(e).ok());
  ExperimentRecord other{"other", "{}", ExperimentState::kStopped, "", FromUnixMillis(1000), {}};
  ASSERT_TRUE(store->CreateExperiment(other).ok());
  for (std::int64_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(store
                    ->CreateTrial({"sweep",
                                   i,
                                   "sweep-" + std::to_string(i),
                                   "{}",
                                   TrialState::kCompleted,
                                   false,
                                   {},
                                   ""})
                    .ok());
  }
  ASSERT_TRUE(
      store->CreateTrial({"other", 0, "other-0", "{}", TrialState::kCompleted, false, {}, ""})
          .ok());
  ASSERT_TRUE(store->DeleteExperiment("sweep").ok());
  EXPECT_EQ(store->GetExperiment("sweep").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store->ListTrials("sweep")->empty());
  EXPECT_EQ(store->ListTrials("other")->size(), 1u);  // another's trials stay
  EXPECT_EQ(store->DeleteExperiment("sweep").code(), StatusCode::kNotFound);
  // The name and its trial indexes are free again.
  ASSERT_TRUE(store->CreateExperiment(e).ok());
  EXPECT_TRUE(
      store->CreateTrial({"sweep", 0, "sweep-0", "{}", TrialState::kRunning, false, {}, ""}).ok());
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

TEST_P(StoreConformance, ListsEventsOfEveryJobAfterAnIdByTypeWithALimit) {
  auto store = Open();
  EXPECT_EQ(*store->LastEventId(), 0);
  Job a = MakeJob("a"), b = MakeJob("b");
  ASSERT_TRUE(store->CreateJob(a, Submitted("a")).ok());
  ASSERT_TRUE(store->CreateJob(b, Submitted("b")).ok());
  auto event = [](const std::string& job, const std::string& type, const std::string& message) {
    return JobEvent{0, job, FromUnixMillis(2000), type, message};
  };
  ASSERT_TRUE(store
                  ->SaveJob(a, {event("a", "StateChanged", "Queued -> Starting"),
                                event("a", "Launched", "pid 1")})
                  .ok());
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
    ASSERT_TRUE(
        store->AddArtifactUse({"data-mnist", 1, "eval", std::nullopt, FromUnixMillis(8000)}).ok());
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
  ASSERT_TRUE(
      store->SaveWorkflow(first, {{"diamond", "diamond-1", "Running", "diamond-a", "{}"}}).ok());
  EXPECT_EQ(first.revision, 2);

  second.phase = "Failed";
  Status stale = store->SaveWorkflow(second, {{"diamond", "diamond-2", "Failed", "", "{}"}});
  EXPECT_EQ(stale.code(), StatusCode::kConflict) << stale.ToString();
  auto now = store->GetWorkflow("diamond");
  EXPECT_EQ(now->phase, "Running");
  EXPECT_EQ(now->revision, 2);
  EXPECT_EQ(store->ListWorkflowNodes("diamond")->size(), 1u)
      << "the stale save's node is not written";

  WorkflowRecord ghost = MakeWorkflow("ghost", "vision", 1);
  ghost.revision = 1;
  EXPECT_EQ(store->SaveWorkflow(ghost, {}).code(), StatusCode::kNotFound);
}

TEST_P(StoreConformance, NodesARetryRemovedAreGoneAfterARestart) {
  {
    auto store = Open();
    WorkflowRecord w = MakeWorkflow("etl", "vision", 1000);
    ASSERT_TRUE(store->CreateWorkflow(w).ok());
    ASSERT_TRUE(store
                    ->SaveWorkflow(w, {{"etl", "etl", "Failed", "", "{}"},
                                       {"etl", "etl-1", "Failed", "etl-a", "{}"},
                                       {"etl", "etl-2", "Failed", "etl-b", "{}"}})
                    .ok());
    ASSERT_TRUE(
        store->SaveWorkflow(w, {{"etl", "etl", "Running", "", "{}"}}, {"etl-1", "etl-2"}).ok());
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
    ASSERT_TRUE(store
                    ->SaveWorkflow(w, {{"etl", "etl", "Running", "", R"({"type":"DAG"})"},
                                       {"etl", "etl-1", "Running", "etl-extract", "{}"}})
                    .ok());
    ASSERT_TRUE(
        store->SaveWorkflow(w, {{"etl", "etl-1", "Succeeded", "etl-extract", R"({"x":1})"}}).ok());
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
                           FromUnixMillis(1),  0};
  ASSERT_TRUE(store->CreateWorkflowManifest(t).ok());
  EXPECT_EQ(store->CreateWorkflowManifest(t).code(), StatusCode::kConflict);
  WorkflowManifestRecord cron{"CronWorkflow",    "etl", "nlp", "{}", FromUnixMillis(2),
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
  EXPECT_EQ(store->GetWorkflowManifest("CronWorkflow", "etl").status().code(),
            StatusCode::kNotFound);
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

INSTANTIATE_TEST_SUITE_P(Backends, StoreConformance,
                         ::testing::Values("sqlite", "postgresql", "mysql"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace headway
