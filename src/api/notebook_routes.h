// Notebooks over REST (docs/api/openapi.yaml):
//
//   GET    /api/v1/notebook-profiles
//   GET    /api/v1/notebooks                  the caller's team's (all for admins)
//   POST   /api/v1/notebooks                  {name, team?, profile?, gpus?, jupyterhub?}:
//                                             create or start again
//   GET    /api/v1/notebooks/{name}
//   POST   /api/v1/notebooks/{name}/stop
//   DELETE /api/v1/notebooks/{name}           stops it and forgets it; its home stays
//   POST   /api/v1/notebooks/{name}/login     a one-time link that opens it in a browser
//   GET    /api/v1/notebooks/{name}/server-env  the notebook's own job only, by its own token
//
// and the notebooks themselves under /notebooks/{name}/ (NotebookProxy):
// every request, WebSockets included, goes to the notebook's Jupyter server
// with the server's token added, once Headway has checked the caller: a
// user token ("Authorization: Bearer ...") or the notebook's cookie, which
// /notebooks/{name}/headway-login?code=... sets from a one-time code. Only
// members (and admins) of the notebook's team get through: a notebook runs
// code as the team. Three paths there are Headway's own, for the idle
// warning shown inside Jupyter:
//   GET  /notebooks/{name}/custom/custom.js   Jupyter's own custom.js (the
//        user's, if any) with NotebookBannerScript after it: every Jupyter
//        page loads it
//   GET  /notebooks/{name}/headway-status     NotebookStatusJson
//   POST /notebooks/{name}/headway-keep       counts as opening it: the idle
//        spell ends and the warning goes
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/http_server.h"
#include "api/notebook_service.h"
#include "api/request_context.h"
#include "api/router.h"
#include "core/access.h"
#include "core/time.h"

namespace headway::api {

// What the notebook routes ask of the server beyond who is asking (the
// RequestContext each route gets: a member's notebook without a team is its
// team's, and the job whose own token was sent reads its server's env).
struct NotebookAccess {
  // A browser session secret for the caller; empty when the server runs
  // without authentication (then no cookie is needed).
  std::function<Result<std::string>(const RequestContext&)> new_session;
  // Whether the caller may start a JupyterHub user's server.
  std::function<Status(const RequestContext&)> may_spawn_for_hub;
  // Non-empty: each notebook has an origin of its own, NAME.DOMAIN (see
  // NotebookOrigin), where its login link leads.
  std::string notebook_domain;
  bool tls = false;
};

// The name of the cookie that carries a notebook's browser session.
inline constexpr std::string_view kNotebookCookie = "headway-notebook";

// One-time login codes: a code is good once, for one notebook, for a minute.
class NotebookLogins {
 public:
  explicit NotebookLogins(const Clock& clock) : clock_(clock) {}
  std::string Issue(const std::string& notebook, const std::string& session_secret);
  // The session secret, once; NotFound for an unknown, used or expired code.
  Result<std::string> Redeem(const std::string& notebook, const std::string& code);

 private:
  struct Pending {
    std::string notebook;
    std::string secret;
    Time expires_at;
  };
  const Clock& clock_;
  std::mutex mu_;
  std::map<std::string, Pending> pending_;  // by SHA-256 of the code
};

// `service` may be null: the routes then answer 503.
void AddNotebookRoutes(Router& router, NotebookService* service, NotebookLogins& logins,
                       NotebookAccess access);

// Whether `path` is under /notebooks/ (served by NotebookProxy, not the router).
bool IsNotebookPath(std::string_view path);

// The name of the notebook a /notebooks/ path is for; empty when malformed.
std::string NotebookOfPath(std::string_view path);

// The script that shows a notebook's idle warning as a banner on its Jupyter
// pages, with a button that keeps it running (see the file comment).
std::string NotebookBannerScript(const std::string& name);
// {"warned": bool, "idle_since": time|null, "cull_at": time|null}: warned
// while the notebook's current idle spell has been warned of.
nlohmann::json NotebookStatusJson(const NotebookView& view);

// Notebooks on origins of their own (--notebook-domain): notebook NAME is
// served at NAME.DOMAIN only, so its pages (and a member's custom.js in
// them) share no origin with the dashboard, the API or another notebook:
// they cannot read the dashboard's storage, frame its pages as same-origin,
// or send another notebook's cookie.
//
// The notebook a Host names ("name.domain", lowercase, without its port);
// empty when it names none.
std::string NotebookOfHost(std::string_view host, std::string_view domain);
// "http[s]://NAME.DOMAIN[:PORT]", with the port of `host_header` (the
// request's Host, as the browser reached the server).
std::string NotebookOrigin(std::string_view name, std::string_view domain,
                           std::string_view host_header, bool tls);
// An upstream Set-Cookie confined to its notebook: Domain dropped (so the
// cookie is its host's alone, never its parent domain's) and Path set to
// `base` unless it lies within it.
std::string ConfineSetCookie(std::string_view set_cookie, std::string_view base);

// The value of cookie `name` in a Cookie header; empty when absent.
std::string CookieValue(std::string_view cookie_header, std::string_view name);

// The Cookie header without cookie `name`: what a notebook is sent.
std::string CookieHeaderWithout(std::string_view cookie_header, std::string_view name);

}  // namespace headway::api
