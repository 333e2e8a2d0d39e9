// HttpRequest from a request Boost.Beast parsed: shared by the server's
// sessions and ParseHttpRequest, so both read a request the same way.
// Internal to src/api.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "api/http_server.h"
#include "core/ascii.h"

namespace headway::api {

// The method, target and headers (names lowercased) of any request; the body
// is the caller's.
template <class Body, class Fields>
HttpRequest RequestHead(const boost::beast::http::request<Body, Fields>& raw) {
  HttpRequest req;
  req.method = std::string(raw.method_string());
  req.target = std::string(raw.target());
  SetRequestTarget(req, std::string_view(raw.target().data(), raw.target().size()));
  for (const auto& field : raw) {
    std::string name =
        AsciiLower(std::string_view(field.name_string().data(), field.name_string().size()));
    if (req.headers.count(name) && (name == "host" || name == "origin" || name == "authorization" ||
                                    name == "cookie" || name == "x-headway-job")) {
      req.repeated_headers.push_back(name);
    }
    req.headers[std::move(name)] = std::string(field.value());
  }
  return req;
}

// A whole request; its body is moved out of `raw`.
inline HttpRequest ToHttpRequest(
    boost::beast::http::request<boost::beast::http::string_body>& raw) {
  HttpRequest req = RequestHead(raw);
  req.body = std::move(raw.body());
  return req;
}

}  // namespace headway::api
