#include "api/rest_api.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "api/argo_routes.h"
#include "api/artifact_json.h"
#include "api/artifact_routes.h"
#include "api/auth.h"
#include "api/dashboard.h"
#include "api/experiment_routes.h"
#include "api/job_json.h"
#include "api/json_response.h"
#include "api/kubeflow_status.h"
#include "api/log_routes.h"
#include "api/log_stream.h"
#include "api/notebook_routes.h"
#include "api/prometheus.h"
#include "api/query_params.h"
#include "api/request_context.h"
#include "api/request_guard.h"
#include "api/router.h"
#include "api/token_routes.h"
#include "api/visible_job.h"
#include "api/watch.h"
#include "core/ascii.h"
#include "core/job_spec_parser.h"
#include "core/progress_report.h"
#include "core/version.h"

namespace headway::api {
namespace {

using nlohmann::json;

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

// How often an open stream checks that its token still works.
constexpr auto kStreamTokenCheck = std::chrono::seconds(2);

// Counts the open streams of each token owner (a session counts as the token
// it was made from).
class StreamCounter {
 public:
  explicit StreamCounter(int limit) : limit_(limit) {}
  // A held slot, or null when `owner` is at the limit.
  std::shared_ptr<void> Take(const std::string& owner) {
    std::lock_guard lock(mu_);
    int& n = open_[owner];
    if (n >= limit_) return nullptr;
    ++n;
    // Not null (the caller tests it); the deleter gives the slot back.
    return std::shared_ptr<void>(static_cast<void*>(this), [this, owner](void*) {
      std::lock_guard lock(mu_);
      if (--open_[owner] <= 0) open_.erase(owner);
    });
  }
  int limit() const { return limit_; }

 private:
  const int limit_;
  std::mutex mu_;
  std::map<std::string, int> open_;  // guarded by mu_
};

// A stream that ends once the token that opened it is revoked or expired,
// and holds its owner's stream slot while open.
class TokenBoundStream final : public ResponseStream {
 public:
  TokenBoundStream(std::shared_ptr<ResponseStream> inner, TokenService* tokens, std::string secret,
                   std::shared_ptr<void> slot)
      : inner_(std::move(inner)),
        tokens_(tokens),
        secret_(std::move(secret)),
        slot_(std::move(slot)),
        next_check_(std::chrono::steady_clock::now() + kStreamTokenCheck) {}

  bool Next(std::string& out) override {
    if (tokens_ != nullptr && std::chrono::steady_clock::now() >= next_check_) {
      next_check_ = std::chrono::steady_clock::now() + kStreamTokenCheck;
      if (!tokens_->Authenticate(secret_).ok()) return false;
    }
    return inner_->Next(out);
  }
  std::chrono::milliseconds interval() const override { return inner_->interval(); }

 private:
  std::shared_ptr<ResponseStream> inner_;
  TokenService* tokens_;
  const std::string secret_;
  std::shared_ptr<void> slot_;
  std::chrono::steady_clock::time_point next_check_;
};

class Api {
  SystemClock system_clock_;  // first: what the members below read time from

