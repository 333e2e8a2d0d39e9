// The job controller driven tick by tick with a ManualClock, a fake executor
// (it records launches and signals and exits attempts when told) and a real
// SQLite store in a temporary directory: preemption, deadlines, restarts,
// stops and recovery without a process or a sleep. What needs a real
// process stays in tests/integration.
#include "server/job_controller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include "fake_executor.h"

namespace headway {
namespace {

using std::chrono::seconds;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

const Time kT0 = FromUnixMillis(1'800'000'000'000);

void WriteFileForTest(const std::string& path) { std::ofstream(path) << "x"; }

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/headway-controller-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    auto store = OpenSqliteStore(dir_ + "/headway.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    options_.total_gpus = 1;
    options_.data_dir = dir_;
    options_.advertise_url = "http://127.0.0.1:1";
    options_.preemption_grace = seconds(20);
    options_.scheduling.preemption = true;
    Start();
  }
  void TearDown() override {
    controller_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  // A new controller over the same store and executor: a server restart.
  void Start() {
    controller_ = std::make_unique<JobController>(
        *store_, std::map<std::string, Executor*>{{"local", &executor_}}, clock_, options_);
    ASSERT_TRUE(controller_->Reconcile().ok());
  }

  void Submit(const std::string& name, int gpus, int priority = 0,
              std::function<void(JobSpec&)> more = {}) {
    JobSpec spec;
    spec.name = name;
    spec.command = {"train"};
    spec.priority = priority;
    spec.resources.gpus_per_process = gpus;
    spec.termination_grace = seconds(30);
    if (more) more(spec);
    ASSERT_TRUE(controller_->Submit(spec, "user/test").ok());
  }
  Job Get(const std::string& name) {
    auto job = controller_->Get(name);
    EXPECT_TRUE(job.ok());
    return job.ok() ? *job : Job{};
  }
  std::vector<int> SignalsTo(const std::string& handle) {
    std::vector<int> out;
    for (const auto& [h, signal] : executor_.signals()) {
      if (h == handle) out.push_back(signal);
    }
    return out;
  }
  void Tick(Duration advance = Duration(0)) {
    clock_.Advance(advance);
    controller_->Tick();
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
  ManualClock clock_{kT0};
  FakeExecutor executor_;
  ControllerOptions options_;
  std::unique_ptr<JobController> controller_;
};

TEST_F(ControllerTest, AJobIsLaunchedOnceOnItsGpusAndSucceeds) {
  Submit("train", 1);
  Tick();
  Job job = Get("train");
  EXPECT_EQ(job.state, JobState::kRunning);
  ASSERT_EQ(executor_.launches().size(), 1u);
  EXPECT_EQ(executor_.gpus(job.executor_handle), std::vector<int>{0});
  Tick(seconds(1));
  EXPECT_EQ(executor_.launches().size(), 1u);
  executor_.Exit(job.executor_handle, 0);
  Tick(seconds(1));
  EXPECT_EQ(Get("train").state, JobState::kSucceeded);
  EXPECT_THAT(Get("train").gpu_ids, IsEmpty());
}

TEST_F(ControllerTest, PreemptionWarnsTerminatesAfterTheGraceAndRequeues) {
  Submit("small", 1, /*priority=*/0);
  Tick();
  const std::string small = Get("small").executor_handle;
  Submit("urgent", 1, /*priority=*/10);
  Tick(seconds(1));
  EXPECT_THAT(SignalsTo(small), ElementsAre(SIGUSR1));
  EXPECT_EQ(Get("urgent").state, JobState::kQueued);  // the GPU is not free yet
  Tick(seconds(19));
  EXPECT_THAT(SignalsTo(small), ElementsAre(SIGUSR1));
  Tick(seconds(1));  // the preemption grace (20 s) is over
  EXPECT_THAT(SignalsTo(small), ElementsAre(SIGUSR1, SIGTERM));
  executor_.Exit(small, 143);
  Tick(seconds(1));
  EXPECT_EQ(Get("small").state, JobState::kPreempted);
  EXPECT_EQ(Get("small").attempt(), 1);
  EXPECT_EQ(Get("urgent").state, JobState::kRunning);
  // When the urgent job ends, the preempted one resumes as attempt 1.
  executor_.Exit(Get("urgent").executor_handle, 0);
  Tick(seconds(1));
  Tick(seconds(1));
  EXPECT_EQ(Get("small").state, JobState::kRunning);
  EXPECT_EQ(executor_.launches().back(), dir_ + "/jobs/small/attempt-1");
}

TEST_F(ControllerTest, TheTimeLimitWarnsThenStopsAndFailsTheJob) {
  Submit("bounded", 1, 0, [](JobSpec& spec) {
    spec.time_limit = std::chrono::minutes(10);
    spec.checkpoint_warning = std::chrono::minutes(1);
  });
  Tick();
  const std::string handle = Get("bounded").executor_handle;
  Tick(std::chrono::minutes(9));
  EXPECT_THAT(SignalsTo(handle), ElementsAre(SIGUSR1));
  Tick(std::chrono::minutes(1));
  EXPECT_THAT(SignalsTo(handle), ElementsAre(SIGUSR1, SIGTERM));
  Tick(seconds(30));  // the termination grace
  EXPECT_THAT(SignalsTo(handle), ElementsAre(SIGUSR1, SIGTERM, SIGKILL));
  executor_.Exit(handle, 137);
  Tick(seconds(1));
  EXPECT_EQ(Get("bounded").state, JobState::kFailed);
  EXPECT_EQ(Get("bounded").reason, "TimeLimitExceeded");
}

TEST_F(ControllerTest, AFailedAttemptRestartsAsANewAttempt) {
  Submit("flaky", 1, 0, [](JobSpec& spec) { spec.max_restarts = 1; });
  Tick();
  executor_.Exit(Get("flaky").executor_handle, 1);
  Tick(seconds(1));  // ends attempt 0, queues attempt 1 and launches it
  EXPECT_EQ(Get("flaky").state, JobState::kRunning);
  EXPECT_EQ(Get("flaky").restarts, 1);
  ASSERT_EQ(executor_.launches().size(), 2u);
  EXPECT_EQ(executor_.launches()[1], dir_ + "/jobs/flaky/attempt-1");
  executor_.Exit(Get("flaky").executor_handle, 1);
  Tick(seconds(1));
  EXPECT_EQ(Get("flaky").state, JobState::kFailed);
  EXPECT_EQ(executor_.launches().size(), 2u);
}

TEST_F(ControllerTest, AStopDoesNotWaitForALaunchUnderWayAndReachesTheAttemptOnceStarted) {
  Submit("slow", 1);
  executor_.HoldLaunches(true);  // a cluster engine that takes its time
  std::thread loop([&] { controller_->Tick(); });
  executor_.WaitForHeldLaunch();
  auto stop = std::async(std::launch::async, [&] { return controller_->Stop("slow", "by alice"); });
  // Answered while the executor is still launching: the executor is never
  // called holding the lock that API calls take.
  ASSERT_EQ(stop.wait_for(seconds(10)), std::future_status::ready);
  ASSERT_TRUE(stop.get().ok());
  EXPECT_EQ(Get("slow").state, JobState::kStarting);
  executor_.HoldLaunches(false);
  loop.join();
  const std::string handle = Get("slow").executor_handle;
  ASSERT_FALSE(handle.empty());
  EXPECT_THAT(SignalsTo(handle), ElementsAre(SIGTERM));
  executor_.Exit(handle, 143);
  Tick(seconds(1));
  EXPECT_EQ(Get("slow").state, JobState::kStopped);
}

TEST_F(ControllerTest, ARestartAdoptsAnAttemptWhoseLaunchWasNotRecorded) {
  Submit("once", 1);
  Tick();
  // As if the server died after the executor started the attempt but
  // before its handle was stored: the record holds only the intent.
  Job job = Get("once");
  const std::string handle = job.executor_handle;
  job.state = JobState::kStarting;
  job.executor_handle.clear();
  ASSERT_TRUE(store_->SaveJob(job, {}).ok());
  Start();
  EXPECT_EQ(Get("once").executor_handle, handle);
  EXPECT_EQ(Get("once").state, JobState::kRunning);
  Tick(seconds(1));
  EXPECT_EQ(executor_.launches().size(), 1u);
}

TEST_F(ControllerTest, ARestartLaunchesAnAttemptThatNeverStartedExactlyOnce) {
  Submit("once", 1);
  Tick();
  Job job = Get("once");
  executor_.Forget(job.executor_handle);  // the launch never happened
  job.state = JobState::kStarting;
  job.executor_handle.clear();
  ASSERT_TRUE(store_->SaveJob(job, {}).ok());
  Start();
  EXPECT_EQ(Get("once").state, JobState::kQueued);
  Tick(seconds(1));
  EXPECT_EQ(Get("once").state, JobState::kRunning);
  EXPECT_EQ(executor_.launches().size(), 2u);  // the forgotten one, then one more
  EXPECT_EQ(Get("once").attempt(), 0);
}

// A restart while the executor cannot say whether the interrupted launch
// reached it (slurmctld down): the job neither runs twice nor is given up;
// it waits, holding its intent, until the executor answers.
TEST_F(ControllerTest, ARestartThatCannotTellWhetherALaunchStartedAsksAgainInsteadOfRelaunching) {
  Submit("once", 1);
  Tick();
  Job job = Get("once");
  const std::string handle = job.executor_handle;
  job.state = JobState::kStarting;
  job.executor_handle.clear();
  ASSERT_TRUE(store_->SaveJob(job, {}).ok());
  executor_.SetUnreachable(true);
  Start();
  EXPECT_EQ(Get("once").state, JobState::kStarting);
  for (int i = 0; i < 5; ++i) Tick(seconds(2));
  EXPECT_EQ(Get("once").state, JobState::kStarting);
  EXPECT_EQ(executor_.launches().size(), 1u);
  EXPECT_GE(executor_.find_calls(), 5);
  auto events = store_->ListEvents("once");
  ASSERT_TRUE(events.ok());
  int unresolved = 0;
  for (const JobEvent& e : *events) unresolved += e.type == "LaunchUnresolved";
  EXPECT_EQ(unresolved, 1) << "said once, not every tick";
  executor_.SetUnreachable(false);
  Tick(seconds(2));
  EXPECT_EQ(Get("once").executor_handle, handle);
  EXPECT_EQ(Get("once").state, JobState::kRunning);
  Tick(seconds(2));
  EXPECT_EQ(executor_.launches().size(), 1u);
}

TEST_F(ControllerTest, AStopOfALaunchNobodyCanResolveYetEndsItOnceTheExecutorAnswers) {
  Submit("once", 1);
  Tick();
  Job job = Get("once");
  executor_.Forget(job.executor_handle);  // the launch never reached the executor
  job.state = JobState::kStarting;
  job.executor_handle.clear();
  ASSERT_TRUE(store_->SaveJob(job, {}).ok());
  executor_.SetUnreachable(true);
  Start();
  ASSERT_TRUE(controller_->Stop("once", "by alice").ok());
  Tick(seconds(2));
  EXPECT_EQ(Get("once").state, JobState::kStarting);
  executor_.SetUnreachable(false);
  Tick(seconds(2));
  EXPECT_EQ(Get("once").state, JobState::kStopped);
  Tick(seconds(2));
  EXPECT_EQ(executor_.launches().size(), 1u) << "never launched again";
}

TEST_F(ControllerTest, ARestartRepeatsTheSigtermOfAStopItMayNotHaveSent) {
  Submit("stopping", 1);
  Tick();
  const std::string handle = Get("stopping").executor_handle;
  ASSERT_TRUE(controller_->Stop("stopping", "by alice").ok());
  Start();
  EXPECT_THAT(SignalsTo(handle), ElementsAre(SIGTERM, SIGTERM));
  Tick(seconds(30));
  EXPECT_THAT(SignalsTo(handle), ElementsAre(SIGTERM, SIGTERM, SIGKILL));
}

TEST_F(ControllerTest, AStopThatCannotBeStoredIsRefusedAndSignalsNothing) {
  Submit("kept", 1);
  Tick();
  const std::string handle = Get("kept").executor_handle;
  // Another connection holds the database's write lock past the store's
  // busy timeout: the stop cannot be stored.
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/headway.db").c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  auto stopped = controller_->Stop("kept", "by alice");
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  EXPECT_FALSE(stopped.ok());
  EXPECT_THAT(SignalsTo(handle), IsEmpty());
  EXPECT_FALSE(Get("kept").stop_requested_at);
  // Once the store takes writes again, the stop goes through.
  ASSERT_TRUE(controller_->Stop("kept", "by alice").ok());
  EXPECT_THAT(SignalsTo(handle), ElementsAre(SIGTERM));
}

// A job that ends while leadership moves (or the server restarts): the
// reports it wrote after the last scan are filed before it is ended.
TEST_F(ControllerTest, ARestartFilesTheLastOutputOfAnAttemptThatEndedMeanwhile) {
  Submit("train", 1);
  Tick();
  Job job = Get("train");
  const std::string log = executor_.launches().at(0) + "/rank-0.log";
  auto write = [&](int first, int last) {
    std::ofstream out(log, std::ios::app);
    for (int step = first; step <= last; ++step) {
      out << "HEADWAY {\"step\": " << step << ", \"total_steps\": 60, \"loss\": " << 1.0 / step
          << "}\n";
    }
  };
  write(1, 57);
  Tick(seconds(1));
  // Its last lines, then its end, while no server watches.
  write(58, 60);
  executor_.Exit(job.executor_handle, 0);
  Start();
  ASSERT_EQ(Get("train").state, JobState::kSucceeded);
  auto steps = store_->RecentSteps("train", 100);
  ASSERT_TRUE(steps.ok());
  ASSERT_FALSE(steps->empty());
  EXPECT_EQ(steps->back().step, 60);
  int losses = 0;
  ASSERT_TRUE(store_->ScanMetric("train", "loss", [&](const MetricPoint&) { ++losses; }).ok());
  EXPECT_EQ(losses, 60);
}

// The server that launched an attempt stopped (it lost the database) before
// the attempt's log files were indexed: the server that takes over finds
// them from the executor, so the markers its ranks write are read.
TEST_F(ControllerTest, ATakeoverIndexesTheLogsOfAnAttemptWhoseLauncherStoppedFirst) {
  Submit("train", 1);
  Tick();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/headway.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DELETE FROM job_logs", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  {
    std::ofstream out(executor_.launches().at(0) + "/rank-0.log");
    for (int step = 1; step <= 5; ++step) out << "HEADWAY {\"step\": " << step << "}\n";
  }
  Start();
  Tick(seconds(1));
  controller_.reset();  // its writer files what it queued before it goes
  auto steps = store_->RecentSteps("train", 100);
  ASSERT_TRUE(steps.ok());
  ASSERT_EQ(steps->size(), 5u);
  EXPECT_EQ(steps->back().step, 5);
}

TEST_F(ControllerTest, TheAnnouncedHealthSurvivesARestart) {
  Submit("quiet", 1);
  Tick();
  Job job = Get("quiet");
  job.health = Health::kStalled;
  ASSERT_TRUE(store_->SaveJob(job, {}).ok());
  Start();
  EXPECT_EQ(Get("quiet").health, Health::kStalled);
}

TEST_F(ControllerTest, AnEndedJobIsDeletedWithItsRecordAndFilesAndItsNameIsFreeAgain) {
  Submit("train", 1);
  Tick();
  Job job = Get("train");
  const std::string run_dir = executor_.launches().at(0);
  ASSERT_TRUE(std::filesystem::exists(run_dir));
  // Not ended: refused, and nothing is touched.
  auto refused = controller_->Delete("train", /*when_ended=*/false);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kConflict);
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("--force"));
  executor_.Exit(job.executor_handle, 0);
  Tick(seconds(1));
  ASSERT_EQ(Get("train").state, JobState::kSucceeded);
  ASSERT_TRUE(controller_->Delete("train", false).ok());
  EXPECT_EQ(controller_->Get("train").status().code(), StatusCode::kNotFound);
  auto logs = store_->ListLogFiles("train");
  ASSERT_TRUE(logs.ok());
  EXPECT_THAT(logs.value(), IsEmpty());
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(dir_) / "jobs" / "train"));
  EXPECT_EQ(controller_->Delete("train", false).status().code(), StatusCode::kNotFound);
  // The same name runs again, as a new job.
  Submit("train", 1);
  Tick();
  EXPECT_EQ(Get("train").state, JobState::kRunning);
  EXPECT_EQ(Get("train").attempt(), 0);
}

