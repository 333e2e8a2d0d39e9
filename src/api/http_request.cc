// Reading requests without a network: the target's path and query, and whole
// raw requests (for fuzzing and tests). Kept apart from the server's sockets
// so that the routes build and link without them.
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "api/beast_request.h"
#include "api/http_server.h"

namespace headway::api {

namespace beast = boost::beast;
namespace http = beast::http;

void SetRequestTarget(HttpRequest& req, std::string_view target) {
  auto q = target.find('?');
  req.path = UrlDecode(target.substr(0, q), false);
  if (q == std::string_view::npos) return;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    auto eq = pair.find('=');
    std::string key = UrlDecode(pair.substr(0, eq), true);
    std::string value = eq == std::string_view::npos ? "" : UrlDecode(pair.substr(eq + 1), true);
    if (!key.empty()) req.query[key] = value;
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
}

Result<HttpRequest> ParseHttpRequest(std::string_view raw, std::size_t max_body_bytes) {
  http::request_parser<http::string_body> parser;
  parser.body_limit(max_body_bytes);
  parser.header_limit(16 * 1024);
  parser.eager(true);
  beast::error_code ec;
  std::size_t offset = 0;
  while (!ec && !parser.is_done() && offset < raw.size()) {
    std::size_t used =
        parser.put(boost::asio::buffer(raw.data() + offset, raw.size() - offset), ec);
    if (ec == http::error::need_more) ec = {};
    if (used == 0) break;
    offset += used;
  }
  if (!ec && !parser.is_done() && parser.is_header_done()) parser.put_eof(ec);
  if (ec || !parser.is_done()) {
    return InvalidArgument("malformed HTTP request" + (ec ? ": " + ec.message() : std::string()));
  }
  http::request<http::string_body> message = parser.release();
  return ToHttpRequest(message);
}

std::string UrlDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
      out += static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2]));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace headway::api
