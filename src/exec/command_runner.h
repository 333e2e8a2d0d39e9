// Runs external programs (sbatch, scontrol, ...) for executors. An interface,
// so executors can be driven by a recorded runner in unit tests.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace headway {

struct CommandOutput {
  int exit_code = -1;  // -1: could not start or timed out
  std::string out;
  std::string err;
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // Runs argv (PATH lookup) with ToolEnvironment(), stdin /dev/null.
  virtual CommandOutput Run(const std::vector<std::string>& argv,
                            std::chrono::milliseconds timeout) = 0;
};

// What a cluster tool started by the server gets of the server's environment:
// PATH, the locale, the time zone, HOME, USER and LOGNAME, and Slurm's and
// MUNGE's own settings, as "NAME=value". Nothing else: sbatch and srun pass
// their environment on to the job, and the server's may hold its secrets.
std::vector<std::string> ToolEnvironment();

// Real child processes.
std::unique_ptr<CommandRunner> MakeProcessRunner();

}  // namespace headway
