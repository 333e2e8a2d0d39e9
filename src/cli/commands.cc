#include "cli/commands.h"

#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <yaml-cpp/yaml.h>

#include "api/http_client.h"
#include "cli/artifact_upload.h"
#include "cli/completion.h"
#include "cli/config.h"
#include "cli/job_table.h"
#include "cli/output.h"
#include "cli/top.h"
#include "core/health.h"
#include "core/job.h"
#include "artifact/file_digest.h"
#include "core/artifact.h"
#include "core/time.h"
#include "core/version.h"

namespace headway::cli {

using api::HttpClient;
namespace {

using nlohmann::json;

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
  bool wait = false;                // submit --wait
  bool restart_successful = false;  // retry --restart-successful
  bool memoized = false;            // resubmit --memoized
  std::vector<std::string> parameters;  // workflow submit -p NAME=VALUE
  std::string node_selector;        // retry --node-field-selector
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
  bool reverse = false;  // top: sort the other way
  // version
  bool client_only = false;
  // wait
  std::string until = "ended";
  std::string timeout = "0";
  // artifacts
  std::string kind;                  // put: checkpoint|model|dataset|output; ls: filter
  std::string job;                   // put: the producer; ls: filter
  std::int64_t step = -1;            // put: the producer's step
  std::vector<std::string> metrics;  // put: NAME=VALUE
  std::string destination;           // get: where to write (default: the name)
  std::vector<std::string> exec_command;  // exec: the command after --
  bool exec_stdin = false;           // exec -i
  bool exec_tty = false;             // exec -t
  bool ssh_stdio = false;            // ssh --stdio
  std::string profile;               // notebook start --profile
  int gpus = -1;                     // notebook start --gpus (-1: the profile's)
};

std::string UrlEncode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '=' || c == ',') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

class Client {
 public:
  explicit Client(const Options& o) : http_(ServerUrl(o), ApiToken(o), CaFile(o)) {}

  // Each setting: flag, else environment, else config file, else default.
  static std::string CaFile(const Options& o) {
    if (!o.ca_file.empty()) return o.ca_file;
    if (const char* env = std::getenv("HEADWAY_CA_FILE"); env && *env) return env;
    return o.config.cacert;
  }

  static std::string ApiToken(const Options& o) {
    if (!o.token.empty()) return o.token;
    if (const char* env = std::getenv("HEADWAY_API_TOKEN"); env && *env) return env;
    // The Python SDK's name for it, accepted too.
    if (const char* env = std::getenv("HEADWAY_USER_TOKEN"); env && *env) return env;
    if (!o.config.token.empty()) return o.config.token;
    std::ifstream file(o.admin_token_file);
    std::string line;
    if (file && std::getline(file, line)) return line;
    return {};
  }

  static std::string ServerUrl(const Options& o) {
    if (!o.server.empty()) return o.server;
    if (const char* env = std::getenv("HEADWAY_SERVER"); env && *env) return env;
    if (!o.config.server.empty()) return o.config.server;
    return "http://127.0.0.1:8080";
  }

  // Sends a request; prints the error and sets exit_code on failure.
  std::optional<json> Call(std::string_view method, const std::string& target,
                           std::string body = {},
                           std::string_view content_type = "application/json",
                           const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    return Answer(http_.Request(method, target, std::move(body), content_type, headers));
  }

  // What a response holds, or the error printed and exit_code set.
  std::optional<json> Answer(const Result<api::ClientResponse>& resp) {
    if (!resp.ok()) {
      std::cerr << "error: " << Safe(resp.status().message()) << "\n";
      exit_code = resp.status().code() == StatusCode::kInvalidArgument ? kExitUsage
                                                                        : kExitUnreachable;
      return std::nullopt;
    }
    auto parsed = json::parse(resp->body, nullptr, /*allow_exceptions=*/false);
    if (resp->status >= 400) {
      PrintError(resp->status, parsed, resp->body);
      exit_code = kExitFailed;
      return std::nullopt;
    }
    if (parsed.is_discarded()) {
      std::cerr << "error: the server sent a response that is not JSON\n";
      exit_code = kExitFailed;
      return std::nullopt;
    }
    return parsed;
  }

  // Like Call, but rides out a server that is away (not listening, or
  // answering 502/503/504 while it restarts): it retries with backoff from
  // 250 ms up to 5 s, saying so once on stderr, until `deadline` (if any)
  // passes, when it returns nullopt with `timed_out` set.
  std::optional<json> CallRetrying(const std::string& target,
                                   std::optional<std::chrono::steady_clock::time_point> deadline,
                                   bool& timed_out) {
    timed_out = false;
    auto backoff = std::chrono::milliseconds(250);
    bool lost = false;
    for (;;) {
      auto resp = http_.Request("GET", target);
      bool away = !resp.ok() ? resp.status().code() != StatusCode::kInvalidArgument
                             : resp->status == 502 || resp->status == 503 || resp->status == 504;
      if (!away) {
        if (lost) std::cerr << "headway: reconnected to " << Safe(http_.base_url()) << "\n";
        // This answer, not a second request: a server gone between the two
        // would end the wait with an error instead of being waited for.
        return Answer(resp);
      }
      if (!lost) {
        std::cerr << "headway: lost " << Safe(http_.base_url()) << " ("
                  << Safe(resp.ok() ? "HTTP " + std::to_string(resp->status)
                                    : resp.status().message())
                  << "); reconnecting\n";
        lost = true;
      }
      auto now = std::chrono::steady_clock::now();
      if (deadline && now + backoff > *deadline) {
        if (now < *deadline) std::this_thread::sleep_until(*deadline);
        timed_out = true;
        return std::nullopt;
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
    }
  }

  static void PrintError(int status, const json& parsed, const std::string& raw) {
    if (parsed.is_object() && parsed.contains("error") && parsed["error"].is_object()) {
      const json& e = parsed["error"];
      std::cerr << "error: ";
      if (e.contains("field") && e["field"].is_string()) {
        std::cerr << Safe(e["field"].get<std::string>());
        if (e.contains("line") && e["line"].is_number_integer()) {
          std::cerr << " (line " << e["line"].get<int>() << ")";
        }
        std::cerr << ": ";
      }
      std::string message = e.contains("message") && e["message"].is_string()
                                ? e["message"].get<std::string>()
                                : raw;
      std::cerr << Safe(message) << "\n";
    } else if (parsed.is_object() && parsed.contains("message") && parsed["message"].is_string()) {
      // Argo's shape, on the workflow routes.
      std::cerr << "error: " << Safe(parsed["message"].get<std::string>()) << "\n";
    } else {
      std::cerr << "error: server answered " << status << ": " << Safe(raw) << "\n";
    }
  }

  HttpClient& http() { return http_; }
  int exit_code = kExitOk;

 private:
  HttpClient http_;
};

// Workflows (below).
bool IsArgoWorkflow(const std::string& text);
int WorkflowSubmit(const Options& o, std::string text = {});
int WorkflowList(const Options& o);
int WorkflowGet(const Options& o);

bool PrintStructured(const Options& o, const json& value) {
  if (o.output == "json") {
    std::cout << ToJson(value) << "\n";
    return true;
  }
  if (o.output == "yaml") {
    std::cout << ToYaml(value);
    return true;
  }
  return false;
}

std::string ReadSpecFile(const std::string& file, bool& ok) {
  std::string text;
  ok = true;
  if (file == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), {});
    return text;
  }
  std::ifstream in(file);
  if (!in) {
    std::cerr << "error: cannot read " << file << "\n";
    ok = false;
    return text;
  }
  text.assign(std::istreambuf_iterator<char>(in), {});
  return text;
}

int ExpCreate(const Options& o, const std::string& text);

// Whether a spec file is a Katib Experiment manifest, which `submit` creates
// as an experiment.
bool IsKatibExperiment(const std::string& text) {
  try {
    YAML::Node root = YAML::Load(text);
    return root.IsMap() && root["apiVersion"] && root["kind"] && root["apiVersion"].IsScalar() &&
           root["kind"].IsScalar() && root["apiVersion"].Scalar().rfind("kubeflow.org/", 0) == 0 &&
           root["kind"].Scalar() == "Experiment";
  } catch (const YAML::Exception&) {
    return false;  // the server says what is wrong with it
  }
}

int Submit(const Options& o) {
  bool ok = true;
  std::string text = ReadSpecFile(o.file, ok);
  if (!ok) return kExitUsage;
  if (IsKatibExperiment(text)) return ExpCreate(o, text);
  if (IsArgoWorkflow(text)) return WorkflowSubmit(o, text);
  Client client(o);
  std::error_code ec;
  std::string cwd = std::filesystem::current_path(ec).string();
  std::string target = "/api/v1/jobs";
  if (!o.submit_name.empty()) target += "?name=" + UrlEncode(o.submit_name);
  auto job = client.Call("POST", target, text, "application/yaml", {{"X-Headway-Submit-Dir", cwd}});
  if (!job) return client.exit_code;
  if (!PrintStructured(o, *job)) {
    if (o.output == "name") {
      std::cout << Safe((*job)["name"].get<std::string>()) << "\n";
    } else {
      std::cout << "job/" << Safe((*job)["name"].get<std::string>()) << " submitted\n";
    }
  }
  return kExitOk;
}

// Metric values as the dashboard writes them.
std::string FormatNumber(const json& v) { return FormatMetric(v); }

// The jobs `get jobs` lists, sorted by --sort-by; a job's name lists that one.
std::optional<std::vector<json>> ListJobs(const Options& o, Client& client,
                                          std::optional<json>* whole = nullptr,
                                          bool retry = false) {
  std::string target;
  if (!o.name.empty()) {
    target = "/api/v1/jobs/" + UrlEncode(o.name);
  } else {
    std::string query;
    auto add = [&](const std::string& k, const std::string& v) {
      query += (query.empty() ? "?" : "&") + k + "=" + UrlEncode(v);
    };
    if (!o.state.empty()) add("state", o.state);
    if (!o.team.empty()) add("team", o.team);
    if (o.active) add("active", "true");
    if (!o.labels.empty()) {
      std::string joined;
      for (const auto& l : o.labels) joined += (joined.empty() ? "" : ",") + l;
      add("label", joined);
    }
    target = "/api/v1/jobs" + query;
  }
  bool timed_out = false;
  auto answer = retry ? client.CallRetrying(target, std::nullopt, timed_out)
                      : client.Call("GET", target);
  if (!answer) return std::nullopt;
  if (whole) *whole = *answer;
  std::vector<json> jobs;
  if (!o.name.empty()) {
    jobs.push_back(*answer);
  } else {
    for (auto& job : (*answer)["jobs"]) jobs.push_back(std::move(job));
  }
  if (!o.sort_by.empty()) {
    if (Status s = SortJobs(jobs, o.sort_by); !s.ok()) {
      std::cerr << "error: " << Safe(s.message()) << "\n";
      client.exit_code = kExitUsage;
      return std::nullopt;
    }
  }
  return jobs;
}

// What a job's row shows that is worth a new line under -w: all but AGE and ETA.
std::string WatchKey(const std::vector<std::string>& row) {
  std::string key;
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (i == 5 || i == 8) continue;  // ETA, AGE
    key += row[i] + '\x1f';
  }
  return key;
}

// `get jobs -w`: the table, then a row for every job that changed, under the
// same columns, until interrupted; rides out server restarts.
int WatchJobs(const Options& o, Client& client, std::vector<json> jobs) {
  bool wide = o.output == "wide";
  bool table = o.output.empty() || wide;
  std::map<std::string, std::string> last;
  std::vector<std::size_t> widths;
  auto print = [&](const json& job, const std::vector<std::string>& row) {
    if (o.output == "json") {
      std::cout << job.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    } else if (o.output == "yaml") {
      std::cout << "---\n" << ToYaml(job);
    } else if (o.output == "name") {
      std::cout << Safe(job.value("name", "")) << "\n";
    } else {
      std::cout << FormatTableRow(row, widths);
    }
  };
  Time now = SystemClock().Now();
  std::vector<std::vector<std::string>> rows;
  for (const auto& job : jobs) rows.push_back(JobRow(job, wide, now));
  widths = TableWidths(JobHeader(wide), rows);
  if (table && !o.no_headers) std::cout << FormatTableRow(JobHeader(wide), widths);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    last[jobs[i].value("name", "")] = WatchKey(rows[i]);
    print(jobs[i], rows[i]);
  }
  std::cout << std::flush;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    auto next = ListJobs(o, client, nullptr, /*retry=*/true);
    if (!next) return client.exit_code;
    now = SystemClock().Now();
    for (const auto& job : *next) {
      std::vector<std::string> row = JobRow(job, wide, now);
      std::string key = WatchKey(row);
      std::string& seen = last[job.value("name", "")];
      if (seen == key) continue;
      seen = key;
      print(job, row);
    }
    std::cout << std::flush;
  }
}