 public:
  Api(JobService& service, const RestApiOptions& options)
      : service_(service),
        experiments_(options.experiments),
        artifacts_(options.artifacts),
        notebooks_(options.notebooks),
        tls_(options.tls),
        local_jobs_reach_only_the_server_(options.local_jobs_reach_only_the_server),
        max_queued_jobs_per_team_(options.max_queued_jobs_per_team),
        spool_dir_(options.spool_dir),
        tokens_(options.tokens),
        hosts_([&] {
          HostPolicy hosts = options.hosts;
          hosts.notebook_domain = options.notebook_domain;
          return hosts;
        }()),
        notebook_domain_(options.notebook_domain),
        team_policy_(options.team_policy),
        dashboard_(options.web_dir),
        own_cache_(options.watch_cache ? nullptr : std::make_unique<WatchCache>(service)),
        cache_(options.watch_cache ? *options.watch_cache : *own_cache_),
        streams_(options.max_streams_per_token) {
    router_.Add("GET", "/healthz",
                [](const HttpRequest&, const PathParams&, const RequestContext&) {
                  return JsonResponse(200, {{"status", "ok"}});
                });
    router_.Add("GET", "/metrics", [this](auto&, auto&, auto& ctx) {
      return HttpResponse{200,
                          "text/plain; version=0.0.4; charset=utf-8",
                          RenderPrometheus(service_, *counters_, ctx.VisibleTeam(), artifacts_),
                          {},
                          nullptr};
    });
    router_.Add("GET", "/api/v1/watch/jobs",
                [this](auto& r, auto&, auto& ctx) { return WatchAll(ctx, r); });
    router_.Add("GET", "/api/v1/jobs/{name}/watch",
                [this](auto& r, auto& p, auto& ctx) { return WatchOne(ctx, r, p.at("name")); });
    router_.Add("GET", "/api/v1/version", [](auto&, auto&, auto&) {
    // Also the shape of Argo Server's answer, whose eight fields Hera's
    // get_version() requires as strings; Go's fields are empty here.
#if defined(__x86_64__)
      const char* platform = "linux/amd64";
#elif defined(__aarch64__)
      const char* platform = "linux/arm64";
#else
      const char* platform = "linux";
#endif
      return JsonResponse(200, {{"version", Version()},
                                {"gitTag", std::string("v") + Version()},
                                {"gitCommit", ""},
                                {"gitTreeState", ""},
                                {"buildDate", ""},
                                {"goVersion", ""},
                                {"compiler", "gcc " __VERSION__},
                                {"platform", platform}});
    });
    AddTokenRoutes(router_, tokens_);
    router_.Add("POST", "/api/v1/jobs",
                [this](auto& r, auto&, auto& ctx) { return Submit(ctx, r); });
    router_.Add("GET", "/api/v1/jobs", [this](auto& r, auto&, auto& ctx) { return List(ctx, r); });
    router_.Add("GET", "/api/v1/jobs/{name}",
                [this](auto&, auto& p, auto& ctx) { return Get(ctx, p.at("name")); });
    router_.Add("GET", "/api/v1/jobs/{name}/exec",
                [this](auto& r, auto& p, auto& ctx) { return Exec(ctx, r, p.at("name")); });
    router_.Add("POST", "/api/v1/jobs/{name}/stop",
                [this](auto& r, auto& p, auto& ctx) { return Stop(ctx, r, p.at("name")); });
    router_.Add("DELETE", "/api/v1/jobs/{name}",
                [this](auto& r, auto& p, auto& ctx) { return Delete(ctx, r, p.at("name")); });
    router_.Add("POST", "/api/v1/jobs/{name}/rerun",
                [this](auto&, auto& p, auto& ctx) { return Rerun(ctx, p.at("name")); });
    router_.Add("POST", "/api/v1/jobs/{name}/progress",
                [this](auto& r, auto& p, auto&) { return Report(r, p.at("name")); });
    router_.Add("GET", "/api/v1/jobs/{name}/metrics",
                [this](auto&, auto& p, auto& ctx) { return MetricNames(ctx, p.at("name")); });
    router_.Add("GET", "/api/v1/jobs/{name}/metrics/{metric}", [this](auto& r, auto& p, auto& ctx) {
      return Metric(ctx, r, p.at("name"), p.at("metric"));
    });
    router_.Add(
        "POST", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}/status",
        [this](auto& r, auto& p, auto&) { return KubeflowStatus(r, p.at("ns"), p.at("name")); });
    router_.Add("GET", "/api/v1/queues",
                [this](auto&, auto&, auto& ctx) { return Queues(ctx.VisibleTeam()); });
    router_.Add("GET", "/api/v1/nodes",
                [this](auto&, auto&, auto& ctx) { return Nodes(ctx.VisibleTeam()); });
    LogRoutesOptions log_routes;
    log_routes.jobs = &service_;
    log_routes.cache = &cache_;
    log_routes.bind_stream = [this](const RequestContext& ctx, HttpResponse response,
                                    std::shared_ptr<ResponseStream> stream) {
      return Bound(ctx, std::move(response), std::move(stream));
    };
    AddLogRoutes(router_, std::move(log_routes));
    ArtifactRoutesOptions artifact_routes;
    artifact_routes.artifacts = artifacts_;
    artifact_routes.jobs = &service_;
    artifact_routes.spool_dir = spool_dir_;
    artifact_routes.local_jobs_reach_only_the_server = local_jobs_reach_only_the_server_;
    artifact_routes.bind_stream = [this](const RequestContext& ctx, HttpResponse response,
                                         std::shared_ptr<ResponseStream> stream) {
      return Bound(ctx, std::move(response), std::move(stream));
    };
    AddArtifactRoutes(router_, std::move(artifact_routes));
    NotebookAccess notebook_access;
    notebook_access.new_session = [this](const RequestContext& ctx) -> Result<std::string> {
      if (!tokens_ || !ctx.caller()) return std::string();
      auto session = tokens_->CreateSession(*ctx.caller());
      if (!session.ok()) return session.status();
      return session->second;
    };
    notebook_access.notebook_domain = options.notebook_domain;
    notebook_access.tls = options.tls;
    notebook_access.may_spawn_for_hub =
        [this, spawners = options.jupyterhub_spawners](const RequestContext& ctx) -> Status {
      // Without authentication anyone acts as the admin; an admin may.
      if (!tokens_ || !ctx.caller() || ctx.caller()->role == Role::kAdmin) return Status::Ok();
      const std::string name = ctx.Owner();
      if (std::find(spawners.begin(), spawners.end(), name) != spawners.end()) {
        return Status::Ok();
      }
      return PermissionDenied(
                 "only JupyterHub's spawner may start a hub user's server: the server names its "
                 "token with --jupyterhub-spawner TOKEN_NAME")
          .WithField("jupyterhub");
    };
    AddNotebookRoutes(router_, notebooks_, logins_, std::move(notebook_access));
    ArgoRoutesOptions argo_routes;
    argo_routes.workflows = options.workflows;
    argo_routes.jobs = &service_;
    argo_routes.cache = &cache_;
    argo_routes.artifacts = artifacts_;
    argo_routes.spool_dir = spool_dir_;
    argo_routes.bind_stream = [this](const RequestContext& ctx, HttpResponse response,
                                     std::shared_ptr<ResponseStream> stream) {
      return Bound(ctx, std::move(response), std::move(stream));
    };
    AddArgoRoutes(router_, std::move(argo_routes));
    AddExperimentRoutes(router_, experiments_);
  }

  HttpResponse Handle(const HttpRequest& req) {
    HttpResponse response = Guarded(req);
    if (response.deferred) return response;  // finished by whoever completes it
    if (IsArgoPath(req.path)) ToArgoError(response);
    Finish(*counters_, response);
    return response;
  }

