// The chaos run: on each backend, jobs report by stdout, HTTP, the Python SDK
// and Kubeflow's status endpoint while the servers are killed (-9) at random
// points of launch, report, stop and job end: the leader, a replica, the
// database's sessions (PostgreSQL and MariaDB, two servers on one database),
// or the only server (SQLite). Killed servers come back as a supervisor
// would bring them back. After each round it checks, against ledgers the jobs
// keep themselves:
//   - every acknowledged report and every logged marker is stored, once;
//   - no job started more often than it had attempts;
//   - every job reached the final state it should (Succeeded, or Stopped);
//   - no GPU is left held.
// and prints a summary: rounds, faults injected, anything lost or doubled.
//
// HEADWAY_CHAOS_ROUNDS (default 2) rounds per backend; HEADWAY_CHAOS_SEED
// repeats a run; HEADWAY_CHAOS_STRESS=1 saturates the CPUs and the disk with
// stress-ng (Debian's stress-ng) while it runs. CI runs the short default;
// the long run is
//   HEADWAY_CHAOS_ROUNDS=200 HEADWAY_CHAOS_STRESS=1 ctest --test-dir build -R 'chaos|databases'
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "test_databases.h"
#include "test_server.h"

namespace headway {
namespace {

using testing::TestServer;
using testing::WaitFor;
using namespace std::chrono_literals;

constexpr int kSteps = 30;
constexpr const char* kWays[] = {"stdout", "http", "kubeflow", "sdk"};

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

std::vector<std::int64_t> ReadSteps(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::int64_t> steps;
  std::int64_t step = 0;
  while (in >> step) steps.push_back(step);
  return steps;
}

int CountLines(const std::string& path) { return static_cast<int>(ReadSteps(path).size()); }

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// stress-ng on every CPU and the disk, for the run's length.
class Stress {
 public:
  explicit Stress(const std::string& dir) {
    if (EnvInt("HEADWAY_CHAOS_STRESS", 0) == 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      const std::string temp = "--temp-path=" + dir;
      ::execlp("stress-ng", "stress-ng", "--cpu", "0", "--cpu-load", "100", "--hdd", "1",
               "--hdd-bytes", "64M", temp.c_str(), "--quiet", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    std::this_thread::sleep_for(200ms);
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      ADD_FAILURE() << "stress-ng did not start (Debian package stress-ng)";
      pid_ = -1;
    }
  }
  ~Stress() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  bool on() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

struct Tally {
  int rounds = 0;
  std::map<std::string, int> faults;
  int jobs = 0;
  long reports = 0;  // reports the ledgers say must be stored
  int lost = 0;
  int doubled = 0;
  int ran_twice = 0;
  int new_attempts = 0;  // jobs with a second attempt (preempted): allowed, but told
  int preemptions = 0;
  int server_starts = 0;  // servers brought back after a fault
  int lost_lead = 0;      // leaders that stopped on losing the database
  int unfinished = 0;
  int wrong_state = 0;
  int gpus_held = 0;
  std::vector<std::string> findings;
  void Find(std::string what) {
    if (findings.size() < 40) findings.push_back(std::move(what));
  }
};

class Chaos : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() != "sqlite") {
      url_ = testing::CreateTestDatabase(GetParam(), "chaos");
      ASSERT_FALSE(url_.empty());
    }
  }
  void TearDown() override {
    servers_.clear();
    if (!url_.empty()) testing::DropTestDatabase(GetParam(), url_);
  }
  bool Replicated() const { return GetParam() != "sqlite"; }

  // A supervisor's loop: whatever exited (killed, or stopped on losing the
  // lead) is started again.
  void Supervise() {
    for (auto& server : servers_) {
      if (server->Running()) continue;
      if (server->LogSinceStart().find("lost the lead") != std::string::npos) ++tally_.lost_lead;
      server->Restart();
      ++tally_.server_starts;
    }
  }
  TestServer* Leader() {
    for (auto& server : servers_) {
      if (server->Running() && server->LogSinceStart().find("leading:") != std::string::npos) {
        return server.get();
      }
    }
    return nullptr;
  }
  TestServer* Replica() {
    TestServer* leader = Leader();
    for (auto& server : servers_) {
      if (server.get() != leader && server->Running()) return server.get();
    }
    return nullptr;
  }
  TestServer& Any() {
    Supervise();
    return *servers_[std::uniform_int_distribution<std::size_t>(0, servers_.size() - 1)(rng_)];
  }