int GetJobs(const Options& o) {
  Client client(o);
  std::optional<json> whole;
  auto jobs = ListJobs(o, client, &whole);
  if (!jobs) return client.exit_code;
  if (o.watch) return WatchJobs(o, client, std::move(*jobs));
  if (o.output == "json" || o.output == "yaml") {
    json value = *whole;
    if (o.name.empty() && !o.sort_by.empty()) value["jobs"] = *jobs;
    PrintStructured(o, value);
    return kExitOk;
  }
  if (o.output == "name") {
    for (const auto& job : *jobs) std::cout << Safe(job["name"].get<std::string>()) << "\n";
    return kExitOk;
  }
  if (jobs->empty()) {
    std::cerr << "No jobs found.\n";
    return kExitOk;
  }
  std::cout << JobsTable(*jobs, o.output == "wide", SystemClock().Now(), !o.no_headers);
  return kExitOk;
}

std::string IntOr(const json& v, const std::string& missing) {
  return v.is_number_integer() ? std::to_string(v.get<int>()) : missing;
}

int GetQueues(const Options& o) {
  Client client(o);
  auto list = client.Call("GET", "/api/v1/queues");
  if (!list) return client.exit_code;
  if (PrintStructured(o, *list)) return kExitOk;
  const json& queues = (*list)["queues"];
  if (o.output == "name") {
    for (const auto& q : queues) std::cout << Safe(q["name"].get<std::string>()) << "\n";
    return kExitOk;
  }
  if (queues.empty()) {
    std::cerr << "No queues yet: a team's queue appears with its first job or --quota.\n";
    return kExitOk;
  }
  bool wide = o.output == "wide";
  std::vector<std::vector<std::string>> rows;
  for (const auto& q : queues) {
    // GPUS: in use / nominal quota ("-": no quota, bounded by the pool).
    std::string gpus = std::to_string(q["gpus_in_use"].get<int>()) + "/" + IntOr(q["nominal_gpus"], "-");
    std::string reason = FieldText(q, "pending_reason", "");
    // next_job is empty when it is another team's (hidden from this token).
    std::string next = FieldText(q, "next_job", "");
    if (!reason.empty()) reason = (next.empty() ? "another team's job" : next) + ": " + reason;
    rows.push_back({FieldText(q, "name"), FieldText(q, "executor"), gpus,
                    IntOr(q["borrowing_limit"], "-"), FormatNumber(q["weight"]),
                    std::to_string(q["running"].get<int>()),
                    std::to_string(q["pending"].get<int>()), reason.empty() ? "-" : reason});
    if (wide) {
      // What the team's members may ask for (admins are not bounded).
      rows.back().push_back(IntOr(q["member_max_priority"], "-"));
      rows.back().push_back(FieldText(q, "member_max_grace"));
    }
  }
  std::vector<std::string> header = {"NAME",    "EXECUTOR", "GPUS", "BORROW",
                                     "WEIGHT",  "RUNNING",  "PENDING", "NEXT"};
  if (wide) {
    header.push_back("MAX-PRIORITY");
    header.push_back("MAX-GRACE");
  }
  std::cout << FormatTable(header, rows, !o.no_headers);
  return kExitOk;
}

int GetNodes(const Options& o) {
  Client client(o);
  auto list = client.Call("GET", "/api/v1/nodes");
  if (!list) return client.exit_code;
  if (PrintStructured(o, *list)) return kExitOk;
  const json& nodes = (*list)["nodes"];
  if (o.output == "name") {
    for (const auto& n : nodes) std::cout << Safe(n["name"].get<std::string>()) << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& n : nodes) {
    std::string jobs;
    for (const auto& j : n["jobs"]) jobs += (jobs.empty() ? "" : ",") + j.get<std::string>();
    // Other teams' jobs are counted, not named, for a token that sees one team.
    if (int hidden = n.value("hidden_jobs", 0); hidden > 0) {
      jobs += (jobs.empty() ? "" : ",") + std::string("+") + std::to_string(hidden) + " hidden";
    }
    int gpus = n["gpus"].get<int>(), used = n["gpus_in_use"].get<int>();
    rows.push_back({FieldText(n, "name"), FieldText(n, "executor"), std::to_string(gpus),
                    std::to_string(used), std::to_string(gpus - used), jobs.empty() ? "-" : jobs});
  }
  std::cout << FormatTable({"NAME", "EXECUTOR", "GPUS", "IN-USE", "FREE", "JOBS"}, rows, !o.no_headers);
  return kExitOk;
}

int Get(const Options& o) {
  bool jobs = o.resource == "jobs" || o.resource == "job";
  if (!jobs && (o.watch || !o.sort_by.empty())) {
    std::cerr << "error: --watch and --sort-by apply to jobs only\n";
    return kExitUsage;
  }
  if (o.resource == "queues" || o.resource == "queue") return GetQueues(o);
  if (o.resource == "nodes" || o.resource == "node") return GetNodes(o);
  if (o.resource == "workflows" || o.resource == "workflow" || o.resource == "wf") {
    return o.name.empty() ? WorkflowList(o) : WorkflowGet(o);
  }
  return GetJobs(o);
}

std::string ParamsText(const json& params) {
  std::string text;
  if (!params.is_object()) return "-";
  for (const auto& [k, v] : params.items()) {
    std::string value = v.is_string() ? v.get<std::string>() : FormatNumber(v);
    text += (text.empty() ? "" : " ") + k + "=" + value;
  }
  return text.empty() ? "-" : text;
}

std::string TrialsSummary(const json& e) {
  const json& c = e["trial_counts"];
  int done = c.value("Completed", 0) + c.value("EarlyStopped", 0) + c.value("Failed", 0);
  return std::to_string(c.value("Running", 0)) + " running, " + std::to_string(done) + "/" +
         FieldText(e, "max_trials") + " done";
}

std::string BestText(const json& e) {
  const json& best = e["best_trial"];
  if (!best.is_object()) return "-";
  return FieldText(best, "job") + " " + FormatNumber(best["objective"]);
}

int ExpCreate(const Options& o, const std::string& text) {
  Client client(o);
  std::error_code ec;
  std::string cwd = std::filesystem::current_path(ec).string();
  auto e = client.Call("POST", "/api/v1/experiments", text, "application/yaml",
                       {{"X-Headway-Submit-Dir", cwd}});
  if (!e) return client.exit_code;
  if (PrintStructured(o, *e)) return kExitOk;
  std::cout << "experiment/" << Safe((*e)["name"].get<std::string>()) << " created\n";
  return kExitOk;
}

int ExpCreate(const Options& o) {
  bool ok = true;
  std::string text = ReadSpecFile(o.file, ok);
  if (!ok) return kExitUsage;
  return ExpCreate(o, text);
}

// --- artifacts ---------------------------------------------------------------

std::string Bytes(std::uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return text;
}

// "NAME[:VERSION]" as the API path of that version ("latest" when none).
std::optional<std::string> ArtifactPath(const std::string& ref_text) {
  auto ref = ParseArtifactRef(ref_text);
  if (!ref.ok()) {
    std::cerr << "error: " << Safe(ref.status().message()) << "\n";
    return std::nullopt;
  }
  return "/api/v1/artifacts/" + UrlEncode(ref->name) + "/versions/" +
         (ref->version ? std::to_string(*ref->version) : std::string("latest"));
}

std::string ProducerText(const json& a) {
  const json& p = a.value("producer", json::object());
  if (!p.contains("job")) return p.contains("pipeline_node") ? FieldText(p, "pipeline_node") : "-";
  std::string text = "job/" + p["job"].get<std::string>();
  if (p.contains("step")) text += "@" + p["step"].dump();
  return text;
}

int ArtifactsList(const Options& o) {
  Client client(o);
  std::string query;
  if (!o.kind.empty()) query += "&kind=" + UrlEncode(o.kind);
  if (!o.job.empty()) query += "&job=" + UrlEncode(o.job);
  if (!o.team.empty()) query += "&team=" + UrlEncode(o.team);
  if (!o.name.empty()) query += "&name=" + UrlEncode(o.name);
  auto list = client.Call("GET", "/api/v1/artifacts" + (query.empty() ? "" : "?" + query.substr(1)));
  if (!list) return client.exit_code;
  if (PrintStructured(o, *list)) return kExitOk;
  const json& items = (*list)["artifacts"];
  if (o.output == "name") {
    for (const auto& a : items) std::cout << Safe(a["ref"].get<std::string>()) << "\n";
    return kExitOk;
  }
  if (items.empty()) {
    std::cerr << "No artifacts found.\n";
    return kExitOk;
  }
  Time now = SystemClock().Now();
  std::vector<std::vector<std::string>> rows;
  for (const auto& a : items) {
    rows.push_back({Safe(a["ref"].get<std::string>()), FieldText(a, "kind"), FieldText(a, "state"),
                    Bytes(a["size"].get<std::uint64_t>()), Safe(ProducerText(a)),
                    FieldText(a, "team"), Age(a["created_at"].get<std::string>(), now)});
  }
  std::cout << FormatTable({"ARTIFACT", "KIND", "STATE", "SIZE", "PRODUCER", "TEAM", "AGE"}, rows);
  return kExitOk;
}

int ArtifactsPut(const Options& o) {
  auto digest = DigestFile(o.file);
  if (!digest.ok()) {
    std::cerr << "error: " << Safe(digest.status().message()) << "\n";
    return kExitUsage;
  }
  json body = {{"name", o.name}, {"kind", o.kind.empty() ? "output" : o.kind},
               {"size", digest->size}, {"digest", digest->digest},
               {"content_md5", digest->content_md5}, {"multipart", true}};
  if (!o.team.empty()) body["team"] = o.team;
  if (!o.job.empty() || o.step >= 0) {
    json producer = json::object();
    if (!o.job.empty()) producer["job"] = o.job;
    if (o.step >= 0) producer["step"] = o.step;
    body["producer"] = producer;
  }
  for (const std::string& label : o.labels) {
    auto eq = label.find('=');
    if (eq == std::string::npos) {
      std::cerr << "error: --label must be KEY=VALUE, got '" << Safe(label) << "'\n";
      return kExitUsage;
    }
    body["labels"][label.substr(0, eq)] = label.substr(eq + 1);
  }
  for (const std::string& metric : o.metrics) {
    auto eq = metric.find('=');
    double value = 0;
    try {
      if (eq == std::string::npos) throw std::invalid_argument("no =");
      std::size_t used = 0;
      value = std::stod(metric.substr(eq + 1), &used);
      if (used != metric.size() - eq - 1) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      std::cerr << "error: --metric must be NAME=NUMBER, got '" << Safe(metric) << "'\n";
      return kExitUsage;
    }
    body["metrics"][metric.substr(0, eq)] = value;
  }
  Client client(o);
  auto created = client.Call("POST", "/api/v1/artifacts", body.dump());
  if (!created) return client.exit_code;
  json artifact = (*created)["artifact"];
  const json& upload = (*created)["upload"];
  std::optional<PartsUploaded> parts;
  if (upload.is_object() && upload.contains("multipart")) {
    // In parts, straight to the object store; resumes what an earlier try left.
    const std::string version_path = "/api/v1/artifacts/" + UrlEncode(artifact["name"].get<std::string>()) +
                                     "/versions/" + artifact["version"].dump();
    auto sent = UploadParts(client.http(), version_path, o.file, digest->size, upload["multipart"],
                            Client::CaFile(o));
    if (!sent.ok()) {
      std::cerr << "error: " << Safe(sent.status().message())
                << "\nRun the same command again to resume: parts already stored are not sent again.\n";
      return kExitUnreachable;
    }
    parts = *sent;
    json commit = {{"upload_id", upload["multipart"]["upload_id"]}};
    auto committed = client.Call("POST", version_path + "/commit", commit.dump());
    if (!committed) return client.exit_code;
    artifact = *committed;
  } else if (upload.is_object()) {
    const std::string url = upload["url"].get<std::string>();
    if (!url.empty() && url.front() == '/') {
      // Through the server (its local store).
      auto sent = client.http().SendFile("PUT", url, o.file);
      if (!sent.ok()) {
        std::cerr << "error: " << Safe(sent.status().message()) << "\n";
        return kExitUnreachable;
      }
      auto parsed = json::parse(sent->body, nullptr, false);
      if (sent->status >= 400) {
        Client::PrintError(sent->status, parsed, sent->body);
        return kExitFailed;
      }
      artifact = parsed;
    } else {
      // Straight to the object store, with the presigned URL; then the server checks it.
      auto [origin, target] = api::SplitUrl(url);
      std::vector<std::pair<std::string, std::string>> headers;
      const json upload_headers = upload.value("headers", json::object());
      for (const auto& [k, v] : upload_headers.items()) {
        if (k != "Content-Length") headers.emplace_back(k, v.get<std::string>());
      }
      HttpClient store(origin, "", Client::CaFile(o));
      auto sent = store.SendFile(upload.value("method", "PUT"), target, o.file, headers);
      if (!sent.ok()) {
        std::cerr << "error: uploading to the object store: " << Safe(sent.status().message()) << "\n";
        return kExitUnreachable;
      }
      if (sent->status >= 300) {
        std::cerr << "error: the object store answered " << sent->status << ": "
                  << Safe(sent->body.substr(0, 300)) << "\n";
        return kExitFailed;
      }
      auto committed = client.Call("POST", "/api/v1/artifacts/" + UrlEncode(artifact["name"].get<std::string>()) +
                                               "/versions/" + artifact["version"].dump() + "/commit");
      if (!committed) return client.exit_code;
      artifact = *committed;
    }
  }
  if (PrintStructured(o, artifact)) return kExitOk;
  std::cout << "artifact/" << Safe(artifact["ref"].get<std::string>())
            << (upload.is_object() ? " uploaded" : " stored (its bytes were there already)") << " ("
            << Bytes(artifact["size"].get<std::uint64_t>()) << ", " << Safe(artifact["digest"].get<std::string>())
            << ")";
  if (parts) {
    std::cout << " in " << parts->parts << " parts";
    if (parts->reused > 0) std::cout << ", " << parts->reused << " of them stored already";
  }
  std::cout << "\n";
  return kExitOk;
}

