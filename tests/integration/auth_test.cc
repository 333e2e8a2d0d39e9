// User tokens against the real server started with --auth: who may read and
// change what, revocation, the admin token written at first start, and the
// CLI's token handling.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <regex>

#include "api/http_client.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

const char* kIdleJob = R"({"name": "%s", "team": "%s",
  "command": "while true; do sleep 0.2; done", "termination_grace": "1s"})";

std::string IdleJob(const std::string& name, const std::string& team) {
  char buf[512];
  std::snprintf(buf, sizeof buf, kIdleJob, name.c_str(), team.c_str());
  return buf;
}

TEST(Auth, RequestsWithoutAValidUserTokenAreRefused) {
  TestServer server(2, {"--auth"});
  std::string admin = server.admin_token();
  ASSERT_THAT(admin, ::testing::StartsWith("hwu_"));
  struct stat st {};
  ASSERT_EQ(::stat((server.data_dir() + "/admin-token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "the admin token file must be private";

  Answer none = Call(server, "", "GET", "/api/v1/jobs");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.body["error"]["code"], "Unauthenticated");
  EXPECT_EQ(Call(server, "hwu_0123456789abcdef", "GET", "/api/v1/jobs").status, 401);
  EXPECT_EQ(Call(server, "garbage", "GET", "/metrics").status, 401);
  EXPECT_EQ(Call(server, "", "POST", "/api/v1/jobs", IdleJob("sneaky", "default")).status, 401);
  // Nothing was created by the refused request.
  EXPECT_EQ(Call(server, admin, "GET", "/api/v1/jobs").body["jobs"].size(), 0u);
  // Health and the dashboard's files are open; they hold no data.
  EXPECT_EQ(Call(server, "", "GET", "/healthz").status, 200);
  api::HttpClient anonymous(server.url());
  auto page = anonymous.Request("GET", "/ui/");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->status, 200);
  EXPECT_THAT(page->body, HasSubstr("<html"));

  // The CLI picks the token up from --token or $HEADWAY_API_TOKEN.
  server.UseToken("");
  CommandResult refused = server.Cli({"get", "jobs"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("user token"));
  EXPECT_EQ(server.Cli({"--token", admin, "get", "jobs"}).exit_code, 0);
  CommandResult by_env = RunCommand({"/usr/bin/env", "HEADWAY_API_TOKEN=" + admin, HEADWAY_BIN,
                                     "--server", server.url(), "get", "jobs"});
  EXPECT_EQ(by_env.exit_code, 0) << by_env.err;
  // And, on the server's machine, by itself from the data directory's admin token.
  CommandResult local =
      RunCommand({"/usr/bin/env", "HEADWAY_API_TOKEN=", "HEADWAY_DATA_DIR=" + server.data_dir(),
                  HEADWAY_BIN, "--server", server.url(), "get", "jobs"});
  EXPECT_EQ(local.exit_code, 0) << local.err;
}

TEST(Auth, IsOnByDefault) {
  TestServer server(1);
  ASSERT_THAT(server.admin_token(), ::testing::StartsWith("hwu_"));
  EXPECT_EQ(Call(server, "", "GET", "/api/v1/jobs").status, 401);
  EXPECT_EQ(Call(server, server.admin_token(), "GET", "/api/v1/whoami").body["authentication"],
            true);
  // The start prints a dashboard URL that signs in with a session, not the admin token.
  ASSERT_TRUE(WaitFor([&] { return server.ServerLog().find("#token=") != std::string::npos; }));
  std::string log = server.ServerLog();
  EXPECT_THAT(log, HasSubstr(server.url() + "/ui/#token=hwu_"));
  EXPECT_THAT(log, Not(HasSubstr(server.admin_token())));
}

// The start-up link lands in logs and terminals: it signs in once, within
// minutes, and neither it nor the session traded for it can mint a token.
TEST(Auth, TheStartUpLinkSignsInOnceAndMintsNoToken) {
  TestServer server(1);
  std::smatch match;
  std::string log;
  const std::regex link(R"(#token=(hwu_[A-Za-z0-9_-]+) \(signs in once, within 10m)");
  ASSERT_TRUE(WaitFor([&] {
    log = server.ServerLog();
    return std::regex_search(log, match, link);
  })) << server.ServerLog();
  const std::string secret = match[1];
  Answer minted =
      Call(server, secret, "POST", "/api/v1/tokens", R"({"name": "forever", "role": "admin"})");
  EXPECT_EQ(minted.status, 403) << minted.body.dump();
  Answer traded = Call(server, secret, "POST", "/api/v1/sessions");
  ASSERT_EQ(traded.status, 201) << traded.body.dump();
  const std::string session = traded.body["token"];
  // Once: the link is used up, the session works, and the session mints nothing either.
  EXPECT_EQ(Call(server, secret, "POST", "/api/v1/sessions").status, 401);
  EXPECT_EQ(Call(server, secret, "GET", "/api/v1/jobs").status, 401);
  EXPECT_EQ(Call(server, session, "GET", "/api/v1/jobs").status, 200);
  EXPECT_EQ(
      Call(server, session, "POST", "/api/v1/tokens", R"({"name": "forever", "role": "admin"})")
          .status,
      403);
  // The session lasts as a sign-in does (12 h), not the link's minutes.
  auto expires = ParseRfc3339(traded.body["expires_at"].get<std::string>());
  ASSERT_TRUE(expires);
  EXPECT_GT(*expires, SystemClock().Now() + std::chrono::hours(11));
}

TEST(Auth, JobsStillReportWithTheirOwnTokens) {
  TestServer server(2, {"--auth"});
  std::string admin = server.admin_token();
  ASSERT_EQ(
      Call(
          server, admin, "POST", "/api/v1/jobs",
          R"({"name": "rep", "command": "echo HEADWAY '{\"step\": 3, \"total_steps\": 4}'; sleep 30",
                     "termination_grace": "1s"})")
          .status,
      201);
  // The stdout marker and the SDK's HTTP reports both need no user token.
  ASSERT_TRUE(WaitFor([&] {
    Answer a = Call(server, admin, "GET", "/api/v1/jobs/rep");
    return a.body["progress"]["step"] == 3;
  }));
  EXPECT_EQ(Call(server, "", "POST", "/api/v1/jobs/rep/progress", R"({"step": 4})").status, 401)
      << "a report without the job's token is still refused";
  Call(server, admin, "POST", "/api/v1/jobs/rep/stop");
}

TEST(Auth, RolesDecideWhatATokenMayChange) {
  TestServer server(2, {"--auth"});
  std::string admin = server.admin_token();
  server.UseToken(admin);
  std::string member = CreateTokenAs(server, admin, "alice", "vision", "member");
  std::string viewer = CreateTokenAs(server, admin, "bob", "vision", "viewer");
  ASSERT_THAT(member, ::testing::StartsWith("hwu_"));

  // Tokens are listed without their secrets.
  CommandResult list = server.Cli({"--token", admin, "token", "list"});
  EXPECT_THAT(list.out, HasSubstr("alice"));
  EXPECT_THAT(list.out, HasSubstr("member"));
  EXPECT_THAT(list.out, Not(HasSubstr(member)));
  EXPECT_THAT(Call(server, admin, "GET", "/api/v1/tokens").body.dump(), Not(HasSubstr("hwu_")));
  // Sign-ins to the dashboard (a session each) do not fill the list.
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(Call(server, member, "POST", "/api/v1/sessions").status, 201);
  CommandResult tokens = server.Cli({"--token", admin, "token", "list"});
  EXPECT_THAT(tokens.out, Not(HasSubstr("session-"))) << tokens.out;
  // Three sessions and the one-time link the server printed as it started.
  EXPECT_THAT(tokens.out, HasSubstr("(and 4 sign-in sessions of the dashboard and its links: "
                                    "--sessions lists them)"));
  CommandResult all = server.Cli({"--token", admin, "token", "list", "--sessions"});
  EXPECT_THAT(all.out, HasSubstr("session of alice"));

  // A member's job without a team lands in the member's team.
  Answer mine = Call(server, member, "POST", "/api/v1/jobs",
                     R"({"name": "mine", "command": "sleep 30", "termination_grace": "1s"})");
  ASSERT_EQ(mine.status, 201) << mine.body.dump();
  EXPECT_EQ(mine.body["team"], "vision");
  // It may not submit into another team, nor stop another team's job.
  Answer theirs = Call(server, member, "POST", "/api/v1/jobs", IdleJob("theirs", "nlp"));
  EXPECT_EQ(theirs.status, 403);
  EXPECT_THAT(theirs.body["error"]["message"].get<std::string>(), HasSubstr("team 'nlp'"));
  ASSERT_EQ(Call(server, admin, "POST", "/api/v1/jobs", IdleJob("nlp-job", "nlp")).status, 201);
  ASSERT_TRUE(server.WaitForState("nlp-job", "Running"));
  EXPECT_EQ(Call(server, member, "POST", "/api/v1/jobs/nlp-job/stop").status, 403);
  EXPECT_EQ(server.State("nlp-job"), "Running");
  // Nor manage tokens.
  EXPECT_EQ(Call(server, member, "POST", "/api/v1/tokens",
                 R"({"name": "mallory", "team": "vision", "role": "admin"})")
                .status,
            403);

  // A viewer reads its team's jobs and changes nothing; other teams' jobs are
  // out of its sight, in lists, single reads, metrics and streams alike.
  Answer visible = Call(server, viewer, "GET", "/api/v1/jobs");
  ASSERT_EQ(visible.body["jobs"].size(), 1u);
  EXPECT_EQ(visible.body["jobs"][0]["name"], "mine");
  EXPECT_EQ(Call(server, viewer, "GET", "/api/v1/jobs/nlp-job").status, 403);
  EXPECT_EQ(Call(server, viewer, "GET", "/api/v1/jobs/nlp-job/events").status, 403);
  EXPECT_EQ(Call(server, viewer, "GET", "/api/v1/jobs/nlp-job/logs").status, 403);
  EXPECT_EQ(Call(server, viewer, "GET", "/api/v1/jobs?team=nlp").status, 403);
  {
    api::HttpClient http(server.url(), viewer);
    auto metrics = http.Request("GET", "/metrics");
    ASSERT_TRUE(metrics.ok());
    EXPECT_THAT(metrics->body, HasSubstr("job_name=\"mine\""));
    EXPECT_THAT(metrics->body, Not(HasSubstr("nlp-job")));
  }
  std::string everyone = CreateTokenAs(server, admin, "grafana", "*", "viewer");
  EXPECT_EQ(Call(server, everyone, "GET", "/api/v1/jobs").body["jobs"].size(), 2u);
  EXPECT_EQ(Call(server, everyone, "POST", "/api/v1/jobs/nlp-job/stop").status, 403);
  EXPECT_EQ(Call(server, admin, "POST", "/api/v1/tokens",
                 R"({"name": "wide", "team": "*", "role": "member"})")
                .status,
            400)
      << "only viewers may span every team";
  EXPECT_EQ(Call(server, viewer, "POST", "/api/v1/jobs/mine/stop").status, 403);
  EXPECT_EQ(Call(server, viewer, "POST", "/api/v1/jobs", IdleJob("v", "vision")).status, 403);

  // The member stops its own team's job; the event says who did.
  Answer stopped = Call(server, member, "POST", "/api/v1/jobs/mine/stop");
  EXPECT_EQ(stopped.status, 200);
  ASSERT_TRUE(server.WaitForState("mine", "Stopped"));
  EXPECT_TRUE(server.HasEvent("mine", "Stopping", "stopped by alice"))
      << "an event names the token that stopped it";
  EXPECT_EQ(Call(server, admin, "POST", "/api/v1/jobs/nlp-job/stop").status, 200);

  // Revoked: refused at the next request, and it stays so after a restart.
  EXPECT_EQ(server.Cli({"--token", admin, "token", "revoke", "alice"}).exit_code, 0);
  EXPECT_EQ(Call(server, member, "GET", "/api/v1/jobs").status, 401);
  EXPECT_EQ(server.Cli({"--token", admin, "token", "revoke", "alice"}).exit_code, 1);
  server.Terminate();
  server.Restart();
  EXPECT_EQ(Call(server, member, "GET", "/api/v1/jobs").status, 401);
  EXPECT_EQ(Call(server, viewer, "GET", "/api/v1/jobs").status, 200);
  EXPECT_EQ(server.admin_token(), admin) << "a restart keeps the admin token";

  // Bad requests name the field.
  Answer bad = Call(server, admin, "POST", "/api/v1/tokens", R"({"name": "x", "role": "root"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["field"], "role");
  Answer teamless = Call(server, admin, "POST", "/api/v1/tokens", R"({"name": "carol"})");
  EXPECT_EQ(teamless.status, 400);
  EXPECT_EQ(teamless.body["error"]["field"], "team");
  Answer dup = Call(server, admin, "POST", "/api/v1/tokens",
                    R"({"name": "bob", "team": "vision", "role": "viewer"})");
  EXPECT_EQ(dup.status, 409);
}

TEST(Auth, WithoutAuthTheTokenRoutesSaySo) {
  TestServer server(4, {"--no-auth"});
  Answer a = Call(server, "", "GET", "/api/v1/tokens");
  EXPECT_EQ(a.status, 503);
  EXPECT_THAT(a.body["error"]["message"].get<std::string>(), HasSubstr("--no-auth"));
  EXPECT_EQ(Call(server, "", "POST", "/api/v1/sessions").status, 503);
  EXPECT_EQ(Call(server, "", "GET", "/api/v1/whoami").body["authentication"], false);
}

}  // namespace
}  // namespace headway::testing