  void KillDatabaseSessions() {
    const std::string db = url_.substr(url_.rfind('/') + 1);
    std::string error;
    if (GetParam() == "postgresql") {
      error = testing::ExecAsAdmin(GetParam(),
                                   "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                   "WHERE datname = '" +
                                       db + "'");
    } else {
      error = testing::ExecAsAdmin(
          GetParam(),
          "BEGIN NOT ATOMIC FOR c IN (SELECT id FROM information_schema.processlist WHERE db = '" +
              db + "') DO KILL CONNECTION c.id; END FOR; END");
    }
    EXPECT_EQ(error, "");
  }

  // One fault, now; returns its name.
  std::string InjectFault() {
    if (!Replicated()) {
      servers_[0]->Kill();
      return "kill -9 the server";
    }
    // HEADWAY_CHAOS_FAULT=0, 1 or 2 repeats one kind (to chase a finding).
    const int chosen = EnvInt("HEADWAY_CHAOS_FAULT", -1);
    switch (chosen >= 0 ? chosen : std::uniform_int_distribution<int>(0, 2)(rng_)) {
      case 0:
        if (TestServer* leader = Leader()) {
          leader->Kill();
          return "kill -9 the leader";
        }
        return "none (no leader at the time)";
      case 1:
        if (TestServer* replica = Replica()) {
          replica->Kill();
          return "kill -9 a replica";
        }
        return "none (no replica at the time)";
      default:
        KillDatabaseSessions();
        return "end the database's sessions";
    }
  }

  std::string Spec(const std::string& job, const std::string& way, int steps) {
    const std::string ledger = work_ + "/" + job;
    std::ostringstream yaml;
    yaml << "name: " << job << "\n"
         << "command: [\"/usr/bin/python3\", \"-u\", \"" HEADWAY_SOURCE_DIR
            "/tests/store/chaos_job.py\", \""
         << way << "\", \"" << ledger << "\", \"" << steps << "\"]\n"
         << "env: {PYTHONPATH: \"" HEADWAY_SOURCE_DIR "/sdk/python\"}\n"
         << "termination_grace: 5s\n"
         << "resources: {gpus_per_process: " << (way == "sdk" ? 0 : 1) << "}\n";
    return yaml.str();
  }

  nlohmann::json JobOn(const std::string& name) {
    for (int i = 0; i < 3; ++i) {
      nlohmann::json job = Any().Job(name);
      if (job.is_object() && job["state"].is_string()) return job;
    }
    return nullptr;
  }

  std::vector<std::int64_t> StoredSteps(const std::string& job) {
    for (int i = 0; i < 20; ++i) {
      auto series = Any().Http().Request("GET", "/api/v1/jobs/" + job + "/metrics/loss");
      // (404: a job stopped before it reported has no series.)
      if (series.ok() && series->status == 404) return {};
      if (series.ok() && series->status == 200) {
        std::vector<std::int64_t> steps;
        const nlohmann::json body = nlohmann::json::parse(series->body);
        for (const auto& p : body["points"]) {
          steps.push_back(p["step"].get<std::int64_t>());
        }
        return steps;
      }
      std::this_thread::sleep_for(200ms);
    }
    ADD_FAILURE() << "no server answered for the series of " << job;
    return {};
  }

