// What the loops' fake-clock tests stand on: a job controller over a real
// SQLite store in a temporary directory, with the fake executor and a
// ManualClock. A fixture derives from it, calls StartJobs in its SetUp and
// builds its own controller over jobs_.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "fake_executor.h"
#include "server/job_controller.h"
#include "store/store.h"

namespace headway {

class JobControllerFixture : public ::testing::Test {
 public:
  // Where the fixture's clock starts.
  static constexpr std::int64_t kStartMillis = 1'800'000'000'000;

 protected:
  void StartJobs(int total_gpus) {
    std::string pattern = (std::filesystem::temp_directory_path() / "headway-loop-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    auto store = OpenSqliteStore(dir_ + "/headway.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    ControllerOptions options;
    options.total_gpus = total_gpus;
    options.data_dir = dir_;
    options.advertise_url = "http://127.0.0.1:1";
    jobs_ = std::make_unique<JobController>(
        *store_, std::map<std::string, Executor*>{{"local", &executor_}}, clock_, options);
    ASSERT_TRUE(jobs_->Reconcile().ok());
  }
  // After the derived fixture's controller is gone.
  void TearDown() override {
    jobs_.reset();
    store_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Whether the latest attempt of job `name` got any signal.
  bool Signalled(const std::string& name) {
    const std::string handle = executor_.AttemptOf(name).first;
    for (const auto& [h, signal] : executor_.signals()) {
      if (h == handle) return true;
    }
    return false;
  }
  // Events of job `name` of `type`.
  std::vector<JobEvent> EventsOf(const std::string& name, const std::string& type) {
    std::vector<JobEvent> out;
    auto events = jobs_->Events(name, 0);
    if (events.ok()) {
      for (const JobEvent& e : *events) {
        if (e.type == type) out.push_back(e);
      }
    }
    return out;
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
  ManualClock clock_{FromUnixMillis(kStartMillis)};
  FakeExecutor executor_;
  std::unique_ptr<JobController> jobs_;
};

}  // namespace headway
