// What the workflow suites share: a folder steps and tests both see, and
// reading a workflow, its phase and its nodes through the Argo REST shapes.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "test_server.h"

namespace headway::testing {

using nlohmann::json;

// A folder the test and the workflow steps both see: steps have a /tmp of
// their own (as containers do), so markers cannot live under the test's
// folder in /tmp. Named for the server's folder; removed with the test's
// process by nothing else, so kept tiny.
inline std::string Shared(const TestServer& server) {
  const std::string dir =
      "/var/tmp/" + std::filesystem::path(server.base_dir()).filename().string() + "-shared";
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::all);
  return dir;
}

inline int Lines(const std::string& path) {
  std::string text = ReadFile(path);
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

inline json Workflow(const TestServer& server, const std::string& name) {
  Answer a = Call(server, server.admin_token(), "GET", "/api/v1/workflows/default/" + name);
  return a.status == 200 ? a.body : json();
}

inline std::string Phase(const TestServer& server, const std::string& name) {
  json wf = Workflow(server, name);
  return wf.is_object() ? wf["status"].value("phase", "") : "";
}

// The node named `display` (its displayName).
inline json NodeOf(const json& wf, const std::string& display) {
  for (const auto& [id, node] : wf["status"]["nodes"].items()) {
    if (node.value("displayName", "") == display) return node;
  }
  return json();
}

// Submits through the CLI; returns the workflow's name.
inline std::string SubmitWorkflow(const TestServer& server, const std::string& yaml) {
  CommandResult r = server.Cli({"workflow", "submit", "-", "-o", "name"}, yaml);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string name = r.out;
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return name;
}

inline bool WaitForPhase(const TestServer& server, const std::string& name,
                         const std::string& phase,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  return WaitFor([&] { return Phase(server, name) == phase; }, timeout);
}

}  // namespace headway::testing
