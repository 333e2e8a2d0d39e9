// HTTPS on the listener (--tls-cert/--tls-key) with a certificate made for
// the test by the openssl command: the CLI, the C++ client and a job's
// Python SDK all talk to the real server over TLS and verify it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/http_client.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Certificate {
  std::string dir = MakeTempDir("headway-tls");
  std::string cert = dir + "/cert.pem";
  std::string key = dir + "/key.pem";
  bool made = false;
  Certificate() {
    CommandResult r = RunCommand({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048",
                                  "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj",
                                  "/CN=headway-test", "-addext", "subjectAltName=IP:127.0.0.1"});
    made = r.exit_code == 0;
  }
};

TEST(Tls, TheApiIsServedOverHttpsAndVerified) {
  Certificate c;
  ASSERT_TRUE(c.made) << "openssl could not make a test certificate";
  TestServer server(1, {"--tls-cert", c.cert, "--tls-key", c.key});
  ASSERT_THAT(server.url(), StartsWith("https://"));

  api::HttpClient trusted(server.url(), "", c.cert);
  auto health = trusted.Request("GET", "/healthz");
  ASSERT_TRUE(health.ok()) << health.status().ToString();
  EXPECT_EQ(health->status, 200);

  // Not trusted without the CA; plain HTTP gets no answer.
  api::HttpClient untrusted(server.url());
  auto refused = untrusted.Request("GET", "/healthz");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("--cacert"));
  std::string plain_url = "http://" + server.url().substr(std::string("https://").size());
  auto plain = api::HttpClient(plain_url).Request("GET", "/healthz");
  EXPECT_TRUE(!plain.ok() || plain->status != 200);

  // The CLI with --cacert (or $HEADWAY_CA_FILE), and exit 3 without.
  CommandResult ok = server.Cli({"--cacert", c.cert, "get", "jobs"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  CommandResult unverified = server.Cli({"get", "jobs"});
  EXPECT_EQ(unverified.exit_code, 3);
  EXPECT_THAT(unverified.err, HasSubstr("TLS"));

  // A job reports over HTTPS with the Python SDK, trusting the server through
  // the HEADWAY_CA_FILE it was given.
  std::string sdk = std::string(HEADWAY_SOURCE_DIR) + "/sdk/python";
  ASSERT_EQ(server
                .Cli({"--cacert", c.cert, "submit", "-f", "-"},
                     "name: secure\ncommand: [\"/usr/bin/python3\", \"-c\", \"import sys; "
                     "sys.path.insert(0, '" +
                         sdk +
                         "'); import headway; "
                         "headway.report(7, total_steps=10, loss=0.5); headway.flush()\"]\n")
                .exit_code,
            0);
  ASSERT_TRUE(server.WaitForState("secure", "Succeeded"));
  EXPECT_EQ(server.Job("secure")["progress"]["step"], 7);
}

TEST(Tls, AMissingOrBadCertificateStopsTheServerWithAClearError) {
  Certificate c;
  ASSERT_TRUE(c.made);
  WriteFile(c.dir + "/bad.pem", "not a certificate\n");
  CommandResult r =
      RunCommand({HEADWAY_BIN, "server", "--listen", "127.0.0.1:0", "--data-dir", c.dir + "/data",
                  "--tls-cert", c.dir + "/bad.pem", "--tls-key", c.key});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out + r.err, HasSubstr("TLS certificate"));
  CommandResult half = RunCommand({HEADWAY_BIN, "server", "--tls-cert", c.cert});
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_THAT(half.out + half.err, HasSubstr("give both or neither"));
}

}  // namespace
}  // namespace headway::testing
