// A job's logs and events, as the REST API serves them:
//   GET /api/v1/jobs/{name}/logs[?rank&attempt&follow&tail&limit_bytes&since&since_time&timestamps]
//       the ranks' output of an attempt (the latest by default), streamed;
//       with follow=true, until the job ends, across its new attempts
//   GET /api/v1/jobs/{name}/events[?after=ID]
#pragma once

#include <functional>
#include <memory>

#include "api/http_server.h"
#include "api/job_service.h"
#include "api/request_context.h"
#include "api/router.h"
#include "api/watch_cache.h"

namespace headway::api {

struct LogRoutesOptions {
  JobService* jobs = nullptr;
  // Followers read the store only when the job's cached view changed.
  WatchCache* cache = nullptr;
  // Puts a followed log's stream in the answer, bound to the caller's token.
  std::function<HttpResponse(const RequestContext&, HttpResponse, std::shared_ptr<ResponseStream>)>
      bind_stream;
};

void AddLogRoutes(Router& router, LogRoutesOptions options);

}  // namespace headway::api
