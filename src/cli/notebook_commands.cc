#include "cli/notebook_commands.h"

#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/job_table.h"

namespace headway::cli {

using nlohmann::json;

namespace {

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

}  // namespace

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
  std::cout << (url.starts_with("http://") || url.starts_with("https://") ? ""
                                                                          : Client::ServerUrl(o))
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

}  // namespace headway::cli
