#include "api/notebook_routes.h"

#include <nlohmann/json.hpp>

#include "api/auth.h"
#include "api/job_json.h"
#include "api/json_response.h"
#include "api/request_guard.h"
#include "core/ascii.h"

namespace headway::api {
namespace {

using nlohmann::json;

json TimeOrNull(const std::optional<Time>& t) {
  return t ? json(FormatRfc3339(*t)) : json(nullptr);
}

json ProfileToJson(const NotebookProfile& p) {
  json j = {{"name", p.name},
            {"description", p.description},
            {"gpus", p.gpus},
            {"cpus", p.cpus},
            {"idle_timeout", FormatDuration(p.idle_timeout)},
            {"cull_warning", FormatDuration(p.cull_warning)},
            {"gpu_idle_below_percent", p.gpu_idle_below_percent}};
  if (p.memory_bytes > 0) j["memory"] = FormatMemoryQuantity(p.memory_bytes);
  if (p.time_limit) j["time_limit"] = FormatDuration(*p.time_limit);
  if (!p.queue.empty()) j["queue"] = p.queue;
  return j;
}

json NotebookToJson(const NotebookView& v) {
  const NotebookRecord& r = v.record;
  return {
      {"name", r.name},
      {"team", r.team},
      {"created_by", r.created_by},
      {"profile", r.profile},
      {"gpus", r.gpus},
      {"state", std::string(NotebookStateName(r.state))},
      {"ready", v.ready},
      {"job", r.job},
      {"job_state", v.job_state ? json(std::string(JobStateName(*v.job_state))) : json(nullptr)},
      {"pending_reason", v.pending_reason},
      {"queue_position", v.place.position > 0 ? json(v.place.position) : json(nullptr)},
      {"expected_start", TimeOrNull(v.place.expected_start)},
      {"message", r.message},
      {"url", r.hub_user.empty() ? json("/notebooks/" + r.name + "/") : json(nullptr)},
      {"starts", r.starts},
      {"created_at", FormatRfc3339(r.created_at)},
      {"idle_since", TimeOrNull(v.idle_since)},
      {"cull_at", TimeOrNull(v.cull_at)},
      {"cull_warned_at", TimeOrNull(r.cull_warned_at)},
      {"jupyterhub_user", r.hub_user.empty() ? json(nullptr) : json(r.hub_user)},
      {"server_url", v.server_url.empty() ? json(nullptr) : json(v.server_url)}};
}

// {name, team?, profile?, gpus?}; unknown fields are refused.
Result<NotebookStartRequest> ParseStart(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return InvalidArgument("the body must be a JSON object");
  NotebookStartRequest request;
  for (const auto& [key, value] : j.items()) {
    if (key == "name" || key == "team" || key == "profile") {
      if (!value.is_string()) return InvalidArgument("'" + key + "' must be a string");
      (key == "name"   ? request.name
       : key == "team" ? request.team
                       : request.profile) = value.get<std::string>();
    } else if (key == "jupyterhub") {
      // From HeadwaySpawner: {"user": "...", "env": {"JUPYTERHUB_...": "..."}}.
      if (!value.is_object()) return InvalidArgument("'jupyterhub' must be an object");
      for (const auto& [hub_key, hub_value] : value.items()) {
        if (hub_key == "user" && hub_value.is_string()) {
          request.hub_user = hub_value.get<std::string>();
        } else if (hub_key == "env" && hub_value.is_object()) {
          for (const auto& [name, text] : hub_value.items()) {
            if (!text.is_string())
              return InvalidArgument("jupyterhub.env." + name + " must be a string");
            request.server_env[name] = text.get<std::string>();
          }
        } else {
          return InvalidArgument("jupyterhub." + hub_key +
                                 " is not known or has the wrong type (it takes user and env)");
        }
      }
      if (request.hub_user.empty()) return InvalidArgument("jupyterhub.user is required");
    } else if (key == "gpus") {
      if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
          value.get<std::int64_t>() > 64) {
        return InvalidArgument("'gpus' must be an integer from 0 to 64");
      }
      request.gpus = value.get<int>();
    } else {
      return InvalidArgument("unknown field '" + key +
                             "' (a notebook takes name, team, profile, gpus and jupyterhub)");
    }
  }
  return request;
}

}  // namespace