int ArtifactsGet(const Options& o) {
  auto path = ArtifactPath(o.name);
  if (!path) return kExitUsage;
  Client client(o);
  auto described = client.Call("GET", *path);
  if (!described) return client.exit_code;
  const std::string ref = (*described)["ref"].get<std::string>();
  std::string destination = o.destination.empty() ? (*described)["name"].get<std::string>()
                                                  : o.destination;
  if (std::filesystem::is_directory(destination)) {
    destination += "/" + (*described)["name"].get<std::string>();
  }
  // Written beside the destination and moved into place once its digest checks.
  const std::string partial = destination + ".partial";
  std::ofstream out(partial, std::ios::binary | std::ios::trunc);
  if (!out) {
    std::cerr << "error: cannot write " << Safe(partial) << "\n";
    return kExitFailed;
  }
  std::string error_body;
  auto write = [&out](std::string_view data) {
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
  };
  auto status = client.http().Stream(
      "/api/v1/artifacts/" + UrlEncode((*described)["name"].get<std::string>()) + "/versions/" +
          (*described)["version"].dump() + "/content",
      write, error_body);
  if (status.ok() && *status == 307) {
    // The bytes are in an object store: read them from there.
    json redirect = json::parse(error_body, nullptr, false);
    std::string url = redirect.is_object() ? redirect.value("url", "") : "";
    auto [origin, target] = api::SplitUrl(url);
    HttpClient store(origin, "", Client::CaFile(o));
    error_body.clear();
    status = store.Stream(target, write, error_body);
  }
  out.close();
  if (!status.ok() || *status >= 300) {
    std::filesystem::remove(partial);
    if (!status.ok()) {
      std::cerr << "error: " << Safe(status.status().message()) << "\n";
      return kExitUnreachable;
    }
    Client::PrintError(*status, json::parse(error_body, nullptr, false), error_body);
    return kExitFailed;
  }
  auto got = DigestFile(partial);
  if (!got.ok() || got->digest != (*described)["digest"].get<std::string>()) {
    std::filesystem::remove(partial);
    std::cerr << "error: the bytes received for " << Safe(ref)
              << " do not match its digest; nothing was written\n";
    return kExitFailed;
  }
  std::filesystem::rename(partial, destination);
  std::cout << Safe(ref) << " -> " << Safe(destination) << " (" << Bytes(got->size) << ")\n";
  return kExitOk;
}

int ArtifactsDescribe(const Options& o, bool lineage_only) {
  auto path = ArtifactPath(o.name);
  if (!path) return kExitUsage;
  Client client(o);
  auto a = client.Call("GET", *path);
  if (!a) return client.exit_code;
  if (PrintStructured(o, *a)) return kExitOk;
  const json& j = *a;
  const json& lineage = j["lineage"];
  if (!lineage_only) {
    std::cout << "Artifact:  " << Safe(j["ref"].get<std::string>()) << "\n"
              << "Kind:      " << FieldText(j, "kind") << "\n"
              << "State:     " << FieldText(j, "state") << "\n"
              << "Team:      " << FieldText(j, "team") << "\n"
              << "Size:      " << Bytes(j["size"].get<std::uint64_t>()) << "\n"
              << "Digest:    " << FieldText(j, "digest") << "\n"
              << "Created:   " << FieldText(j, "created_at") << " by " << FieldText(j, "created_by")
              << "\n";
    if (!j["metrics"].empty()) {
      std::cout << "Metrics:  ";
      for (const auto& [k, v] : j["metrics"].items()) std::cout << " " << Safe(k) << "=" << Safe(v.dump());
      std::cout << "\n";
    }
    if (!j["labels"].empty()) {
      std::cout << "Labels:   ";
      for (const auto& [k, v] : j["labels"].items()) {
        std::cout << " " << Safe(k) << "=" << Safe(v.get<std::string>());
      }
      std::cout << "\n";
    }
  }
  std::cout << "Produced by: " << Safe(ProducerText(j));
  if (lineage["producer"].is_object() && lineage["producer"]["state"].is_string()) {
    std::cout << " (" << Safe(lineage["producer"]["state"].get<std::string>()) << ")";
  }
  std::cout << "\n";
  if (!lineage["inputs"].empty()) {
    std::cout << "  which read:\n";
    for (const auto& u : lineage["inputs"]) std::cout << "    " << Safe(u["artifact"].get<std::string>()) << "\n";
  }
  std::cout << "Used by:" << (lineage["used_by"].empty() ? " none\n" : "\n");
  for (const auto& u : lineage["used_by"]) {
    std::cout << "  job/" << Safe(u["job"].get<std::string>()) << " at " << Safe(u["used_at"].get<std::string>()) << "\n";
  }
  return kExitOk;
}

int ArtifactsRemove(const Options& o) {
  auto ref = ParseArtifactRef(o.name);
  if (!ref.ok() || !ref->version) {
    std::cerr << "error: name the version to delete, as NAME:VERSION\n";
    return kExitUsage;
  }
  Client client(o);
  auto deleted = client.Call("DELETE", "/api/v1/artifacts/" + UrlEncode(ref->name) + "/versions/" +
                                           std::to_string(*ref->version));
  if (!deleted) return client.exit_code;
  std::cout << "artifact/" << Safe((*deleted)["deleted"].get<std::string>()) << " deleted\n";
  return kExitOk;
}


// `get` of a resource kind: GET COLLECTION/NAME with a name, else the
// collection's list under `key`. Printed whole for -o json|yaml and as
// names for -o name; then nullopt with `exit_code` set, else the items for
// the caller's table.
std::optional<std::vector<json>> GetOneOrAll(const Options& o, const std::string& collection,
                                             const std::string& key, int& exit_code) {
  Client client(o);
  std::vector<json> items;
  auto answer = client.Call("GET", o.name.empty() ? collection : collection + "/" + UrlEncode(o.name));
  exit_code = client.exit_code;
  if (!answer) return std::nullopt;
  exit_code = kExitOk;
  if (PrintStructured(o, *answer)) return std::nullopt;
  if (o.name.empty()) {
    for (const auto& item : (*answer)[key]) items.push_back(item);
  } else {
    items.push_back(*answer);
  }
  if (o.output == "name") {
    for (const auto& item : items) std::cout << Safe(FieldText(item, "name")) << "\n";
    return std::nullopt;
  }
  return items;
}

int ExpGet(const Options& o) {
  int exit_code = kExitOk;
  auto listed = GetOneOrAll(o, "/api/v1/experiments", "experiments", exit_code);
  if (!listed) return exit_code;
  const std::vector<json>& experiments = *listed;
  if (experiments.empty()) {
    std::cerr << "No experiments found.\n";
    return kExitOk;
  }
  Time now = SystemClock().Now();
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : experiments) {
    std::string objective = e["objective"].is_object()
                                ? FieldText(e["objective"], "metric") + " (" +
                                      FieldText(e["objective"], "direction") + ")"
                                : "-";
    rows.push_back({FieldText(e, "name"), FieldText(e, "state"), FieldText(e, "algorithm"),
                    objective, TrialsSummary(e), BestText(e),
                    Age(e["created_at"].get<std::string>(), now)});
  }
  std::cout << FormatTable({"NAME", "STATE", "ALGORITHM", "OBJECTIVE", "TRIALS", "BEST", "AGE"}, rows);
  return kExitOk;
}

int ExpDescribe(const Options& o) {
  Client client(o);
  auto e = client.Call("GET", "/api/v1/experiments/" + UrlEncode(o.name));
  if (!e) return client.exit_code;
  if (PrintStructured(o, *e)) return kExitOk;
  const json& j = *e;
  std::cout << "Name:       " << Safe(FieldText(j, "name")) << "\n"
            << "State:      "
            << Safe(FieldText(j, "state") + (FieldText(j, "message", "").empty()
                                                 ? ""
                                                 : " (" + FieldText(j, "message") + ")"))
            << "\n"
            << "Algorithm:  " << Safe(FieldText(j, "algorithm")) << "\n"
            << "Objective:  "
            << Safe(FieldText(j["objective"], "metric") + " (" +
                    FieldText(j["objective"], "direction") + ")")
            << "\n"
            << "Trials:     " << Safe(TrialsSummary(j)) << "\n"
            << "Best:       " << Safe(BestText(j));
  if (j["best_trial"].is_object()) std::cout << "  " << Safe(ParamsText(j["best_trial"]["params"]));
  std::cout << "\n\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : j["trials"]) {
    // A trial that ran to its end is "Completed" in the API; shown as its job
    // would be, "Succeeded", so one word means one thing on the command line.
    std::string state = FieldText(t, "state");
    if (state == "Completed") state = "Succeeded";
    if (state == "Running" && FieldText(t, "job_state", "") != "Running")
      state += " (" + FieldText(t, "job_state") + ")";
    rows.push_back({FieldText(t, "job"), state, t["step"].is_number() ? FieldText(t, "step") : "-",
                    FormatNumber(t["objective"].is_null() ? t["latest"] : t["objective"]),
                    ParamsText(t["params"]),
                    FieldText(t, "message", "").empty() ? "-" : FieldText(t, "message")});
  }
  std::cout << FormatTable({"TRIAL", "STATE", "STEP", "OBJECTIVE", "PARAMETERS", "NOTE"}, rows);
  return kExitOk;
}

