// What every client command of `headway` shares: the parsed command line
// (Options), the REST client that reports errors the same way for all
// (Client), the exit codes, and helpers for specs and structured output.
// Internal to cli/.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/http_client.h"
#include "cli/config.h"
#include "cli/output.h"
#include "core/status.h"

namespace headway::cli {

using api::HttpClient;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitUnreachable = 3;

struct Options {
  std::string server;
  std::string token;
  std::string ca_file;
  std::string admin_token_file;
  std::string config_path;  // --config
  ClientConfig config;      // what the config file said (read after parsing)
  // token create
  std::string role = "member";
  std::string ttl;     // "": never expires
  std::string output;  // "", "wide", "json", "yaml", "name"
  // submit
  std::string file;
  std::string submit_name;  // --name: overrides the spec's name
  // workflow
  bool wait = false;                    // submit --wait
  bool restart_successful = false;      // retry --restart-successful
  bool memoized = false;                // resubmit --memoized
  std::vector<std::string> parameters;  // workflow submit -p NAME=VALUE
  std::string node_selector;            // retry --node-field-selector
  // get
  std::string resource;
  std::string name;
  std::string state;
  std::string team;
  std::vector<std::string> labels;
  bool watch = false;       // get -w
  std::string sort_by;      // get --sort-by, top --sort-by
  bool no_headers = false;  // get --no-headers
  // logs
  bool follow = false;
  int rank = -1;
  int attempt = -1;
  std::int64_t tail = -1;        // logs: each rank's newest N lines (-1: all)
  std::int64_t limit_bytes = 0;  // logs: at most N bytes of whole lines (0: no bound)
  std::string since;             // logs: only lines written in the last DURATION
  std::string since_time;        // logs: only lines written from this RFC 3339 time on
  bool timestamps = false;       // logs: each line starts with when it was written
  // stop
  std::vector<std::string> names;
  bool force = false;
  // top
  double interval_s = 2;
  int iterations = 0;  // 0: until interrupted
  bool active = false;
  bool sessions = false;  // token list: the dashboard's sessions and sign-in links too
  bool reverse = false;   // top: sort the other way
  // version
  bool client_only = false;
  // wait
  std::string until = "ended";
  std::string timeout = "0";
  // artifacts
  std::string kind;                       // put: checkpoint|model|dataset|output; ls: filter
  std::string job;                        // put: the producer; ls: filter
  std::int64_t step = -1;                 // put: the producer's step
  std::vector<std::string> metrics;       // put: NAME=VALUE
  std::string destination;                // get: where to write (default: the name)
  std::vector<std::string> exec_command;  // exec: the command after --
  bool exec_stdin = false;                // exec -i
  bool exec_tty = false;                  // exec -t
  bool ssh_stdio = false;                 // ssh --stdio
  std::string profile;                    // notebook start --profile
  int gpus = -1;                          // notebook start --gpus (-1: the profile's)
};
constexpr int kExitTimeout = 4;

// Percent-encodes `s` for a URL's path or query (keeps '=' and ',').
std::string UrlEncode(const std::string& s);

class Client {
 public:
  explicit Client(const Options& o)
      : http_(ServerUrl(o), ApiToken(o), CaFile(o)), token_source_(TokenSource(o)) {}

  // Each setting: flag, else environment, else config file, else default.
  static std::string CaFile(const Options& o);

  static std::string ApiToken(const Options& o);
  // Where ApiToken found it ("--token", "$HEADWAY_API_TOKEN", a file's
  // path...); "" when it found none.
  static std::string TokenSource(const Options& o);

  static std::string ServerUrl(const Options& o);

  // Sends a request; prints the error and sets exit_code on failure.
  std::optional<nlohmann::json> Call(
      std::string_view method, const std::string& target, std::string body = {},
      std::string_view content_type = "application/json",
      const std::vector<std::pair<std::string, std::string>>& headers = {});

  // What a response holds, or the error printed and exit_code set.
  std::optional<nlohmann::json> Answer(const Result<api::ClientResponse>& resp);

  // Like Call, but rides out a server that is away (not listening, or
  // answering 502/503/504 while it restarts): it retries with backoff from
  // 250 ms up to 5 s, saying so once on stderr, until `deadline` (if any)
  // passes, when it returns nullopt with `timed_out` set.
  std::optional<nlohmann::json> CallRetrying(
      const std::string& target, std::optional<std::chrono::steady_clock::time_point> deadline,
      bool& timed_out);

  static void PrintError(int status, const nlohmann::json& parsed, const std::string& raw);

  HttpClient& http() { return http_; }
  int exit_code = kExitOk;

 private:
  HttpClient http_;
  std::string token_source_;
};

// With -o json or -o yaml: prints `value` so and returns true.
bool PrintStructured(const Options& o, const nlohmann::json& value);

// The text of a spec file, or of standard input for "-"; `ok` false (and
// the error printed) when it cannot be read.
std::string ReadSpecFile(const std::string& file, bool& ok);

// Metric values as the dashboard writes them.
std::string FormatNumber(const nlohmann::json& v);

// `get` of a resource kind: GET COLLECTION/NAME with a name, else the
// collection's list under `key`. Printed whole for -o json|yaml and as
// names for -o name; then nullopt with `exit_code` set, else the items for
// the caller's table.
std::optional<std::vector<nlohmann::json>> GetOneOrAll(const Options& o,
                                                       const std::string& collection,
                                                       const std::string& key, int& exit_code);

// Whether a spec file is a Katib Experiment manifest, which `submit` creates
// as an experiment.
bool IsKatibExperiment(const std::string& text);

}  // namespace headway::cli