std::string NotebookLogins::Issue(const std::string& notebook, const std::string& session_secret) {
  std::string code = NewSecret();
  std::lock_guard lock(mu_);
  const Time now = clock_.Now();
  for (auto it = pending_.begin(); it != pending_.end();) {
    it = it->second.expires_at <= now ? pending_.erase(it) : std::next(it);
  }
  pending_[HashToken(code)] = {notebook, session_secret, now + std::chrono::minutes(1)};
  return code;
}

Result<std::string> NotebookLogins::Redeem(const std::string& notebook, const std::string& code) {
  std::lock_guard lock(mu_);
  auto it = pending_.find(HashToken(code));
  if (it == pending_.end() || it->second.notebook != notebook ||
      it->second.expires_at <= clock_.Now()) {
    return NotFound(
        "this login link is unknown, used or expired: ask for a new one with "
        "`headway notebook open " +
        notebook + "`");
  }
  std::string secret = std::move(it->second.secret);
  pending_.erase(it);
  return secret;
}

void AddNotebookRoutes(Router& router, NotebookService* service, NotebookLogins& logins,
                       NotebookAccess access) {
  auto need = [service]() -> Status {
    return service ? Status::Ok() : Unavailable("notebooks are not enabled on this server");
  };
  router.Add("GET", "/api/v1/notebook-profiles", [=](auto&, auto&, const RequestContext&) {
    if (Status s = need(); !s.ok()) return ErrorResponse(s);
    json items = json::array();
    for (const NotebookProfile& p : service->Profiles()) items.push_back(ProfileToJson(p));
    return JsonResponse(200, {{"profiles", items}});
  });
  router.Add("GET", "/api/v1/notebooks", [=](auto&, auto&, const RequestContext& ctx) {
    if (Status s = need(); !s.ok()) return ErrorResponse(s);
    auto all = service->List(ctx.VisibleTeam());
    if (!all.ok()) return ErrorResponse(all.status());
    json items = json::array();
    for (const NotebookView& v : *all) items.push_back(NotebookToJson(v));
    return JsonResponse(200, {{"notebooks", items}});
  });
  router.Add("POST", "/api/v1/notebooks", [=](auto& req, auto&, const RequestContext& ctx) {
    if (Status s = need(); !s.ok()) return ErrorResponse(s);
    auto request = ParseStart(req.body);
    if (!request.ok()) return ErrorResponse(request.status());
    if (!request->hub_user.empty() && access.may_spawn_for_hub) {
      if (Status s = access.may_spawn_for_hub(ctx); !s.ok()) return ErrorResponse(s);
    }
    auto existing = service->Get(request->name);
    // Starting an existing notebook again needs no team; a new one without
    // one is the caller's team's (the default team for an admin).
    if (request->team.empty()) {
      request->team = existing.ok() ? existing->record.team : JobSpec().team;
    }
    PoolRequest pool{request->team};
    if (Status s = ctx.Admit(pool); !s.ok()) return ErrorResponse(s);
    request->team = pool.team;
    if (Status s = ctx.MayChange(request->team); !s.ok()) return ErrorResponse(s);
    if (existing.ok()) {
      // Names are unique on the server: say nothing of another team's.
      if (Status s = ctx.MaySee(existing->record.team); !s.ok()) return ErrorResponse(s);
    }
    bool existed = existing.ok();
    auto started = service->Start(*request, ctx.Creator());
    if (!started.ok()) return ErrorResponse(started.status());
    return JsonResponse(existed ? 200 : 201, NotebookToJson(*started));
  });
  // The notebook `name` if the caller may see it (and change it, with `change`).
  auto visible = [=](const RequestContext& ctx, const std::string& name,
                     bool change) -> Result<NotebookView> {
    HEADWAY_RETURN_IF_ERROR(need());
    auto v = service->Get(name);
    if (!v.ok()) return v.status();
    HEADWAY_RETURN_IF_ERROR(ctx.MaySee(v->record.team));
    if (change) HEADWAY_RETURN_IF_ERROR(ctx.MayChange(v->record.team));
    return v;
  };
  router.Add("GET", "/api/v1/notebooks/{name}", [=](auto&, auto& p, const RequestContext& ctx) {
    auto v = visible(ctx, p.at("name"), false);
    if (!v.ok()) return ErrorResponse(v.status());
    return JsonResponse(200, NotebookToJson(*v));
  });
  router.Add("POST", "/api/v1/notebooks/{name}/stop",
             [=](auto&, auto& p, const RequestContext& ctx) {
               auto v = visible(ctx, p.at("name"), true);
               if (!v.ok()) return ErrorResponse(v.status());
               auto stopped = service->Stop(p.at("name"));
               if (!stopped.ok()) return ErrorResponse(stopped.status());
               return JsonResponse(200, NotebookToJson(*stopped));
             });
  router.Add("DELETE", "/api/v1/notebooks/{name}", [=](auto&, auto& p, const RequestContext& ctx) {
    auto v = visible(ctx, p.at("name"), true);
    if (!v.ok()) return ErrorResponse(v.status());
    if (Status s = service->Delete(p.at("name")); !s.ok()) return ErrorResponse(s);
    return JsonResponse(200, NotebookToJson(*v));
  });
  // A JupyterHub notebook's job asks for its server's environment with its
  // own token (the REST API checked it and names the job).
  router.Add(
      "GET", "/api/v1/notebooks/{name}/server-env", [=](auto&, auto& p, const RequestContext& ctx) {
        if (Status s = need(); !s.ok()) return ErrorResponse(s);
        const Job* job = ctx.job();
        if (job == nullptr) {
          return ErrorResponse(
              PermissionDenied("only the notebook's own job may read its server environment"));
        }
        auto env = service->ServerEnv(p.at("name"), job->name());
        if (!env.ok()) return ErrorResponse(env.status());
        return JsonResponse(200, {{"env", *env}});
      });
  router.Add("POST", "/api/v1/notebooks/{name}/login",
             [=, &logins](auto& req, auto& p, const RequestContext& ctx) {
               auto v = visible(ctx, p.at("name"), true);
               if (!v.ok()) return ErrorResponse(v.status());
               if (!v->record.hub_user.empty()) {
                 return ErrorResponse(Conflict("notebook '" + v->record.name +
                                               "' belongs to JupyterHub user " +
                                               v->record.hub_user + ": open it through the hub"));
               }
               // On its own origin where notebooks have one: the link is absolute.
               const std::string base =
                   (access.notebook_domain.empty()
                        ? std::string()
                        : NotebookOrigin(v->record.name, access.notebook_domain, req.Header("host"),
                                         access.tls)) +
                   "/notebooks/" + v->record.name + "/";
               auto secret = access.new_session(ctx);
               if (!secret.ok()) return ErrorResponse(secret.status());
               if (secret->empty())
                 return JsonResponse(200, {{"url", base + "tree"}, {"expires_in", nullptr}});
               std::string code = logins.Issue(v->record.name, *secret);
               return JsonResponse(
                   200, {{"url", base + "headway-login?code=" + code}, {"expires_in", 60}});
             });
}

