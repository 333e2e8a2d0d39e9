// What keeps other web sites from using a visitor's browser as a client of
// this server, as Jupyter does:
//
//  * DNS rebinding: a page on attacker.example makes its own name resolve to
//    127.0.0.1 and reads the API as same-origin. Its requests still say
//    "Host: attacker.example", so a server on a loopback address answers only
//    requests that name a loopback host.
//  * Cross-site requests: a page may send "simple" requests (POST with
//    Content-Type text/plain, no preflight) to any address. Browsers mark
//    them with an Origin header, so a request with an Origin must come from
//    the server's own origin. Programs (CLI, curl, SDKs) send no Origin.
//
// Pure functions of the request; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "api/http_server.h"
#include "core/status.h"

namespace headway::api {

struct HostPolicy {
  // The address the server listens on ("127.0.0.1", "0.0.0.0", "::1", ...).
  std::string listen_address = "127.0.0.1";
  // Extra host names requests may use (--allow-host), without ports. On a
  // non-loopback address with none, any Host is accepted (tokens are
  // required there), as Jupyter does with allow_remote_access.
  std::vector<std::string> allowed_hosts;
  // Notebooks' own origins (api/notebook_routes.h): NAME.DOMAIN is a name of
  // this server too. ("localhost" names are loopback names, RFC 6761.)
  std::string notebook_domain;
};

// Whether `host` (no port; IPv6 with or without brackets) is "localhost",
// an address in 127.0.0.0/8 or ::1. Case-insensitive.
bool IsLoopbackHost(std::string_view host);

// The host part of a Host header value: "Example.com:8080" -> "example.com",
// "[::1]:80" -> "::1". Lowercased, without a trailing dot.
std::string HostOfHeader(std::string_view host_header);

// The port of a Host header value, with its colon (":8080"); empty when it
// names none ("example.com", "[::1]", a bare "::1").
std::string PortOfHeader(std::string_view host_header);

// Whether `host` (as HostOfHeader gives it) is a name under `domain`:
// "lab.localhost" is under "localhost", "localhost" and "evillocalhost" are
// not. False for an empty domain.
bool IsNameUnder(std::string_view host, std::string_view domain);

// Ok, or PermissionDenied saying which header was refused and why.
// Requests without a Host header (HTTP/1.0 programs; browsers always send
// one) pass the host check.
Status CheckHostAndOrigin(const HttpRequest& request, const HostPolicy& policy);

}  // namespace headway::api
