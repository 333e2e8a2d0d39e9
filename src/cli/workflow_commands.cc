#include "cli/workflow_commands.h"

#include <yaml-cpp/yaml.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/job_table.h"

namespace headway::cli {

using nlohmann::json;

namespace {

// ---------------------------------------------------------------------------
// Workflows (Argo's REST API, in Headway's one namespace)

const char* const kWorkflows = "/api/v1/workflows/default";

}  // namespace

bool IsArgoWorkflow(const std::string& text) {
  return text.find("argoproj.io/") != std::string::npos &&
         text.find("Workflow") != std::string::npos &&
         text.find("CronWorkflow") == std::string::npos &&
         text.find("WorkflowTemplate") == std::string::npos;
}

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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
    if (!o.parameters.empty()) body["parameters"] = o.parameters;
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
  if (!o.parameters.empty()) body["parameters"] = o.parameters;
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

}  // namespace headway::cli
