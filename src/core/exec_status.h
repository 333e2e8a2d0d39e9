// What an executor saw of an attempt's processes when polled: the input the
// attempt lifecycle (lifecycle/attempt.h) decides on. A domain type, so the
// lifecycle is decided without the executors' code.
#pragma once

#include <string>

namespace headway {

struct ExecStatus {
  enum class Phase { kPending, kRunning, kExited, kLost };
  Phase phase = Phase::kRunning;
  int exit_code = 0;    // kExited: 0 on success, the first failing rank's code otherwise,
                        // 128+N when killed by signal N
  std::string message;  // kPending: why; kExited with failure or kLost: what happened
  std::string reason;   // kExited: a CamelCase cause when the executor knows one
                        // ("TimeLimitExceeded", "Cancelled", "NodeFail", "Preempted")
};

}  // namespace headway