  void CheckJob(const std::string& job, const std::string& way, const std::string& expected) {
    ++tally_.jobs;
    nlohmann::json state;
    const bool final = WaitFor(
        [&] {
          Supervise();
          state = JobOn(job);
          const std::string s = state.is_object() ? state["state"].get<std::string>() : "";
          return s == "Succeeded" || s == "Failed" || s == "Stopped" || s == "Lost";
        },
        180s);
    if (!final) {
      ++tally_.unfinished;
      tally_.Find(job + ": no final state: " + state.dump());
      return;
    }
    if (state["state"] != expected) {
      ++tally_.wrong_state;
      tally_.Find(job + ": " + state["state"].get<std::string>() + ", not " + expected + ": " +
                  state.value("message", std::string()));
    }
    const std::string ledger = work_ + "/" + job;
    // Attempts: the first, and one more per restart or preemption.
    const int attempts = state.value("attempt", 0) + 1;
    const int starts = CountLines(ledger + ".starts");
    if (attempts > 1) ++tally_.new_attempts;
    if (starts > attempts) {
      ++tally_.ran_twice;
      tally_.Find(job + ": started " + std::to_string(starts) + " times for " +
                  std::to_string(attempts) + " attempt(s)");
    }
    if (way == "none") return;  // reports nothing
    // What must be stored: logged markers; acknowledged HTTP and Kubeflow
    // reports; the SDK's points once flush() said they were all taken.
    std::vector<std::int64_t> owed;
    if (way == "stdout") owed = ReadSteps(ledger + ".sent");
    if (way == "http" || way == "kubeflow") owed = ReadSteps(ledger + ".acked");
    if (way == "sdk" && FirstLine(ledger + ".flushed") == "yes") owed = ReadSteps(ledger + ".sent");
    if (way == "sdk" && expected == "Succeeded" && FirstLine(ledger + ".flushed") != "yes") {
      tally_.Find(job + ": the SDK's flush() did not succeed");
    }
    tally_.reports += static_cast<long>(owed.size());
    std::vector<std::int64_t> stored = StoredSteps(job);
    std::multiset<std::int64_t> counted(stored.begin(), stored.end());
    bool told = false;
    for (std::int64_t step : owed) {
      if (counted.count(step) == 0) {
        if (!told) {  // what the server says happened to it, once per job
          told = true;
          std::string history;
          for (const auto& e : Any().Events(job)) {
            history += "\n                 " + e.value("type", std::string()) + ": " +
                       e.value("message", std::string());
          }
          tally_.Find(job + "'s events:" + history);
        }
        ++tally_.lost;
        tally_.Find(job + ": step " + std::to_string(step) + " lost (" +
                    std::to_string(stored.size()) + " points stored)");
      }
    }
    for (std::int64_t step : std::set<std::int64_t>(stored.begin(), stored.end())) {
      if (counted.count(step) > 1) {
        ++tally_.doubled;
        tally_.Find(job + ": step " + std::to_string(step) + " stored " +
                    std::to_string(counted.count(step)) + " times");
      }
    }
  }

  // Submits until the job exists: a submit whose answer was lost with a
  // killed server may have been taken all the same (and is then refused
  // as a duplicate, rightly).
  void Submit(const std::string& job, const std::string& spec) {
    while (Any().Cli({"submit", "-f", "-"}, spec).exit_code != 0 && !JobOn(job).is_object()) {
      std::this_thread::sleep_for(200ms);  // no leader at the moment
    }
  }
  bool StopTaken(const std::string& job) {
    nlohmann::json state = JobOn(job);
    return state.is_object() &&
           (state["stop_requested_at"].is_string() || state["state"] == "Stopped");
  }

  int GpusInUse() {
    nlohmann::json nodes = testing::Get(Any(), "/api/v1/nodes");
    if (!nodes.is_object()) return -1;
    int used = 0;
    for (const auto& node : nodes["items"]) used += node.value("gpus_in_use", 0);
    return used;
  }

