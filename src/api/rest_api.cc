#include "api/rest_api.h"

#include <filesystem>
#include <memory>

#include "api/job_json.h"
#include "api/log_stream.h"
#include "api/router.h"
#include "core/job_spec_parser.h"

namespace headway::api {
namespace {

using nlohmann::json;

HttpResponse JsonResponse(int status, const json& body) {
  return {status, "application/json", body.dump(), {}, nullptr};
}

HttpResponse ErrorResponse(const Status& status) {
  return JsonResponse(HttpStatusFor(status.code()), ErrorToJson(status));
}

Result<int> ParseNonNegativeInt(const std::string& name, const std::string& text) {
  try {
    std::size_t used = 0;
    int v = std::stoi(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  return InvalidArgument("query parameter '" + name + "' must be a non-negative integer");
}

Result<JobFilter> ParseFilter(const HttpRequest& req) {
  JobFilter filter;
  for (const auto& [key, value] : req.query) {
    if (key == "state") {
      auto state = ParseJobState(value);
      if (!state) return InvalidArgument("unknown state '" + value + "'");
      filter.state = state;
    } else if (key == "team") {
      filter.team = value;
    } else if (key == "active") {
      filter.active_only = value == "true" || value == "1";
    } else if (key == "label") {
      // label=k=v[,k2=v2]
      std::size_t start = 0;
      while (start < value.size()) {
        std::size_t comma = value.find(',', start);
        if (comma == std::string::npos) comma = value.size();
        std::string pair = value.substr(start, comma - start);
        auto eq = pair.find('=');
        if (eq == std::string::npos || eq == 0) {
          return InvalidArgument("label selector '" + pair + "' must be key=value");
        }
        filter.labels[pair.substr(0, eq)] = pair.substr(eq + 1);
        start = comma + 1;
      }
    } else {
      return InvalidArgument("unknown query parameter '" + key + "'");
    }
  }
  return filter;
}

class Api {
 public:
  explicit Api(JobService& service) : service_(service) {
    router_.Add("GET", "/healthz", [](const HttpRequest&, const PathParams&) {
      return JsonResponse(200, {{"status", "ok"}});
    });
    router_.Add("POST", "/api/v1/jobs", [this](auto& r, auto&) { return Submit(r); });
    router_.Add("GET", "/api/v1/jobs", [this](auto& r, auto&) { return List(r); });
    router_.Add("GET", "/api/v1/jobs/{name}",
                [this](auto&, auto& p) { return Get(p.at("name")); });
    router_.Add("POST", "/api/v1/jobs/{name}/stop",
                [this](auto& r, auto& p) { return Stop(r, p.at("name")); });
    router_.Add("GET", "/api/v1/jobs/{name}/events",
                [this](auto& r, auto& p) { return Events(r, p.at("name")); });
    router_.Add("GET", "/api/v1/jobs/{name}/logs",
                [this](auto& r, auto& p) { return Logs(r, p.at("name")); });
  }

  HttpResponse Handle(const HttpRequest& req) { return router_.Dispatch(req); }

 private:
  json View(const Job& job) { return JobToJson(job, service_.PendingReason(job.name())); }

  HttpResponse Submit(const HttpRequest& req) {
    auto spec = ParseJobSpec(req.body);
    if (!spec.ok()) return ErrorResponse(spec.status());
    // Like sbatch, a job runs where it was submitted from unless it says
    // otherwise, and a relative working_dir is taken from there.
    std::string submit_dir = req.Header("x-headway-submit-dir");
    if (!submit_dir.empty() && submit_dir.front() == '/') {
      if (spec->working_dir.empty()) {
        spec->working_dir = submit_dir;
      } else if (spec->working_dir.front() != '/') {
        spec->working_dir = (std::filesystem::path(submit_dir) / spec->working_dir)
                                .lexically_normal()
                                .string();
      }
    }
    auto job = service_.Submit(std::move(spec.value()));
    if (!job.ok()) return ErrorResponse(job.status());
    return JsonResponse(201, View(*job));
  }

  HttpResponse List(const HttpRequest& req) {
    auto filter = ParseFilter(req);
    if (!filter.ok()) return ErrorResponse(filter.status());
    auto jobs = service_.List(*filter);
    if (!jobs.ok()) return ErrorResponse(jobs.status());
    json items = json::array();
    for (const Job& job : *jobs) items.push_back(View(job));
    return JsonResponse(200, {{"jobs", items}});
  }

  HttpResponse Get(const std::string& name) {
    auto job = service_.Get(name);
    if (!job.ok()) return ErrorResponse(job.status());
    return JsonResponse(200, View(*job));
  }

  HttpResponse Stop(const HttpRequest& req, const std::string& name) {
    std::string why = "stopped by user";
    if (!req.body.empty()) {
      auto body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
      if (!body.is_object()) return ErrorResponse(InvalidArgument("body must be a JSON object"));
      if (body.contains("reason")) {
        if (!body["reason"].is_string()) {
          return ErrorResponse(InvalidArgument("must be a string").WithField("reason"));
        }
        why = body["reason"].get<std::string>();
      }
    }
    auto job = service_.Stop(name, why);
    if (!job.ok()) return ErrorResponse(job.status());
    return JsonResponse(200, View(*job));
  }

  HttpResponse Events(const HttpRequest& req, const std::string& name) {
    std::int64_t after = 0;
    if (req.query.count("after")) {
      auto n = ParseNonNegativeInt("after", req.query.at("after"));
      if (!n.ok()) return ErrorResponse(n.status());
      after = *n;
    }
    auto events = service_.Events(name, after);
    if (!events.ok()) return ErrorResponse(events.status());
    json items = json::array();
    for (const JobEvent& e : *events) items.push_back(EventToJson(e));
    return JsonResponse(200, {{"events", items}});
  }

  HttpResponse Logs(const HttpRequest& req, const std::string& name) {
    auto job = service_.Get(name);
    if (!job.ok()) return ErrorResponse(job.status());
    auto files = service_.LogFiles(name);
    if (!files.ok()) return ErrorResponse(files.status());
    for (const auto& [key, value] : req.query) {
      if (key != "rank" && key != "attempt" && key != "follow") {
        return ErrorResponse(InvalidArgument("unknown query parameter '" + key + "'"));
      }
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
      if (*n >= job->spec.resources.processes()) {
        return ErrorResponse(NotFound("job '" + name + "' has no rank " + std::to_string(*n) +
                                      " (it has " +
                                      std::to_string(job->spec.resources.processes()) + ")"));
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
    bool prefix = !rank && job->spec.resources.processes() > 1;
    HttpResponse resp{200, "text/plain; charset=utf-8", "", {}, nullptr};
    std::string follow = req.Query("follow");
    if (follow == "true" || follow == "1") {
      std::string job_name = name;
      JobService& service = service_;
      auto view = [&service, job_name, select]() {
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
        return v;
      };
      resp.stream = std::make_shared<LogFollowStream>(view, attempt, std::move(selected), prefix,
                                                      req.query.count("attempt") > 0);
      return resp;
    }
    LogReader reader(std::move(selected), prefix);
    reader.ReadNew(resp.body, /*flush_partial=*/true);
    return resp;
  }

  JobService& service_;
  Router router_;
};

}  // namespace

HttpHandler MakeRestApi(JobService& service) {
  auto api = std::make_shared<Api>(service);
  return [api](const HttpRequest& req) { return api->Handle(req); };
}

}  // namespace headway::api
