#include "cli/commands.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <yaml-cpp/yaml.h>

#include "api/http_client.h"
#include "cli/output.h"
#include "core/time.h"

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
  // token create
  std::string role = "member";
  std::string ttl;     // "": never expires
  std::string output;  // "", "wide", "json", "yaml", "name"
  // submit
  std::string file;
  // get
  std::string resource;
  std::string name;
  std::string state;
  std::string team;
  std::vector<std::string> labels;
  // logs
  bool follow = false;
  int rank = -1;
  int attempt = -1;
  std::int64_t tail = -1;        // logs: each rank's newest N lines (-1: all)
  std::int64_t limit_bytes = 0;  // logs: at most N bytes of whole lines (0: no bound)
  // stop
  std::vector<std::string> names;
  bool force = false;
  // top
  double interval_s = 2;
  int iterations = 0;  // 0: until interrupted
  bool active = false;
  // wait
  std::string until = "ended";
  std::string timeout = "0";
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
  explicit Client(const Options& o) : options_(o), http_(ServerUrl(o), ApiToken(o), CaFile(o)) {}

  static std::string CaFile(const Options& o) {
    if (!o.ca_file.empty()) return o.ca_file;
    if (const char* env = std::getenv("HEADWAY_CA_FILE"); env && *env) return env;
    return {};
  }

  static std::string ApiToken(const Options& o) {
    if (!o.token.empty()) return o.token;
    if (const char* env = std::getenv("HEADWAY_API_TOKEN"); env && *env) return env;
    std::ifstream file(o.admin_token_file);
    std::string line;
    if (file && std::getline(file, line)) return line;
    return {};
  }

  static std::string ServerUrl(const Options& o) {
    if (!o.server.empty()) return o.server;
    if (const char* env = std::getenv("HEADWAY_SERVER"); env && *env) return env;
    return "http://127.0.0.1:8080";
  }

  // Sends a request; prints the error and sets exit_code on failure.
  std::optional<json> Call(std::string_view method, const std::string& target,
                           std::string body = {},
                           std::string_view content_type = "application/json",
                           const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    auto resp = http_.Request(method, target, std::move(body), content_type, headers);
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
    } else {
      std::cerr << "error: server answered " << status << ": " << Safe(raw) << "\n";
    }
  }

  HttpClient& http() { return http_; }
  int exit_code = kExitOk;

 private:
  const Options& options_;
  HttpClient http_;
};

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

std::string Or(const json& j, const char* key, const std::string& fallback = "-") {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (j[key].is_string()) {
    std::string s = j[key].get<std::string>();
    return s.empty() ? fallback : s;
  }
  return j[key].dump();
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
  Client client(o);
  std::error_code ec;
  std::string cwd = std::filesystem::current_path(ec).string();
  auto job = client.Call("POST", "/api/v1/jobs", text, "application/yaml",
                         {{"X-Headway-Submit-Dir", cwd}});
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

std::string ProgressBar(const json& progress) {
  if (!progress.is_object() || !progress["percent"].is_number()) return "-";
  double pct = progress["percent"].get<double>();
  int filled = static_cast<int>(pct / 12.5 + 0.5);
  std::string bar;
  for (int i = 0; i < 8; ++i) bar += i < filled ? "\u2588" : "\u2591";
  char text[16];
  std::snprintf(text, sizeof text, "%3.0f%% ", pct);
  return text + bar;
}

std::string FormatNumber(const json& v) {
  if (v.is_string()) return v.get<std::string>();  // NaN, Infinity
  if (!v.is_number()) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v.get<double>());
  return text;
}

std::string FormatEta(const json& progress, const std::string& state) {
  if (state != "Running") return "-";
  if (!progress.is_object() || !progress["eta_seconds"].is_number()) return "?";
  auto seconds = static_cast<std::int64_t>(progress["eta_seconds"].get<double>());
  return FormatDuration(std::chrono::seconds(seconds));
}