TEST_F(ControllerTest, ARestartRemovesRunDirectoriesADeleteLeftMovedAside) {
  const auto left = std::filesystem::path(dir_) / "jobs" / ".deleted-train-abcdefghij";
  std::filesystem::create_directories(left / "checkpoints");
  WriteFileForTest((left / "checkpoints" / "model.pt").string());
  std::filesystem::create_directories(std::filesystem::path(dir_) / "jobs" / "kept");
  Start();
  EXPECT_FALSE(std::filesystem::exists(left));
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(dir_) / "jobs" / "kept"));
}

TEST_F(ControllerTest, AForcedDeleteStopsARunningJobAndDeletesItOnceItEnded) {
  Submit("train", 1);
  Tick();
  const std::string handle = Get("train").executor_handle;
  auto deleting = controller_->Delete("train", /*when_ended=*/true);
  ASSERT_TRUE(deleting.ok()) << deleting.status().ToString();
  EXPECT_EQ(deleting->state, JobState::kRunning);
  EXPECT_THAT(SignalsTo(handle), ElementsAre(SIGTERM));
  Tick(seconds(1));
  EXPECT_TRUE(Get("train").delete_requested_at.has_value());
  executor_.Exit(handle, 143);
  Tick(seconds(1));
  EXPECT_EQ(controller_->Get("train").status().code(), StatusCode::kNotFound);
  // A running trial would be submitted again by its experiment: not even with force.
  JobSpec trial;
  trial.name = "sweep-1";
  trial.command = {"train"};
  ASSERT_TRUE(controller_->Submit(trial, "experiment/sweep").ok());
  Tick();
  auto refused = controller_->Delete("sweep-1", true);
  EXPECT_EQ(refused.status().code(), StatusCode::kConflict);
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("experiment/sweep"));
  ASSERT_TRUE(controller_->Stop("sweep-1", "test").ok());
  executor_.Exit(Get("sweep-1").executor_handle, 143);
  Tick(seconds(1));
  ASSERT_TRUE(controller_->Delete("sweep-1", false).ok());
  // A queued job stops at once, so it goes at once.
  Submit("waiting", 1);
  Submit("queued", 1);
  Tick();
  ASSERT_EQ(Get("queued").state, JobState::kQueued);
  ASSERT_TRUE(controller_->Delete("queued", true).ok());
  EXPECT_EQ(controller_->Get("queued").status().code(), StatusCode::kNotFound);
}