// `headway exec` and `headway ssh`: a command (or a login shell) inside a
// running job, over the server's exec WebSocket.
int ExecInJob(const Options& o, bool ssh) {
  if (ssh && o.ssh_stdio) {
    // OpenSSH's ProxyCommand: this process's stdin and stdout carry an SSH
    // connection to the job. The host may be named NAME.headway, so that one
    // `Host *.headway` block in ~/.ssh/config serves every job.
    std::string name = o.name;
    if (name.ends_with(".headway")) name.resize(name.size() - 8);
    const std::string target = "/api/v1/jobs/" + UrlEncode(name) +
                               "/exec?rank=" + std::to_string(std::max(0, o.rank)) +
                               "&stdin=true&ssh=true";
    api::HttpClient http(Client::ServerUrl(o), Client::ApiToken(o), Client::CaFile(o));
    auto code = http.Exec(target, /*forward_stdin=*/true, /*tty=*/false);
    if (!code.ok()) {
      std::cerr << "error: " << code.status().message() << "\n";
      return kExitFailed;
    }
    return *code;
  }
  const bool terminal = ::isatty(0) == 1 && ::isatty(1) == 1;
  const bool tty = ssh ? terminal : o.exec_tty && terminal;
  const bool forward_stdin = ssh || o.exec_stdin || tty;
  if (o.exec_tty && !terminal && !ssh) {
    std::cerr << "warning: -t needs a terminal on stdin and stdout; running without one\n";
  }
  std::string target = "/api/v1/jobs/" + UrlEncode(o.name) + "/exec?rank=" +
                       std::to_string(std::max(0, o.rank)) + "&stdin=" +
                       (forward_stdin ? "true" : "false") + "&tty=" + (tty ? "true" : "false");
  for (const std::string& arg : o.exec_command) target += "&command=" + UrlEncode(arg);
  if (tty) {
    struct winsize size {};
    if (::ioctl(0, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
      target += "&columns=" + std::to_string(size.ws_col) + "&rows=" + std::to_string(size.ws_row);
    }
  }
  // A terminal session passes every key through (^C included) until it ends.
  struct RawTerminal {
    bool on = false;
    termios saved{};
    explicit RawTerminal(bool wanted) {
      if (!wanted || ::tcgetattr(0, &saved) != 0) return;
      termios raw = saved;
      ::cfmakeraw(&raw);
      on = ::tcsetattr(0, TCSANOW, &raw) == 0;
    }
    void Restore() {
      if (on) ::tcsetattr(0, TCSANOW, &saved);
      on = false;
    }
    ~RawTerminal() { Restore(); }
  } raw(tty);
  api::HttpClient http(Client::ServerUrl(o), Client::ApiToken(o), Client::CaFile(o));
  auto code = http.Exec(target, forward_stdin, tty);
  raw.Restore();
  if (!code.ok()) {
    std::cerr << "error: " << code.status().message() << "\n";
    return kExitFailed;
  }
  return *code;
}

// Notebooks: a Jupyter server per notebook, as a job on the pool.
std::string NotebookStatus(const json& n) {
  std::string state = FieldText(n, "state");
  if (state != "Running") return state;
  if (n.value("ready", false)) return "Ready";
  return FieldText(n, "job_state", "Starting") == "Queued" ? "Queued" : "Starting";
}

void PrintNotebookTable(const std::vector<json>& notebooks) {
  Time now = SystemClock().Now();
  std::vector<std::vector<std::string>> rows;
  for (const json& n : notebooks) {
    std::string idle = "-";
    if (n.contains("idle_since") && n["idle_since"].is_string()) {
      if (auto since = ParseRfc3339(n["idle_since"].get<std::string>())) {
        idle = FormatDuration(std::max(Duration(0), now - *since));
      }
    }
    std::string note = NotebookStatus(n) == "Queued" ? FieldText(n, "pending_reason", "")
                                                     : FieldText(n, "message", "");
    rows.push_back({FieldText(n, "name"), FieldText(n, "team"), NotebookStatus(n),
                    FieldText(n, "profile"), std::to_string(n.value("gpus", 0)), idle,
                    Age(n["created_at"].get<std::string>(), now), Safe(note)});
  }
  std::cout << FormatTable({"NAME", "TEAM", "STATUS", "PROFILE", "GPUS", "IDLE", "AGE", "MESSAGE"},
                           rows);
}

int NotebookStart(const Options& o) {
  Client client(o);
  json body = {{"name", o.name}};
  if (!o.team.empty()) body["team"] = o.team;
  if (!o.profile.empty()) body["profile"] = o.profile;
  if (o.gpus >= 0) body["gpus"] = o.gpus;
  auto n = client.Call("POST", "/api/v1/notebooks", body.dump());
  if (!n) return client.exit_code;
  if (o.wait) {
    // Until its server answers, or it ends without ever doing so.
    for (;;) {
      if ((*n).value("ready", false) || FieldText(*n, "state") != "Running") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      n = client.Call("GET", "/api/v1/notebooks/" + UrlEncode(o.name));
      if (!n) return client.exit_code;
    }
  }
  if (PrintStructured(o, *n)) return kExitOk;
  if (o.output == "name") {
    std::cout << Safe(o.name) << "\n";
    return kExitOk;
  }
  std::cout << "notebook/" << Safe(o.name) << " " << (o.wait ? NotebookStatus(*n) : "started")
            << " (job " << Safe(FieldText(*n, "job")) << "); open it with `headway notebook open "
            << Safe(o.name) << "`\n";
  return FieldText(*n, "state") == "Running" ? kExitOk : kExitFailed;
}

int NotebookList(const Options& o) {
  int exit_code = kExitOk;
  auto listed = GetOneOrAll(o, "/api/v1/notebooks", "notebooks", exit_code);
  if (!listed) return exit_code;
  const std::vector<json>& notebooks = *listed;
  if (notebooks.empty()) {
    std::cerr << "No notebooks found.\n";
    return kExitOk;
  }
  PrintNotebookTable(notebooks);
  return kExitOk;
}

int NotebookOpen(const Options& o) {
  Client client(o);
  auto link = client.Call("POST", "/api/v1/notebooks/" + UrlEncode(o.name) + "/login", "{}");
  if (!link) return client.exit_code;
  if (PrintStructured(o, *link)) return kExitOk;
  // A one-time link: good once, for a minute; it signs the browser in to
  // this notebook alone.
  // Absolute where the notebook has an origin of its own (NAME.DOMAIN).
  const std::string url = FieldText(*link, "url", "");
  std::cout << (url.starts_with("http://") || url.starts_with("https://") ? "" : Client::ServerUrl(o))
            << url << "\n";
  return kExitOk;
}

int NotebookAct(const Options& o, const std::string& action) {
  Client client(o);
  auto n = action == "delete"
               ? client.Call("DELETE", "/api/v1/notebooks/" + UrlEncode(o.name))
               : client.Call("POST", "/api/v1/notebooks/" + UrlEncode(o.name) + "/" + action, "{}");
  if (!n) return client.exit_code;
  if (PrintStructured(o, *n)) return kExitOk;
  std::cout << "notebook/" << Safe(o.name) << (action == "delete" ? " deleted" : " stopped")
            << "; its home is kept\n";
  return kExitOk;
}

int ExpStop(const Options& o) {
  Client client(o);
  auto e = client.Call("POST", "/api/v1/experiments/" + UrlEncode(o.name) + "/stop", "{}");
  if (!e) return client.exit_code;
  if (PrintStructured(o, *e)) return kExitOk;
  std::cout << "experiment/" << Safe(o.name) << " stopped\n";
  return kExitOk;
}

// "Succeeded, diverged: loss is NaN at step 40" for an ended job whose run
// was not healthy; empty otherwise.
std::string FinalVerdict(const json& j) {
  std::string state = FieldText(j, "state"), health = FieldText(j, "health");
  if (state != "Succeeded" && state != "Failed" && state != "Stopped") return {};
  std::string what = health == "Diverging"   ? "diverged"
                     : health == "Stalled"   ? "stalled"
                     : health == "Plateaued"   ? "plateaued"
                     : health == "Overfitting" ? "overfitted"
                                               : "";
  if (what.empty()) return {};
  std::string reason = FieldText(j, "health_reason", "");
  return state + ", " + what + (reason.empty() ? "" : ": " + reason);
}

int Describe(const Options& o) {
  Client client(o);
  auto job = client.Call("GET", "/api/v1/jobs/" + UrlEncode(o.name));
  if (!job) return client.exit_code;
  auto events = client.Call("GET", "/api/v1/jobs/" + UrlEncode(o.name) + "/events");
  if (!events) return client.exit_code;
  if (o.output == "json" || o.output == "yaml") {
    json both = *job;
    both["events"] = (*events)["events"];
    PrintStructured(o, both);
    return kExitOk;
  }
  const json& j = *job;
  const json& spec = j["spec"];
  std::ostringstream out;
  auto line = [&](const std::string& k, const std::string& v) {
    out << k << ":" << std::string(k.size() < 15 ? 15 - k.size() : 1, ' ') << Safe(v) << "\n";
  };
  line("Name", FieldText(j, "name"));
  line("Team", FieldText(j, "team"));
  if (!FieldText(j, "created_by", "").empty()) line("Created by", FieldText(j, "created_by"));
  line("Priority", FieldText(j, "priority"));
  line("State", FieldText(j, "state"));
  line("Reason", FieldText(j, "reason"));
  if (FieldText(j, "message", "") != "") line("Message", FieldText(j, "message"));
  if (FieldText(j, "pending_reason", "") != "") line("Pending", FieldText(j, "pending_reason"));
  if (j.value("queue_position", json()).is_number()) {
    std::string place = FieldText(j, "queue_position") + " in line";
    if (FieldText(j, "expected_start", "") != "")
      place += ", expected to start " + FieldText(j, "expected_start");
    line("Queue", place);
  }
  line("Exit code", FieldText(j, "exit_code"));
  line("Restarts", FieldText(j, "restarts") + " (max " +
                       std::to_string(spec["restart_policy"]["max_restarts"].get<int>()) + ")");
  if (j.value("preemptions", 0) > 0) line("Preemptions", FieldText(j, "preemptions"));
  std::string command;
  for (const auto& a : spec["command"]) command += (command.empty() ? "" : " ") + a.get<std::string>();
  for (const auto& a : spec["args"]) command += " " + a.get<std::string>();
  line("Command", command);
  const json& r = spec["resources"];
  line("Resources", std::to_string(r["nodes"].get<int>()) + " node(s) x " +
                        std::to_string(r["processes_per_node"].get<int>()) + " process(es) x " +
                        std::to_string(r["gpus_per_process"].get<int>()) + " GPU(s)");
  std::string gpu_ids;
  for (const auto& id : j["gpu_ids"]) gpu_ids += (gpu_ids.empty() ? "" : ",") + id.dump();
  line("GPU ids", gpu_ids.empty() ? "-" : gpu_ids);
  line("Time limit", FieldText(spec, "time_limit", "none"));
  std::string labels;
  for (auto it = j["labels"].begin(); it != j["labels"].end(); ++it) {
    labels += (labels.empty() ? "" : ",") + it.key() + "=" + it.value().get<std::string>();
  }
  line("Labels", labels.empty() ? "-" : labels);
  const json& p = j["progress"];
  line("Health", FieldText(j, "health") + (FieldText(j, "health_reason", "").empty()
                                               ? ""
                                               : " (" + FieldText(j, "health_reason") + ")"));
  if (std::string verdict = FinalVerdict(j); !verdict.empty()) line("Verdict", verdict);
  line("Progress", ProgressBar(p));
  std::string step = p["step"].is_number() ? std::to_string(p["step"].get<std::int64_t>()) : "-";
  if (p["total_steps"].is_number()) step += " / " + std::to_string(p["total_steps"].get<std::int64_t>());
  line("Step", step);
  if (p["epoch"].is_number()) {
    line("Epoch", FormatFixed(p["epoch"], 2) +
                      (p["total_epochs"].is_number() ? " / " + FormatFixed(p["total_epochs"], 2) : ""));
  }
  line("ETA",
       FieldText(j, "health") == "Stalled" ? "stalled" : FormatEta(p, FieldText(j, "state")));
  if (p["steps_per_second"].is_number()) line("Steps/s", FormatFixed(p["steps_per_second"], 2));
  if (p["samples_per_second"].is_number()) line("Samples/s", FormatFixed(p["samples_per_second"], 1));
  // As the dashboard says it: "4m12s ago".
  line("Last report", FieldText(p, "last_report_at", "").empty()
                          ? "-"
                          : Age(FieldText(p, "last_report_at"), SystemClock().Now()) + " ago (" +
                                FieldText(p, "last_report_at") + ")");
  if (p["metrics"].is_object() && !p["metrics"].empty()) {
    out << "Metrics:\n";
    for (auto it = p["metrics"].begin(); it != p["metrics"].end(); ++it) {
      out << "  " << Safe(it.key()) << ":" << std::string(it.key().size() < 22 ? 22 - it.key().size() : 1, ' ')
          << FormatNumber(it.value()) << "\n";
    }
  }
  line("Created", FieldText(j, "created_at"));
  line("Started", FieldText(j, "started_at"));
  line("Finished", FieldText(j, "finished_at"));
  out << "Events:\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : (*events)["events"]) {
    rows.push_back({"  " + e["time"].get<std::string>(), e["type"].get<std::string>(),
                    e["message"].get<std::string>()});
  }
  out << FormatTable({"  TIME", "TYPE", "MESSAGE"}, rows);
  std::cout << out.str();
  return kExitOk;
}

// Output already printed by `logs -f`, counted per rank, so that after a
// reconnect (the server restarted) the stream, read again from the start of
// the attempt, is printed only from where it was cut.
class LogResume {
 public:
  explicit LogResume(bool merged) : merged_(merged) {}

  // Prints what of `data` was not printed before the reconnect.
  void Feed(std::string_view data) {
    std::string out;
    while (!data.empty()) {
      std::size_t nl = data.find('\n');
      std::string_view piece = data.substr(0, nl == std::string_view::npos ? data.size() : nl + 1);
      data.remove_prefix(piece.size());
      // A raw stream's line is kept only as far as needed to tell the marker.
      if (merged_) {
        line_ += piece;
      } else if (line_.size() < 64) {
        line_ += piece.substr(0, 64 - line_.size());
      }
      bool whole = piece.back() == '\n';
      if (merged_ && !whole) continue;  // the server sends merged output in whole lines
      std::string key = merged_ ? RankOf(line_) : std::string();
      if (!whole) {
        // A raw stream's partial line: print it now, as it comes.
        out += Unseen(key, piece, false);
        continue;
      }
      static constexpr std::string_view kMarker = "headway: job restarted, following attempt ";
      if (line_.rfind(kMarker, 0) == 0) {
        lines_.clear();
        skip_.clear();
        partial_.clear();
        skip_partial_.clear();
        out += line_;
        attempt_ = std::atoi(line_.c_str() + kMarker.size());
      } else {
        out += Unseen(key, merged_ ? std::string_view(line_) : piece, true);
      }
      line_.clear();
    }
    if (!out.empty()) std::cout.write(out.data(), static_cast<std::streamsize>(out.size())).flush();
  }

  // Before reading the stream again from the start of the attempt.
  void Rewind() {
    skip_ = lines_;
    skip_partial_ = partial_;
    line_.clear();
  }
  // The attempt the last "job restarted" line moved to; -1 before any.
  int followed_attempt() const { return attempt_; }

 private:
  static std::string RankOf(const std::string& line) {
    if (line.rfind("[rank ", 0) != 0) return {};
    return line.substr(0, line.find(']') + 1);
  }

