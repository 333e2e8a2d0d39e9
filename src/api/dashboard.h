// Serves the web dashboard: "/" redirects to "/ui/", "/ui/" is index.html and
// "/ui/PATH" the file web/PATH; "/favicon.ico" redirects to its icon. The files are the copy built
// into the binary, or, with a `web_dir`, read from that folder on every request (for working on the
// dashboard without rebuilding).
//
// The files hold no data: every figure the dashboard shows comes from the
// REST API, under its authentication. So they are served to anyone, with a
// Content-Security-Policy that allows only the dashboard's own files and
// fetch() to this server, X-Frame-Options: DENY, Referrer-Policy: no-referrer
// and X-Content-Type-Options: nosniff. Errors (404, 405) are JSON.
//
// Thread safety: Serve() may be called concurrently.
#pragma once

#include <optional>
#include <string>

#include "api/http_server.h"

namespace headway::api {

class Dashboard {
 public:
  explicit Dashboard(std::string web_dir = {}) : web_dir_(std::move(web_dir)) {}

  // The response for a dashboard path; nullopt for any other path.
  std::optional<HttpResponse> Serve(const HttpRequest& request) const;

 private:
  std::string web_dir_;
};

}  // namespace headway::api
