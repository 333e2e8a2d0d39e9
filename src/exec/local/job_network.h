// A local job's network, as a container runtime gives one: the attempt's
// processes share a network namespace of their own, whose only interface is
// a loopback of its own. So ranks reach each other on 127.0.0.1 (torchrun's
// rendezvous, NCCL's and gloo's sockets), and nothing on the host's loopback
// (the database, another team's notebook or service, the host's private
// daemons) nor any other address is reachable from the job.
//
// Two ways through it, each to one place only, neither chosen by the job:
//  - out, to the control plane: a relay started before the namespace is
//    made listens, inside it, on the server's own address and port (so the
//    job's HEADWAY_URL is unchanged) and carries each connection to the
//    server. It connects from a loopback address of the attempt's own
//    (127.A.B.C), so the server tells jobs apart by their source address.
//  - in, from the server: a connector inside the namespace listens on a Unix
//    socket in the attempt's run directory (which the job cannot see) and,
//    asked for a port, connects to it inside the namespace and hands the
//    connected socket back (SCM_RIGHTS). The server reaches a notebook, a
//    pull-mode progress endpoint or an `ssh -L` target this way, at the
//    job's own loopback, never at a port of the host.
//
// Internal to exec/local (the supervisor, shim.cc, calls these in order:
// StartControlPlaneRelay and BindConnectSocket before EnterSandbox;
// OpenControlPlane and StartConnector after it), except ConnectIntoJob,
// which is the server's side (exec/local/local_executor.h).
#pragma once

#include <sys/types.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace headway::internal {

struct NetworkPlan {
  bool isolated = false;  // false: the job shares the host's network
  // The server's address and port as the job's HEADWAY_URL names them
  // (IPv4); empty host: no way out at all.
  std::string control_host;
  int control_port = 0;
  // The loopback address the relay connects to the server from.
  std::string source_address;
  // The Unix socket through which the server connects into the job.
  std::string connect_socket;
  // Whether the job may reach the internet through its egress proxy
  // (egress_proxy.h), and the special ranges the site opens to it
  // (egress_policy.h).
  bool outbound = false;
  std::vector<std::string> outbound_allow;

  nlohmann::json ToJson() const;
  static NetworkPlan FromJson(const nlohmann::json& j);
};

// A loopback source address for an attempt, from its run directory: one of
// 127.64.0.1 .. 127.127.255.254, never 127.0.0.1.
std::string AttemptSourceAddress(const std::string& run_dir);

// In the new network namespace: brings its loopback up and, when the control
// host is not a loopback address, gives the loopback that address too, so
// the job's HEADWAY_URL leads to the relay.
Status SetUpLoopback(const NetworkPlan& plan);

// A helper process that stays in the host's network and serves a socket
// made inside the job's.
struct NetworkHelper {
  pid_t pid = -1;
  int channel = -1;  // where the listening socket is sent, once made
};

// Before the namespace is made: forks the relay, which stays in the host's
// network. `in_child` runs in it first (joining the attempt's cgroup, taking
// the job's account). It dies with the caller.
Result<NetworkHelper> StartControlPlaneRelay(const NetworkPlan& plan,
                                             const std::function<void()>& in_child);
// After SetUpLoopback: listens on the control address inside the namespace
// and hands the socket to the relay.
Status OpenControlPlane(const NetworkPlan& plan, NetworkHelper& relay);

// The same two steps for the egress proxy, where plan.outbound: it listens
// on 127.0.0.1:kEgressProxyPort inside the namespace.
Result<NetworkHelper> StartEgressProxy(const NetworkPlan& plan,
                                       const std::function<void()>& in_child);
Status OpenEgressProxy(NetworkHelper& proxy);

// Before the mount namespace hides the run directory: the connect socket,
// listening (any old one removed first).
Result<int> BindConnectSocket(const std::string& path);
// After the namespaces are made (and after the PID namespace's first
// process): forks the connector, which serves `listen_fd`. `in_child` runs in
// it first. It dies with the caller, and with the PID namespace.
Result<pid_t> StartConnector(int listen_fd, const std::function<void()>& in_child);

// The server's side: a socket connected to `port` on the job's own loopback,
// through the job's connect socket. The caller owns the descriptor.
Result<int> ConnectIntoJob(const std::string& connect_socket, int port);

}  // namespace headway::internal
