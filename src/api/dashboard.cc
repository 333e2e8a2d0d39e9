#include "api/dashboard.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "api/web_assets.h"

namespace headway::api {
namespace {

std::string ContentType(std::string_view path) {
  auto ends = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.substr(path.size() - suffix.size()) == suffix;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js") || ends(".mjs")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".png")) return "image/png";
  if (ends(".json")) return "application/json";
  if (ends(".txt") || ends("LICENSE")) return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

// A path inside web/: no empty, "." or ".." segments, no backslashes.
bool IsSafeRelativePath(std::string_view path) {
  if (path.empty() || path.find('\\') != std::string_view::npos ||
      path.find('\0') != std::string_view::npos) {
    return false;
  }
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view segment = path.substr(start, slash - start);
    if (segment.empty() || segment == "." || segment == "..") return false;
    start = slash + 1;
  }
  return true;
}

HttpResponse Redirect(std::string location) {
  HttpResponse r{302, "text/plain; charset=utf-8", "see " + location + "\n", {}, nullptr};
  r.headers.emplace_back("Location", std::move(location));
  return r;
}

// Built by the JSON library: the path is the client's, quotes and all.
HttpResponse NotFoundPage(std::string_view path) {
  nlohmann::json body = {
      {"error",
       {{"code", "NotFound"}, {"message", "no dashboard file '" + std::string(path) + "'"}}}};
  return {404,
          "application/json",
          body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
          {},
          nullptr};
}

// What the dashboard needs and no more: its own scripts (ES modules and the
// vendored uPlot, no inline script, no eval), its own style sheets (it sets
// styles only through element.style, which CSP allows), its icon, canvas
// charts, inline SVG built with createElementNS, and fetch() to this server.
// No framing by other sites (clickjacking), no Referer (a #token= URL's
// fragment is never sent, but the path and query would be).
constexpr const char* kDashboardCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'";

void AddPageHeaders(HttpResponse& response) {
  response.headers.emplace_back("Content-Security-Policy", kDashboardCsp);
  response.headers.emplace_back("X-Frame-Options", "DENY");
  response.headers.emplace_back("Referrer-Policy", "no-referrer");
  response.headers.emplace_back("X-Content-Type-Options", "nosniff");
}

}  // namespace

std::optional<HttpResponse> Dashboard::Serve(const HttpRequest& request) const {
  const std::string& path = request.path;
  // Browsers ask for /favicon.ico on their own, without the user's token.
  if (path == "/favicon.ico" && request.method == "GET") return Redirect("/ui/favicon.svg");
  if (path != "/" && path != "/ui" && path.rfind("/ui/", 0) != 0) return std::nullopt;
  if (request.method != "GET" && request.method != "HEAD") {
    return HttpResponse{
        405,
        "application/json",
        R"({"error":{"code":"MethodNotAllowed","message":"the dashboard is read-only"}})",
        {},
        nullptr};
  }
  if (path == "/" || path == "/ui") return Redirect("/ui/");
  std::string relative = path.substr(4);
  if (relative.empty()) relative = "index.html";
  if (!IsSafeRelativePath(relative)) return NotFoundPage(relative);

  HttpResponse response{200, ContentType(relative), "", {}, nullptr};
  // Small files that change with every release: let the browser revalidate.
  response.headers.emplace_back("Cache-Control", "no-cache");
  AddPageHeaders(response);
  if (!web_dir_.empty()) {
    std::string file = web_dir_ + "/" + relative;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) return NotFoundPage(relative);
    std::ifstream in(file, std::ios::binary);
    if (!in) return NotFoundPage(relative);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    response.body = bytes.str();
    return response;
  }
  for (const WebAsset& asset : BuiltInWebAssets()) {
    if (asset.path == relative) {
      response.body = std::string(asset.bytes);
      return response;
    }
  }
  return NotFoundPage(relative);
}

}  // namespace headway::api
