#include "cli/job_commands.h"

#include <sys/ioctl.h>
#include <termios.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/experiment_commands.h"
#include "cli/job_table.h"
#include "cli/top.h"
#include "cli/workflow_commands.h"
#include "core/job.h"

namespace headway::cli {

using nlohmann::json;

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
  auto answer =
      retry ? client.CallRetrying(target, std::nullopt, timed_out) : client.Call("GET", target);
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

namespace {

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
    std::string gpus =
        std::to_string(q["gpus_in_use"].get<int>()) + "/" + IntOr(q["nominal_gpus"], "-");
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
  std::vector<std::string> header = {"NAME",   "EXECUTOR", "GPUS",    "BORROW",
                                     "WEIGHT", "RUNNING",  "PENDING", "NEXT"};
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
  std::cout << FormatTable({"NAME", "EXECUTOR", "GPUS", "IN-USE", "FREE", "JOBS"}, rows,
                           !o.no_headers);
  return kExitOk;
}

}  // namespace

int Get(const Options& o) {
  if (o.resource == "queues" || o.resource == "queue") return GetQueues(o);
  if (o.resource == "nodes" || o.resource == "node") return GetNodes(o);
  if (o.resource == "workflows" || o.resource == "workflow" || o.resource == "wf") {
    return o.name.empty() ? WorkflowList(o) : WorkflowGet(o);
  }
  return GetJobs(o);
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
  std::string target =
      "/api/v1/jobs/" + UrlEncode(o.name) + "/exec?rank=" + std::to_string(std::max(0, o.rank)) +
      "&stdin=" + (forward_stdin ? "true" : "false") + "&tty=" + (tty ? "true" : "false");
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

namespace {

// "Succeeded, diverged: loss is NaN at step 40" for an ended job whose run
// was not healthy; empty otherwise.
std::string FinalVerdict(const json& j) {
  std::string state = FieldText(j, "state"), health = FieldText(j, "health");
  if (!IsEndedState(state)) return {};
  std::string what = health == "Diverging"     ? "diverged"
                     : health == "Stalled"     ? "stalled"
                     : health == "Plateaued"   ? "plateaued"
                     : health == "Overfitting" ? "overfitted"
                                               : "";
  if (what.empty()) return {};
  std::string reason = FieldText(j, "health_reason", "");
  return state + ", " + what + (reason.empty() ? "" : ": " + reason);
}

}  // namespace

namespace {

double SecondsBetween(Time from, Time to) {
  return static_cast<double>((to - from).count()) / 1000.0;
}

}  // namespace

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
  const Time now = SystemClock().Now();
  const std::optional<Time> finished = ParseRfc3339(FieldText(j, "finished_at", ""));
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
    if (auto start = ParseRfc3339(FieldText(j, "expected_start", ""))) {
      const double in = SecondsBetween(now, *start);
      place += ", expected to start " + (in > 0 ? "in " + FormatSeconds(in) : std::string("now")) +
               " (" + FieldText(j, "expected_start") + ")";
    }
    line("Queue", place);
  }
  line("Exit code", FieldText(j, "exit_code"));
  line("Restarts", FieldText(j, "restarts") + " (max " +
                       std::to_string(spec["restart_policy"]["max_restarts"].get<int>()) + ")");
  if (j.value("preemptions", 0) > 0) line("Preemptions", FieldText(j, "preemptions"));
  std::string command;
  for (const auto& a : spec["command"])
    command += (command.empty() ? "" : " ") + a.get<std::string>();
  for (const auto& a : spec["args"]) command += " " + a.get<std::string>();
  line("Command", command);
  const json& r = spec["resources"];
  line("Resources", std::to_string(r["nodes"].get<int>()) + " node(s) x " +
                        std::to_string(r["processes_per_node"].get<int>()) + " process(es) x " +
                        std::to_string(r["gpus_per_process"].get<int>()) + " GPU(s)");
  if (j.contains("elastic") && j["elastic"].is_object()) {
    const json& e = j["elastic"];
    const std::string range =
        e["min"].dump() + "-" + e["max"].dump() + " " + e["unit"].get<std::string>();
    line("Elastic", e["size"].is_number() ? e["size"].dump() + " now, of " + range
                                          : range + ", admitted at " + e["min"].dump());
    // What it measured: steps/s at each size, and its last restart.
    std::string measured;
    if (e.contains("steps_per_second") && e["steps_per_second"].is_object()) {
      for (const auto& [size, rate] : e["steps_per_second"].items()) {
        char text[64];
        std::snprintf(text, sizeof text, "%s%s: %.2f steps/s", measured.empty() ? "" : ", ",
                      size.c_str(), rate.get<double>());
        measured += text;
      }
    }
    if (e.contains("restart_seconds") && e["restart_seconds"].is_number()) {
      char text[48];
      std::snprintf(text, sizeof text, "%slast restart %.1f s", measured.empty() ? "" : "; ",
                    e["restart_seconds"].get<double>());
      measured += text;
    }
    if (!measured.empty()) line("Measured", measured);
  }
  std::string gpu_ids;
  for (const auto& id : j["gpu_ids"]) gpu_ids += (gpu_ids.empty() ? "" : ",") + id.dump();
  line("GPU ids", gpu_ids.empty() ? "-" : gpu_ids);
  const auto limit = ParseDuration(FieldText(spec, "time_limit", ""));
  line("Time limit", limit ? FormatSeconds(static_cast<double>(limit->count()) / 1000.0) : "none");
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
  if (p["total_steps"].is_number())
    step += " / " + std::to_string(p["total_steps"].get<std::int64_t>());
  line("Step", step);
  if (p["epoch"].is_number()) {
    line("Epoch",
         FormatFixed(p["epoch"], 2) +
             (p["total_epochs"].is_number() ? " / " + FormatFixed(p["total_epochs"], 2) : ""));
  }
  line("ETA",
       FieldText(j, "health") == "Stalled" ? "stalled" : FormatEta(p, FieldText(j, "state")));
  if (p["steps_per_second"].is_number()) line("Steps/s", FormatFixed(p["steps_per_second"], 2));
  if (p["samples_per_second"].is_number())
    line("Samples/s", FormatFixed(p["samples_per_second"], 1));
  // As the dashboard says it: "4m12s ago"; for an ended job, how long
  // before its end (its age would only grow).
  if (auto reported = ParseRfc3339(FieldText(p, "last_report_at", ""))) {
    line("Last report",
         (finished ? FormatSeconds(SecondsBetween(*reported, *finished)) + " before it ended"
                   : FormatSeconds(SecondsBetween(*reported, now)) + " ago") +
             " (" + FieldText(p, "last_report_at") + ")");
  } else {
    line("Last report", "-");
  }
  if (p["metrics"].is_object() && !p["metrics"].empty()) {
    out << "Metrics:\n";
    for (auto it = p["metrics"].begin(); it != p["metrics"].end(); ++it) {
      out << "  " << Safe(it.key()) << ":"
          << std::string(it.key().size() < 22 ? 22 - it.key().size() : 1, ' ')
          << FormatNumber(it.value()) << "\n";
    }
  }
  line("Created", FieldText(j, "created_at"));
  line("Started", FieldText(j, "started_at"));
  line("Finished", FieldText(j, "finished_at"));
  if (auto started = ParseRfc3339(FieldText(j, "started_at", ""))) {
    line("Duration", finished ? FormatSeconds(SecondsBetween(*started, *finished))
                              : FormatSeconds(SecondsBetween(*started, now)) + " so far");
  }
  out << "Events:\n";
  // Commands run in the job (exec, ssh) are audited one event each; a busy
  // session would bury what happened to the job itself, so they are counted
  // after the table (-o json lists each).
  std::vector<std::vector<std::string>> rows;
  std::size_t execs = 0;
  const json* latest_exec = nullptr;
  for (const auto& e : (*events)["events"]) {
    if (e["type"] == "Exec" || e["type"] == "ExecEnded") {
      if (e["type"] == "Exec") {
        ++execs;
        latest_exec = &e;
      }
      continue;
    }
    rows.push_back({"  " + e["time"].get<std::string>(), e["type"].get<std::string>(),
                    e["message"].get<std::string>()});
  }
  out << FormatTable({"  TIME", "TYPE", "MESSAGE"}, rows);
  if (latest_exec != nullptr) {
    out << "Exec:           " << execs << (execs == 1 ? " command" : " commands")
        << " run in the job; the latest at " << Safe((*latest_exec)["time"].get<std::string>())
        << ": " << Safe((*latest_exec)["message"].get<std::string>()) << "\n";
  }
  std::cout << out.str();
  return kExitOk;
}

