// Who may call the API: user tokens and the dashboard's sessions.
//   GET    /api/v1/whoami           the caller's name, team and role
//   GET    /api/v1/tokens           every token, never a secret (admins)
//   POST   /api/v1/tokens           {name, team?, role?, ttl?}: its secret, once (admins)
//   DELETE /api/v1/tokens/{name}    revoked at once, with its sessions (admins)
//   POST   /api/v1/sessions         the caller's token for a short-lived session
#pragma once

#include "api/router.h"
#include "api/token_service.h"

namespace headway::api {

// `tokens` null: authentication is off, and these answer 503 (whoami says so).
void AddTokenRoutes(Router& router, TokenService* tokens);

}  // namespace headway::api