const std::vector<std::string> kJobColumns = {"NAME",  "STATE", "HEALTH", "PROGRESS", "STEP",
                                              "ETA",   "LOSS",  "GPUS",   "AGE"};
const std::vector<std::string> kWideColumns = {"TEAM", "RESTARTS", "REASON"};

std::vector<std::string> JobRow(const json& job, bool wide, Time now) {
  std::string state = job["state"].get<std::string>();
  const json& progress = job.contains("progress") ? job["progress"] : json();
  std::string step = "-";
  if (progress.is_object() && progress["step"].is_number()) {
    step = std::to_string(progress["step"].get<std::int64_t>());
    if (progress["total_steps"].is_number()) {
      step += "/" + std::to_string(progress["total_steps"].get<std::int64_t>());
    }
  }
  std::string loss = "-";
  if (progress.is_object() && progress["metrics"].is_object() && progress["metrics"].contains("loss")) {
    loss = FormatNumber(progress["metrics"]["loss"]);
  }
  std::string health = state == "Running" ? Or(job, "health") : "-";
  std::vector<std::string> row = {job["name"].get<std::string>(),
                                  state,
                                  health,
                                  ProgressBar(progress),
                                  step,
                                  FormatEta(progress, state),
                                  loss,
                                  std::to_string(job["gpus"].get<int>()),
                                  Age(job["created_at"].get<std::string>(), now)};
  if (wide) {
    row.push_back(Or(job, "team"));
    row.push_back(std::to_string(job["restarts"].get<int>()));
    std::string reason = Or(job, "pending_reason", "");
    if (reason.empty() && state == "Running") reason = Or(job, "health_reason", "");
    if (reason.empty()) reason = Or(job, "message", "");
    row.push_back(reason.empty() ? "-" : reason);
  }
  return row;
}

std::vector<std::string> JobHeader(bool wide) {
  std::vector<std::string> header = kJobColumns;
  if (wide) header.insert(header.end(), kWideColumns.begin(), kWideColumns.end());
  return header;
}

std::string JobsTable(const json& jobs, bool wide) {
  std::vector<std::vector<std::string>> rows;
  Time now = SystemClock().Now();
  for (const auto& job : jobs) rows.push_back(JobRow(job, wide, now));
  return FormatTable(JobHeader(wide), rows);
}

int GetJobs(const Options& o) {
  Client client(o);
  if (!o.name.empty()) {
    auto job = client.Call("GET", "/api/v1/jobs/" + UrlEncode(o.name));
    if (!job) return client.exit_code;
    if (PrintStructured(o, *job)) return kExitOk;
    bool wide = o.output == "wide";
    std::cout << FormatTable(JobHeader(wide), {JobRow(*job, wide, SystemClock().Now())});
    return kExitOk;
  }
  std::string query;
  auto add = [&](const std::string& k, const std::string& v) {
    query += (query.empty() ? "?" : "&") + k + "=" + UrlEncode(v);
  };
  if (!o.state.empty()) add("state", o.state);
  if (!o.team.empty()) add("team", o.team);
  if (!o.labels.empty()) {
    std::string joined;
    for (const auto& l : o.labels) joined += (joined.empty() ? "" : ",") + l;
    add("label", joined);
  }
  auto list = client.Call("GET", "/api/v1/jobs" + query);
  if (!list) return client.exit_code;
  if (PrintStructured(o, *list)) return kExitOk;
  const json& jobs = (*list)["jobs"];
  if (o.output == "name") {
    for (const auto& job : jobs) std::cout << Safe(job["name"].get<std::string>()) << "\n";
    return kExitOk;
  }
  if (jobs.empty()) {
    std::cerr << "No jobs found.\n";
    return kExitOk;
  }
  std::cout << JobsTable(jobs, o.output == "wide");
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
    std::string reason = Or(q, "pending_reason", "");
    // next_job is empty when it is another team's (hidden from this token).
    std::string next = Or(q, "next_job", "");
    if (!reason.empty()) reason = (next.empty() ? "another team's job" : next) + ": " + reason;
    rows.push_back({Or(q, "name"), Or(q, "executor"), gpus, IntOr(q["borrowing_limit"], "-"),
                    FormatNumber(q["weight"]), std::to_string(q["running"].get<int>()),
                    std::to_string(q["pending"].get<int>()), reason.empty() ? "-" : reason});
    if (wide) {
      // What the team's members may ask for (admins are not bounded).
      rows.back().push_back(IntOr(q["member_max_priority"], "-"));
      rows.back().push_back(Or(q, "member_max_grace"));
    }
  }
  std::vector<std::string> header = {"NAME",    "EXECUTOR", "GPUS", "BORROW",
                                     "WEIGHT",  "RUNNING",  "PENDING", "NEXT"};
  if (wide) {
    header.push_back("MAX-PRIORITY");
    header.push_back("MAX-GRACE");
  }
  std::cout << FormatTable(header, rows);
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
    rows.push_back({Or(n, "name"), Or(n, "executor"), std::to_string(gpus),
                    std::to_string(used), std::to_string(gpus - used), jobs.empty() ? "-" : jobs});
  }
  std::cout << FormatTable({"NAME", "EXECUTOR", "GPUS", "IN-USE", "FREE", "JOBS"}, rows);
  return kExitOk;
}

