// Where a job's egress proxy lets it connect (exec/local/egress_policy.h),
// and how the proxy reads a request (exec/local/egress_proxy.h).
#include "exec/local/egress_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "exec/local/egress_proxy.h"

namespace headway::internal {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

IpAddress Ip(const char* text) { return *IpAddress::Parse(text); }

std::optional<std::string> Refuse(const char* to, const EgressPolicy& policy = {},
                                  const std::vector<IpAddress>& host = {}) {
  return RefuseDestination(Ip(to), policy, host);
}

TEST(EgressPolicy, PublicAddressesAreReached) {
  EXPECT_EQ(Refuse("151.101.0.223"), std::nullopt);  // a CDN
  EXPECT_EQ(Refuse("198.51.100.2"), std::nullopt);   // documentation: not private
  EXPECT_EQ(Refuse("2606:4700::6810:84e5"), std::nullopt);
  EXPECT_EQ(Refuse("172.32.0.1"), std::nullopt);   // just past 172.16.0.0/12
  EXPECT_EQ(Refuse("100.128.0.1"), std::nullopt);  // just past 100.64.0.0/10
}

TEST(EgressPolicy, TheSiteAndTheHostAreNot) {
  EXPECT_THAT(Refuse("127.0.0.1"), Optional(HasSubstr("the host's loopback")));
  EXPECT_THAT(Refuse("127.45.6.7"), Optional(HasSubstr("the host's loopback")));
  EXPECT_THAT(Refuse("::1"), Optional(HasSubstr("the host's loopback")));
  EXPECT_THAT(Refuse("10.1.2.3"), Optional(HasSubstr("a private address (10.0.0.0/8)")));
  EXPECT_THAT(Refuse("172.31.255.255"), Optional(HasSubstr("a private address")));
  EXPECT_THAT(Refuse("192.168.1.1"), Optional(HasSubstr("a private address")));
  EXPECT_THAT(Refuse("100.64.0.1"), Optional(HasSubstr("shared")));
  EXPECT_THAT(Refuse("169.254.169.254"), Optional(HasSubstr("metadata")));
  EXPECT_THAT(Refuse("0.0.0.0"), Optional(HasSubstr("'this network'")));
  EXPECT_THAT(Refuse("224.0.0.251"), Optional(HasSubstr("multicast")));
  EXPECT_THAT(Refuse("255.255.255.255"), Optional(HasSubstr("reserved")));
  EXPECT_THAT(Refuse("fd12:3456::1"), Optional(HasSubstr("unique-local")));
  EXPECT_THAT(Refuse("fe80::1"), Optional(HasSubstr("link-local")));
  EXPECT_THAT(Refuse("::"), Optional(HasSubstr("unspecified")));
  // NAT64 may lead to any IPv4 address, a private one too.
  EXPECT_THAT(Refuse("64:ff9b::a00:1"), Optional(HasSubstr("NAT64")));
}

TEST(EgressPolicy, AnIpv4MappedAddressMeetsIpv4sRules) {
  EXPECT_THAT(Refuse("::ffff:127.0.0.1"), Optional(HasSubstr("127.0.0.1 is the host's loopback")));
  EXPECT_THAT(Refuse("::ffff:10.0.0.1"), Optional(HasSubstr("a private address")));
  EXPECT_EQ(Refuse("::ffff:151.101.0.223"), std::nullopt);
}

TEST(EgressPolicy, AnyAddressOfTheHostItselfIsRefusedEvenAPublicOne) {
  const std::vector<IpAddress> host = {Ip("203.0.113.9"), Ip("2001:db8::9")};
  EXPECT_THAT(Refuse("203.0.113.9", {}, host), Optional(HasSubstr("the host itself")));
  EXPECT_THAT(Refuse("2001:db8::9", {}, host), Optional(HasSubstr("the host itself")));
  EXPECT_EQ(Refuse("203.0.113.10", {}, host), std::nullopt);
}

TEST(EgressPolicy, ASiteOpensAPrivateRangeButNeverLoopbackNorTheHost) {
  EgressPolicy policy;
  policy.allow = {*Cidr::Parse("10.0.5.0/24"), *Cidr::Parse("127.0.0.0/8"),
                  *Cidr::Parse("192.168.7.7")};
  const std::vector<IpAddress> host = {Ip("10.0.5.1")};
  EXPECT_EQ(Refuse("10.0.5.200", policy, host), std::nullopt);
  EXPECT_EQ(Refuse("192.168.7.7", policy, host), std::nullopt);
  EXPECT_THAT(Refuse("192.168.7.8", policy, host), Optional(HasSubstr("a private address")));
  EXPECT_THAT(Refuse("10.0.6.1", policy, host), Optional(HasSubstr("a private address")));
  EXPECT_THAT(Refuse("127.0.0.1", policy, host), Optional(HasSubstr("loopback")));
  EXPECT_THAT(Refuse("10.0.5.1", policy, host), Optional(HasSubstr("the host itself")));
}

TEST(EgressPolicy, RangesAreReadStrictly) {
  EXPECT_EQ(Cidr::Parse("10.0.5.0/24")->ToString(), "10.0.5.0/24");
  EXPECT_EQ(Cidr::Parse("10.0.5.7")->ToString(), "10.0.5.7/32");
  EXPECT_EQ(Cidr::Parse("fd00:5::/64")->ToString(), "fd00:5::/64");
  EXPECT_THAT(Cidr::Parse("10.0.5.7/24").status().message(), HasSubstr("the range is 10.0.5.0/24"));
  EXPECT_THAT(Cidr::Parse("10.0.5.0/33").status().message(), HasSubstr("0..32"));
  EXPECT_THAT(Cidr::Parse("10.0.5.0/").status().message(), HasSubstr("0..32"));
  EXPECT_THAT(Cidr::Parse("10.0.5.0/2x").status().message(), HasSubstr("0..32"));
  EXPECT_THAT(Cidr::Parse("example.com/24").status().message(), HasSubstr("not an address"));
  EXPECT_FALSE(Cidr::Parse("").ok());
  EXPECT_TRUE(Cidr::Parse("0.0.0.0/0")->Contains(Ip("8.8.8.8")));
  EXPECT_FALSE(Cidr::Parse("0.0.0.0/0")->Contains(Ip("2001:db8::1")));
}

TEST(ProxyRequest, ConnectNamesATunnel) {
  auto r = ParseProxyRequest("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->tunnel);
  EXPECT_EQ(r->host, "pypi.org");
  EXPECT_EQ(r->port, 443);
  auto v6 = ParseProxyRequest("CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "2001:db8::1");
  EXPECT_EQ(v6->port, 8443);
}

TEST(ProxyRequest, APlainRequestIsPassedOnAsOneOriginFormRequest) {
  auto r = ParseProxyRequest(
      "GET http://files.example.org:8080/data/x.bin?v=1 HTTP/1.1\r\nHost: "
      "files.example.org:8080\r\n"
      "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n"
      "Connection: keep-alive\r\nUser-Agent: pip\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->tunnel);
  EXPECT_EQ(r->host, "files.example.org");
  EXPECT_EQ(r->port, 8080);
  EXPECT_EQ(r->upstream_head,
            "GET /data/x.bin?v=1 HTTP/1.1\r\nHost: files.example.org:8080\r\nUser-Agent: pip\r\n"
            "Connection: close\r\n\r\n");
  auto bare = ParseProxyRequest("HEAD http://example.org HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->port, 80);
  EXPECT_EQ(bare->upstream_head, "HEAD / HTTP/1.0\r\nConnection: close\r\n\r\n");
}

TEST(ProxyRequest, MalformedRequestsGetAReason) {
  EXPECT_THAT(ParseProxyRequest("GET /local HTTP/1.1\r\n\r\n").status().message(),
              HasSubstr("names an http:// URL"));
  EXPECT_THAT(ParseProxyRequest("GET https://example.org/ HTTP/1.1\r\n\r\n").status().message(),
              HasSubstr("https goes through CONNECT"));
  EXPECT_THAT(ParseProxyRequest("CONNECT example.org HTTP/1.1\r\n\r\n").status().message(),
              HasSubstr("host:port"));
  EXPECT_THAT(ParseProxyRequest("CONNECT example.org:0 HTTP/1.1\r\n\r\n").status().message(),
              HasSubstr("host:port"));
  EXPECT_THAT(ParseProxyRequest("CONNECT example.org:99999 HTTP/1.1\r\n\r\n").status().message(),
              HasSubstr("host:port"));
  EXPECT_THAT(ParseProxyRequest("CONNECT user@example.org:443 HTTP/1.1\r\n\r\n").status().message(),
              HasSubstr("host:port"));
  EXPECT_THAT(ParseProxyRequest("not http at all\r\n\r\n").status().message(),
              HasSubstr("malformed"));
  EXPECT_FALSE(ParseProxyRequest("GET http://:80/ HTTP/1.1\r\n\r\n").ok());
}

}  // namespace
}  // namespace headway::internal