  std::string Unseen(const std::string& key, std::string_view piece, bool ends_line) {
    std::string shown;
    if (skip_[key] > 0) {
      if (ends_line) --skip_[key];
    } else {
      std::size_t& drop = skip_partial_[key];
      std::size_t n = std::min(drop, piece.size());
      drop -= n;
      shown = std::string(piece.substr(n));
    }
    if (ends_line) {
      ++lines_[key];
      partial_[key] = 0;
    } else {
      partial_[key] += piece.size();
    }
    return shown;
  }

  bool merged_;
  std::string line_;  // the line being read
  int attempt_ = -1;
  std::map<std::string, std::uint64_t> lines_;          // whole lines printed, per rank
  std::map<std::string, std::size_t> partial_;          // bytes of a partial last line printed
  std::map<std::string, std::uint64_t> skip_;           // to drop after a rewind
  std::map<std::string, std::size_t> skip_partial_;
};

bool Ended(const std::string& state) {
  return state == "Succeeded" || state == "Failed" || state == "Stopped";
}

int Logs(const Options& o) {
  // A relative --since is fixed once, here: a reconnect asks for the same lines.
  std::string since_time = o.since_time;
  if (!o.since.empty()) {
    auto d = ParseDuration(o.since);
    if (!d) {
      std::cerr << "error: --since must be a duration such as 90s, 5m or 2h, got '"
                << Safe(o.since) << "'\n";
      return kExitUsage;
    }
    since_time = FormatRfc3339(SystemClock().Now() - *d);
  } else if (!since_time.empty() && !ParseRfc3339(since_time)) {
    std::cerr << "error: --since-time must be an RFC 3339 time such as 2026-12-03T10:00:00Z, got '"
              << Safe(since_time) << "'\n";
    return kExitUsage;
  }
  Client client(o);
  std::string base = "/api/v1/jobs/" + UrlEncode(o.name) + "/logs";
  auto target = [&](bool with_tail, int attempt) {
    std::string query;
    if (!since_time.empty()) query += "&since_time=" + UrlEncode(since_time);
    if (o.timestamps) query += "&timestamps=true";
    if (o.rank >= 0) query += "&rank=" + std::to_string(o.rank);
    if (attempt >= 0) query += "&attempt=" + std::to_string(attempt);
    if (o.follow) query += "&follow=true";
    if (with_tail && o.tail >= 0) query += "&tail=" + std::to_string(o.tail);
    if (o.limit_bytes > 0) query += "&limit_bytes=" + std::to_string(o.limit_bytes);
    return query.empty() ? base : base + "?" + query.substr(1);
  };
  std::string error_body;
  if (!o.follow) {
    auto status = client.http().Stream(
        target(true, o.attempt),
        [](std::string_view data) { std::cout.write(data.data(), static_cast<std::streamsize>(data.size())).flush(); },
        error_body);
    if (!status.ok()) {
      std::cerr << "error: " << Safe(status.status().message()) << "\n";
      return kExitUnreachable;
    }
    if (*status >= 400) {
      Client::PrintError(*status, json::parse(error_body, nullptr, false), error_body);
      return kExitFailed;
    }
    return kExitOk;
  }
  // Following: across a server restart, reconnect and go on where it was cut.
  auto job = client.Call("GET", "/api/v1/jobs/" + UrlEncode(o.name));
  if (!job) return client.exit_code;
  int processes = 1;
  if (job->contains("spec") && (*job)["spec"].contains("resources")) {
    const json& r = (*job)["spec"]["resources"];
    processes = r.value("nodes", 1) * r.value("processes_per_node", 1);
  }
  int attempt = o.attempt >= 0 ? o.attempt : job->value("attempt", 0);
  LogResume resume(o.rank < 0 && processes > 1);
  // With --tail the lines before the first one shown are not counted, so a
  // reconnect cannot skip exactly what was printed: it asks for new output only.
  bool tailed = o.tail >= 0;
  bool first = true;
  bool timed_out = false;
  for (;;) {
    error_body.clear();
    std::string url = target(first, first && o.attempt < 0 ? -1 : attempt);
    if (!first && tailed) url += "&tail=0";
    auto status = client.http().Stream(url, [&](std::string_view data) { resume.Feed(data); },
                                       error_body);
    if (resume.followed_attempt() >= 0) attempt = resume.followed_attempt();
    first = false;
    bool away = !status.ok() || *status == 502 || *status == 503 || *status == 504;
    if (!away && *status >= 400) {
      Client::PrintError(*status, json::parse(error_body, nullptr, false), error_body);
      return kExitFailed;
    }
    // The stream ended: the job ended, or the server went away (a restart
    // may end a stream cleanly, too). Ask which.
    auto now = client.CallRetrying("/api/v1/jobs/" + UrlEncode(o.name), std::nullopt, timed_out);
    if (!now) return client.exit_code;
    int latest = now->value("attempt", 0);
    if (!away && Ended((*now)["state"].get<std::string>()) &&
        (o.attempt >= 0 || latest == attempt)) {
      return kExitOk;
    }
    if (tailed) {
      std::cerr << "headway: reconnected; output written while the server was away is not "
                   "shown (it is with `logs -f` without --tail)\n";
      resume = LogResume(o.rank < 0 && processes > 1);
      attempt = o.attempt >= 0 ? o.attempt : latest;
      continue;
    }
    resume.Rewind();
    if (o.attempt < 0 && latest != attempt) {
      // The job restarted while the server was away: finish the attempt that
      // was being read (a pinned follow ends with it), then move on as the
      // server would have.
      error_body.clear();
      auto rest = client.http().Stream(target(false, attempt),
                                       [&](std::string_view data) { resume.Feed(data); },
                                       error_body);
      (void)rest;
      attempt = latest;
      resume.Feed("headway: job restarted, following attempt " + std::to_string(attempt) + "\n");
    }
  }
}

int DeleteJobs(const Options& o) {
  Client client(o);
  int result = kExitOk;
  for (const auto& name : o.names) {
    auto answer = client.Call("DELETE", "/api/v1/jobs/" + UrlEncode(name) + (o.force ? "?force=true" : ""));
    if (!answer) {
      result = client.exit_code;
      continue;
    }
    bool deleted = answer->value("deleted", false);
    std::cout << "job/" << Safe(name) << (deleted ? " deleted" : " stopping; deleted once it has ended")
              << "\n";
  }
  return result;
}

int Rerun(const Options& o) {
  Client client(o);
  auto job = client.Call("POST", "/api/v1/jobs/" + UrlEncode(o.name) + "/rerun");
  if (!job) return client.exit_code;
  if (PrintStructured(o, *job)) return kExitOk;
  if (o.output == "name") {
    std::cout << Safe((*job)["name"].get<std::string>()) << "\n";
  } else {
    std::cout << "job/" << Safe((*job)["name"].get<std::string>()) << " submitted (rerun of "
              << Safe(o.name) << ")\n";
  }
  return kExitOk;
}

int Stop(const Options& o) {
  Client client(o);
  int result = kExitOk;
  std::string body = o.force ? json{{"force", true}}.dump() : std::string();
  for (const auto& name : o.names) {
    auto job = client.Call("POST", "/api/v1/jobs/" + UrlEncode(name) + "/stop", body);
    if (!job) {
      result = client.exit_code;
      continue;
    }
    std::string what = (*job)["state"] == "Stopped" ? "stopped" : o.force ? "killed" : "stopping";
    std::cout << "job/" << Safe(name) << " " << what << "\n";
  }
  return result;
}

int TokenCreate(const Options& o) {
  Client client(o);
  json body = {{"name", o.name}, {"team", o.team}, {"role", o.role}};
  if (!o.ttl.empty()) body["ttl"] = o.ttl;
  auto t = client.Call("POST", "/api/v1/tokens", body.dump());
  if (!t) return client.exit_code;
  if (PrintStructured(o, *t)) return kExitOk;
  std::cerr << "token/" << Safe(o.name) << " created"
            << ((*t)["expires_at"].is_string()
                    ? " (expires " + Safe((*t)["expires_at"].get<std::string>()) + ")"
                    : std::string())
            << "; it is shown only this once:\n";
  std::cout << Safe((*t)["token"].get<std::string>()) << "\n";
  return kExitOk;
}

int TokenList(const Options& o) {
  Client client(o);
  auto list = client.Call("GET", "/api/v1/tokens");
  if (!list) return client.exit_code;
  if (PrintStructured(o, *list)) return kExitOk;
  Time now = SystemClock().Now();
  std::vector<std::vector<std::string>> rows;
  for (const json& t : (*list)["tokens"]) {
    std::string team = t["team"].get<std::string>();
    std::string status = "active";
    std::optional<Time> expires;
    if (t.contains("expires_at") && t["expires_at"].is_string()) {
      expires = ParseRfc3339(t["expires_at"].get<std::string>());
    }
    if (!t["revoked_at"].is_null()) {
      status = "revoked";
    } else if (expires && *expires <= now) {
      status = "expired";
    } else if (expires) {
      status = "expires in " + FormatDuration(std::chrono::duration_cast<Duration>(*expires - now));
    }
    std::string kind = t.contains("session_of") && t["session_of"].is_string()
                           ? "session of " + t["session_of"].get<std::string>()
                           : "-";
    rows.push_back({t["name"].get<std::string>(), team.empty() ? "-" : team,
                    t["role"].get<std::string>(), status, kind,
                    Age(t["created_at"].get<std::string>(), now)});
  }
  std::cout << FormatTable({"NAME", "TEAM", "ROLE", "STATUS", "SESSION", "AGE"}, rows);
  return kExitOk;
}

int TokenRevoke(const Options& o) {
  Client client(o);
  auto t = client.Call("DELETE", "/api/v1/tokens/" + UrlEncode(o.name));
  if (!t) return client.exit_code;
  std::cout << "token/" << Safe(o.name) << " revoked\n";
  return kExitOk;
}

int Top(const Options& o, bool iterations_set) {
  Client client(o);
  TopOptions top;
  top.interval_s = o.interval_s;
  top.iterations = o.iterations;
  top.iterations_set = iterations_set;
  top.view.wide = o.output == "wide";
  top.view.server = client.http().base_url();
  if (!o.sort_by.empty()) {
    top.view.sort_key = o.sort_by;
    top.view.descending = false;
    for (const auto& [key, descending] : TopSortKeys()) {
      if (key == o.sort_by) top.view.descending = descending;
    }
    std::vector<json> none;
    if (Status s = SortJobs(none, o.sort_by); !s.ok()) {
      std::cerr << "error: " << Safe(s.message()) << "\n";
      return kExitUsage;
    }
  }
  if (o.reverse) top.view.descending = !top.view.descending;
  std::string target = std::string("/api/v1/jobs") + (o.active ? "?active=true" : "");
  return RunTop(top, [&]() -> Result<std::vector<json>> {
    auto resp = client.http().Request("GET", target);
    if (!resp.ok()) return resp.status();
    if (resp->status == 502 || resp->status == 503 || resp->status == 504) {
      return Unavailable("HTTP " + std::to_string(resp->status));
    }
    auto parsed = json::parse(resp->body, nullptr, false);
    if (resp->status >= 400 || !parsed.is_object() || !parsed["jobs"].is_array()) {
      std::string message = parsed.is_object() && parsed["error"].is_object()
                                ? parsed["error"].value("message", resp->body)
                                : resp->body;
      return Status(StatusCode::kInternal, "server answered " + std::to_string(resp->status) +
                                               ": " + message);
    }
    return parsed["jobs"].get<std::vector<json>>();
  });
}

constexpr int kExitTimeout = 4;

