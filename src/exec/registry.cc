#include "exec/executor.h"
#include "exec/local/local_executor.h"
#include "exec/slurm/slurm_executor.h"

namespace headway {

std::vector<std::string_view> ExecutorNames() { return {"local", "slurm"}; }

Result<std::unique_ptr<Executor>> MakeExecutor(std::string_view name,
                                               const ExecutorOptions& options) {
  if (name == "local") return MakeLocalExecutor(options);
  if (name == "slurm") {
    if (options.runner == nullptr) return Internal("the slurm executor needs a command runner");
    return MakeSlurmExecutor(*options.runner, options.max_log_bytes, options.self_executable);
  }
  return NotFound("no executor named '" + std::string(name) + "' (known: local, slurm)");
}

}  // namespace headway
