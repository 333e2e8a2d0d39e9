// Parses a job spec document (YAML, or JSON, which is read as YAML flow style).
//
//   name: mnist                    # required, lowercase DNS label...
//   generateName: mnist-           # ...or a prefix: the server appends 5 random characters
//   team: vision                   # default "default"
//   queue: ""                      # default: the team's queue
//   priority: 0                    # higher runs first
//   command: ["python3", "train.py"]   # a list is argv; a string runs under /bin/sh -c
//   args: ["--epochs", "3"]
//   working_dir: /data/mnist
//   env: {SEED: "1"}
//   resources: {gpus_per_process: 1, processes_per_node: 2, nodes: 1}
//   restart_policy: {max_restarts: 2}
//   time_limit: 2h                 # or seconds as an integer
//   termination_grace: 30s         # SIGTERM, then SIGKILL after this
//   labels: {project: demo}
//   policies: {on_stall: notify, on_diverge: stop, on_plateau: notify, on_overfit: notify,
//              objective: eval_accuracy, objective_goal: maximize,
//              on_gpu_idle: stop, gpu_idle_after: 30m, gpu_idle_below_percent: 5}
//   progress_endpoint: {port: 28080, path: /metrics, interval: 30s}   # pull mode (see job.h)
//   ttl_after_finished: 24h        # deleted this long after it ended (0: at once)
//
// Every error names the field and its 1-based line; unknown fields and wrong
// types are rejected rather than ignored, so a typo never silently changes a job.
#pragma once

#include <string_view>

#include "core/job.h"
#include "core/status.h"

namespace headway {

// The longest generateName prefix: with 5 random characters it stays within 63.
inline constexpr std::size_t kMaxGenerateNamePrefix = 58;

// `name_required`: false when the caller names the job itself (submit --name).
Result<JobSpec> ParseJobSpec(std::string_view document, bool name_required = true);

}  // namespace headway
