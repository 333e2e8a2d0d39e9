// The job commands of `headway`: submit, get (jobs, queues, nodes), describe, logs,
// delete, rerun, stop, top, wait, exec and ssh.
// Internal to cli/: commands.cc registers them (see cli/commands.h).
#pragma once

#include <string>

#include "cli/command_support.h"

namespace headway::cli {

int Submit(const Options& o);
int Get(const Options& o);
// `headway exec` and `headway ssh`: a command (or a login shell) inside a
// running job, over the server's exec WebSocket.
int ExecInJob(const Options& o, bool ssh);
int Describe(const Options& o);
int Logs(const Options& o);
int DeleteJobs(const Options& o);
int Rerun(const Options& o);
int Stop(const Options& o);
int Top(const Options& o, bool iterations_set);
// Conditions: "ended", a state ("Succeeded" or "state=Succeeded"),
// "health=Diverging", "step>=N", "percent>=N".
int Wait(const Options& o);

}  // namespace headway::cli
