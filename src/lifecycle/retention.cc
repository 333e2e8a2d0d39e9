#include "lifecycle/retention.h"

namespace headway::lifecycle {

std::optional<Time> DeleteDueAt(const Job& job, std::optional<Duration> default_ttl) {
  if (!IsTerminal(job.state)) return std::nullopt;
  // A job ended without a finish time (an old record) counts from its creation.
  const Time ended = job.finished_at.value_or(job.created_at);
  if (job.delete_requested_at) return ended;
  std::optional<Duration> ttl =
      job.spec.ttl_after_finished ? job.spec.ttl_after_finished : default_ttl;
  if (!ttl) return std::nullopt;
  return ended + *ttl;
}

}  // namespace headway::lifecycle
