#include "api/router.h"

#include "api/job_json.h"

namespace headway::api {

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> segments;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    if (slash > start) segments.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return segments;
}

void Router::Add(std::string method, std::string pattern, RouteHandler handler) {
  routes_.push_back({std::move(method), SplitPath(pattern), std::move(handler)});
}

HttpResponse Router::Dispatch(const HttpRequest& request, const RequestContext& context) const {
  std::vector<std::string> segments = SplitPath(request.path);
  bool path_known = false;
  for (const Route& route : routes_) {
    if (route.segments.size() != segments.size()) continue;
    PathParams params;
    bool match = true;
    for (std::size_t i = 0; i < segments.size() && match; ++i) {
      const std::string& pattern = route.segments[i];
      if (pattern.size() > 2 && pattern.front() == '{' && pattern.back() == '}') {
        params[pattern.substr(1, pattern.size() - 2)] = segments[i];
      } else {
        match = pattern == segments[i];
      }
    }
    if (!match) continue;
    path_known = true;
    if (route.method == request.method) return route.handler(request, params, context);
  }
  Status status = path_known ? Status(StatusCode::kInvalidArgument,
                                      "method " + request.method + " is not allowed here")
                             : NotFound("no such endpoint: " + request.path);
  return {path_known ? 405 : 404, "application/json", JsonText(ErrorToJson(status)), {}, nullptr};
}

}  // namespace headway::api
