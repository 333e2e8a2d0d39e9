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
  // Runs argv (PATH lookup) with the server's environment, stdin /dev/null.
  virtual CommandOutput Run(const std::vector<std::string>& argv,
                            std::chrono::milliseconds timeout) = 0;
};

// Real child processes.
std::unique_ptr<CommandRunner> MakeProcessRunner();

}  // namespace headway