TEST_F(ControllerTest, EndedJobsAreDeletedAfterTheirTtlOnTheControlLoop) {
  options_.finished_job_ttl = std::chrono::hours(1);
  options_.retention_interval = seconds(30);
  Start();
  Submit("short", 0, 0, [](JobSpec& spec) { spec.ttl_after_finished = seconds(60); });
  Submit("default", 0);
  Submit("running", 0);
  Tick();
  executor_.Exit(Get("short").executor_handle, 0);
  executor_.Exit(Get("default").executor_handle, 1);
  Tick(seconds(1));
  ASSERT_EQ(Get("short").state, JobState::kSucceeded);
  ASSERT_EQ(Get("default").state, JobState::kFailed);
  Tick(seconds(59));
  EXPECT_TRUE(controller_->Get("short").ok());  // 59 s after it ended
  Tick(seconds(31));
  EXPECT_EQ(controller_->Get("short").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(controller_->Get("default").ok());
  Tick(std::chrono::minutes(59));
  EXPECT_EQ(controller_->Get("default").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Get("running").state, JobState::kRunning);  // never before it ended
}

TEST_F(ControllerTest, ASilentJobGetsOneNoReportsEventAfterTheGrace) {
  options_.health.unknown_grace_s = 300;
  std::vector<std::string> changes;
  options_.on_change = [&](const Job&, const JobEvent& e) { changes.push_back(e.type); };
  Start();
  Submit("silent", 1);
  Tick();
  Tick(seconds(299));
  auto count = [&] {
    auto events = store_->ListEvents("silent");
    EXPECT_TRUE(events.ok());
    if (!events.ok()) return -1;
    std::vector<JobEvent> list = std::move(events.value());
    return static_cast<int>(std::count_if(list.begin(), list.end(),
                                          [](const JobEvent& e) { return e.type == "NoReports"; }));
  };
  EXPECT_EQ(count(), 0);
  Tick(seconds(2));
  EXPECT_EQ(count(), 1);
  EXPECT_THAT(changes, Contains("NoReports"));  // the path webhooks follow
  EXPECT_THAT(Get("silent").health_reason, ::testing::HasSubstr("no progress reported"));
  Tick(seconds(60));
  Start();  // not said again after a restart
  Tick(seconds(60));
  EXPECT_EQ(count(), 1);
}

TEST_F(ControllerTest, AGeneratedNameIsThePrefixAndFiveCharacters) {
  JobSpec spec;
  spec.generate_name = "sweep-";
  spec.command = {"train"};
  auto a = controller_->Submit(spec, "user/test");
  auto b = controller_->Submit(spec, "user/test");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_THAT(a->name(), ::testing::MatchesRegex("sweep-[a-z0-9]{5}"));
  EXPECT_NE(a->name(), b->name());
  EXPECT_TRUE(controller_->Get(a->name()).ok());
}

}  // namespace
}  // namespace headway