 private:
  HttpResponse Guarded(const HttpRequest& req) {
    // Health checks probe by address and learn nothing but "ok".
    if (req.path != "/healthz") {
      if (Status s = CheckHostAndOrigin(req, hosts_); !s.ok()) return ErrorResponse(s);
    }
    return Authorized(req);
  }

  // What every answer gets last: the security headers, and a count by status.
  static void Finish(ApiCounters& counters, HttpResponse& response) {
    AddSecurityHeaders(response);
    counters.CountResponse(response.status);
  }

  // Headers every answer carries unless it set its own (the dashboard's
  // pages do, api/dashboard.h): API answers are data, never to be framed,
  // sniffed into another type, cached, or named in a Referer.
  static void AddSecurityHeaders(HttpResponse& response) {
    auto add = [&](std::string_view name, std::string_view value) {
      for (const auto& [k, v] : response.headers) {
        if (EqualsIgnoringCase(k, name)) return;
      }
      response.headers.emplace_back(name, value);
    };
    add("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'");
    add("X-Frame-Options", "DENY");
    add("X-Content-Type-Options", "nosniff");
    add("Referrer-Policy", "no-referrer");
    add("Cache-Control", "no-store");
  }

  HttpResponse Authorized(const HttpRequest& req) {
    // Who is asking, for the handler: these outlive it.
    UserToken caller;
    std::string secret;
    if (!notebook_domain_.empty()) {
      // A notebook's own origin serves that notebook and nothing else: not
      // the API, not the dashboard, not another notebook.
      const std::string own = NotebookOfHost(HostOfHeader(req.Header("host")), notebook_domain_);
      if (!own.empty()) {
        if (NotebookOfPath(req.path) != own) {
          return ErrorResponse(NotFound("this origin serves notebook " + own +
                                        " alone, under /notebooks/" + own + "/"));
        }
        return NotebookProxy(req, caller, secret);
      }
      if (IsNotebookPath(req.path) && BearerToken(req.Header("authorization")).empty()) {
        // A browser (programs send their token): to the notebook's origin.
        const std::string name = NotebookOfPath(req.path);
        if (name.empty()) return ErrorResponse(NotFound("no notebook at " + req.path));
        HttpResponse r{302, "text/plain; charset=utf-8", "", {}, nullptr, nullptr};
        r.headers.emplace_back(
            "Location",
            NotebookOrigin(name, notebook_domain_, req.Header("host"), tls_) + req.target);
        return r;
      }
    }
    if (IsNotebookPath(req.path)) return NotebookProxy(req, caller, secret);
    if (auto missing = KubeflowNotFound(req.method, req.path)) {
      return JsonResponse(missing->code, missing->body);
    }
    if (auto page = dashboard_.Serve(req)) return std::move(*page);
    Job job;  // likewise
    if (!req.Header("x-headway-job").empty() &&
        (IsArtifactPath(req.path) || IsNotebookServerEnvPath(req.path))) {
      // A job's own token, for its checkpoints and the inputs it reads.
      const std::string name = req.Header("x-headway-job");
      secret = BearerToken(req.Header("authorization"));
      if (Status s = service_.MayReport(name, secret); !s.ok()) return ErrorResponse(s);
      auto found = service_.Get(name);
      if (!found.ok()) return ErrorResponse(found.status());
      job = std::move(found.value());
      return router_.Dispatch(req, RequestContext(job));
    }
    if (tokens_ && NeedsUserToken(req)) {
      secret = BearerToken(req.Header("authorization"));
      if (secret.empty()) {
        return ErrorResponse(Unauthenticated(
            "this server requires a user token: send \"Authorization: Bearer <token>\""));
      }
      auto who = tokens_->Authenticate(secret);
      if (!who.ok()) return ErrorResponse(who.status());
      caller = std::move(who.value());
      // A viewer may still trade its token for a session, which reads as little.
      if (caller.role == Role::kViewer && req.method != "GET" && req.method != "HEAD" &&
          req.path != "/api/v1/sessions") {
        return ErrorResponse(
            PermissionDenied("token '" + caller.name + "' is a viewer: it may only read"));
      }
      return router_.Dispatch(req, RequestContext(caller, secret, team_policy_));
    }
    return router_.Dispatch(req, RequestContext());
  }

