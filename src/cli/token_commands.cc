#include "cli/token_commands.h"

#include <iostream>
#include <nlohmann/json.hpp>

namespace headway::cli {

using nlohmann::json;

int TokenCreate(const Options& o) {
  Client client(o);
  json body = {{"name", o.name}, {"team", o.team}, {"role", o.role}};
  if (!o.ttl.empty()) body["ttl"] = o.ttl;
  auto t = client.Call("POST", "/api/v1/tokens", body.dump());
  if (!t) return client.exit_code;
  if (PrintStructured(o, *t)) return kExitOk;
  std::cerr << "token/" << Safe(o.name) << " created"
            << ((*t)["expires_at"].is_string()
                    ? " (expires " + Safe((*t)["expires_at"].get<std::string>()) + ")"
                    : std::string())
            << "; it is shown only this once:\n";
  std::cout << Safe((*t)["token"].get<std::string>()) << "\n";
  return kExitOk;
}

int TokenList(const Options& o) {
  Client client(o);
  auto list = client.Call("GET", "/api/v1/tokens");
  if (!list) return client.exit_code;
  if (PrintStructured(o, *list)) return kExitOk;
  Time now = SystemClock().Now();
  std::vector<std::vector<std::string>> rows;
  std::size_t sessions_left_out = 0;
  for (const json& t : (*list)["tokens"]) {
    // Each sign-in makes a session: they would bury the tokens people made.
    const bool session = t.contains("session_of") && t["session_of"].is_string();
    if (session && !o.sessions) {
      ++sessions_left_out;
      continue;
    }
    std::string team = t["team"].get<std::string>();
    std::string status = "active";
    std::optional<Time> expires;
    if (t.contains("expires_at") && t["expires_at"].is_string()) {
      expires = ParseRfc3339(t["expires_at"].get<std::string>());
    }
    if (!t["revoked_at"].is_null()) {
      status = "revoked";
    } else if (expires && *expires <= now) {
      status = "expired";
    } else if (expires) {
      status = "expires in " + FormatDuration(std::chrono::duration_cast<Duration>(*expires - now));
    }
    std::string kind = t.contains("session_of") && t["session_of"].is_string()
                           ? "session of " + t["session_of"].get<std::string>()
                           : "-";
    rows.push_back({t["name"].get<std::string>(), team.empty() ? "-" : team,
                    t["role"].get<std::string>(), status, kind,
                    Age(t["created_at"].get<std::string>(), now)});
  }
  std::cout << FormatTable({"NAME", "TEAM", "ROLE", "STATUS", "SESSION", "AGE"}, rows);
  if (sessions_left_out > 0) {
    std::cout << "(and " << sessions_left_out << " sign-in session"
              << (sessions_left_out == 1 ? "" : "s")
              << " of the dashboard and its links: --sessions lists them)\n";
  }
  return kExitOk;
}

int TokenRevoke(const Options& o) {
  Client client(o);
  auto t = client.Call("DELETE", "/api/v1/tokens/" + UrlEncode(o.name));
  if (!t) return client.exit_code;
  std::cout << "token/" << Safe(o.name) << " revoked\n";
  return kExitOk;
}

}  // namespace headway::cli