namespace {

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
  std::map<std::string, std::uint64_t> lines_;  // whole lines printed, per rank
  std::map<std::string, std::size_t> partial_;  // bytes of a partial last line printed
  std::map<std::string, std::uint64_t> skip_;   // to drop after a rewind
  std::map<std::string, std::size_t> skip_partial_;
};

}  // namespace

int Logs(const Options& o) {
  // A relative --since is fixed once, here: a reconnect asks for the same lines.
  std::string since_time = o.since_time;
  if (!o.since.empty()) {
    auto d = ParseDuration(o.since);
    if (!d) {
      std::cerr << "error: --since must be a duration such as 90s, 5m or 2h, got '" << Safe(o.since)
                << "'\n";
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
        [](std::string_view data) {
          std::cout.write(data.data(), static_cast<std::streamsize>(data.size())).flush();
        },
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
    // An elastic job may write logs of as many rank groups as it may grow to.
    const json& spec = (*job)["spec"];
    if (spec.contains("elastic") && spec["elastic"].contains("max_ranks")) {
      processes = std::max(processes, spec["elastic"]["max_ranks"].get<int>());
    }
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
    auto status = client.http().Stream(
        url, [&](std::string_view data) { resume.Feed(data); }, error_body);
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
    if (!away && IsEndedState((*now)["state"].get<std::string>()) &&
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
      auto rest = client.http().Stream(
          target(false, attempt), [&](std::string_view data) { resume.Feed(data); }, error_body);
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
    auto answer =
        client.Call("DELETE", "/api/v1/jobs/" + UrlEncode(name) + (o.force ? "?force=true" : ""));
    if (!answer) {
      result = client.exit_code;
      continue;
    }
    bool deleted = answer->value("deleted", false);
    std::cout << "job/" << Safe(name)
              << (deleted ? " deleted" : " stopping; deleted once it has ended") << "\n";
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
      return Status(StatusCode::kInternal,
                    "server answered " + std::to_string(resp->status) + ": " + message);
    }
    return parsed["jobs"].get<std::vector<json>>();
  });
}

