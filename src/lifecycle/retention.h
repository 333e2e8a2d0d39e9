// How long an ended job is kept. Pure: no I/O, no clocks.
#pragma once

#include <optional>

#include "core/job.h"
#include "core/time.h"

namespace headway::lifecycle {

// When the job is due to be deleted, or nullopt while it is to be kept:
// never before it ended (Succeeded, Failed, Stopped). A job whose delete was
// asked for while it ran is due as soon as it ended; otherwise its spec's
// ttl_after_finished, or else `default_ttl` (the server's
// --finished-job-ttl; nullopt: kept until deleted), counted from finished_at.
std::optional<Time> DeleteDueAt(const Job& job, std::optional<Duration> default_ttl);

}  // namespace headway::lifecycle
