// A local job's way to the internet, where the site allows one
// (`--job-outbound=public`): an HTTP proxy that listens inside the job's
// network (127.0.0.1:kEgressProxyPort, named by the job's HTTPS_PROXY and
// HTTP_PROXY) and connects from the host's network to the destinations
// egress_policy.h allows. It resolves names itself, on the host, and checks
// every address it would connect to, so a name that leads into the site is
// refused like the address it leads to. pip, curl, git, huggingface_hub, W&B
// and boto3 follow those variables; a tool that opens raw sockets reaches
// nothing outside, as without the proxy.
//
//  - `CONNECT host:port` opens a tunnel (https and any other TCP protocol);
//  - an absolute-form request (`GET http://host/path`) is passed on to that
//    host as one request (`Connection: close`).
// A refusal answers 403 with the reason in its status line and body, which
// is what Python's and curl's errors show.
//
// Internal to exec/local: job_network.cc starts the process (as the job's
// account, in its cgroup, in the host's network) and hands it the socket.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "exec/local/egress_policy.h"

namespace headway::internal {

constexpr int kEgressProxyPort = 3128;  // the port proxies are known by

struct ProxyRequest {
  bool tunnel = false;  // CONNECT
  std::string host;     // a name or an address, without IPv6's brackets
  int port = 0;
  // Absolute-form requests: the request head as the origin gets it.
  std::string upstream_head;
};

// One request head, through its blank line. The error is the reason a 400
// reply gives.
Result<ProxyRequest> ParseProxyRequest(std::string_view head);

// Serves `listener` until the process ends.
[[noreturn]] void RunEgressProxy(int listener, const EgressPolicy& policy);

}  // namespace headway::internal
