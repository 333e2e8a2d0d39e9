// Starts a command whose standard streams the caller relays (`headway exec`,
// `headway ssh`): on a new terminal or on three pipes, as ExecRequest asks.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "exec/executor.h"

namespace headway {

struct AttachOptions {
  // The command's environment ("NAME=value"); empty: the server's own.
  std::vector<std::string> env;
  // A new session whose controlling terminal is the command's (with a
  // terminal): the kernel then tells it of resizes and hang-ups itself.
  // Without, it gets a process group of its own.
  bool new_session = false;
};

// argv[0] is a path, not looked up. The caller owns the returned descriptors
// and must reap the process.
Result<ExecProcess> StartAttached(const std::vector<std::string>& argv, const ExecRequest& request,
                                  const AttachOptions& options);

}  // namespace headway
