#include "exec/executor.h"
#include "exec/local/local_executor.h"

namespace headway {

std::vector<std::string_view> ExecutorNames() { return {"local"}; }

Result<std::unique_ptr<Executor>> MakeExecutor(std::string_view name,
                                               const ExecutorOptions& options) {
  if (name == "local") return MakeLocalExecutor(options.self_executable);
  return NotFound("no executor named '" + std::string(name) + "' (known: local)");
}

}  // namespace headway