int Get(const Options& o) {
  if (o.resource == "queues" || o.resource == "queue") return GetQueues(o);
  if (o.resource == "nodes" || o.resource == "node") return GetNodes(o);
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
         Or(e, "max_trials") + " done";
}

std::string BestText(const json& e) {
  const json& best = e["best_trial"];
  if (!best.is_object()) return "-";
  return Or(best, "job") + " " + FormatNumber(best["objective"]);
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

int ExpGet(const Options& o) {
  Client client(o);
  std::vector<json> experiments;
  if (!o.name.empty()) {
    auto e = client.Call("GET", "/api/v1/experiments/" + UrlEncode(o.name));
    if (!e) return client.exit_code;
    if (PrintStructured(o, *e)) return kExitOk;
    experiments.push_back(*e);
  } else {
    auto list = client.Call("GET", "/api/v1/experiments");
    if (!list) return client.exit_code;
    if (PrintStructured(o, *list)) return kExitOk;
    for (const auto& e : (*list)["experiments"]) experiments.push_back(e);
  }
  if (o.output == "name") {
    for (const auto& e : experiments) std::cout << Safe(e["name"].get<std::string>()) << "\n";
    return kExitOk;
  }
  if (experiments.empty()) {
    std::cerr << "No experiments found.\n";
    return kExitOk;
  }
  Time now = SystemClock().Now();
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : experiments) {
    std::string objective = e["objective"].is_object()
                                ? Or(e["objective"], "metric") + " (" + Or(e["objective"], "direction") + ")"
                                : "-";
    rows.push_back({Or(e, "name"), Or(e, "state"), Or(e, "algorithm"), objective, TrialsSummary(e),
                    BestText(e), Age(e["created_at"].get<std::string>(), now)});
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
  std::cout << "Name:       " << Safe(Or(j, "name")) << "\n"
            << "State:      " << Safe(Or(j, "state") + (Or(j, "message", "").empty() ? "" : " (" + Or(j, "message") + ")")) << "\n"
            << "Algorithm:  " << Safe(Or(j, "algorithm")) << "\n"
            << "Objective:  " << Safe(Or(j["objective"], "metric") + " (" + Or(j["objective"], "direction") + ")") << "\n"
            << "Trials:     " << Safe(TrialsSummary(j)) << "\n"
            << "Best:       " << Safe(BestText(j));
  if (j["best_trial"].is_object()) std::cout << "  " << Safe(ParamsText(j["best_trial"]["params"]));
  std::cout << "\n\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : j["trials"]) {
    std::string state = Or(t, "state");
    if (state == "Running" && Or(t, "job_state", "") != "Running") state += " (" + Or(t, "job_state") + ")";
    rows.push_back({Or(t, "job"), state, t["step"].is_number() ? Or(t, "step") : "-",
                    FormatNumber(t["objective"].is_null() ? t["latest"] : t["objective"]),
                    ParamsText(t["params"]), Or(t, "message", "").empty() ? "-" : Or(t, "message")});
  }
  std::cout << FormatTable({"TRIAL", "STATE", "STEP", "OBJECTIVE", "PARAMETERS", "NOTE"}, rows);
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
  line("Name", Or(j, "name"));
  line("Team", Or(j, "team"));
  if (!Or(j, "created_by", "").empty()) line("Created by", Or(j, "created_by"));
  line("Priority", Or(j, "priority"));
  line("State", Or(j, "state"));
  line("Reason", Or(j, "reason"));
  if (Or(j, "message", "") != "") line("Message", Or(j, "message"));
  if (Or(j, "pending_reason", "") != "") line("Pending", Or(j, "pending_reason"));
  line("Exit code", Or(j, "exit_code"));
  line("Restarts", Or(j, "restarts") + " (max " +
                       std::to_string(spec["restart_policy"]["max_restarts"].get<int>()) + ")");
  if (j.value("preemptions", 0) > 0) line("Preemptions", Or(j, "preemptions"));
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
  line("Time limit", Or(spec, "time_limit", "none"));
  std::string labels;
  for (auto it = j["labels"].begin(); it != j["labels"].end(); ++it) {
    labels += (labels.empty() ? "" : ",") + it.key() + "=" + it.value().get<std::string>();
  }
  line("Labels", labels.empty() ? "-" : labels);
  const json& p = j["progress"];
  line("Health", Or(j, "health") + (Or(j, "health_reason", "").empty() ? "" : " (" + Or(j, "health_reason") + ")"));
  line("Progress", ProgressBar(p));
  std::string step = p["step"].is_number() ? std::to_string(p["step"].get<std::int64_t>()) : "-";
  if (p["total_steps"].is_number()) step += " / " + std::to_string(p["total_steps"].get<std::int64_t>());
  line("Step", step);
  if (p["epoch"].is_number()) {
    line("Epoch", FormatNumber(p["epoch"]) +
                      (p["total_epochs"].is_number() ? " / " + FormatNumber(p["total_epochs"]) : ""));
  }
  line("ETA", FormatEta(p, Or(j, "state")));
  if (p["steps_per_second"].is_number()) line("Steps/s", FormatNumber(p["steps_per_second"]));
  if (p["samples_per_second"].is_number()) line("Samples/s", FormatNumber(p["samples_per_second"]));
  line("Last report", Or(p, "last_report_at"));
  if (p["metrics"].is_object() && !p["metrics"].empty()) {
    out << "Metrics:\n";
    for (auto it = p["metrics"].begin(); it != p["metrics"].end(); ++it) {
      out << "  " << Safe(it.key()) << ":" << std::string(it.key().size() < 22 ? 22 - it.key().size() : 1, ' ')
          << FormatNumber(it.value()) << "\n";
    }
  }
  line("Created", Or(j, "created_at"));
  line("Started", Or(j, "started_at"));
  line("Finished", Or(j, "finished_at"));
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

int Logs(const Options& o) {
  Client client(o);
  std::string target = "/api/v1/jobs/" + UrlEncode(o.name) + "/logs";
  std::string query;
  if (o.rank >= 0) query += "&rank=" + std::to_string(o.rank);
  if (o.attempt >= 0) query += "&attempt=" + std::to_string(o.attempt);
  if (o.follow) query += "&follow=true";
  if (o.tail >= 0) query += "&tail=" + std::to_string(o.tail);
  if (o.limit_bytes > 0) query += "&limit_bytes=" + std::to_string(o.limit_bytes);
  if (!query.empty()) target += "?" + query.substr(1);
  std::string error_body;
  auto status = client.http().Stream(
      target, [](std::string_view data) { std::cout.write(data.data(), static_cast<std::streamsize>(data.size())).flush(); },
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

int Top(const Options& o) {
  Client client(o);
  for (int i = 0; o.iterations == 0 || i < o.iterations; ++i) {
    auto list = client.Call("GET", std::string("/api/v1/jobs") + (o.active ? "?active=true" : ""));
    if (!list) return client.exit_code;
    std::string screen = "\033[H\033[2J";
    screen += "headway top   " + Safe(client.http().base_url()) + "   " +
              FormatRfc3339(SystemClock().Now()).substr(0, 19) + "   (Ctrl-C to quit)\n\n";
    screen += (*list)["jobs"].empty() ? "No jobs.\n" : JobsTable((*list)["jobs"], o.output == "wide");
    std::cout << screen << std::flush;
    if (o.iterations != 0 && i + 1 == o.iterations) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(o.interval_s * 1000)));
  }
  return kExitOk;
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
  auto timeout = ParseDuration(o.timeout);
  if (!timeout) {
    std::cerr << "error: --timeout must be a duration like 90s or 10m\n";
    return kExitUsage;
  }
  auto deadline = std::chrono::steady_clock::now() + *timeout;
  Client client(o);
  for (;;) {
    auto job = client.Call("GET", "/api/v1/jobs/" + UrlEncode(o.name));
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
                 "user token (default: $HEADWAY_API_TOKEN, or the admin token a local server "
                 "wrote to DATA_DIR/admin-token)");

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
  AddOutputFlag(submit, o, {"name", "json", "yaml"});
  submit->callback([&exit_code, &o] { exit_code = Submit(o); });

  auto* get = app.add_subcommand("get", "List resources (jobs, queues, nodes)");
  get->add_option("resource", o.resource, "what to list")
      ->required()
      ->check(CLI::IsMember({"jobs", "job", "queues", "queue", "nodes", "node"}));
  get->add_option("name", o.name, "one job's name");
  get->add_option("--state", o.state, "only jobs in this state (Queued, Running, ...)");
  get->add_option("--team", o.team, "only this team's jobs");
  get->add_option("-l,--selector", o.labels, "label filter key=value (repeatable)");
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
  logs->callback([&exit_code, &o] { exit_code = Logs(o); });

  auto* stop = app.add_subcommand("stop", "Stop jobs (SIGTERM, then SIGKILL after the grace)");
  stop->add_option("names", o.names, "job names")->required();
  stop->add_flag("--force", o.force,
                 "kill at once with SIGKILL, without the job's grace (admin tokens only)");
  stop->callback([&exit_code, &o] { exit_code = Stop(o); });
  auto* top = app.add_subcommand("top", "Live view of jobs with progress, refreshed");
  top->add_option("-n,--interval", o.interval_s, "seconds between refreshes")->check(CLI::Range(0.1, 3600.0));
  top->add_option("--iterations", o.iterations, "stop after this many refreshes (0: never)")
      ->check(CLI::NonNegativeNumber);
  top->add_flag("--active", o.active, "only jobs that have not ended");
  AddOutputFlag(top, o, {"wide"});
  top->callback([&exit_code, &o] { exit_code = Top(o); });

  auto* wait = app.add_subcommand(
      "wait", "Block until a job reaches a condition (exit 0), ends without it (1), or times out (4)");
  wait->add_option("name", o.name, "job name")->required();
  wait->add_option("--until", o.until,
                   "ended | STATE | state=STATE | health=HEALTH | step>=N | percent>=N")
      ->capture_default_str();
  wait->add_option("--timeout", o.timeout, "give up after this long (0: never)")->capture_default_str();
  wait->callback([&exit_code, &o] { exit_code = Wait(o); });
  return options;
}

}  // namespace headway::cli