  // GET /api/v1/jobs/{name}/exec?command=A&command=B&stdin=true&tty=true&rank=N&columns=C&rows=R,
  // upgraded to a WebSocket in Kubernetes' exec protocol (api/http_server.h,
  // AttachedProcess). No command: the job account's login shell. ssh=true
  // (with stdin=true): an SSH connection's bytes, served inside the job.
  HttpResponse Exec(const RequestContext& ctx, const HttpRequest& req, const std::string& name) {
    auto job = Visible(ctx, name);
    if (!job.ok()) return ErrorResponse(job.status());
    // A command in a job acts as the team: members and admins, never viewers.
    if (Status s = ctx.MayChange(job->spec.team); !s.ok()) return ErrorResponse(s);
    if (job->state != JobState::kRunning) {
      return ErrorResponse(Conflict("job '" + name + "' is not running (" +
                                    std::string(JobStateName(job->state)) + ")"));
    }
    // Everything is checked before the upgrade: a client whose upgrade was
    // refused asks again without one to learn why.
    ExecOptions options;
    for (auto [key, target, low, high] :
         {std::tuple{"rank", &options.rank, 0, RankSlots(job->spec) - 1},
          std::tuple{"columns", &options.columns, 1, 1000},
          std::tuple{"rows", &options.rows, 1, 1000}}) {
      if (req.Query(key).empty()) continue;
      auto value = ParseNonNegativeInt(key, req.Query(key));
      if (!value.ok()) return ErrorResponse(value.status());
      if (*value < low || *value > high) {
        return ErrorResponse(InvalidArgument(std::string(key) + " must be from " +
                                             std::to_string(low) + " to " + std::to_string(high)));
      }
      *target = *value;
    }
    if (AsciiLower(req.Header("upgrade")) != "websocket") {
      return ErrorResponse(InvalidArgument(
          "exec is a WebSocket: send \"Upgrade: websocket\" (headway exec and headway ssh do)"));
    }
    options.argv = QueryValues(req.target, "command");
    if (options.argv.size() > 256)
      return ErrorResponse(InvalidArgument("too many command arguments"));
    const std::string tty = req.Query("tty", "false");
    options.tty = tty == "true" || tty == "1";
    const std::string input = req.Query("stdin", "false");
    options.stdin = input == "true" || input == "1";
    const std::string ssh = req.Query("ssh", "false");
    options.ssh = ssh == "true" || ssh == "1";
    if (options.ssh && (!options.argv.empty() || options.tty || !options.stdin)) {
      return ErrorResponse(InvalidArgument(
          "ssh=true carries an SSH connection: it takes stdin=true and no command or tty"));
    }
    auto attached = service_.Exec(name, options, ctx.Creator());
    if (!attached.ok()) return ErrorResponse(attached.status());
    HttpResponse r;
    r.attach = std::move(attached.value());
    return r;
  }

  // Every value of a repeated query key, decoded, in order.
  static std::vector<std::string> QueryValues(std::string_view target, std::string_view key) {
    std::vector<std::string> out;
    auto q = target.find('?');
    if (q == std::string_view::npos) return out;
    std::string_view query = target.substr(q + 1);
    while (!query.empty()) {
      auto amp = query.find('&');
      std::string_view pair = query.substr(0, amp);
      auto eq = pair.find('=');
      if (UrlDecode(pair.substr(0, eq), true) == key) {
        out.push_back(eq == std::string_view::npos ? "" : UrlDecode(pair.substr(eq + 1), true));
      }
      if (amp == std::string_view::npos) break;
      query.remove_prefix(amp + 1);
    }
    return out;
  }

  // /notebooks/NAME/...: to the notebook's server (api/notebook_routes.h),
  // for members of its team, by user token or the notebook's cookie.
  HttpResponse NotebookProxy(const HttpRequest& req, UserToken& caller, std::string& secret) {
    RequestContext ctx;  // no caller: authentication is off
    if (!notebooks_) return ErrorResponse(Unavailable("notebooks are not enabled on this server"));
    const std::string name = NotebookOfPath(req.path);
    if (name.empty()) return ErrorResponse(NotFound("no notebook at " + req.path));
    const std::string base = "/notebooks/" + name + "/";
    if (req.path == base + "headway-login") {
      // The one-time link: its code becomes the notebook's cookie, which
      // scripts cannot read (HttpOnly) and only this notebook's paths get.
      auto session = logins_.Redeem(name, req.Query("code"));
      if (!session.ok()) return ErrorResponse(session.status());
      notebooks_->Opened(name);
      HttpResponse r{302, "text/plain; charset=utf-8", "", {}, nullptr, nullptr};
      r.headers.emplace_back("Location", base + "tree");
      r.headers.emplace_back("Set-Cookie", std::string(kNotebookCookie) + "=" + *session +
                                               "; Path=" + base + "; HttpOnly; SameSite=Lax" +
                                               (tls_ ? "; Secure" : ""));
      return r;
    }
    if (tokens_) {
      secret = BearerToken(req.Header("authorization"));
      if (secret.empty()) secret = CookieValue(req.Header("cookie"), kNotebookCookie);
      if (secret.empty()) {
        return ErrorResponse(Unauthenticated("open this notebook with `headway notebook open " +
                                             name +
                                             "`, or send \"Authorization: Bearer <token>\""));
      }
      auto who = tokens_->Authenticate(secret);
      if (!who.ok()) return ErrorResponse(who.status());
      caller = std::move(who.value());
      ctx = RequestContext(caller, secret, team_policy_);
    }
    auto endpoint = notebooks_->Endpoint(name);
    if (!endpoint.ok()) {
      // Its team only learns it is starting; others learn nothing of it.
      auto view = notebooks_->Get(name);
      if (!view.ok()) return ErrorResponse(view.status());
      if (Status s = ctx.MayChange(view->record.team); !s.ok()) return ErrorResponse(s);
      return ErrorResponse(endpoint.status());
    }
    // A notebook runs code as its team: members and admins only, never viewers.
    if (Status s = ctx.MayChange(endpoint->team); !s.ok()) return ErrorResponse(s);
    if (req.path == base + "headway-status" && req.method == "GET") {
      auto view = notebooks_->Get(name);
      if (!view.ok()) return ErrorResponse(view.status());
      return JsonResponse(200, NotebookStatusJson(*view));
    }
    if (req.path == base + "headway-keep" && req.method == "POST") {
      notebooks_->Opened(name);
      return HttpResponse{204, "text/plain; charset=utf-8", "", {}, nullptr, nullptr};
    }
    if (req.path == base + "custom/custom.js" && req.method == "GET") {
      // The user's own custom.js (Jupyter answers with an empty one without),
      // then the banner.
      std::string script = notebooks_->OwnCustomScript(name);
      HttpResponse r{200,
                     "application/javascript; charset=utf-8",
                     script + "\n" + NotebookBannerScript(name),
                     {},
                     nullptr,
                     nullptr};
      r.headers.emplace_back("Cache-Control", "no-cache");
      return r;
    }
    auto target = std::make_shared<ProxyTarget>();
    target->host = endpoint->host;
    target->port = endpoint->port;
    target->connect = endpoint->connect;
    target->remove_headers = {"authorization", "cookie", "x-headway-job"};
    target->set_headers = {{"Authorization", "token " + endpoint->token}};
    std::string cookies = CookieHeaderWithout(req.Header("cookie"), kNotebookCookie);
    if (!cookies.empty()) target->set_headers.emplace_back("Cookie", cookies);
    // What Jupyter sets stays this notebook's: its host, its path.
    target->rewrite_set_cookie = [base](std::string_view cookie) {
      return ConfineSetCookie(cookie, base);
    };
    // Its pages are framed by its own origin at most.
    target->default_response_headers = {{"Content-Security-Policy", "frame-ancestors 'self'"},
                                        {"X-Content-Type-Options", "nosniff"}};
    HttpResponse r;
    r.proxy = std::move(target);
    return r;
  }

