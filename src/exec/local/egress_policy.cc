#include "exec/local/egress_policy.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <cstring>

namespace headway::internal {
namespace {

struct SpecialRange {
  const char* cidr;
  const char* what;
};

// IANA's special-purpose registries (RFC 6890 and its updates), the ranges
// that lead into a site rather than to the internet.
constexpr SpecialRange kSpecialRanges[] = {
    {"0.0.0.0/8", "'this network'"},
    {"10.0.0.0/8", "a private address"},
    {"100.64.0.0/10", "a shared (carrier-grade NAT) address"},
    {"169.254.0.0/16", "a link-local address (a cloud's metadata service)"},
    {"172.16.0.0/12", "a private address"},
    {"192.0.0.0/24", "an IETF protocol address"},
    {"192.168.0.0/16", "a private address"},
    {"198.18.0.0/15", "a benchmarking address"},
    {"224.0.0.0/4", "a multicast address"},
    {"240.0.0.0/4", "a reserved address"},
    {"::/128", "the unspecified address"},
    {"64:ff9b::/96", "a NAT64 address (it may lead to a private IPv4 one)"},
    {"64:ff9b:1::/48", "a NAT64 address (it may lead to a private IPv4 one)"},
    {"fc00::/7", "a unique-local (private) address"},
    {"fe80::/10", "a link-local address"},
    {"ff00::/8", "a multicast address"},
};

const std::vector<std::pair<Cidr, const char*>>& SpecialCidrs() {
  static const auto* ranges = [] {
    auto* out = new std::vector<std::pair<Cidr, const char*>>;
    for (const SpecialRange& r : kSpecialRanges) out->emplace_back(*Cidr::Parse(r.cidr), r.what);
    return out;
  }();
  return *ranges;
}

bool IsLoopback(const IpAddress& a) {
  if (!a.v6) return a.bytes[0] == 127;
  for (int i = 0; i < 15; ++i) {
    if (a.bytes[i] != 0) return false;
  }
  return a.bytes[15] == 1;
}

}  // namespace

IpAddress IpAddress::V4(std::uint32_t host_order) {
  IpAddress a;
  a.bytes[0] = static_cast<std::uint8_t>(host_order >> 24);
  a.bytes[1] = static_cast<std::uint8_t>(host_order >> 16);
  a.bytes[2] = static_cast<std::uint8_t>(host_order >> 8);
  a.bytes[3] = static_cast<std::uint8_t>(host_order);
  return a;
}

IpAddress IpAddress::V6(const std::array<std::uint8_t, 16>& bytes) {
  static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(bytes.data(), kMapped, sizeof kMapped) == 0) {
    return V4((std::uint32_t{bytes[12]} << 24) | (std::uint32_t{bytes[13]} << 16) |
              (std::uint32_t{bytes[14]} << 8) | bytes[15]);
  }
  IpAddress a;
  a.v6 = true;
  a.bytes = bytes;
  return a;
}

std::optional<IpAddress> IpAddress::Parse(std::string_view text) {
  const std::string s(text);
  in_addr v4{};
  if (::inet_pton(AF_INET, s.c_str(), &v4) == 1) return V4(ntohl(v4.s_addr));
  in6_addr v6{};
  if (::inet_pton(AF_INET6, s.c_str(), &v6) == 1) {
    std::array<std::uint8_t, 16> bytes{};
    std::memcpy(bytes.data(), v6.s6_addr, 16);
    return V6(bytes);
  }
  return std::nullopt;
}

std::string IpAddress::ToString() const {
  char text[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), text, sizeof text);
  return text;
}

Result<Cidr> Cidr::Parse(std::string_view text) {
  const std::size_t slash = text.find('/');
  auto address = IpAddress::Parse(text.substr(0, slash));
  if (!address) {
    return InvalidArgument("'" + std::string(text) +
                           "' is not an address or a range (10.0.5.0/24)");
  }
  Cidr c;
  c.base = *address;
  const int max = address->v6 ? 128 : 32;
  c.prefix = max;
  if (slash != std::string_view::npos) {
    const std::string_view digits = text.substr(slash + 1);
    int prefix = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() || prefix < 0 ||
        prefix > max) {
      return InvalidArgument("'" + std::string(text) + "': the prefix length must be 0.." +
                             std::to_string(max));
    }
    c.prefix = prefix;
  }
  // A range is named by its first address.
  IpAddress first = c.base;
  for (int bit = c.prefix; bit < max; ++bit) {
    first.bytes[bit / 8] &= static_cast<std::uint8_t>(~(0x80 >> (bit % 8)));
  }
  if (!(first == c.base)) {
    return InvalidArgument("'" + std::string(text) +
                           "' has bits set past its prefix: the range is " + first.ToString() +
                           "/" + std::to_string(c.prefix));
  }
  return c;
}

bool Cidr::Contains(const IpAddress& address) const {
  if (address.v6 != base.v6) return false;
  int bits = prefix;
  for (int i = 0; bits > 0; ++i, bits -= 8) {
    const std::uint8_t mask = bits >= 8 ? 0xff : static_cast<std::uint8_t>(0xff << (8 - bits));
    if ((address.bytes[i] & mask) != (base.bytes[i] & mask)) return false;
  }
  return true;
}

std::string Cidr::ToString() const { return base.ToString() + "/" + std::to_string(prefix); }

std::optional<std::string> RefuseDestination(const IpAddress& to, const EgressPolicy& policy,
                                             const std::vector<IpAddress>& host_addresses) {
  if (IsLoopback(to)) return to.ToString() + " is the host's loopback";
  for (const IpAddress& own : host_addresses) {
    if (own == to) return to.ToString() + " is an address of the host itself";
  }
  for (const Cidr& open : policy.allow) {
    if (open.Contains(to)) return std::nullopt;
  }
  for (const auto& [range, what] : SpecialCidrs()) {
    if (range.Contains(to)) {
      return to.ToString() + " is " + what + " (" + range.ToString() +
             "); a site opens such a range with --job-outbound-allow";
    }
  }
  return std::nullopt;
}

}  // namespace headway::internal
