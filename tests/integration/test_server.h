// Test harness: runs the real `headway` binary as a server on a free loopback
// port with its own data directory, and runs CLI commands against it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace headway::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs argv to completion (with `input` on stdin), capturing its output.
CommandResult RunCommand(const std::vector<std::string>& argv, const std::string& input = {});

// Polls `condition` every 50 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& condition,
             std::chrono::milliseconds timeout = std::chrono::seconds(20));

std::string MakeTempDir(const std::string& prefix);
void WriteFile(const std::string& path, const std::string& content);
std::string ReadFile(const std::string& path);

class TestServer {
 public:
  // Starts a server with `--gpus gpus` and a fresh data directory.
  explicit TestServer(int gpus = 4, std::vector<std::string> extra_args = {});
  ~TestServer();

  // Starts again on the same data directory and port after Kill()/Terminate().
  void Restart();
  void Kill();       // SIGKILL, as a crash would
  void Terminate();  // SIGTERM, a clean shutdown

  const std::string& url() const { return url_; }
  const std::string& data_dir() const { return data_dir_; }
  std::string work_dir() const { return base_dir_ + "/work"; }

  // Job(), State(), Events() send this user token (for a server with --auth);
  // Cli() does not: pass --token where a command needs one.
  void UseToken(std::string token) { token_ = std::move(token); }

  // `headway --server URL args...`
  CommandResult Cli(std::vector<std::string> args, const std::string& input = {}) const;
  // Submits a YAML spec through the CLI; fails the test if it is refused.
  void Submit(const std::string& yaml) const;
  // GET /api/v1/jobs/NAME as JSON (null if not found).
  nlohmann::json Job(const std::string& name) const;
  std::string State(const std::string& name) const;
  bool WaitForState(const std::string& name, const std::string& state,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;
  std::vector<nlohmann::json> Events(const std::string& name) const;
  // Whether the job has an event of `type` whose message contains `text`.
  bool HasEvent(const std::string& name, const std::string& type,
                const std::string& text = "") const;
  std::string ServerLog() const;

 private:
  void Start();
  int gpus_;
  std::vector<std::string> extra_args_;
  std::string base_dir_;  // holds the data directory, the work directory and the log
  std::string data_dir_;
  std::string log_path_;
  std::string url_;
  std::string token_;
  std::string ca_file_;  // the --tls-cert it was started with, trusted by Job() etc.
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace headway::testing
