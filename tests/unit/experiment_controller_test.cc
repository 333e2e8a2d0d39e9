// The experiment controller driven tick by tick with a ManualClock, over a
// real job controller (with the fake executor) and a real SQLite store:
// trials start up to the parallelism and the trial budget, their reported
// objective picks the best, failures past the bound fail the experiment, a
// goal reached ends it, and stopping it stops its running trials. No process
// and no sleep.
#include "server/experiment_controller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "job_controller_fixture.h"

namespace headway {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

std::string Spec(int max_trials, int parallel, int max_failed, const std::string& goal = "") {
  return "name: sweep\n"
         "objective: {metric: loss, direction: minimize" +
         (goal.empty() ? std::string() : ", goal: " + goal) +
         "}\n"
         "algorithm: {name: random, seed: 7}\n"
         "parameters:\n"
         "  - {name: lr, type: double, min: 0.001, max: 0.1}\n"
         "max_trials: " +
         std::to_string(max_trials) +
         "\n"
         "parallel_trials: " +
         std::to_string(parallel) +
         "\n"
         "max_failed_trials: " +
         std::to_string(max_failed) +
         "\n"
         "trial_template:\n"
         "  command: [train, --lr, \"${params.lr}\"]\n"
         "  resources: {gpus_per_process: 1}\n";
}

class ExperimentControllerTest : public JobControllerFixture {
 protected:
  void SetUp() override {
    StartJobs(4);
    experiments_ = std::make_unique<ExperimentController>(*store_, *jobs_, clock_);
  }
  void TearDown() override {
    experiments_.reset();
    JobControllerFixture::TearDown();
  }

  // One pass of each loop, as the server runs them, after `advance`.
  void Tick(Duration advance = seconds(1)) {
    clock_.Advance(advance);
    experiments_->Tick();
    jobs_->Tick();
  }
  api::ExperimentView View() {
    auto view = experiments_->GetExperiment("sweep");
    EXPECT_TRUE(view.ok()) << view.status().ToString();
    return view.ok() ? *view : api::ExperimentView{};
  }
  std::vector<std::string> RunningTrialJobs() {
    std::vector<std::string> out;
    for (const auto& t : View().trials) {
      if (t.record.state == TrialState::kRunning && t.job_state == "Running") {
        out.push_back(t.record.job);
      }
    }
    return out;
  }
  // The trial's job reports `loss` at step 10, then exits with `code`.
  void Finish(const std::string& job, std::optional<double> loss, int code = 0) {
    auto [handle, token] = executor_.AttemptOf(job);
    ASSERT_FALSE(handle.empty()) << job << " never launched";
    if (loss) {
      ProgressReport report;
      report.step = 10;
      report.metrics["loss"] = *loss;
      ASSERT_TRUE(jobs_->ReportProgress(job, token, {report}).ok());
    }
    executor_.Exit(handle, code);
  }

  std::unique_ptr<ExperimentController> experiments_;
};

TEST_F(ExperimentControllerTest, TrialsRunUpToTheParallelismAndTheBudgetAndTheBestIsKept) {
  ASSERT_TRUE(experiments_->CreateExperiment(Spec(5, 2, 0), dir_).ok());
  Tick();
  Tick();
  ASSERT_EQ(RunningTrialJobs().size(), 2u);
  EXPECT_EQ(executor_.launches().size(), 2u);
  // However many passes go by, no third trial starts while two run.
  for (int i = 0; i < 5; ++i) Tick(seconds(30));
  EXPECT_EQ(executor_.launches().size(), 2u);

  const double losses[] = {0.9, 0.3, 0.7, 0.5, 0.8};
  int finished = 0;
  while (finished < 5) {
    auto running = RunningTrialJobs();
    ASSERT_FALSE(running.empty()) << "after " << finished << " trials";
    ASSERT_LE(running.size(), 2u);
    Finish(running.front(), losses[finished++]);
    Tick();
    Tick();
  }
  for (int i = 0; i < 3; ++i) Tick();
  api::ExperimentView view = View();
  EXPECT_EQ(executor_.launches().size(), 5u) << "max_trials bounds the trials";
  EXPECT_EQ(view.record.state, ExperimentState::kSucceeded) << view.record.message;
  ASSERT_TRUE(view.best.has_value());
  EXPECT_DOUBLE_EQ(*view.trials[*view.best].record.objective, 0.3);
  EXPECT_THAT(view.record.message, HasSubstr("loss 0.3"));
}

TEST_F(ExperimentControllerTest, FailuresPastTheBoundFailTheExperimentAndStartNoMore) {
  ASSERT_TRUE(experiments_->CreateExperiment(Spec(10, 1, 1), dir_).ok());
  Tick();
  Tick();
  // A trial that exits 1, and one that succeeds without its objective: both failed.
  auto first = RunningTrialJobs();
  ASSERT_EQ(first.size(), 1u);
  Finish(first.front(), std::nullopt, 1);
  Tick();
  Tick();
  auto second = RunningTrialJobs();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second.front(), first.front());
  Finish(second.front(), std::nullopt, 0);
  for (int i = 0; i < 4; ++i) Tick();
  api::ExperimentView view = View();
  EXPECT_EQ(view.record.state, ExperimentState::kFailed);
  EXPECT_THAT(view.record.message, HasSubstr("2 trials failed (max_failed_trials 1)"));
  EXPECT_THAT(view.trials[1].record.message, HasSubstr("without reporting a finite 'loss'"));
  EXPECT_EQ(executor_.launches().size(), 2u);
}

TEST_F(ExperimentControllerTest, AGoalReachedEndsTheExperimentAndStopsTheOtherTrials) {
  ASSERT_TRUE(experiments_->CreateExperiment(Spec(10, 3, 0, "0.1"), dir_).ok());
  Tick();
  Tick();
  auto running = RunningTrialJobs();
  ASSERT_EQ(running.size(), 3u);
  Finish(running[0], 0.05);
  Tick();
  Tick();
  api::ExperimentView view = View();
  EXPECT_EQ(view.record.state, ExperimentState::kSucceeded);
  EXPECT_THAT(view.record.message, HasSubstr("goal"));
  // The other two are asked to stop (SIGTERM first), and nothing new starts.
  int stopped = 0;
  for (const std::string& job : {running[1], running[2]}) {
    const std::string handle = executor_.AttemptOf(job).first;
    for (const auto& [h, signal] : executor_.signals()) stopped += h == handle && signal == SIGTERM;
  }
  EXPECT_EQ(stopped, 2);
  EXPECT_EQ(executor_.launches().size(), 3u);
}

TEST_F(ExperimentControllerTest, StoppingAnExperimentStopsItsRunningTrials) {
  ASSERT_TRUE(experiments_->CreateExperiment(Spec(10, 2, 0), dir_).ok());
  Tick();
  Tick();
  auto running = RunningTrialJobs();
  ASSERT_EQ(running.size(), 2u);
  auto stopped = experiments_->StopExperiment("sweep");
  ASSERT_TRUE(stopped.ok()) << stopped.status().ToString();
  EXPECT_EQ(stopped->record.state, ExperimentState::kStopped);
  Tick();
  for (const std::string& job : running) {
    const std::string handle = executor_.AttemptOf(job).first;
    bool signalled = false;
    for (const auto& [h, signal] : executor_.signals()) signalled = signalled || h == handle;
    EXPECT_TRUE(signalled) << job;
  }
  for (int i = 0; i < 5; ++i) Tick(seconds(30));
  EXPECT_EQ(executor_.launches().size(), 2u);
}

}  // namespace
}  // namespace headway