  // The jobs' own progress reports carry job tokens, checked by the service.
  static bool NeedsUserToken(const HttpRequest& req) {
    if (req.path == "/healthz") return false;
    return !IsJobReport(req.method, req.path);
  }

  Result<Job> Visible(const RequestContext& ctx, const std::string& name) {
    return VisibleJob(service_, ctx, name);
  }
  Status CheckVisible(const RequestContext& ctx, const std::string& name) {
    return CheckJobVisible(service_, ctx, name);
  }

  // A local queue is a team: what its members may ask for (admins are not bounded).
  json WithMemberBounds(json queue) const {
    if (!tokens_ || queue.value("executor", "local") != "local") return queue;
    TeamBounds b = team_policy_.For(queue.value("name", ""));
    queue["member_max_priority"] = b.max_priority;
    queue["member_max_grace"] = FormatDuration(b.max_grace);
    return queue;
  }

  HttpResponse EventStream(const RequestContext& ctx, std::shared_ptr<ResponseStream> stream) {
    HttpResponse r{200, "text/event-stream", "", {}, nullptr};
    r.headers.emplace_back("X-Accel-Buffering", "no");
    return Bound(ctx, std::move(r), std::move(stream));
  }

  // Puts `stream` in `response`, bound to the caller's token (see
  // TokenBoundStream), or answers 429 when the token has too many open.
  HttpResponse Bound(const RequestContext& ctx, HttpResponse response,
                     std::shared_ptr<ResponseStream> stream) {
    if (!ctx.caller() || !ctx.secret()) {
      response.stream = std::move(stream);
      return response;
    }
    std::string owner = ctx.Owner();
    auto slot = streams_.Take(owner);
    if (!slot) {
      return ErrorResponse(Status(
          StatusCode::kResourceExhausted,
          "token '" + owner + "' (with its sessions) has " + std::to_string(streams_.limit()) +
              " streams open, the limit (--max-streams-per-token); close one first"));
    }
    response.stream = std::make_shared<TokenBoundStream>(std::move(stream), tokens_, *ctx.secret(),
                                                         std::move(slot));
    return response;
  }

  HttpResponse WatchAll(const RequestContext& ctx, const HttpRequest& req) {
    bool compact = false;
    for (const auto& [key, value] : req.query) {
      if (key != "compact")
        return ErrorResponse(InvalidArgument("unknown query parameter '" + key + "'"));
      auto on = ParseSwitch(key, value);
      if (!on.ok()) return ErrorResponse(on.status());
      compact = *on;
    }
    return EventStream(ctx, WatchJobs(cache_, service_, ctx.VisibleTeam(), compact));
  }

  HttpResponse WatchOne(const RequestContext& ctx, const HttpRequest& req,
                        const std::string& name) {
    std::size_t buckets = 300;
    for (const auto& [key, value] : req.query) {
      if (key != "buckets")
        return ErrorResponse(InvalidArgument("unknown query parameter '" + key + "'"));
      auto n = ParseNonNegativeInt("buckets", value);
      if (!n.ok()) return ErrorResponse(n.status());
      if (*n < 2 || *n > 100000) {
        return ErrorResponse(InvalidArgument("query parameter 'buckets' must be from 2 to 100000"));
      }
      buckets = static_cast<std::size_t>(*n);
    }
    if (Status s = CheckVisible(ctx, name); !s.ok()) return ErrorResponse(s);
    auto stream = WatchJob(cache_, service_, name, buckets);
    if (!stream.ok()) return ErrorResponse(stream.status());
    return EventStream(ctx, std::move(stream.value()));
  }

  json View(const Job& job) { return JobView(service_, job); }