bool IsNotebookPath(std::string_view path) { return path.starts_with("/notebooks/"); }

std::string NotebookOfPath(std::string_view path) {
  if (!IsNotebookPath(path)) return {};
  path.remove_prefix(std::string_view("/notebooks/").size());
  std::string name(path.substr(0, path.find('/')));
  return IsValidJobName(name) ? name : std::string();
}

std::string NotebookOfHost(std::string_view host, std::string_view domain) {
  if (!IsNameUnder(host, domain)) return {};
  std::string name(host.substr(0, host.size() - domain.size() - 1));
  return IsValidJobName(name) ? name : std::string();
}

std::string NotebookOrigin(std::string_view name, std::string_view domain,
                           std::string_view host_header, bool tls) {
  return std::string(tls ? "https://" : "http://") + std::string(name) + "." + std::string(domain) +
         PortOfHeader(host_header);
}

std::string ConfineSetCookie(std::string_view value, std::string_view base) {
  std::string out;
  bool path_set = false;
  std::size_t start = 0;
  bool first = true;
  while (start <= value.size()) {
    auto semi = value.find(';', start);
    if (semi == std::string_view::npos) semi = value.size();
    std::string_view part = value.substr(start, semi - start);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    start = semi + 1;
    if (first) {
      out = std::string(part);  // name=value
      first = false;
      continue;
    }
    const auto eq = part.find('=');
    const std::string key = AsciiLower(part.substr(0, eq));
    if (key == "domain") continue;
    if (key == "path") {
      const std::string_view path = eq == std::string_view::npos ? "" : part.substr(eq + 1);
      if (!path.starts_with(base)) continue;  // set below
      path_set = true;
    }
    if (!part.empty()) out += "; " + std::string(part);
  }
  if (!path_set) out += "; Path=" + std::string(base);
  return out;
}