  void Round(int round) {
    const std::string prefix = "r" + std::to_string(round) + "-";
    std::uniform_real_distribution<double> seconds(0.0, 3.0);
    // HEADWAY_CHAOS_FAULT_WITHIN_MS: the fault within that many ms of the submits.
    const double within = EnvInt("HEADWAY_CHAOS_FAULT_WITHIN_MS", 3000) / 1000.0;
    const auto fault_at = std::chrono::duration<double>(seconds(rng_) * within / 3.0);
    const auto stop_at = std::chrono::duration<double>(0.3 + seconds(rng_));
    const auto back_after = std::chrono::duration<double>(seconds(rng_) / 3.0);

    const auto submitted = std::chrono::steady_clock::now();
    for (const char* way : kWays) Submit(prefix + way, Spec(prefix + way, way, kSteps));
    const std::string stopped = prefix + "stopped";
    Submit(stopped, Spec(stopped, "stdout", 0));

    // The fault, the stop and a job that preempts another (every GPU is
    // taken), each at its random moment.
    const auto urgent_at = std::chrono::duration<double>(0.3 + seconds(rng_));
    const std::string urgent = prefix + "urgent";
    bool faulted = false;
    bool stop_sent = false;
    bool urgent_sent = false;
    std::string fault;
    while (!faulted || !stop_sent || !urgent_sent) {
      const auto now = std::chrono::steady_clock::now() - submitted;
      if (!faulted && now >= fault_at) {
        fault = InjectFault();
        ++tally_.faults[fault];
        faulted = true;
        std::this_thread::sleep_for(
            std::chrono::duration_cast<std::chrono::milliseconds>(back_after));
        Supervise();
      }
      if (!stop_sent && now >= stop_at) {
        // Taken, though its answer may have been lost with a killed server.
        stop_sent = Any().Cli({"stop", stopped}).exit_code == 0 || StopTaken(stopped);
      }
      if (!urgent_sent && now >= urgent_at) {
        Submit(urgent, "name: " + urgent +
                           "\npriority: 10\ncommand: \"echo urgent ran\"\n"
                           "resources: {gpus_per_process: 1}\n");
        urgent_sent = true;
      }
      std::this_thread::sleep_for(20ms);
    }
    for (const char* way : kWays) CheckJob(prefix + way, way, "Succeeded");
    CheckJob(stopped, "stdout", "Stopped");
    CheckJob(urgent, "none", "Succeeded");
    for (const std::string& name :
         {prefix + "stdout", prefix + "http", prefix + "kubeflow", prefix + "sdk", stopped}) {
      nlohmann::json job = JobOn(name);
      if (job.is_object()) tally_.preemptions += job.value("preemptions", 0);
    }
    int used = -1;
    if (!WaitFor([&] { return (used = GpusInUse()) == 0; }, 30s)) {
      ++tally_.gpus_held;
      tally_.Find(prefix + ": " + std::to_string(used) +
                  " GPU(s) still held after every job ended");
    }
    ++tally_.rounds;
    std::cout << "[  ROUND   ] " << GetParam() << " " << round << ": " << fault << " at "
              << fault_at.count() << " s, back after " << back_after.count() << " s\n"
              << std::flush;
  }

  std::string url_;
  std::string work_;
  std::vector<std::unique_ptr<TestServer>> servers_;
  std::mt19937_64 rng_;
  Tally tally_;
};

TEST_P(Chaos, KillsAtRandomPointsLoseNothingAndRunNothingTwice) {
  const int rounds = EnvInt("HEADWAY_CHAOS_ROUNDS", 2);
  const auto seed = static_cast<std::uint64_t>(
      EnvInt("HEADWAY_CHAOS_SEED", static_cast<int>(std::random_device{}() & 0x7fffffff)));
  rng_.seed(seed);
  std::vector<std::string> args;
  if (Replicated()) args = {"--store", url_};
  servers_.push_back(std::make_unique<TestServer>(4, args));
  if (Replicated()) servers_.push_back(std::make_unique<TestServer>(*servers_[0], args));
  work_ = servers_[0]->work_dir();
  Stress stress(work_);

  const auto began = std::chrono::steady_clock::now();
  for (int round = 1; round <= rounds && !HasFatalFailure(); ++round) Round(round);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();

  std::cout << "[  CHAOS   ] " << GetParam() << " (seed " << seed << ", stress "
            << (stress.on() ? "on" : "off") << "): " << tally_.rounds << " rounds in " << took
            << " s, " << tally_.jobs << " jobs, " << tally_.reports << " reports owed\n";
  for (const auto& [fault, n] : tally_.faults)
    std::cout << "             " << n << " x " << fault << "\n";
  std::cout << "             " << tally_.server_starts << " servers brought back ("
            << tally_.lost_lead << " leaders stopped on losing the database), "
            << tally_.preemptions << " preemptions\n";
  std::cout << "             lost " << tally_.lost << ", doubled " << tally_.doubled
            << ", ran twice " << tally_.ran_twice << ", jobs with a new attempt "
            << tally_.new_attempts << ", unfinished " << tally_.unfinished << ", wrong final state "
            << tally_.wrong_state << ", GPUs left held " << tally_.gpus_held << "\n";
  for (const auto& finding : tally_.findings) std::cout << "             - " << finding << "\n";
  std::cout << std::flush;
  EXPECT_EQ(tally_.lost, 0);
  EXPECT_EQ(tally_.doubled, 0);
  EXPECT_EQ(tally_.ran_twice, 0);
  EXPECT_EQ(tally_.unfinished, 0);
  EXPECT_EQ(tally_.wrong_state, 0);
  EXPECT_EQ(tally_.gpus_held, 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, Chaos, ::testing::Values("sqlite", "postgresql", "mysql"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace headway