  HttpResponse Submit(const RequestContext& ctx, const HttpRequest& req) {
    // ?name=NAME names the job whatever its spec says (headway submit --name).
    std::string name;
    for (const auto& [key, value] : req.query) {
      if (key != "name")
        return ErrorResponse(InvalidArgument("unknown query parameter '" + key + "'"));
      if (!IsValidJobName(value)) {
        return ErrorResponse(InvalidArgument("must be 1-63 lowercase letters, digits or '-', "
                                             "starting and ending with a letter or digit")
                                 .WithField("name"));
      }
      name = value;
    }
    auto spec = ParseJobSpec(req.body, /*name_required=*/name.empty());
    if (!spec.ok()) return ErrorResponse(spec.status());
    if (!name.empty()) spec->name = name;
    if (Status s = ctx.Admit(*spec); !s.ok()) return ErrorResponse(s);
    if (tokens_ && ctx.caller() && ctx.caller()->role != Role::kAdmin &&
        max_queued_jobs_per_team_ > 0) {
      if (int waiting = service_.QueuedJobsOf(spec->team); waiting >= max_queued_jobs_per_team_) {
        return ErrorResponse(Status(StatusCode::kResourceExhausted,
                                    "team " + spec->team + " has " + std::to_string(waiting) +
                                        " jobs waiting, its limit for members (--max-queued-jobs " +
                                        std::to_string(max_queued_jobs_per_team_) +
                                        "): submit again once some start"));
      }
    }
    ApplySubmitDir(*spec, req.Header("x-headway-submit-dir"));
    auto job = service_.Submit(std::move(spec.value()), ctx.Creator());
    if (!job.ok()) return ErrorResponse(job.status());
    cache_.OnSubmitted(*job);
    return JsonResponse(201, View(*job));
  }

  HttpResponse List(const RequestContext& ctx, const HttpRequest& req) {
    auto filter = ParseFilter(req);
    if (!filter.ok()) return ErrorResponse(filter.status());
    if (std::string team = ctx.VisibleTeam(); !team.empty()) {
      if (!filter->team.empty() && filter->team != team)
        return ErrorResponse(ctx.MaySee(filter->team));
      filter->team = team;
    }
    auto jobs = service_.List(*filter);
    if (!jobs.ok()) return ErrorResponse(jobs.status());
    // Job by job into the body, each freed once written: a whole document of
    // 10k jobs held several times the body's size at once.
    std::string body = "{\"jobs\":[";
    bool first = true;
    for (Job& job : *jobs) {
      if (!first) body += ',';
      first = false;
      body += JsonText(View(job));
      job = Job{};
    }
    body += "]}";
    return {200, "application/json", std::move(body), {}, nullptr};
  }

  HttpResponse Get(const RequestContext& ctx, const std::string& name) {
    auto job = Visible(ctx, name);
    if (!job.ok()) return ErrorResponse(job.status());
    return JsonResponse(200, View(*job));
  }

  HttpResponse Stop(const RequestContext& ctx, const HttpRequest& req, const std::string& name) {
    std::string team;
    if (ctx.caller()) {
      auto current = Visible(ctx, name);
      if (!current.ok()) return ErrorResponse(current.status());
      if (Status s = ctx.MayChange(current->spec.team); !s.ok()) return ErrorResponse(s);
      team = current->spec.team;
    }
    std::string why = ctx.caller() ? "stopped by " + ctx.caller()->name : "stopped by user";
    bool force = false;
    if (!req.body.empty()) {
      auto body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
      if (!body.is_object()) return ErrorResponse(InvalidArgument("body must be a JSON object"));
      if (body.contains("reason")) {
        if (!body["reason"].is_string()) {
          return ErrorResponse(InvalidArgument("must be a string").WithField("reason"));
        }
        why = body["reason"].get<std::string>();
      }
      if (body.contains("force")) {
        if (!body["force"].is_boolean()) {
          return ErrorResponse(InvalidArgument("must be true or false").WithField("force"));
        }
        force = body["force"].get<bool>();
      }
    }
    if (force) {
      // Skipping the grace loses the job's unsaved work: admins only.
      if (ctx.caller() && !MayForceStop(*ctx.caller(), team)) {
        return ErrorResponse(PermissionDenied("token '" + ctx.caller()->name + "' (" +
                                              std::string(RoleName(ctx.caller()->role)) +
                                              ") may not force a stop: that needs an admin token"));
      }
      auto job = service_.ForceStop(name, why);
      if (!job.ok()) return ErrorResponse(job.status());
      return JsonResponse(200, View(*job));
    }
    auto job = service_.Stop(name, why);
    if (!job.ok()) return ErrorResponse(job.status());
    return JsonResponse(200, View(*job));
  }

  // DELETE /api/v1/jobs/NAME[?force=true]: 200 once deleted; 202 when the
  // job had not ended and force asked for it to be stopped and deleted then.
  HttpResponse Delete(const RequestContext& ctx, const HttpRequest& req, const std::string& name) {
    bool force = false;
    for (const auto& [key, value] : req.query) {
      if (key != "force")
        return ErrorResponse(InvalidArgument("unknown query parameter '" + key + "'"));
      if (value != "true" && value != "false" && value != "1" && value != "0") {
        return ErrorResponse(InvalidArgument("must be true or false").WithField("force"));
      }
      force = value == "true" || value == "1";
    }
    auto current = Visible(ctx, name);
    if (!current.ok()) return ErrorResponse(current.status());
    if (Status s = ctx.MayChange(current->spec.team); !s.ok()) return ErrorResponse(s);
    auto job = service_.Delete(name, force);
    if (!job.ok()) return ErrorResponse(job.status());
    bool deleted = IsTerminal(job->state);
    return JsonResponse(deleted ? 200 : 202,
                        {{"name", name},
                         {"deleted", deleted},
                         {"state", JobStateName(job->state)},
                         {"message", deleted ? "deleted with its progress, events, logs and files"
                                             : "stopping; deleted once it has ended"}});
  }

