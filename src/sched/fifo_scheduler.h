// A first-in, first-out GPU scheduler: pure decision logic, state in and
// actions out, so it is tested without processes and replaced wholesale by
// the full scheduler later.
//
// Order: higher priority first, then earlier submission. Strict FIFO: when
// the head job does not fit, nothing behind it starts (no backfill), so a
// large job is never starved by a stream of small ones.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace headway::sched {

struct PendingJob {
  std::string name;
  int gpus = 0;  // total GPUs the job needs, all at once
  int priority = 0;
  std::int64_t submit_seq = 0;
};

struct Placement {
  std::string job;
  std::vector<int> gpu_ids;  // ascending
};

struct FifoDecision {
  std::vector<Placement> starts;                       // in start order
  std::map<std::string, std::string> pending_reasons;  // for every job left waiting
};

// `free_gpu_ids` are the GPUs not held by any running job; `total_gpus` is
// the inventory size, used to explain jobs that can never fit.
FifoDecision ScheduleFifo(std::vector<PendingJob> pending, std::vector<int> free_gpu_ids,
                          int total_gpus);

}  // namespace headway::sched