std::string CookieValue(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    auto semi = header.find(';');
    std::string_view pair = header.substr(0, semi);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    auto eq = pair.find('=');
    if (eq != std::string_view::npos && pair.substr(0, eq) == name) {
      return std::string(pair.substr(eq + 1));
    }
    if (semi == std::string_view::npos) break;
    header.remove_prefix(semi + 1);
  }
  return {};
}

std::string NotebookBannerScript(const std::string& name) {
  // `name` is a notebook name ([a-z0-9-]): safe inside a JavaScript string.
  return R"JS(
// Headway: the notebook's idle warning, shown on every Jupyter page.
(function () {
  var base = '/notebooks/)JS" +
         name + R"JS(/';
  var banner = null;
  function clock(iso) { return new Date(iso).toLocaleTimeString([], {hour: '2-digit', minute: '2-digit'}); }
  function hide() { if (banner) { banner.remove(); banner = null; } }
  function show(status) {
    if (!banner) {
      banner = document.createElement('div');
      banner.id = 'headway-idle-banner';
      banner.setAttribute('role', 'alert');
      // At the bottom: Jupyter's own menus and toolbars stay reachable.
      banner.style.cssText = 'position:fixed;bottom:0;left:0;right:0;z-index:10000;padding:8px 16px;' +
        'background:#fff3cd;color:#664d03;border-top:1px solid #e0c36a;font:14px sans-serif';
      banner.appendChild(document.createElement('span'));
      var keep = document.createElement('button');
      keep.id = 'headway-keep';
      keep.textContent = 'Keep it running';
      keep.style.marginLeft = '12px';
      keep.onclick = function () {
        fetch(base + 'headway-keep', {method: 'POST', credentials: 'same-origin'}).then(check, check);
      };
      banner.appendChild(keep);
      document.body.appendChild(banner);
    }
    banner.firstChild.textContent = 'This notebook has been idle since ' + clock(status.idle_since) +
      ' and will be stopped at ' + clock(status.cull_at) +
      ' to free what it holds. Your files are kept.';
  }
  function check() {
    fetch(base + 'headway-status', {credentials: 'same-origin'})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (s) { if (s && s.warned && s.cull_at && s.idle_since) show(s); else hide(); })
      .catch(function () {});
  }
  check();
  setInterval(check, 15000);
})();
)JS";
}

nlohmann::json NotebookStatusJson(const NotebookView& view) {
  const auto& warned_at = view.record.cull_warned_at;
  const bool warned =
      warned_at && view.idle_since && view.cull_at && *warned_at >= *view.idle_since;
  return {{"warned", warned},
          {"idle_since", TimeOrNull(view.idle_since)},
          {"cull_at", TimeOrNull(view.cull_at)}};
}

std::string CookieHeaderWithout(std::string_view header, std::string_view name) {
  std::string out;
  while (!header.empty()) {
    auto semi = header.find(';');
    std::string_view pair = header.substr(0, semi);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    auto eq = pair.find('=');
    if (!pair.empty() && (eq == std::string_view::npos || pair.substr(0, eq) != name)) {
      if (!out.empty()) out += "; ";
      out += pair;
    }
    if (semi == std::string_view::npos) break;
    header.remove_prefix(semi + 1);
  }
  return out;
}

}  // namespace headway::api
