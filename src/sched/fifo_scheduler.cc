#include "sched/fifo_scheduler.h"

#include <algorithm>

namespace headway::sched {

FifoDecision ScheduleFifo(std::vector<PendingJob> pending, std::vector<int> free_gpu_ids,
                          int total_gpus) {
  std::stable_sort(pending.begin(), pending.end(), [](const PendingJob& a, const PendingJob& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.submit_seq < b.submit_seq;
  });
  std::sort(free_gpu_ids.begin(), free_gpu_ids.end());

  FifoDecision decision;
  const PendingJob* blocked_by = nullptr;
  for (const PendingJob& job : pending) {
    if (blocked_by != nullptr) {
      decision.pending_reasons[job.name] = "waiting behind " + blocked_by->name;
      continue;
    }
    if (job.gpus <= static_cast<int>(free_gpu_ids.size())) {
      Placement placement{job.name, {free_gpu_ids.begin(), free_gpu_ids.begin() + job.gpus}};
      free_gpu_ids.erase(free_gpu_ids.begin(), free_gpu_ids.begin() + job.gpus);
      decision.starts.push_back(std::move(placement));
      continue;
    }
    blocked_by = &job;
    if (job.gpus > total_gpus) {
      decision.pending_reasons[job.name] = "needs " + std::to_string(job.gpus) +
                                           " GPUs but the pool has only " +
                                           std::to_string(total_gpus);
    } else {
      decision.pending_reasons[job.name] = "waiting for " + std::to_string(job.gpus) + " GPUs (" +
                                           std::to_string(free_gpu_ids.size()) + " of " +
                                           std::to_string(total_gpus) + " free)";
    }
  }
  return decision;
}

}  // namespace headway::sched
