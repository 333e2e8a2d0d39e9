// The Host and Origin checks (api/request_guard.h), table-driven.
#include "api/request_guard.h"

#include <gtest/gtest.h>

namespace headway::api {
namespace {

HttpRequest Request(std::string host, std::string origin = {}) {
  HttpRequest r;
  r.method = "POST";
  r.path = "/api/v1/jobs";
  if (!host.empty()) r.headers["host"] = std::move(host);
  if (!origin.empty()) r.headers["origin"] = std::move(origin);
  return r;
}

TEST(RequestGuard, LoopbackHosts) {
  for (const char* h :
       {"localhost", "LOCALHOST", "localhost.", "127.0.0.1", "127.1.2.3", "::1", "[::1]"}) {
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  }
  for (const char* h : {"", "0.0.0.0", "10.0.0.1", "127.0.0", "127.0.0.1.example.com",
                        "localhost.example.com", "128.0.0.1", "127.0.0.256", "::"}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
}

TEST(RequestGuard, HostOfHeader) {
  EXPECT_EQ(HostOfHeader("Example.COM:8080"), "example.com");
  EXPECT_EQ(HostOfHeader("[::1]:80"), "::1");
  EXPECT_EQ(HostOfHeader("localhost."), "localhost");
  EXPECT_EQ(HostOfHeader("fd00::1"), "fd00::1");
  EXPECT_EQ(PortOfHeader("Example.COM:8080"), ":8080");
  EXPECT_EQ(PortOfHeader("[::1]:80"), ":80");
  EXPECT_EQ(PortOfHeader("[::1]"), "");
  EXPECT_EQ(PortOfHeader("fd00::1"), "");
  EXPECT_EQ(PortOfHeader("localhost"), "");
}

TEST(RequestGuard, OnALoopbackAddressOnlyLoopbackNamesPass) {
  HostPolicy loopback;  // 127.0.0.1
  struct Case {
    const char* host;
    bool ok;
  } cases[] = {
      {"127.0.0.1:8080", true},
      {"localhost:1", true},
      {"[::1]:8080", true},
      {"attacker.example", false},
      {"attacker.example:8080", false},
      {"10.0.0.5:8080", false},
      {"", true},  // no Host: not a browser
  };
  for (const Case& c : cases) {
    Status s = CheckHostAndOrigin(Request(c.host), loopback);
    EXPECT_EQ(s.ok(), c.ok) << c.host;
    if (!c.ok) {
      EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << c.host;
    }
  }
  // --allow-host does not open a loopback server to other names.
  loopback.allowed_hosts = {"attacker.example"};
  EXPECT_FALSE(CheckHostAndOrigin(Request("attacker.example"), loopback).ok());
}

TEST(RequestGuard, ElsewhereTheListenAddressAndAllowedNamesPass) {
  HostPolicy open{"0.0.0.0", {}, ""};
  EXPECT_TRUE(CheckHostAndOrigin(Request("anything.example:80"), open).ok())
      << "no --allow-host: any name (tokens are required there)";
  HostPolicy named{"10.0.0.5", {"gpu.example.com", "Alias.Example.com:443"}, ""};
  EXPECT_TRUE(CheckHostAndOrigin(Request("10.0.0.5:8080"), named).ok());
  EXPECT_TRUE(CheckHostAndOrigin(Request("GPU.example.com"), named).ok());
  EXPECT_TRUE(CheckHostAndOrigin(Request("alias.example.com:8080"), named).ok());
  EXPECT_TRUE(CheckHostAndOrigin(Request("127.0.0.1:8080"), named).ok());
  EXPECT_FALSE(CheckHostAndOrigin(Request("attacker.example"), named).ok());
  HostPolicy any_address{"0.0.0.0", {"gpu.example.com"}, ""};
  EXPECT_FALSE(CheckHostAndOrigin(Request("0.0.0.0"), any_address).ok());
}

// Notebooks on origins of their own: NAME.DOMAIN names this server too, and
// a notebook's page may send requests to its own origin only.
TEST(RequestGuard, NotebooksOwnOriginsAreNamesOfThisServer) {
  HostPolicy loopback{"127.0.0.1", {}, "localhost"};
  EXPECT_TRUE(CheckHostAndOrigin(Request("lab.localhost:8080"), loopback).ok());
  EXPECT_TRUE(
      CheckHostAndOrigin(Request("lab.localhost:8080", "http://lab.localhost:8080"), loopback)
          .ok());
  EXPECT_FALSE(
      CheckHostAndOrigin(Request("lab.localhost:8080", "http://other.localhost:8080"), loopback)
          .ok());
  EXPECT_FALSE(
      CheckHostAndOrigin(Request("127.0.0.1:8080", "http://lab.localhost:8080"), loopback).ok());
  EXPECT_FALSE(CheckHostAndOrigin(Request("lab.localhost.attacker.example"), loopback).ok());
  EXPECT_FALSE(CheckHostAndOrigin(Request("evillocalhost"), loopback).ok());
  HostPolicy named{"10.0.0.5", {"gpu.example.com"}, "nb.example.com"};
  EXPECT_TRUE(CheckHostAndOrigin(Request("lab.nb.example.com"), named).ok());
  EXPECT_FALSE(CheckHostAndOrigin(Request("nb.example.com.attacker.example"), named).ok());
}

TEST(RequestGuard, AnOriginMustBeTheRequestsOwn) {
  HostPolicy policy;
  EXPECT_TRUE(CheckHostAndOrigin(Request("127.0.0.1:8080", "http://127.0.0.1:8080"), policy).ok());
  EXPECT_TRUE(CheckHostAndOrigin(Request("localhost:8080", "https://LOCALHOST:8080"), policy).ok());
  for (const char* origin : {"http://attacker.example", "http://127.0.0.1:8081", "null",
                             "http://localhost:8080", "file://", "http://127.0.0.1:8080.x"}) {
    Status s = CheckHostAndOrigin(Request("127.0.0.1:8080", origin), policy);
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << origin;
  }
  EXPECT_FALSE(CheckHostAndOrigin(Request("", "http://127.0.0.1:8080"), policy).ok())
      << "an Origin without a Host to compare with";
}

// Which of two Host or Origin headers counts differs between servers and
// proxies: a request with two is refused, not read by its last one.
TEST(RequestGuard, ARepeatedHostOriginOrTokenIsRefused) {
  HostPolicy loopback;
  for (const std::string header : {"Host", "Origin", "Authorization", "X-Headway-Job"}) {
    std::string raw = "GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    if (header != "Host") raw += header + ": a\r\n";
    raw += header + ": b\r\n\r\n";
    auto parsed = ParseHttpRequest(raw);
    ASSERT_TRUE(parsed.ok()) << header << ": " << parsed.status().ToString();
    Status s = CheckHostAndOrigin(*parsed, loopback);
    EXPECT_FALSE(s.ok()) << header;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << header;
  }
  auto once =
      ParseHttpRequest("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: a\r\nAccept: b\r\n\r\n");
  ASSERT_TRUE(once.ok());
  EXPECT_TRUE(CheckHostAndOrigin(*once, loopback).ok()) << "other headers may repeat";
}

}  // namespace
}  // namespace headway::api
