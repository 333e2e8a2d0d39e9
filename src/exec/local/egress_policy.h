// Where a local job may connect outside its own network, when the site lets
// jobs out at all (`--job-outbound=public`): public addresses only. Never
// the host itself (any address of its own: the control plane, the database,
// another team's notebook listen there) nor its loopback; never a private,
// link-local (a cloud's metadata service at 169.254.169.254), shared,
// multicast or reserved range, unless the site opens one of those ranges
// (`--job-outbound-allow 10.0.5.0/24`, a dataset mirror on the site's
// network). Loopback and the host's own addresses cannot be opened.
//
// Pure: the caller gives the destination, already resolved (so a name that
// resolves to a private address is refused as that address: no DNS
// rebinding), and the host's addresses at that moment.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace headway::internal {

// An IPv4 or IPv6 address. An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is
// kept as the IPv4 address it maps, so it meets IPv4's rules.
struct IpAddress {
  bool v6 = false;
  std::array<std::uint8_t, 16> bytes{};  // IPv4: the first 4

  static std::optional<IpAddress> Parse(std::string_view text);
  static IpAddress V4(std::uint32_t host_order);
  static IpAddress V6(const std::array<std::uint8_t, 16>& bytes);
  std::string ToString() const;
  bool operator==(const IpAddress&) const = default;
};

struct Cidr {
  IpAddress base;
  int prefix = 0;

  // "10.0.5.0/24", "fd00::/8", or one address ("10.0.5.7": /32, /128).
  // Bits set past the prefix are an error: "10.0.5.7/24" is not a range.
  static Result<Cidr> Parse(std::string_view text);
  bool Contains(const IpAddress& address) const;
  std::string ToString() const;
};

struct EgressPolicy {
  std::vector<Cidr> allow;  // ranges a site opens among the special ones
};

// Empty: `to` may be reached. Otherwise why not, for the job to read.
std::optional<std::string> RefuseDestination(const IpAddress& to, const EgressPolicy& policy,
                                             const std::vector<IpAddress>& host_addresses);

}  // namespace headway::internal
