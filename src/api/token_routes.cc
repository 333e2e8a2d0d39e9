#include "api/token_routes.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "api/json_response.h"
#include "api/request_context.h"
#include "core/access.h"
#include "core/time.h"

namespace headway::api {
namespace {

using nlohmann::json;

class TokenRoutes {
 public:
  explicit TokenRoutes(TokenService* tokens) : tokens_(tokens) {}

  HttpResponse ListTokens(const RequestContext& ctx) {
    if (!tokens_)
      return ErrorResponse(Unavailable("authentication is off (the server runs with --no-auth)"));
    if (Status s = ctx.RequireAdmin(); !s.ok()) return ErrorResponse(s);
    auto all = tokens_->ListTokens();
    if (!all.ok()) return ErrorResponse(all.status());
    json items = json::array();
    for (const UserToken& t : *all) items.push_back(TokenToJson(t));
    return JsonResponse(200, {{"tokens", items}});
  }

  HttpResponse CreateToken(const RequestContext& ctx, const HttpRequest& req) {
    if (!tokens_)
      return ErrorResponse(Unavailable("authentication is off (the server runs with --no-auth)"));
    if (Status s = ctx.RequireAdmin(); !s.ok()) return ErrorResponse(s);
    if (ctx.caller() && !ctx.caller()->parent.empty()) {
      // A session lives in a browser (or came from a link in a log): it must
      // not turn into a secret that outlives it.
      return ErrorResponse(PermissionDenied(
          "a session (the dashboard's sign-in) cannot create tokens: use `headway token create` "
          "with your own token"));
    }
    json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object()) return ErrorResponse(InvalidArgument("body must be a JSON object"));
    std::string name, team, role = "member";
    std::optional<Duration> ttl;
    for (auto it = body.begin(); it != body.end(); ++it) {
      if (!it.value().is_string())
        return ErrorResponse(InvalidArgument("must be a string").WithField(it.key()));
      if (it.key() == "name") {
        name = it.value().get<std::string>();
      } else if (it.key() == "team") {
        team = it.value().get<std::string>();
      } else if (it.key() == "role") {
        role = it.value().get<std::string>();
      } else if (it.key() == "ttl") {
        ttl = ParseDuration(it.value().get<std::string>());
        if (!ttl || ttl->count() <= 0) {
          return ErrorResponse(InvalidArgument("must be a positive duration such as 30m, 24h or 7d")
                                   .WithField("ttl"));
        }
      } else {
        return ErrorResponse(InvalidArgument("unknown field").WithField(it.key().substr(0, 64)));
      }
    }
    auto parsed_role = ParseRole(role);
    if (!parsed_role) {
      return ErrorResponse(InvalidArgument("must be viewer, member or admin").WithField("role"));
    }
    auto secret = tokens_->CreateToken(name, team, *parsed_role, ttl);
    if (!secret.ok()) return ErrorResponse(secret.status());
    // The token's own expiry is the one stored; read it back rather than recompute it.
    json expires_at = nullptr;
    if (auto who = tokens_->Authenticate(*secret); who.ok() && who->expires_at) {
      expires_at = FormatRfc3339(*who->expires_at);
    }
    return JsonResponse(201, {{"name", name},
                              {"team", team},
                              {"role", role},
                              {"token", *secret},
                              {"expires_at", expires_at}});
  }

  // Trades the caller's token for a short-lived session token with the same
  // team and role (the dashboard keeps only that one).
  HttpResponse CreateSession(const RequestContext& ctx) {
    if (!tokens_ || !ctx.caller()) {
      return ErrorResponse(Unavailable("authentication is off (the server runs with --no-auth)"));
    }
    auto session = tokens_->CreateSession(*ctx.caller());
    if (!session.ok()) return ErrorResponse(session.status());
    const UserToken& s = session->first;
    return JsonResponse(
        201, {{"name", s.name},
              {"team", s.team},
              {"role", RoleName(s.role)},
              {"session_of", s.parent},
              {"token", session->second},
              {"expires_at", s.expires_at ? json(FormatRfc3339(*s.expires_at)) : json(nullptr)}});
  }

  HttpResponse RevokeToken(const RequestContext& ctx, const std::string& name) {
    if (!tokens_)
      return ErrorResponse(Unavailable("authentication is off (the server runs with --no-auth)"));
    if (Status s = ctx.RequireAdmin(); !s.ok()) return ErrorResponse(s);
    Status s = tokens_->RevokeToken(name);
    if (!s.ok()) return ErrorResponse(s);
    return JsonResponse(200, {{"name", name}, {"revoked", true}});
  }

  static json TokenToJson(const UserToken& t) {
    return {{"name", t.name},
            {"team", t.team},
            {"role", RoleName(t.role)},
            {"created_at", FormatRfc3339(t.created_at)},
            {"revoked_at", t.revoked_at ? json(FormatRfc3339(*t.revoked_at)) : json(nullptr)},
            {"expires_at", t.expires_at ? json(FormatRfc3339(*t.expires_at)) : json(nullptr)},
            {"session_of", t.parent.empty() ? json(nullptr) : json(t.parent)}};
  }

 private:
  TokenService* tokens_;
};

}  // namespace

void AddTokenRoutes(Router& router, TokenService* tokens) {
  auto routes = std::make_shared<TokenRoutes>(tokens);
  router.Add("GET", "/api/v1/whoami", [](auto&, auto&, auto& ctx) {
    if (!ctx.caller()) return JsonResponse(200, {{"authentication", false}});
    return JsonResponse(200, {{"authentication", true},
                              {"name", ctx.caller()->name},
                              {"team", ctx.caller()->team},
                              {"role", RoleName(ctx.caller()->role)}});
  });
  router.Add("GET", "/api/v1/tokens",
             [routes](auto&, auto&, auto& ctx) { return routes->ListTokens(ctx); });
  router.Add("POST", "/api/v1/tokens",
             [routes](auto& r, auto&, auto& ctx) { return routes->CreateToken(ctx, r); });
  router.Add("DELETE", "/api/v1/tokens/{name}", [routes](auto&, auto& p, auto& ctx) {
    return routes->RevokeToken(ctx, p.at("name"));
  });
  router.Add("POST", "/api/v1/sessions",
             [routes](auto&, auto&, auto& ctx) { return routes->CreateSession(ctx); });
}

}  // namespace headway::api
