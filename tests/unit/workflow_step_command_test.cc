// The shell step that runs a workflow's pod node (StepCommand), run for real.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "server/workflow_controller.h"

namespace headway {
namespace {

int RunArgv(const std::vector<std::string>& argv) {
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(WorkflowStepCommand, AScriptIsStagedExecutableAsArgoStagesIt) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("headway-step-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "in");
  workflow::JobToCreate job;
  // `sh -c FILE` runs the file as a program: it must be executable.
  job.spec.command = {"sh", "-c"};
  job.script_source = "#!/bin/sh\necho staged\n";
  const int rc = RunArgv(StepCommand(job, (dir / "step").string(), (dir / "in").string()));
  EXPECT_EQ(rc, 0);
  std::ifstream out(dir / "step" / "stdout");
  std::stringstream text;
  text << out.rdbuf();
  EXPECT_EQ(text.str(), "staged\n");
  const auto perms = std::filesystem::status(dir / "step" / "script").permissions();
  EXPECT_EQ(perms & std::filesystem::perms::owner_exec, std::filesystem::perms::owner_exec);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace headway