namespace {}  // namespace

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
      for (JobState s :
           {JobState::kQueued, JobState::kStarting, JobState::kRunning, JobState::kSucceeded,
            JobState::kFailed, JobState::kStopped, JobState::kPreempted}) {
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
      std::cerr << "error: --until " << Safe(until) << ": not a health; expected one of " << healths
                << "\n";
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
    auto job = client.CallRetrying("/api/v1/jobs/" + UrlEncode(o.name),
                                   timeout->count() > 0 ? std::optional(deadline) : std::nullopt,
                                   timed_out);
    if (timed_out) {
      std::cerr << "error: timed out waiting for job/" << Safe(o.name) << " --until " << Safe(until)
                << " (the server did not answer)\n";
      return kExitTimeout;
    }
    if (!job) return client.exit_code;
    std::string state = (*job)["state"].get<std::string>();
    const bool ended = IsEndedState(state);
    const json& p = (*job)["progress"];
    bool met = false;
    if (kind == "ended") met = ended;
    if (kind == "state") met = state == want;
    if (kind == "health") met = (*job)["health"] == want;
    if (kind == "step") met = p["step"].is_number() && p["step"].get<double>() >= threshold;
    if (kind == "percent")
      met = p["percent"].is_number() && p["percent"].get<double>() >= threshold;
    if (met) {
      std::cout << "job/" << Safe(o.name) << " " << Safe(state) << "\n";
      return kExitOk;
    }
    if (ended) {
      std::cerr << "error: job/" << Safe(o.name) << " ended (" << Safe(state) << ") before --until "
                << Safe(until) << " held\n";
      return kExitFailed;
    }
    if (timeout->count() > 0 && std::chrono::steady_clock::now() >= deadline) {
      std::cerr << "error: timed out waiting for job/" << Safe(o.name) << " --until " << Safe(until)
                << "\n";
      return kExitTimeout;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

}  // namespace headway::cli
