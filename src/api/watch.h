// Server-sent event streams (text/event-stream) that the dashboard follows
// instead of polling. Each message is "event: TYPE\ndata: JSON\n\n"; lines
// that start with ':' are keep-alives.
//
// Jobs:     "snapshot" {"jobs": [view...]} once, then "update" {"jobs": [view...]}
//           with the jobs whose view changed and "deleted" {"names": [...]}
//           with the jobs deleted, at most once a second.
//           Compact (?compact=true): "snapshot" and "update" carry
//           {"columns": [...], "rows": [[...]...]} instead, a row per job as
//           JobRow() (api/job_json.h) makes it: what a list of jobs shows.
// One job:  "job" view (first and on every change); "series" {"reset": bool,
//           "metrics": {NAME: {"steps": [...], "values": [...]}}}: first every
//           metric downsampled to at most `buckets` points (reset: true), then
//           only the new points; "events" {"events": [...]}: new events.
//
// A view is the object GET /api/v1/jobs/{name} returns (without "spec" in the
// jobs stream). The jobs stream reads the job store once, for its snapshot,
// then only the watch cache (api/watch_cache.h): no database reads, no view
// rendering. The job stream reads the store again only when the job's cache
// entry changed, and otherwise every few seconds (for events that change no
// view). Streams end when the client goes away.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "api/http_server.h"
#include "api/job_service.h"
#include "api/watch_cache.h"

namespace headway::api {

// Only the jobs of `team` when it is not empty; rows instead of views when
// `compact`.
std::shared_ptr<ResponseStream> WatchJobs(WatchCache& cache, JobService& service,
                                          std::string team = {}, bool compact = false);

// NotFound for an unknown job. `buckets` >= 2.
Result<std::shared_ptr<ResponseStream>> WatchJob(WatchCache& cache, JobService& service,
                                                 const std::string& name, std::size_t buckets);

}  // namespace headway::api
