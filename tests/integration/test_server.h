// Test harness: runs the real `headway` binary as a server on a free loopback
// port with its own data directory, and runs CLI commands against it.
//
// Each server gets a fresh base directory (mode 0755, removed with the
// server) holding `data/` (the server's --data-dir) and `work/` (mode 0777:
// a place for the jobs' own files, outside the server's data, which jobs
// running as another user must not reach).
//
// Authentication is on, as by default: after start the harness reads the
// admin token the server wrote to data/admin-token and sends it with Job(),
// State(), Events() and Cli(). A test of a server without authentication
// passes "--no-auth".
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/http_client.h"

namespace headway::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs argv to completion (with `input` on stdin), capturing its output.
CommandResult RunCommand(const std::vector<std::string>& argv, const std::string& input = {});

// The headway binary the harness runs: $HEADWAY_BIN, else the one built
// beside the tests.
std::string HeadwayBinary();

// Polls `condition` every 50 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& condition,
             std::chrono::milliseconds timeout = std::chrono::seconds(20));

// Where the tests keep what a job and the test both read and write: not
// /tmp, which each job sees through a layer of its own (what it writes
// there, the test would not see). $HEADWAY_TEST_TMPDIR, else /var/tmp.
std::string TestTempRoot();
// A new directory PREFIX-XXXXXX under TestTempRoot().
std::string MakeTempDir(const std::string& prefix);
// A TCP port on 127.0.0.1 that nothing listens on at the time of the call.
int UnusedLoopbackPort();
// A loopback listener that takes connections into its backlog and never
// reads them (a hung peer); returns its descriptor and sets `port`.
int SilentListener(int& port);
// Whether some process holds an established TCP connection to the server at
// `url` (127.0.0.1:PORT, from /proc/net/tcp): a client that has connected,
// however slowly it started.
bool SomeoneConnectedTo(const std::string& url);
// Pids of the processes (seen from here) whose command line contains `marker`.
// The processes whose command line holds `marker`; with `environment`, only
// those whose environment holds that entry too (a job's "HEADWAY_URL=" +
// its server's url(), so that another suite's run beside this one on the
// machine is not counted).
std::vector<pid_t> ProcessesWith(const std::string& marker, const std::string& environment = "");
void WriteFile(const std::string& path, const std::string& content);
std::string ReadFile(const std::string& path);

class TestServer;

// A plain TCP connection to a server, for clients that misbehave (idle,
// slow) or must come from another loopback address than 127.0.0.1.
class RawConnection {
 public:
  // `source`: the local address to connect from, e.g. "127.0.0.2".
  explicit RawConnection(const TestServer& server, const std::string& source = {});
  ~RawConnection() { Close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  void Close();
  bool connected() const { return connected_; }
  bool Send(const std::string& bytes);
  // What the server sent within `timeout`, until it closed the connection.
  std::string Receive(std::chrono::milliseconds timeout, bool* closed = nullptr);
  // Reads until `text` has arrived (true) or `timeout` passes or the server closes.
  bool ReceiveUntil(const std::string& text, std::chrono::milliseconds timeout);
  // Whether the server has closed its end (reads what is pending, without waiting).
  bool ClosedByServer();
  const std::string& received() const { return received_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string received_;  // what ReceiveUntil and ClosedByServer read
};

// One API call's answer; status -1 when no response came back.
struct Answer {
  int status = -1;
  nlohmann::json body;  // discarded (not an error) when the body is not JSON
  std::string raw;
  api::ClientResponse response;
};
Answer Call(const TestServer& server, const std::string& token, const std::string& method,
            const std::string& path, const std::string& body = {},
            std::vector<std::pair<std::string, std::string>> headers = {},
            const std::string& content_type = "application/json");

// `headway token create NAME --team TEAM --role ROLE MORE...` with the
// harness's token; returns the secret it printed. CreateTokenAs sends `admin`.
std::string CreateToken(const TestServer& server, const std::string& name, const std::string& team,
                        const std::string& role, const std::vector<std::string>& more = {});
std::string CreateTokenAs(const TestServer& server, const std::string& admin,
                          const std::string& name, const std::string& team,
                          const std::string& role);

class TestServer {
 public:
  // Starts a server with `--gpus gpus` (negative: the GPUs it detects) and
  // a fresh base directory.
  explicit TestServer(int gpus = 4, std::vector<std::string> extra_args = {});
  // A second server on `primary`'s data directory (with a shared --store in
  // `extra_args`: a replica), logging to a file of its own. `primary` must
  // outlive it.
  TestServer(const TestServer& primary, std::vector<std::string> extra_args);
  ~TestServer();

  // Starts again on the same data directory and port after Kill()/Terminate().
  void Restart();
  // The same, with `extra_args` in place of the ones it was made with.
  void Restart(std::vector<std::string> extra_args);
  void Kill();       // SIGKILL, as a crash would
  void Terminate();  // SIGTERM, a clean shutdown
  // Whether the server process is alive; false once it exited on its own
  // (as a leader cut off from the database does), or was killed.
  bool Running();
  pid_t pid() const { return pid_; }

  const std::string& url() const { return url_; }
  const std::string& base_dir() const { return base_dir_; }
  const std::string& data_dir() const { return data_dir_; }
  std::string work_dir() const { return base_dir_ + "/work"; }
  // The admin token the server wrote at its first start; empty with --no-auth.
  const std::string& admin_token() const { return admin_token_; }

  // Job(), State(), Events() and Cli() send this user token instead of the
  // admin's ("": none).
  void UseToken(std::string token) {
    token_ = std::move(token);
    token_chosen_ = true;
  }
  const std::string& token() const { return token_; }

  // A client of this server that sends token() (and trusts its --tls-cert).
  api::HttpClient Http() const { return api::HttpClient(url_, token_, ca_file_); }

  // `headway --server URL args...` with $HEADWAY_API_TOKEN set to token()
  // and $HEADWAY_DATA_DIR and $XDG_CONFIG_HOME to empty folders, so the CLI
  // finds no admin token or config file of its own; a --token in `args`
  // takes precedence.
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
  // What it logged since it was last started.
  std::string LogSinceStart() const;

 private:
  void Start();
  int gpus_;
  std::vector<std::string> extra_args_;
  std::string base_dir_;
  std::string data_dir_;
  std::string admin_token_;
  bool token_chosen_ = false;
  std::string log_path_;
  std::size_t log_offset_ = 0;  // the log's size when it was last started
  std::string url_;
  std::string token_;
  std::string ca_file_;  // the --tls-cert it was started with, trusted by Job() etc.
  int port_ = 0;
  pid_t pid_ = -1;
  bool owns_base_dir_ = true;
};

// POST `body` to `path` with `token`: the status, or -1 with no answer; the
// response's body in `response`.
int Post(const TestServer& server, const std::string& path, const std::string& token,
         const std::string& body, std::string* response = nullptr);
// GET `path` as the server's admin, parsed: null with no answer, discarded
// when the body is not JSON.
nlohmann::json Get(const TestServer& server, const std::string& path);

}  // namespace headway::testing