  // POST /api/v1/jobs/NAME/rerun: a new job with NAME's spec, named NAME-2
  // (or the first of NAME-3, NAME-4, ... that is free).
  HttpResponse Rerun(const RequestContext& ctx, const std::string& name) {
    auto job = Visible(ctx, name);
    if (!job.ok()) return ErrorResponse(job.status());
    JobSpec spec = job->spec;
    if (Status s = ctx.Admit(spec); !s.ok()) return ErrorResponse(s);
    for (int n = 2; n < 10000; ++n) {
      std::string suffix = "-" + std::to_string(n);
      std::string base = job->name().substr(0, 63 - suffix.size());
      while (!base.empty() && base.back() == '-') base.pop_back();
      spec.name = base + suffix;
      if (service_.Get(spec.name).ok()) continue;
      auto created = service_.Submit(spec, ctx.Creator());
      if (created.ok()) {
        cache_.OnSubmitted(*created);
        json view = View(*created);
        view["rerun_of"] = job->name();
        return JsonResponse(201, view);
      }
      if (created.status().code() != StatusCode::kConflict) return ErrorResponse(created.status());
    }
    return ErrorResponse(Conflict("no free name of the form " + name + "-N"));
  }

  HttpResponse Report(const HttpRequest& req, const std::string& name) {
    auto reports = DecodeProgressReports(req.body);
    if (!reports.ok()) {
      CountReport(reports.status(), 0);
      return ErrorResponse(reports.status());
    }
    std::size_t n = reports->size();
    // The answer waits for the group commit without holding an I/O thread.
    // What completes it may run after this Api is gone (the writer drains
    // at shutdown), so it holds the counters, not `this`.
    auto deferred = std::make_shared<DeferredResponse>();
    service_.ReportProgressThen(
        name, BearerToken(req.Header("authorization")), std::move(reports.value()),
        [deferred, counters = counters_, n](const Status& outcome) {
          Status s = SameForMissingJobs(outcome);
          CountReport(*counters, s, n);
          HttpResponse answer = s.ok() ? JsonResponse(202, {{"accepted", n}}) : ErrorResponse(s);
          Finish(*counters, answer);
          deferred->Complete(std::move(answer));
        });
    HttpResponse response;
    response.deferred = std::move(deferred);
    return response;
  }

  // Kubeflow Trainer v2's status endpoint (api/kubeflow_status.h).
  HttpResponse KubeflowStatus(const HttpRequest& req, const std::string& ns,
                              const std::string& name) {
    KubeflowAnswer a = HandleKubeflowStatus(service_, ns, name,
                                            BearerToken(req.Header("authorization")), req.body);
    CountReport(a.code == 200 ? Status::Ok() : Internal("refused"), a.stored_points);
    return JsonResponse(a.code, a.body);
  }

  HttpResponse MetricNames(const RequestContext& ctx, const std::string& name) {
    if (Status s = CheckVisible(ctx, name); !s.ok()) return ErrorResponse(s);
    auto names = service_.MetricNames(name);
    if (!names.ok()) return ErrorResponse(names.status());
    return JsonResponse(200, {{"metrics", *names}});
  }

  HttpResponse Metric(const RequestContext& ctx, const HttpRequest& req, const std::string& name,
                      const std::string& metric) {
    std::size_t buckets = 0;
    for (const auto& [key, value] : req.query) {
      if (key != "buckets")
        return ErrorResponse(InvalidArgument("unknown query parameter '" + key + "'"));
      auto n = ParseNonNegativeInt("buckets", value);
      if (!n.ok()) return ErrorResponse(n.status());
      buckets = static_cast<std::size_t>(*n);
    }
    if (Status s = CheckVisible(ctx, name); !s.ok()) return ErrorResponse(s);
    auto chart = service_.MetricChartOf(name, metric, buckets);
    if (!chart.ok()) return ErrorResponse(chart.status());
    json out = {{"metric", metric}, {"count", chart->count}};
    if (chart->buckets.empty()) {
      json items = json::array();
      for (const MetricPoint& p : chart->points)
        items.push_back({{"step", p.step}, {"value", NumberToJson(p.value)}});
      out["points"] = std::move(items);
    } else {
      json items = json::array();
      for (const MetricBucket& b : chart->buckets) {
        items.push_back({{"first_step", b.first_step},
                         {"last_step", b.last_step},
                         {"min", NumberToJson(b.min)},
                         {"max", NumberToJson(b.max)},
                         {"last", NumberToJson(b.last)},
                         {"count", b.count},
                         {"non_finite", b.non_finite}});
      }
      out["buckets"] = std::move(items);
    }
    return JsonResponse(200, out);
  }

  static bool IsNotebookServerEnvPath(const std::string& path) {
    std::vector<std::string> parts = SplitPath(path);
    return parts.size() == 5 && parts[0] == "api" && parts[2] == "notebooks" &&
           parts[4] == "server-env";
  }

  // Reports need no user token, so their answers must not tell whether a
  // job exists: a token refused for a job and a job that does not exist get
  // the same answer, word for word (the name is left out: it differs).
  static Status SameForMissingJobs(Status s) {
    if (s.code() == StatusCode::kNotFound || s.code() == StatusCode::kPermissionDenied) {
      return PermissionDenied("this token may not report for this job (or there is no such job)");
    }
    return s;
  }

