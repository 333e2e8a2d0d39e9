// Maps (method, path pattern) to handlers. Patterns are literal segments and
// {param} segments: "/api/v1/jobs/{name}/stop". Unknown paths answer 404 and
// known paths with another method 405, both as JSON errors.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "api/http_server.h"
#include "api/request_context.h"

namespace headway::api {

using PathParams = std::map<std::string, std::string>;
// Each handler gets who is asking explicitly (api/request_context.h).
using RouteHandler =
    std::function<HttpResponse(const HttpRequest&, const PathParams&, const RequestContext&)>;

class Router {
 public:
  void Add(std::string method, std::string pattern, RouteHandler handler);
  HttpResponse Dispatch(const HttpRequest& request, const RequestContext& context) const;

 private:
  struct Route {
    std::string method;
    std::vector<std::string> segments;
    RouteHandler handler;
  };
  std::vector<Route> routes_;
};

std::vector<std::string> SplitPath(const std::string& path);

}  // namespace headway::api
