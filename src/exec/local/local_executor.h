// The local executor runs each attempt on this machine under a small
// supervisor process (`headway shim RUN_DIR`) that leads its own session and
// process group. The supervisor starts one process per rank with torchrun-style
// environment, writes each rank's output to RUN_DIR/rank-N.log, and records
// the exit status in RUN_DIR/result.json before it exits. With
// ExecutorOptions::max_log_bytes, the ranks write into pipes that the
// supervisor copies into their logs, rotating each at half the limit to
// rank-N.log.1 (on a line boundary where one fits), so a rank keeps at most
// max_log_bytes of output, the newest. Because the ranks
// never write through the server, a server crash or restart does not disturb
// them; the server re-adopts the supervisor by pid and start time.
//
// Each attempt runs in its own cgroup and (unless isolation is off) in
// namespaces that hide the server's data directory, as the job's Unix
// account; its environment holds only the basics, the spec's env and the
// platform's variables. See exec/local/cgroup.h and exec/local/sandbox.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exec/executor.h"

namespace headway {

std::unique_ptr<Executor> MakeLocalExecutor(const ExecutorOptions& options);

// Whether this process can isolate local jobs here (namespaces, a network
// namespace too with `network`; see exec/local/sandbox.h); the error says
// why not. Call before starting threads.
Status CheckJobIsolation(bool network = true);

// Removes `dir` whole without following links, the work folder the kernel
// leaves in a job's /tmp overlay included (mode 000: a server run as an
// ordinary user owns it but cannot list it). Empty `dir`: nothing.
Status RemoveTree(const std::string& dir);

// Whether each of a site's --job-outbound-allow ranges is one ("10.0.5.0/24",
// "fd00:5::/64", or one address); the error names the bad one.
Status CheckOutboundRanges(const std::vector<std::string>& ranges);

namespace internal {
// The descriptor on which the supervisor inherits its attempt's
// supervisor.lock, held (flock) for as long as it lives.
inline constexpr int kSupervisorLockFd = 3;
// ...and, for a job in an image, the image's lock, held shared for as long
// as it lives (exec/oci/image_store.h).
inline constexpr int kImageLockFd = 4;
}  // namespace internal

// Entry point of `headway shim RUN_DIR`; returns the process exit code.
int RunLocalShim(const std::string& run_dir);

// Entry point of `headway exec-helper RUN_DIR RANK -- [ARGV...]` and
// `headway exec-helper RUN_DIR RANK --ssh HOST_KEY_FILE` (exec_helper.cc):
// runs ARGV (the account's login shell without one), or an SSH server whose
// commands run there (exec/ssh_server.h), inside rank RANK of the running
// attempt: its namespaces, cgroup, account, environment and working
// directory, on this process's standard descriptors (a terminal's slave side
// for a terminal session). Returns the process exit code (the command's).
int RunExecHelper(const std::string& run_dir, int rank, const std::vector<std::string>& argv,
                  const std::string& ssh_host_key_file = "");

}  // namespace headway
