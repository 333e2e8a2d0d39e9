#include "api/request_guard.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "core/ascii.h"

namespace headway::api {
namespace {

// "a.b.c.d" with four decimal octets; the first octet, or -1 when it is not one.
int FirstOctetOfIpv4(std::string_view text) {
  int octets = 0, first = -1;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t dot = text.find('.', start);
    if (dot == std::string_view::npos) dot = text.size();
    std::string_view part = text.substr(start, dot - start);
    if (part.empty() || part.size() > 3 ||
        !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return -1;
    }
    int value = std::stoi(std::string(part));
    if (value > 255) return -1;
    if (octets == 0) first = value;
    ++octets;
    start = dot + 1;
  }
  return octets == 4 ? first : -1;
}

bool IsUnspecified(std::string_view address) {
  return address == "0.0.0.0" || address == "::" || address == "[::]" || address.empty();
}

}  // namespace

bool IsLoopbackHost(std::string_view host) {
  std::string h = AsciiLower(host);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (!h.empty() && h.back() == '.') h.pop_back();
  if (h == "localhost" || h == "::1" || h == "0:0:0:0:0:0:0:1") return true;
  return FirstOctetOfIpv4(h) == 127;
}

namespace {

// A Host header value's host and port parts: "[v6]:port", "name:port", or
// either without a port. More than one colon without brackets is a bare
// IPv6 address, whole.
std::pair<std::string_view, std::string_view> SplitHostHeader(std::string_view value) {
  if (!value.empty() && value.front() == '[') {
    auto close = value.find(']');
    if (close == std::string_view::npos) return {value, {}};
    std::string_view rest = value.substr(close + 1);
    return {value.substr(1, close - 1), rest.starts_with(':') ? rest : std::string_view()};
  }
  auto colon = value.rfind(':');
  if (colon != std::string_view::npos && value.find(':') == colon) {
    return {value.substr(0, colon), value.substr(colon)};
  }
  return {value, {}};
}

}  // namespace

std::string PortOfHeader(std::string_view host_header) {
  return std::string(SplitHostHeader(host_header).second);
}

bool IsNameUnder(std::string_view host, std::string_view domain) {
  return !domain.empty() && host.size() > domain.size() + 1 && host.ends_with(domain) &&
         host[host.size() - domain.size() - 1] == '.';
}

std::string HostOfHeader(std::string_view value) {
  std::string host = AsciiLower(SplitHostHeader(value).first);
  if (!host.empty() && host.back() == '.') host.pop_back();
  return host;
}

Status CheckHostAndOrigin(const HttpRequest& request, const HostPolicy& policy) {
  if (!request.repeated_headers.empty()) {
    return InvalidArgument("the " + request.repeated_headers.front() +
                           " header came more than once; send it once");
  }
  std::string host_header = request.Header("host");
  if (!host_header.empty()) {
    std::string host = HostOfHeader(host_header);
    bool ok = IsLoopbackHost(host) || IsNameUnder(host, policy.notebook_domain);
    if (!ok && !IsLoopbackHost(policy.listen_address)) {
      std::string listen = HostOfHeader(policy.listen_address);
      if (policy.allowed_hosts.empty()) {
        ok = true;  // listening for anyone, and tokens are required there
      } else {
        ok = (!IsUnspecified(policy.listen_address) && host == listen) ||
             std::any_of(policy.allowed_hosts.begin(), policy.allowed_hosts.end(),
                         [&](const std::string& allowed) { return HostOfHeader(allowed) == host; });
      }
    }
    if (!ok) {
      return PermissionDenied(
          "Host '" + host_header.substr(0, 100) + "' is not a name of this server" +
          (IsLoopbackHost(policy.listen_address)
               ? " (it listens on a loopback address: use localhost or 127.0.0.1)"
               : " (start it with --allow-host NAME to accept it)"));
    }
  }
  std::string origin = request.Header("origin");
  if (!origin.empty()) {
    // Same origin: the page that sent it was served by this server under
    // the name the request uses. The scheme is not compared: behind a proxy
    // that ends TLS, https pages talk to a plain-http server, and a foreign
    // site differs in host or port anyway.
    std::string lowered = AsciiLower(origin);
    std::string_view rest = lowered;
    bool http = rest.rfind("http://", 0) == 0, https = rest.rfind("https://", 0) == 0;
    if (http || https) rest.remove_prefix(http ? 7 : 8);
    if ((!http && !https) || host_header.empty() || rest != AsciiLower(host_header)) {
      return PermissionDenied("cross-origin request refused: Origin '" + origin.substr(0, 100) +
                              "' is not this server's own origin");
    }
  }
  return Status::Ok();
}

}  // namespace headway::api
