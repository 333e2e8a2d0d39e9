// The Slurm executor submits each attempt as a batch job with `sbatch
// --parsable` and follows it with `scontrol show job`. The batch script runs
// the ranks with `srun` (one task per rank, output per task in
// RUN_DIR/rank-N.log) and derives the torchrun-style variables from SLURM_*
// (RANK = SLURM_PROCID, MASTER_ADDR = the first node's address), so one job
// spec runs unchanged on local or Slurm. Time limits are Slurm's (--time),
// with --signal=USR1@warning delivering the checkpoint warning to every task.
// Stop is scancel. The handle holds the Slurm job id, so a restarted server
// re-adopts jobs by id: nothing is lost and nothing is submitted twice.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "exec/command_runner.h"
#include "exec/executor.h"

namespace headway {

// `max_log_bytes` bounds each rank's log (rank-N.log plus rank-N.log.1), as
// --max-log-bytes does for local jobs; 0: no limit. `self_executable`: the
// headway binary, which serves SSH sessions (`headway ssh --stdio`) from a
// step on the job's node, so it must be at the same path there (a shared
// install); empty: no SSH sessions.
std::unique_ptr<Executor> MakeSlurmExecutor(CommandRunner& runner, std::uint64_t max_log_bytes = 0,
                                            std::string self_executable = {});

// Parsed `scontrol show job -o` fields that the executor needs.
struct SlurmJobInfo {
  std::string state;   // PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
  std::string reason;  // Slurm's pending/failure reason
  int exit_code = 0;
  int exit_signal = 0;
  std::string batch_host;  // the node rank 0 (the batch script) runs on; "" until it starts
};
std::optional<SlurmJobInfo> ParseScontrolJob(const std::string& text);
// Maps a Slurm job to Headway's view of an attempt.
ExecStatus MapSlurmState(const SlurmJobInfo& info);

}  // namespace headway