// Conditions: "ended", a state ("Succeeded" or "state=Succeeded"),
// "health=Diverging", "step>=N", "percent>=N".
int Wait(const Options& o) {
  std::string until = o.until;
  std::string kind = "state", want = until;
  double threshold = 0;
  if (until == "ended") {
    kind = "ended";
  } else if (auto eq = until.find(">="); eq != std::string::npos) {
    kind = until.substr(0, eq);
    try {
      threshold = std::stod(until.substr(eq + 2));
    } catch (const std::exception&) {
      std::cerr << "error: --until " << until << ": expected a number after >=\n";
      return kExitUsage;
    }
    if (kind != "step" && kind != "percent") {
      std::cerr << "error: --until supports step>=N and percent>=N\n";
      return kExitUsage;
    }
  } else if (auto eq = until.find('='); eq != std::string::npos) {
    kind = until.substr(0, eq);
    want = until.substr(eq + 1);
    if (kind != "state" && kind != "health") {
      std::cerr << "error: --until supports ended, state=X, health=X, step>=N, percent>=N\n";
      return kExitUsage;
    }
  }
  // A state or health that no job can be in would make `wait` block forever.
  if (kind == "state") {
    auto state = ParseJobState(want);
    if (!state) {
      std::string states;
      for (JobState s : {JobState::kQueued, JobState::kStarting, JobState::kRunning,
                         JobState::kSucceeded, JobState::kFailed, JobState::kStopped,
                         JobState::kPreempted}) {
        states += std::string(states.empty() ? "" : ", ") + std::string(JobStateName(s));
      }
      std::cerr << "error: --until " << Safe(until) << ": not a job state; expected ended, one of "
                << states << ", health=HEALTH, step>=N or percent>=N\n";
      return kExitUsage;
    }
    want = std::string(JobStateName(*state));
  } else if (kind == "health") {
    auto health = ParseHealth(want);
    if (!health) {
      std::string healths;
      for (Health h : {Health::kProgressing, Health::kStalled, Health::kDiverging,
                       Health::kPlateaued, Health::kOverfitting, Health::kUnknown}) {
        healths += std::string(healths.empty() ? "" : ", ") + std::string(HealthName(h));
      }
      std::cerr << "error: --until " << Safe(until) << ": not a health; expected one of "
                << healths << "\n";
      return kExitUsage;
    }
    want = std::string(HealthName(*health));
  }
  auto timeout = ParseDuration(o.timeout);
  if (!timeout) {
    std::cerr << "error: --timeout must be a duration like 90s or 10m\n";
    return kExitUsage;
  }
  auto deadline = std::chrono::steady_clock::now() + *timeout;
  Client client(o);
  for (;;) {
    // A server that restarts while we wait is waited for, too.
    bool timed_out = false;
    auto job = client.CallRetrying(
        "/api/v1/jobs/" + UrlEncode(o.name),
        timeout->count() > 0 ? std::optional(deadline) : std::nullopt, timed_out);
    if (timed_out) {
      std::cerr << "error: timed out waiting for job/" << Safe(o.name) << " --until " << Safe(until)
                << " (the server did not answer)\n";
      return kExitTimeout;
    }
    if (!job) return client.exit_code;
    std::string state = (*job)["state"].get<std::string>();
    bool ended = state == "Succeeded" || state == "Failed" || state == "Stopped";
    const json& p = (*job)["progress"];
    bool met = false;
    if (kind == "ended") met = ended;
    if (kind == "state") met = state == want;
    if (kind == "health") met = (*job)["health"] == want;
    if (kind == "step") met = p["step"].is_number() && p["step"].get<double>() >= threshold;
    if (kind == "percent") met = p["percent"].is_number() && p["percent"].get<double>() >= threshold;
    if (met) {
      std::cout << "job/" << Safe(o.name) << " " << Safe(state) << "\n";
      return kExitOk;
    }
    if (ended) {
      std::cerr << "error: job/" << Safe(o.name) << " ended (" << Safe(state)
                << ") before --until " << Safe(until) << " held\n";
      return kExitFailed;
    }
    if (timeout->count() > 0 && std::chrono::steady_clock::now() >= deadline) {
      std::cerr << "error: timed out waiting for job/" << Safe(o.name) << " --until " << Safe(until) << "\n";
      return kExitTimeout;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

// `headway version`: this client's version and, unless --client, the server's.
int PrintVersion(const Options& o) {
  json out = {{"client", {{"version", headway::Version()}}}};
  int result = kExitOk;
  if (!o.client_only) {
    Client client(o);
    auto v = client.Call("GET", "/api/v1/version");
    if (v) {
      out["server"] = *v;
      out["server"]["url"] = client.http().base_url();
    } else {
      result = client.exit_code;
    }
  }
  if (PrintStructured(o, out)) return result;
  std::cout << "Client Version: " << headway::Version() << "\n";
  if (out.contains("server")) {
    std::cout << "Server Version: " << Safe(out["server"].value("version", "?")) << " ("
              << Safe(out["server"]["url"].get<std::string>()) << ")\n";
  }
  return result;
}

// ---------------------------------------------------------------------------
// Workflows (Argo's REST API, in Headway's one namespace)

const char* const kWorkflows = "/api/v1/workflows/default";

bool IsArgoWorkflow(const std::string& text) {
  return text.find("argoproj.io/") != std::string::npos &&
         text.find("Workflow") != std::string::npos &&
         text.find("CronWorkflow") == std::string::npos &&
         text.find("WorkflowTemplate") == std::string::npos;
}

// A duration between two RFC 3339 times ("" for the second: now).
std::string Between(const json& from, const json& to, Time now) {
  if (!from.is_string()) return "-";
  auto start = ParseRfc3339(from.get<std::string>());
  if (!start) return "-";
  Time end = now;
  if (to.is_string()) {
    auto t = ParseRfc3339(to.get<std::string>());
    if (t) end = *t;
  }
  return FormatDuration(std::chrono::duration_cast<Duration>(end - *start) / 1000 * 1000);
}

// PROGRESS: steps done of all, with the time-weighted percent while it runs.
std::string WorkflowProgress(const json& status) {
  std::string text = FieldText(status, "progress");
  const json& h = status.value("headway", json::object());
  if (h.contains("percent") && h["percent"].is_number()) {
    text += " (" + FormatMetric(h["percent"]) + "%)";
  }
  return text;
}

// ETA from the critical path; "+" when some step still to run has no estimate.
std::string WorkflowEta(const json& status) {
  const json& h = status.value("headway", json::object());
  if (!h.contains("eta_seconds") || !h["eta_seconds"].is_number()) return "-";
  auto ms = static_cast<std::int64_t>(h["eta_seconds"].get<double>() * 1000);
  std::string text = ms < 1000 ? "0s" : FormatDuration(Duration(ms / 1000 * 1000));
  return h.value("eta_is_lower_bound", false) ? text + "+" : text;
}

std::string WorkflowPhase(const json& wf) {
  const json& status = wf["status"];
  std::string phase = FieldText(status, "phase");
  if (wf["spec"].value("suspend", false) && phase == "Running") phase = "Running (Suspended)";
  return phase;
}

int WorkflowList(const Options& o) {
  Client client(o);
  std::string target = kWorkflows;
  if (!o.labels.empty()) {
    std::string selector;
    for (const std::string& l : o.labels) selector += (selector.empty() ? "" : ",") + l;
    target += "?listOptions.labelSelector=" + UrlEncode(selector);
  }
  auto list = client.Call("GET", target);
  if (!list) return client.exit_code;
  if (PrintStructured(o, *list)) return kExitOk;
  const json& items = (*list)["items"];
  if (o.output == "name") {
    for (const auto& w : items) std::cout << Safe(w["metadata"].value("name", "")) << "\n";
    return kExitOk;
  }
  if (items.empty()) {
    std::cerr << "No workflows found.\n";
    return kExitOk;
  }
  Time now = SystemClock().Now();
  std::vector<std::vector<std::string>> rows;
  for (const auto& w : items) {
    const json& status = w["status"];
    if (!o.state.empty() && status.value("phase", "") != o.state) continue;
    const json& h = status.value("headway", json::object());
    rows.push_back({w["metadata"].value("name", ""), WorkflowPhase(w), FieldText(h, "health"),
                    WorkflowProgress(status), WorkflowEta(status),
                    Age(w["metadata"].value("creationTimestamp", ""), now),
                    Between(status["startedAt"], status["finishedAt"], now),
                    FieldText(status, "message", "")});
  }
  std::cout << FormatTable(
      {"NAME", "STATUS", "HEALTH", "PROGRESS", "ETA", "AGE", "DURATION", "MESSAGE"}, rows);
  return kExitOk;
}

// The node tree of a workflow, as `argo get` prints it.
void PrintNodeTree(const json& nodes, const std::string& id, const std::string& indent, Time now,
                   std::vector<std::vector<std::string>>& rows, int depth = 0) {
  if (!nodes.contains(id) || depth > 64) return;
  const json& n = nodes[id];
  std::string type = FieldText(n, "type");
  // Step groups are structure only: their children print at their level.
  if (type != "StepGroup") {
    std::string job = n.contains("headway") ? n["headway"].value("job", "") : "";
    rows.push_back({indent + FieldText(n, "displayName"), FieldText(n, "templateName", ""), type,
                    FieldText(n, "phase"), job.empty() ? "" : job,
                    Between(n["startedAt"], n["finishedAt"], now), FieldText(n, "message", "")});
  }
  if (!n.contains("children")) return;
  std::string next = type == "StepGroup" ? indent : indent + "  ";
  for (const auto& child : n["children"]) {
    if (child.is_string())
      PrintNodeTree(nodes, child.get<std::string>(), next, now, rows, depth + 1);
  }
}

int PrintWorkflow(const Options& o, const json& wf) {
  if (PrintStructured(o, wf)) return kExitOk;
  const std::string name = wf["metadata"].value("name", "");
  if (o.output == "name") {
    std::cout << Safe(name) << "\n";
    return kExitOk;
  }
  Time now = SystemClock().Now();
  const json& status = wf["status"];
  std::cout << "Name:         " << Safe(name) << "\n"
            << "Team:         " << Safe(wf["metadata"]["labels"].value("headway.dev/team", "-"))
            << "\n"
            << "Status:       " << Safe(WorkflowPhase(wf)) << "\n";
  if (status.contains("message"))
    std::cout << "Message:      " << Safe(FieldText(status, "message")) << "\n";
  std::cout << "Created:      " << Safe(Age(wf["metadata"].value("creationTimestamp", ""), now))
            << " ago\n"
            << "Duration:     " << Safe(Between(status["startedAt"], status["finishedAt"], now))
            << "\n"
            << "Progress:     " << Safe(WorkflowProgress(status)) << "\n";
  if (status.contains("headway") && status["headway"].is_object()) {
    const json& h = status["headway"];
    std::cout << "ETA:          " << Safe(WorkflowEta(status)) << "\n"
              << "Health:       " << Safe(FieldText(h, "health")) << "\n";
    if (h.contains("critical_path") && h["critical_path"].is_array() &&
        !h["critical_path"].empty()) {
      std::string path;
      for (const auto& id : h["critical_path"]) {
        if (id.is_string()) path += (path.empty() ? "" : " -> ") + id.get<std::string>();
      }
      std::cout << "Critical path: " << Safe(path) << "\n";
    }
  }
  if (status.contains("outputs") && status["outputs"].contains("parameters")) {
    std::cout << "Outputs:\n";
    for (const auto& p : status["outputs"]["parameters"]) {
      std::cout << "  " << Safe(FieldText(p, "name")) << ": " << Safe(FieldText(p, "value", ""))
                << "\n";
    }
  }
  if (status.contains("nodes") && status["nodes"].is_object()) {
    std::vector<std::vector<std::string>> rows;
    PrintNodeTree(status["nodes"], name, "", now, rows);
    // The exit handler hangs off no parent: listed after the tree.
    for (const auto& [id, n] : status["nodes"].items()) {
      if (n.value("name", "") == name + ".onExit") {
        PrintNodeTree(status["nodes"], id, "", now, rows);
      }
    }
    std::cout << "\n"
              << FormatTable({"STEP", "TEMPLATE", "TYPE", "PHASE", "JOB", "DURATION", "MESSAGE"},
                             rows);
  }
  return kExitOk;
}

bool WorkflowEnded(const json& wf) {
  std::string phase = wf["status"].value("phase", "");
  return phase == "Succeeded" || phase == "Failed" || phase == "Error";
}

int WorkflowWaitFor(const Options& o, Client& client, const std::string& name) {
  for (;;) {
    bool timed_out = false;
    auto wf = client.CallRetrying(std::string(kWorkflows) + "/" + UrlEncode(name), std::nullopt,
                                  timed_out);
    if (!wf) return client.exit_code;
    if (WorkflowEnded(*wf)) {
      int rc = PrintWorkflow(o, *wf);
      if (rc != kExitOk) return rc;
      return (*wf)["status"].value("phase", "") == "Succeeded" ? kExitOk : kExitFailed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

// A workflow just made (submit, resubmit): its name, or the whole of it.
int PrintNewWorkflow(const Options& o, const json& wf) {
  if (PrintStructured(o, wf)) return kExitOk;
  const std::string name = wf["metadata"].value("name", "");
  if (o.output == "name") {
    std::cout << Safe(name) << "\n";
  } else {
    std::cout << "workflow/" << Safe(name) << " submitted\n";
  }
  return kExitOk;
}

// `argo submit -p NAME=VALUE`: each sets the workflow argument NAME (added
// when the manifest does not declare it). Empty on a manifest that is not
// a YAML or JSON map, or a parameter without '=' (said on stderr).
std::optional<std::string> WithParameters(const std::string& text,
                                          const std::vector<std::string>& parameters) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    std::cerr << "error: the manifest is not YAML or JSON: " << e.what() << "\n";
    return std::nullopt;
  }
  if (!root.IsMap()) {
    std::cerr << "error: -p needs a Workflow manifest (a map)\n";
    return std::nullopt;
  }
  for (const std::string& parameter : parameters) {
    std::size_t eq = parameter.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "error: -p takes NAME=VALUE, got '" << Safe(parameter) << "'\n";
      return std::nullopt;
    }
    const std::string name = parameter.substr(0, eq);
    YAML::Node list = root["spec"]["arguments"]["parameters"];
    bool found = false;
    if (list.IsSequence()) {
      for (YAML::Node p : list) {
        if (p.IsMap() && p["name"] && p["name"].IsScalar() && p["name"].Scalar() == name) {
          p["value"] = parameter.substr(eq + 1);
          p.remove("valueFrom");
          found = true;
        }
      }
    }
    if (!found) {
      YAML::Node p;
      p["name"] = name;
      p["value"] = parameter.substr(eq + 1);
      root["spec"]["arguments"]["parameters"].push_back(p);
    }
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str());
}

int WorkflowSubmit(const Options& o, std::string text) {
  if (text.empty()) {
    bool ok = true;
    text = ReadSpecFile(o.file, ok);
    if (!ok) return kExitUsage;
  }
  if (!o.parameters.empty()) {
    auto with = WithParameters(text, o.parameters);
    if (!with) return kExitUsage;
    text = std::move(*with);
  }
  Client client(o);
  auto wf = client.Call("POST", kWorkflows, text, "application/yaml");
  if (!wf) return client.exit_code;
  const std::string name = (*wf)["metadata"].value("name", "");
  if (o.wait) return WorkflowWaitFor(o, client, name);
  return PrintNewWorkflow(o, *wf);
}

int WorkflowGet(const Options& o) {
  Client client(o);
  auto wf = client.Call("GET", std::string(kWorkflows) + "/" + UrlEncode(o.name));
  if (!wf) return client.exit_code;
  return PrintWorkflow(o, *wf);
}

// suspend, resume, stop, terminate, retry: PUT .../NAME/ACTION.
int WorkflowAct(const Options& o, const std::string& action) {
  Client client(o);
  json body = json::object();
  if (action == "retry") {
    if (o.restart_successful) body["restartSuccessful"] = true;
    if (!o.node_selector.empty()) body["nodeFieldSelector"] = o.node_selector;
  }
  auto wf = client.Call("PUT", std::string(kWorkflows) + "/" + UrlEncode(o.name) + "/" + action,
                        body.dump());
  if (!wf) return client.exit_code;
  if (PrintStructured(o, *wf)) return kExitOk;
  static const std::map<std::string, std::string> kDone = {{"suspend", "suspended"},
                                                           {"resume", "resumed"},
                                                           {"stop", "stopping"},
                                                           {"terminate", "terminating"},
                                                           {"retry", "retrying"}};
  std::cout << "workflow/" << Safe(o.name) << " " << kDone.at(action) << "\n";
  return kExitOk;
}

int WorkflowResubmit(const Options& o) {
  Client client(o);
  json body = json::object();
  if (o.memoized) body["memoized"] = true;
  auto wf = client.Call("PUT", std::string(kWorkflows) + "/" + UrlEncode(o.name) + "/resubmit",
                        body.dump());
  if (!wf) return client.exit_code;
  return PrintNewWorkflow(o, *wf);
}

int WorkflowDelete(const Options& o) {
  Client client(o);
  auto done = client.Call("DELETE", std::string(kWorkflows) + "/" + UrlEncode(o.name));
  if (!done) return client.exit_code;
  std::cout << "workflow/" << Safe(o.name) << " deleted\n";
  return kExitOk;
}

// Every step's output, in the order the steps started, each line prefixed
// with the step's name.
int WorkflowLogs(const Options& o) {
  Client client(o);
  auto wf = client.Call("GET", std::string(kWorkflows) + "/" + UrlEncode(o.name));
  if (!wf) return client.exit_code;
  std::vector<std::pair<std::string, json>> pods;
  const json nodes = (*wf)["status"].value("nodes", json::object());
  for (const auto& [id, n] : nodes.items()) {
    if (n.value("type", "") == "Pod" && n.contains("headway") && n["headway"].contains("job")) {
      pods.emplace_back(n.value("startedAt", ""), n);
    }
  }
  std::sort(pods.begin(), pods.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  int rc = kExitOk;
  for (const auto& [started, n] : pods) {
    const std::string job = n["headway"].value("job", "");
    std::string error_body, pending;
    const std::string prefix = n.value("displayName", job) + ": ";
    auto status = client.http().Stream(
        "/api/v1/jobs/" + UrlEncode(job) + "/logs",
        [&](std::string_view data) {
          pending.append(data);
          std::size_t nl;
          while ((nl = pending.find('\n')) != std::string::npos) {
            std::cout << Safe(prefix) << Safe(pending.substr(0, nl)) << "\n";
            pending.erase(0, nl + 1);
          }
        },
        error_body);
    if (!pending.empty()) std::cout << Safe(prefix) << Safe(pending) << "\n";
    if (!status.ok() || *status >= 400) rc = kExitFailed;  // e.g. a job deleted since
  }
  std::cout.flush();
  return rc;
}

void AddOutputFlag(CLI::App* cmd, Options& o, std::vector<std::string> allowed) {
  cmd->add_option("-o,--output", o.output, "output format")->check(CLI::IsMember(allowed));
}

}  // namespace

std::shared_ptr<void> AddClientCommands(CLI::App& app, int& exit_code,
                                        std::string admin_token_file) {
  auto options = std::make_shared<Options>();
  Options& o = *options;
  o.admin_token_file = std::move(admin_token_file);
  app.add_option("--server", o.server,
                 "Headway server URL (default: $HEADWAY_SERVER or http://127.0.0.1:8080)");
  app.add_option("--cacert", o.ca_file,
                 "PEM file of the CA (or self-signed certificate) an https:// server's "
                 "certificate chains to (default: $HEADWAY_CA_FILE, and the system's CAs)");
  app.add_option("--token", o.token,
                 "user token (default: $HEADWAY_API_TOKEN or $HEADWAY_USER_TOKEN, the config "
                 "file's, or the admin token a local server wrote to DATA_DIR/admin-token)");
  app.add_option("--config", o.config_path,
                 "client config file with server, token and cacert (default: $HEADWAY_CONFIG, "
                 "else $XDG_CONFIG_HOME/headway/config or ~/.config/headway/config; must be "
                 "mode 0600). Flags win over environment variables, which win over it");
  // The config file is read once the command line is parsed, before the
  // command runs; the server and `completion` do not read it.
  app.parse_complete_callback([&app, &o] {
    if (app.got_subcommand("server") || app.got_subcommand("completion")) return;
    auto config = LoadClientConfig(o.config_path);
    if (!config.ok()) throw CLI::ValidationError("--config", config.status().message());
    for (const auto& warning : config->warnings) std::cerr << "warning: " << warning << "\n";
    o.config = std::move(*config);
  });

  auto* token = app.add_subcommand("token", "User tokens of the server");
  token->require_subcommand(1);
  auto* token_create = token->add_subcommand("create", "Create a token and print its secret once");
  token_create->add_option("name", o.name, "token name (lowercase letters, digits, '-')")->required();
  token_create->add_option("--team", o.team, "the team it acts for (not needed for admin)");
  token_create->add_option("--role", o.role, "viewer (reads), member (runs its team's jobs) or admin")
      ->capture_default_str()
      ->check(CLI::IsMember({"viewer", "member", "admin"}));
  token_create->add_option("--ttl", o.ttl,
                           "stop working after this long, e.g. 24h, 7d (default: until revoked)");
  AddOutputFlag(token_create, o, {"json", "yaml"});
  token_create->callback([&exit_code, &o] { exit_code = TokenCreate(o); });
  auto* token_list = token->add_subcommand("list", "List tokens (never their secrets)");
  AddOutputFlag(token_list, o, {"json", "yaml"});
  token_list->callback([&exit_code, &o] { exit_code = TokenList(o); });
  auto* token_revoke = token->add_subcommand("revoke", "Revoke a token; it stops working at once");
  token_revoke->add_option("name", o.name, "token name")->required();
  token_revoke->callback([&exit_code, &o] { exit_code = TokenRevoke(o); });

  auto* submit = app.add_subcommand("submit", "Submit a job from a YAML or JSON spec");
  submit->add_option("-f,--file", o.file, "job spec file, or - for standard input")->required();
  submit->add_option("--name", o.submit_name,
                     "name the job this, whatever the spec's name or generateName says");
  AddOutputFlag(submit, o, {"name", "json", "yaml"});
  submit->callback([&exit_code, &o] { exit_code = Submit(o); });

  auto* get = app.add_subcommand("get", "List resources (jobs, queues, nodes)");
  get->add_option("resource", o.resource, "what to list")
      ->required()
      ->check(CLI::IsMember(
          {"jobs", "job", "queues", "queue", "nodes", "node", "workflows", "workflow", "wf"}));
  get->add_option("name", o.name, "one job's name");
  get->add_option("--state", o.state, "only jobs in this state (Queued, Running, ...)");
  get->add_option("--team", o.team, "only this team's jobs");
  get->add_option("-l,--selector", o.labels, "label filter key=value (repeatable)");
  get->add_flag("--active", o.active, "only jobs that have not ended");
  get->add_flag("-w,--watch", o.watch,
                "after the list, print a row for each job that changes, until interrupted "
                "(reconnects across server restarts)");
  get->add_option("--sort-by", o.sort_by,
                  "jobs: sort by a column (name, state, health, progress, step, eta, loss, gpus, "
                  "age, team, restarts, priority) or a field path such as .progress.percent");
  get->add_flag("--no-headers", o.no_headers, "print the table without its header line");
  AddOutputFlag(get, o, {"wide", "json", "yaml", "name"});
  get->callback([&exit_code, &o] { exit_code = Get(o); });

  auto* exp = app.add_subcommand("exp", "Hyperparameter experiments: create, get, describe, stop");
  exp->require_subcommand(1);
  auto* exp_create = exp->add_subcommand("create", "Start an experiment from a YAML or JSON spec");
  exp_create->add_option("-f,--file", o.file, "experiment spec file, or - for standard input")->required();
  AddOutputFlag(exp_create, o, {"json", "yaml"});
  exp_create->callback([&exit_code, &o] { exit_code = ExpCreate(o); });
  auto* exp_get = exp->add_subcommand("get", "List experiments with their best trial");
  exp_get->add_option("name", o.name, "one experiment");
  AddOutputFlag(exp_get, o, {"json", "yaml", "name"});
  exp_get->callback([&exit_code, &o] { exit_code = ExpGet(o); });
  auto* exp_describe = exp->add_subcommand("describe", "An experiment's trials: parameters and objective");
  exp_describe->add_option("name", o.name, "experiment name")->required();
  AddOutputFlag(exp_describe, o, {"json", "yaml"});
  exp_describe->callback([&exit_code, &o] { exit_code = ExpDescribe(o); });
  auto* exp_stop = exp->add_subcommand("stop", "Stop an experiment and its running trials");
  exp_stop->add_option("name", o.name, "experiment name")->required();
  AddOutputFlag(exp_stop, o, {"json", "yaml"});
  exp_stop->callback([&exit_code, &o] { exit_code = ExpStop(o); });

  auto* workflow = app.add_subcommand(
      "workflow",
      "Argo-compatible workflows: submit, get, list, logs, retry, suspend, resume, stop, delete");
  workflow->alias("wf");
  workflow->require_subcommand(1);
  auto* wf_submit = workflow->add_subcommand("submit", "Submit an Argo Workflow (YAML or JSON)");
  wf_submit->add_option("file", o.file, "the manifest, or - for standard input")->required();
  wf_submit->add_flag("--wait", o.wait, "wait until it ends; exit 0 only if it succeeded");
  wf_submit->add_option("-p,--parameter", o.parameters,
                        "set a workflow argument NAME=VALUE (repeatable)");
  AddOutputFlag(wf_submit, o, {"json", "yaml", "name"});
  wf_submit->callback([&exit_code, &o] { exit_code = WorkflowSubmit(o); });
  auto* wf_list = workflow->add_subcommand("list", "List workflows, newest first");
  wf_list->add_option("--status", o.state,
                      "only workflows in this phase (Running, Succeeded, ...)");
  wf_list->add_option("-l,--selector", o.labels, "label filter key=value (repeatable)");
  AddOutputFlag(wf_list, o, {"json", "yaml", "name"});
  wf_list->callback([&exit_code, &o] { exit_code = WorkflowList(o); });
  for (const char* verb : {"get", "describe"}) {
    auto* wf_get = workflow->add_subcommand(verb, "A workflow with its steps");
    wf_get->add_option("name", o.name, "workflow name")->required();
    AddOutputFlag(wf_get, o, {"json", "yaml", "name"});
    wf_get->callback([&exit_code, &o] { exit_code = WorkflowGet(o); });
  }
  auto* wf_logs =
      workflow->add_subcommand("logs", "Every step's output, each line with its step's name");
  wf_logs->add_option("name", o.name, "workflow name")->required();
  wf_logs->callback([&exit_code, &o] { exit_code = WorkflowLogs(o); });
  auto* wf_resubmit =
      workflow->add_subcommand("resubmit", "Run a workflow again as a new one (NAME-xxxxx)");
  wf_resubmit->add_option("name", o.name, "workflow name")->required();
  wf_resubmit->add_flag("--memoized", o.memoized,
                        "keep the steps that succeeded; run only the others");
  AddOutputFlag(wf_resubmit, o, {"json", "yaml", "name"});
  wf_resubmit->callback([&exit_code, &o] { exit_code = WorkflowResubmit(o); });
  auto* wf_retry =
      workflow->add_subcommand("retry", "Run the failed steps again, with what depends on them");
  wf_retry->add_option("name", o.name, "workflow name")->required();
  wf_retry->add_flag("--restart-successful", o.restart_successful,
                     "also run again the succeeded steps that --node-field-selector names");
  wf_retry->add_option("--node-field-selector", o.node_selector,
                       "only nodes whose name contains this (displayName=NAME)");
  AddOutputFlag(wf_retry, o, {"json", "yaml"});
  wf_retry->callback([&exit_code, &o] { exit_code = WorkflowAct(o, "retry"); });
  for (const auto& [verb, help] : std::vector<std::pair<const char*, const char*>>{
           {"suspend", "Start no new step until resumed"},
           {"resume", "Resume a suspended workflow, or its waiting suspend steps"},
           {"stop", "Stop its running steps, then run its exit handlers"},
           {"terminate", "Stop its running steps without running exit handlers"}}) {
    auto* cmd = workflow->add_subcommand(verb, help);
    cmd->add_option("name", o.name, "workflow name")->required();
    AddOutputFlag(cmd, o, {"json", "yaml"});
    std::string action = verb;
    cmd->callback([&exit_code, &o, action] { exit_code = WorkflowAct(o, action); });
  }
  auto* wf_delete =
      workflow->add_subcommand("delete", "Delete a workflow (its running steps are stopped)");
  wf_delete->add_option("name", o.name, "workflow name")->required();
  wf_delete->callback([&exit_code, &o] { exit_code = WorkflowDelete(o); });

  auto* exec = app.add_subcommand(
      "exec", "Run a command inside a running job: `headway exec NAME [--rank N] [-i] [-t] -- CMD...`");
  exec->add_option("name", o.name, "job name")->required();
  exec->add_option("command", o.exec_command, "the command and its arguments, after --")->required();
  exec->add_option("--rank", o.rank, "which rank's process to join (default 0)");
  exec->add_flag("-i,--stdin", o.exec_stdin, "pass this terminal's (or pipe's) stdin to it");
  exec->add_flag("-t,--tty", o.exec_tty, "run it on a terminal (with -i: interactive programs)");
  exec->callback([&exit_code, &o] { exit_code = ExecInJob(o, false); });
  auto* ssh = app.add_subcommand(
      "ssh", "An interactive shell inside a running job (or notebook's job), as its account");
  ssh->add_option("name", o.name, "job name")->required();
  ssh->add_option("--rank", o.rank, "which rank's process to join (default 0)");
  ssh->add_flag("--stdio", o.ssh_stdio,
                "carry an SSH connection on stdin and stdout, for OpenSSH's ProxyCommand "
                "(VS Code Remote-SSH, scp, sftp, ssh -L); NAME may end in .headway");
  ssh->callback([&exit_code, &o] { exit_code = ExecInJob(o, true); });

  auto* notebook = app.add_subcommand(
      "notebook", "Jupyter notebooks on the pool: start, list, open, stop, delete");
  notebook->alias("nb");
  notebook->require_subcommand(1);
  auto* nb_start = notebook->add_subcommand(
      "start", "Start a notebook (or start a stopped or culled one again, with the same home)");
  nb_start->add_option("name", o.name, "notebook name")->required();
  nb_start->add_option("--profile", o.profile, "one of the server's notebook profiles");
  nb_start->add_option("--gpus", o.gpus, "GPUs (default: the profile's; at most the profile's)");
  nb_start->add_option("--team", o.team, "team (default: your token's)");
  nb_start->add_flag("--wait", o.wait, "wait until its server answers");
  AddOutputFlag(nb_start, o, {"json", "yaml", "name"});
  nb_start->callback([&exit_code, &o] { exit_code = NotebookStart(o); });
  auto* nb_list = notebook->add_subcommand("list", "List notebooks: status, GPUs, idle time");
  nb_list->alias("get");
  nb_list->add_option("name", o.name, "one notebook");
  AddOutputFlag(nb_list, o, {"json", "yaml", "name"});
  nb_list->callback([&exit_code, &o] { exit_code = NotebookList(o); });
  auto* nb_open = notebook->add_subcommand(
      "open", "Print a one-time link that opens the notebook in a browser (good for a minute)");
  nb_open->add_option("name", o.name, "notebook name")->required();
  AddOutputFlag(nb_open, o, {"json", "yaml"});
  nb_open->callback([&exit_code, &o] { exit_code = NotebookOpen(o); });
  for (const auto& [verb, help] : std::vector<std::pair<const char*, const char*>>{
           {"stop", "Stop a notebook's server; its GPUs go back to the pool, its home stays"},
           {"delete", "Stop a notebook and forget it; its home stays"}}) {
    auto* cmd = notebook->add_subcommand(verb, help);
    cmd->add_option("name", o.name, "notebook name")->required();
    AddOutputFlag(cmd, o, {"json", "yaml"});
    std::string action = verb;
    cmd->callback([&exit_code, &o, action] { exit_code = NotebookAct(o, action); });
  }

  auto* artifacts = app.add_subcommand("artifacts", "Checkpoints, models, datasets and outputs, with lineage");
  artifacts->require_subcommand(1);
  auto* artifacts_ls = artifacts->add_subcommand("ls", "List artifact versions");
  artifacts_ls->add_option("name", o.name, "only this artifact's versions");
  artifacts_ls->add_option("--kind", o.kind, "only checkpoints, models, datasets or outputs")
      ->check(CLI::IsMember({"checkpoint", "model", "dataset", "output"}));
  artifacts_ls->add_option("--job", o.job, "only those this job produced");
  artifacts_ls->add_option("--team", o.team, "only this team's");
  AddOutputFlag(artifacts_ls, o, {"json", "yaml", "name"});
  artifacts_ls->callback([&exit_code, &o] { exit_code = ArtifactsList(o); });
  auto* artifacts_put = artifacts->add_subcommand("put", "Store a file as a new version of an artifact");
  artifacts_put->add_option("file", o.file, "the file to store")->required();
  artifacts_put->add_option("--name", o.name, "artifact name (lowercase letters, digits, - _ .)")->required();
  artifacts_put->add_option("--kind", o.kind, "checkpoint, model, dataset or output (default)")
      ->check(CLI::IsMember({"checkpoint", "model", "dataset", "output"}));
  artifacts_put->add_option("--team", o.team, "the team it belongs to (default: your token's)");
  artifacts_put->add_option("--job", o.job, "the job that produced it");
  artifacts_put->add_option("--step", o.step, "the step it was produced at")->check(CLI::NonNegativeNumber);
  artifacts_put->add_option("--label", o.labels, "KEY=VALUE (repeatable)");
  artifacts_put->add_option("--metric", o.metrics, "NAME=NUMBER at the time, e.g. eval_loss=0.41 (repeatable)");
  AddOutputFlag(artifacts_put, o, {"json", "yaml"});
  artifacts_put->callback([&exit_code, &o] { exit_code = ArtifactsPut(o); });
  auto* artifacts_get = artifacts->add_subcommand("get", "Download a version (its digest checked)");
  artifacts_get->add_option("ref", o.name, "NAME (latest ready version) or NAME:VERSION")->required();
  artifacts_get->add_option("destination", o.destination, "file or directory (default: ./NAME)");
  artifacts_get->callback([&exit_code, &o] { exit_code = ArtifactsGet(o); });
  auto* artifacts_describe = artifacts->add_subcommand("describe", "A version in detail, with its lineage");
  artifacts_describe->add_option("ref", o.name, "NAME or NAME:VERSION")->required();
  AddOutputFlag(artifacts_describe, o, {"json", "yaml"});
  artifacts_describe->callback([&exit_code, &o] { exit_code = ArtifactsDescribe(o, false); });
  auto* artifacts_lineage = artifacts->add_subcommand("lineage", "Which job made a version, what it read, who used it");
  artifacts_lineage->add_option("ref", o.name, "NAME or NAME:VERSION")->required();
  AddOutputFlag(artifacts_lineage, o, {"json", "yaml"});
  artifacts_lineage->callback([&exit_code, &o] { exit_code = ArtifactsDescribe(o, true); });
  auto* artifacts_rm = artifacts->add_subcommand("rm", "Delete a version (its bytes go once no version holds them)");
  artifacts_rm->add_option("ref", o.name, "NAME:VERSION")->required();
  artifacts_rm->callback([&exit_code, &o] { exit_code = ArtifactsRemove(o); });

  auto* describe = app.add_subcommand("describe", "Show a job in detail, with its events");
  describe->add_option("resource", o.resource, "job")->required()->check(CLI::IsMember({"job"}));
  describe->add_option("name", o.name, "job name")->required();
  AddOutputFlag(describe, o, {"json", "yaml"});
  describe->callback([&exit_code, &o] { exit_code = Describe(o); });

  auto* logs = app.add_subcommand("logs", "Print a job's output (all ranks, or one)");
  logs->add_option("name", o.name, "job name")->required();
  logs->add_flag("-f,--follow", o.follow, "keep printing until the job ends");
  logs->add_option("--rank", o.rank, "only this rank")->check(CLI::NonNegativeNumber);
  logs->add_option("--attempt", o.attempt, "an earlier attempt (0 = first run)")
      ->check(CLI::NonNegativeNumber);
  logs->add_option("--tail", o.tail,
                   "only the newest N lines of each rank (default: all; with -f, then follow)")
      ->check(CLI::NonNegativeNumber);
  logs->add_option("--limit-bytes", o.limit_bytes,
                   "at most N bytes of whole lines; a cut output ends with a line saying so "
                   "(with --tail: the newest lines that fit)")
      ->check(CLI::PositiveNumber);
  auto* since = logs->add_option("--since", o.since,
                                 "only lines written in the last DURATION (90s, 5m, 2h)");
  logs->add_option("--since-time", o.since_time,
                   "only lines written from this RFC 3339 time on (2026-12-03T10:00:00Z)")
      ->excludes(since);
  logs->add_flag("--timestamps", o.timestamps,
                 "start each line with when it was written (RFC 3339, UTC)");
  logs->callback([&exit_code, &o] { exit_code = Logs(o); });

  auto* stop = app.add_subcommand("stop", "Stop jobs (SIGTERM, then SIGKILL after the grace)");
  stop->add_option("names", o.names, "job names")->required();
  stop->add_flag("--force", o.force,
                 "kill at once with SIGKILL, without the job's grace (admin tokens only)");
  stop->callback([&exit_code, &o] { exit_code = Stop(o); });
  auto* del = app.add_subcommand("delete", "Delete ended jobs with their progress, events, logs and files");
  del->add_option("resource", o.resource, "job")->required()->check(CLI::IsMember({"job", "jobs"}));
  del->add_option("names", o.names, "job names")->required();
  del->add_flag("--force", o.force,
                "a job that has not ended is stopped (SIGTERM, SIGKILL after its grace) and "
                "deleted once it has ended");
  del->callback([&exit_code, &o] { exit_code = DeleteJobs(o); });
  auto* rerun = app.add_subcommand("rerun", "Submit a new job with an existing job's spec, named NAME-2, NAME-3, ...");
  rerun->add_option("name", o.name, "the job to run again")->required();
  AddOutputFlag(rerun, o, {"name", "json", "yaml"});
  rerun->callback([&exit_code, &o] { exit_code = Rerun(o); });
  auto* top = app.add_subcommand(
      "top", "Live, sorted view of jobs that fits the terminal (q quits, s sorts, r reverses)");
  top->add_option("-n,--interval", o.interval_s, "seconds between refreshes (default 2)")->check(CLI::Range(0.1, 3600.0));
  auto* iterations = top->add_option("--iterations", o.iterations,
                                     "stop after this many refreshes (0: never; without a "
                                     "terminal the default is 1)")
                         ->check(CLI::NonNegativeNumber);
  top->add_flag("--active", o.active, "only jobs that have not ended");
  top->add_option("--sort-by", o.sort_by,
                  "first sort column: progress, eta, name, gpus, age, state (keys s, <, > and r "
                  "change it while running)")
      ->check(CLI::IsMember({"progress", "eta", "name", "gpus", "age", "state"}));
  top->add_flag("--reverse", o.reverse, "sort the other way");
  AddOutputFlag(top, o, {"wide"});
  top->callback([&exit_code, &o, iterations] { exit_code = Top(o, iterations->count() > 0); });

  auto* wait = app.add_subcommand(
      "wait", "Block until a job reaches a condition (exit 0), ends without it (1), or times out (4)");
  wait->add_option("name", o.name, "job name")->required();
  wait->add_option("--until", o.until,
                   "ended | STATE | state=STATE | health=HEALTH | step>=N | percent>=N")
      ->capture_default_str();
  wait->add_option("--timeout", o.timeout, "give up after this long (0: never)")->capture_default_str();
  wait->callback([&exit_code, &o] { exit_code = Wait(o); });

  auto* version = app.add_subcommand("version", "Print the client's version and the server's");
  version->add_flag("--client", o.client_only, "only the client's (no request)");
  AddOutputFlag(version, o, {"json", "yaml"});
  version->callback([&exit_code, &o] { exit_code = PrintVersion(o); });

  AddCompletionCommand(app, exit_code);
  return options;
}

}  // namespace headway::cli
