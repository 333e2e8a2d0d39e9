#include "cli/experiment_commands.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/job_table.h"

namespace headway::cli {

using nlohmann::json;

namespace {

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

}  // namespace

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
  std::cout << FormatTable({"NAME", "STATE", "ALGORITHM", "OBJECTIVE", "TRIALS", "BEST", "AGE"},
                           rows);
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

int ExpStop(const Options& o) {
  Client client(o);
  auto e = client.Call("POST", "/api/v1/experiments/" + UrlEncode(o.name) + "/stop", "{}");
  if (!e) return client.exit_code;
  if (PrintStructured(o, *e)) return kExitOk;
  std::cout << "experiment/" << Safe(o.name) << " stopped\n";
  return kExitOk;
}

int ExpDelete(const Options& o) {
  Client client(o);
  auto e = client.Call("DELETE", "/api/v1/experiments/" + UrlEncode(o.name));
  if (!e) return client.exit_code;
  if (PrintStructured(o, *e)) return kExitOk;
  const std::size_t trials = e->value("trials", std::size_t{0});
  std::cout << "experiment/" << Safe(o.name) << " deleted with its " << trials
            << (trials == 1 ? " trial" : " trials") << "\n";
  return kExitOk;
}

}  // namespace headway::cli
