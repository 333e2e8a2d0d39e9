// An executor for controller tests driven tick by tick: it records launches
// and signals, and an attempt runs until the test exits it. No process.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exec/executor.h"

namespace headway {

inline ExecStatus Running() { return ExecStatus{ExecStatus::Phase::kRunning, 0, "", ""}; }

class FakeExecutor final : public Executor {
 public:
  std::string_view Name() const override { return "local"; }
  Status Admit(const JobSpec&) const override { return Status::Ok(); }

  Result<Launched> Launch(const LaunchRequest& request) override {
    std::unique_lock lock(mu_);
    if (hold_launches_) {
      launch_waiting_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !hold_launches_; });
    }
    std::string handle = "fake-" + std::to_string(++next_);
    launches_.push_back(request.run_dir);
    if (auto token = request.platform_env.find("HEADWAY_TOKEN");
        token != request.platform_env.end()) {
      by_job_[request.spec.name] = {handle, token->second};
    }
    gpus_[handle] = request.gpu_ids;
    by_run_dir_[request.run_dir] = handle;
    status_[handle] = Running();
    return Launched{handle, "fake attempt " + handle, {{0, request.run_dir + "/rank-0.log"}}, {}};
  }
  Result<std::optional<Launched>> FindLaunched(const LaunchRequest& request) override {
    std::lock_guard lock(mu_);
    ++find_calls_;
    if (unreachable_) return Unavailable("squeue: Unable to contact slurm controller");
    auto it = by_run_dir_.find(request.run_dir);
    if (it == by_run_dir_.end()) return std::optional<Launched>();
    return std::optional<Launched>(Launched{
        it->second, "fake attempt " + it->second, {{0, request.run_dir + "/rank-0.log"}}, {}});
  }
  // While set, FindLaunched cannot tell (a cluster engine that does not answer).
  void SetUnreachable(bool unreachable) {
    std::lock_guard lock(mu_);
    unreachable_ = unreachable;
  }
  int find_calls() {
    std::lock_guard lock(mu_);
    return find_calls_;
  }
  ExecStatus Poll(const std::string& handle) override {
    std::lock_guard lock(mu_);
    auto it = status_.find(handle);
    if (it == status_.end()) return ExecStatus{ExecStatus::Phase::kLost, 0, "unknown handle", ""};
    return it->second;
  }
  Status Signal(const std::string& handle, int signal) override {
    std::lock_guard lock(mu_);
    signals_.emplace_back(handle, signal);
    return Status::Ok();
  }

  void Exit(const std::string& handle, int code) {
    std::lock_guard lock(mu_);
    status_[handle] = ExecStatus{ExecStatus::Phase::kExited, code, "", ""};
  }
  // Forgets the attempt `run_dir` started, as if its launch never happened.
  void Forget(const std::string& handle) {
    std::lock_guard lock(mu_);
    for (auto it = by_run_dir_.begin(); it != by_run_dir_.end();) {
      it = it->second == handle ? by_run_dir_.erase(it) : std::next(it);
    }
    status_.erase(handle);
  }
  void HoldLaunches(bool hold) {
    std::lock_guard lock(mu_);
    hold_launches_ = hold;
    cv_.notify_all();
  }
  void WaitForHeldLaunch() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return launch_waiting_; });
  }
  std::vector<std::string> launches() {
    std::lock_guard lock(mu_);
    return launches_;
  }
  std::vector<std::pair<std::string, int>> signals() {
    std::lock_guard lock(mu_);
    return signals_;
  }
  // The latest attempt of job `name`: its handle and its report token.
  std::pair<std::string, std::string> AttemptOf(const std::string& name) {
    std::lock_guard lock(mu_);
    auto it = by_job_.find(name);
    return it == by_job_.end() ? std::pair<std::string, std::string>() : it->second;
  }
  std::vector<int> gpus(const std::string& handle) {
    std::lock_guard lock(mu_);
    return gpus_[handle];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_launches_ = false;
  bool launch_waiting_ = false;
  bool unreachable_ = false;
  int find_calls_ = 0;
  int next_ = 0;
  std::vector<std::string> launches_;
  std::vector<std::pair<std::string, int>> signals_;
  std::map<std::string, std::string> by_run_dir_;
  std::map<std::string, ExecStatus> status_;
  std::map<std::string, std::vector<int>> gpus_;
  std::map<std::string, std::pair<std::string, std::string>> by_job_;
};

}  // namespace headway
