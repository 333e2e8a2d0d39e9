// The local executor runs each attempt on this machine under a small
// supervisor process (`headway shim RUN_DIR`) that leads its own session and
// process group. The supervisor starts one process per rank with torchrun-style
// environment, writes each rank's output to RUN_DIR/rank-N.log, and records
// the exit status in RUN_DIR/result.json before it exits. Because the ranks
// never write through the server, a server crash or restart does not disturb
// them; the server re-adopts the supervisor by pid and start time.
#pragma once

#include <memory>
#include <string>

#include "exec/executor.h"

namespace headway {

std::unique_ptr<Executor> MakeLocalExecutor(std::string self_executable);

// Entry point of `headway shim RUN_DIR`; returns the process exit code.
int RunLocalShim(const std::string& run_dir);

}  // namespace headway