  // Queues and nodes are the whole pool's, but a caller confined to `team`
  // (non-empty) sees only that team's job names in them; other teams' jobs
  // still count in the figures.
  HttpResponse Queues(const std::string& team) {
    std::vector<QueueStatus> queues = service_.Queues();
    auto names = team.empty() ? Result<JobNames>(JobNames{}) : ActiveJobNames(team);
    if (!names.ok()) return ErrorResponse(names.status());
    json items = json::array();
    for (QueueStatus& q : queues) {
      if (!team.empty()) {
        if (!names->visible.count(q.next_job)) q.next_job.clear();
        q.pending_reason = RedactJobNames(q.pending_reason, names->hidden);
      }
      items.push_back(WithMemberBounds(QueueToJson(q)));
    }
    return JsonResponse(200, {{"queues", items}});
  }

  HttpResponse Nodes(const std::string& team) {
    std::vector<NodeStatus> nodes = service_.Nodes();
    auto names = team.empty() ? Result<JobNames>(JobNames{}) : ActiveJobNames(team);
    if (!names.ok()) return ErrorResponse(names.status());
    json items = json::array();
    for (NodeStatus& n : nodes) {
      std::size_t hidden = 0;
      if (!team.empty()) {
        std::vector<std::string> shown;
        for (std::string& job : n.jobs) {
          if (names->visible.count(job)) {
            shown.push_back(std::move(job));
          } else {
            ++hidden;
          }
        }
        n.jobs = std::move(shown);
      }
      json item = NodeToJson(n);
      item["hidden_jobs"] = hidden;
      items.push_back(std::move(item));
    }
    return JsonResponse(200, {{"nodes", items}});
  }

  struct JobNames {
    std::set<std::string> visible;  // the team's active jobs
    std::set<std::string> hidden;   // every other active job
  };

  Result<JobNames> ActiveJobNames(const std::string& team) {
    JobFilter filter;
    filter.active_only = true;
    auto jobs = service_.List(filter);
    if (!jobs.ok()) return jobs.status();
    JobNames names;
    for (const Job& job : *jobs)
      (job.spec.team == team ? names.visible : names.hidden).insert(job.name());
    return names;
  }

  // `text` with each whole-word occurrence of a name in `hidden` replaced.
  static std::string RedactJobNames(const std::string& text, const std::set<std::string>& hidden) {
    auto in_name = [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    };
    std::string out;
    std::size_t i = 0;
    while (i < text.size()) {
      if (!in_name(text[i])) {
        out += text[i++];
        continue;
      }
      std::size_t end = i;
      while (end < text.size() && in_name(text[end])) ++end;
      std::string word = text.substr(i, end - i);
      out += hidden.count(word) ? "another team's job" : word;
      i = end;
    }
    return out;
  }

  void CountReport(const Status& s, std::size_t points) { CountReport(*counters_, s, points); }
  static void CountReport(ApiCounters& counters, const Status& s, std::size_t points) {
    if (s.ok()) {
      counters.report_requests_accepted.fetch_add(1);
      counters.report_points.fetch_add(points);
    } else {
      counters.report_requests_rejected.fetch_add(1);
    }
  }

  JobService& service_;
  ExperimentService* experiments_;
  ArtifactService* artifacts_;
  NotebookService* notebooks_;
  const bool tls_;
  const bool local_jobs_reach_only_the_server_;
  const int max_queued_jobs_per_team_;
  const std::string spool_dir_;
  NotebookLogins logins_{system_clock_};
  TokenService* tokens_;
  HostPolicy hosts_;
  const std::string notebook_domain_;
  const TeamPolicy team_policy_;
  Dashboard dashboard_;
  // Shared with deferred answers, which may complete after this Api is gone.
  std::shared_ptr<ApiCounters> counters_ = std::make_shared<ApiCounters>();
  std::unique_ptr<WatchCache> own_cache_;  // only without options.watch_cache
  WatchCache& cache_;
  StreamCounter streams_;
  Router router_;
};

}  // namespace

bool IsArtifactUpload(std::string_view method, std::string_view path) {
  if (method != "PUT") return false;
  std::vector<std::string> parts = SplitPath(std::string(path));
  return parts.size() == 7 && parts[0] == "api" && parts[2] == "artifacts" &&
         parts[4] == "versions" && parts[6] == "content";
}

bool DefersItsAnswer(std::string_view method, std::string_view path) {
  if (method != "POST" || !path.starts_with("/api/v1/jobs/") || !path.ends_with("/progress")) {
    return false;
  }
  std::string_view name = path.substr(13, path.size() - 13 - 9);
  return !name.empty() && name.find('/') == std::string_view::npos;
}

bool IsJobReport(std::string_view method, std::string_view path) {
  if (method != "POST") return false;
  std::vector<std::string> parts = SplitPath(std::string(path));
  bool native_report =
      parts.size() == 5 && parts[0] == "api" && parts[2] == "jobs" && parts[4] == "progress";
  bool kubeflow_report = parts.size() >= 2 && parts[0] == "apis" &&
                         parts[1] == "trainer.kubeflow.org" && parts.back() == "status";
  return native_report || kubeflow_report;
}

HttpHandler MakeRestApi(JobService& service, const RestApiOptions& options) {
  auto api = std::make_shared<Api>(service, options);
  return [api](const HttpRequest& req) { return api->Handle(req); };
}

}  // namespace headway::api
