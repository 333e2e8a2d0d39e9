#include "api/log_routes.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/job_json.h"
#include "api/json_response.h"
#include "api/log_stream.h"
#include "api/query_params.h"
#include "api/visible_job.h"
#include "core/time.h"

namespace headway::api {
namespace {

using nlohmann::json;

class LogRoutes {
 public:
  explicit LogRoutes(LogRoutesOptions options)
      : jobs_(options.jobs), cache_(options.cache), bind_stream_(std::move(options.bind_stream)) {}

  HttpResponse Events(const RequestContext& ctx, const HttpRequest& req, const std::string& name) {
    std::int64_t after = 0;
    if (req.query.count("after")) {
      auto n = ParseNonNegativeInt("after", req.query.at("after"));
      if (!n.ok()) return ErrorResponse(n.status());
      after = *n;
    }
    if (Status s = CheckJobVisible(*jobs_, ctx, name); !s.ok()) return ErrorResponse(s);
    auto events = jobs_->Events(name, after);
    if (!events.ok()) return ErrorResponse(events.status());
    json items = json::array();
    for (const JobEvent& e : *events) items.push_back(EventToJson(e));
    return JsonResponse(200, {{"events", items}});
  }

  HttpResponse Logs(const RequestContext& ctx, const HttpRequest& req, const std::string& name) {
    auto job = VisibleJob(*jobs_, ctx, name);
    if (!job.ok()) return ErrorResponse(job.status());
    auto files = jobs_->LogFiles(name);
    if (!files.ok()) return ErrorResponse(files.status());
    for (const auto& [key, value] : req.query) {
      if (key != "rank" && key != "attempt" && key != "follow" && key != "tail" &&
          key != "limit_bytes" && key != "since" && key != "since_time" && key != "timestamps") {
        return ErrorResponse(InvalidArgument("unknown query parameter '" + key + "'"));
      }
    }
    // tail=N: each rank's newest N lines; limit_bytes=N: at most N bytes of
    // whole lines (with tail, the newest that fit). Without them, everything
    // kept is sent, however long.
    LogStart start;
    std::optional<std::uint64_t> limit_bytes;
    if (req.query.count("tail")) {
      auto n = ParseCount("tail", req.query.at("tail"));
      if (!n.ok()) return ErrorResponse(n.status());
      start.tail_lines = *n;
    }
    // since=DURATION ("90s", "5m") or since_time=RFC3339: only lines written
    // from then on; timestamps=true: each line starts with when it was.
    if (req.query.count("since") && req.query.count("since_time")) {
      return ErrorResponse(InvalidArgument("give 'since' or 'since_time', not both"));
    }
    if (req.query.count("since")) {
      auto d = ParseDuration(req.query.at("since"));
      if (!d) {
        return ErrorResponse(InvalidArgument("query parameter 'since' must be a duration such as "
                                             "90s, 5m or 2h, got '" +
                                             req.query.at("since") + "'")
                                 .WithField("since"));
      }
      start.since = SystemClock().Now() - *d;
    }
    if (req.query.count("since_time")) {
      auto t = ParseRfc3339(req.query.at("since_time"));
      if (!t) {
        return ErrorResponse(InvalidArgument("query parameter 'since_time' must be an RFC 3339 "
                                             "time such as 2026-12-03T10:00:00Z, got '" +
                                             req.query.at("since_time") + "'")
                                 .WithField("since_time"));
      }
      start.since = *t;
    }
    if (req.query.count("timestamps")) {
      auto on = ParseSwitch("timestamps", req.query.at("timestamps"));
      if (!on.ok()) return ErrorResponse(on.status());
      start.timestamps = *on;
    }
    if (req.query.count("limit_bytes")) {
      auto n = ParseCount("limit_bytes", req.query.at("limit_bytes"));
      if (!n.ok()) return ErrorResponse(n.status());
      if (*n == 0) {
        return ErrorResponse(InvalidArgument("query parameter 'limit_bytes' must be at least 1")
                                 .WithField("limit_bytes"));
      }
      limit_bytes = *n;
    }
    // Default: the latest attempt, all ranks.
    int attempt = files->empty() ? 0 : files->back().attempt;
    if (req.query.count("attempt")) {
      auto n = ParseNonNegativeInt("attempt", req.query.at("attempt"));
      if (!n.ok()) return ErrorResponse(n.status());
      attempt = *n;
    }
    std::optional<int> rank;
    if (req.query.count("rank")) {
      auto n = ParseNonNegativeInt("rank", req.query.at("rank"));
      if (!n.ok()) return ErrorResponse(n.status());
      rank = *n;
      if (*n >= RankSlots(job->spec)) {
        return ErrorResponse(NotFound("job '" + name + "' has no rank " + std::to_string(*n) +
                                      " (it has " + std::to_string(RankSlots(job->spec)) + ")"));
      }
    }
    auto select = [rank](const std::vector<LogFile>& all, int of_attempt) {
      std::vector<LogFile> out;
      for (const LogFile& f : all) {
        if (f.attempt == of_attempt && (!rank || f.rank == *rank)) out.push_back(f);
      }
      return out;
    };
    std::vector<LogFile> selected = select(*files, attempt);
    bool prefix = !rank && RankSlots(job->spec) > 1;
    if (start.tail_lines && limit_bytes) {
      // The newest lines that fit: each rank's share of the bytes.
      std::uint64_t ranks = std::max<std::uint64_t>(1, selected.size());
      start.tail_bytes = *limit_bytes / ranks;
    }
    HttpResponse resp{200, "text/plain; charset=utf-8", "", {}, nullptr};
    std::string follow = req.Query("follow");
    if (follow == "true" || follow == "1") {
      std::string job_name = name;
      JobService& service = *jobs_;
      WatchCache& cache = *cache_;
      // The stream looks every 200 ms; the store is read only when the
      // job's cached view changed (its state, attempt, progress) or 2 s have
      // passed, so followers cost the database next to nothing.
      struct Seen {
        std::uint64_t version = 0;
        std::chrono::steady_clock::time_point read_at;
        std::optional<FollowView> view;
      };
      auto view = [&service, &cache, job_name, select, seen = std::make_shared<Seen>()]() {
        auto entry = cache.Find(job_name);
        const auto now = std::chrono::steady_clock::now();
        if (seen->view && entry && entry->version == seen->version &&
            now - seen->read_at < std::chrono::seconds(2)) {
          return *seen->view;
        }
        FollowView v;
        auto j = service.Get(job_name);
        auto all = service.LogFiles(job_name);
        if (!j.ok() || !all.ok()) {
          v.finished = true;  // deleted or unreadable: end the stream
          return v;
        }
        v.finished = IsTerminal(j->state);
        v.attempt = all->empty() ? 0 : all->back().attempt;
        v.files = select(*all, v.attempt);
        seen->version = entry ? entry->version : 0;
        seen->read_at = now;
        seen->view = v;
        return v;
      };
      return bind_stream_(
          ctx, std::move(resp),
          std::make_shared<LogFollowStream>(view, attempt, std::move(selected), prefix,
                                            req.query.count("attempt") > 0, start, limit_bytes));
    }
    // What is there now, streamed: a log of any size, never cut silently.
    auto now = [attempt, files = selected]() {
      FollowView v;
      v.finished = true;
      v.attempt = attempt;
      v.files = files;
      return v;
    };
    resp.stream = std::make_shared<LogFollowStream>(now, attempt, std::move(selected), prefix,
                                                    /*pin_attempt=*/true, start, limit_bytes);
    return resp;
  }

 private:
  JobService* jobs_;
  WatchCache* cache_;
  std::function<HttpResponse(const RequestContext&, HttpResponse, std::shared_ptr<ResponseStream>)>
      bind_stream_;
};

}  // namespace

void AddLogRoutes(Router& router, LogRoutesOptions options) {
  auto routes = std::make_shared<LogRoutes>(std::move(options));
  router.Add("GET", "/api/v1/jobs/{name}/events", [routes](auto& r, auto& p, auto& ctx) {
    return routes->Events(ctx, r, p.at("name"));
  });
  router.Add("GET", "/api/v1/jobs/{name}/logs",
             [routes](auto& r, auto& p, auto& ctx) { return routes->Logs(ctx, r, p.at("name")); });
}

}  // namespace headway::api
