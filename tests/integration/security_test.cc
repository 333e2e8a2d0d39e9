// Attacks on a server started the default way, each shown to fail: other web
// sites driving the API through a visitor's browser (cross-origin requests,
// DNS rebinding), other local users, the dashboard's headers and sessions,
// a report endpoint that told which jobs exist, and job names of other teams
// seen in the pool's queues and nodes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "api/http_client.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kIdleJob =
    R"({"name": "planted", "command": "echo pwned > /tmp/headway-planted", "termination_grace": "1s"})";

std::size_t JobCount(const TestServer& server) {
  return Call(server, server.admin_token(), "GET", "/api/v1/jobs").body["jobs"].size();
}

std::string HostPort(const TestServer& server) {
  return server.url().substr(server.url().find("://") + 3);
}

TEST(Security, ACrossOriginSimplePostIsRefused) {
  // What a web page can send anywhere without a preflight:
  // fetch(url, {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}}).
  for (const char* flag : {"--auth", "--no-auth"}) {
    TestServer server(1, {flag});
    std::vector<std::pair<std::string, std::string>> from_elsewhere = {
        {"Origin", "http://attacker.example"}};
    Answer anonymous = Call(server, "", "POST", "/api/v1/jobs", kIdleJob, from_elsewhere,
                            "text/plain;charset=UTF-8");
    EXPECT_EQ(anonymous.status, 403) << flag << " " << anonymous.raw;
    EXPECT_EQ(anonymous.body["error"]["code"], "PermissionDenied") << flag;
    EXPECT_THAT(anonymous.body["error"]["message"].get<std::string>(), HasSubstr("cross-origin"));
    // Even with a valid token (a page cannot get one, but the check must not rely on that).
    Answer with_token = Call(server, server.admin_token(), "POST", "/api/v1/jobs", kIdleJob,
                             from_elsewhere, "text/plain");
    EXPECT_EQ(with_token.status, 403) << flag;
    // An origin differing only in port is another site too.
    Answer other_port = Call(server, server.admin_token(), "POST", "/api/v1/jobs", kIdleJob,
                             {{"Origin", "http://127.0.0.1:1"}});
    EXPECT_EQ(other_port.status, 403) << flag;
    EXPECT_EQ(JobCount(server), 0u) << flag << ": no job was created";
    // The dashboard's own origin is fine.
    Answer own = Call(server, server.admin_token(), "GET", "/api/v1/jobs", {},
                      {{"Origin", "http://" + HostPort(server)}});
    EXPECT_EQ(own.status, 200) << flag << " " << own.raw;
  }
}

TEST(Security, AForeignHostIsRefused) {
  // DNS rebinding: attacker.example resolves to 127.0.0.1, and the browser
  // names it in Host.
  TestServer server(1);
  for (const char* host :
       {"attacker.example", "attacker.example:8080", "127.0.0.1.attacker.example"}) {
    for (const char* path : {"/api/v1/jobs", "/ui/", "/metrics", "/api/v1/whoami"}) {
      Answer a = Call(server, server.admin_token(), "GET", path, {}, {{"Host", host}});
      EXPECT_EQ(a.status, 403) << host << " " << path;
      EXPECT_EQ(a.body["error"]["code"], "PermissionDenied") << host << " " << path;
      EXPECT_THAT(a.raw, HasSubstr("Host")) << host << " " << path;
    }
    Answer submit =
        Call(server, server.admin_token(), "POST", "/api/v1/jobs", kIdleJob, {{"Host", host}});
    EXPECT_EQ(submit.status, 403) << host;
  }
  EXPECT_EQ(JobCount(server), 0u);
  // Loopback names, any port, are this server.
  for (const std::string& host : std::vector<std::string>{
           "localhost", "localhost:9", HostPort(server), "127.9.9.9", "[::1]:1"}) {
    EXPECT_EQ(
        Call(server, server.admin_token(), "GET", "/api/v1/jobs", {}, {{"Host", host}}).status, 200)
        << host;
  }
}

TEST(Security, AnotherLocalUserCannotSubmit) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as the user nobody";
  TestServer server(1);
  // `nobody` runs the CLI as a local user would: it looks for the admin
  // token where the server keeps it, and cannot read it.
  std::vector<std::string> as_nobody = {
      "/usr/bin/setpriv",  "--reuid=65534",
      "--regid=65534",     "--clear-groups",
      "/usr/bin/env",      "HEADWAY_API_TOKEN=",
      "HOME=/nonexistent", "HEADWAY_DATA_DIR=" + server.data_dir()};
  std::vector<std::string> cat = as_nobody;
  cat.push_back("/bin/cat");
  cat.push_back(server.data_dir() + "/admin-token");
  EXPECT_NE(RunCommand(cat).exit_code, 0) << "nobody must not read the admin token";

  std::vector<std::string> submit = as_nobody;
  for (std::string arg : {std::string(HEADWAY_BIN), std::string("--server"), server.url(),
                          std::string("submit"), std::string("-f"), std::string("-")}) {
    submit.push_back(arg);
  }
  CommandResult r = RunCommand(submit, "name: planted\ncommand: \"true\"\n");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("requires a user token")) << "the server's 401";
  EXPECT_EQ(JobCount(server), 0u);
}

TEST(Security, NoAuthIsRefusedOffLoopback) {
  std::string dir = MakeTempDir("headway-noauth");
  for (const char* listen : {"0.0.0.0:0", "[::]:0"}) {
    CommandResult r = RunCommand({"/usr/bin/timeout", "20", HEADWAY_BIN, "server", "--no-auth",
                                  "--listen", listen, "--data-dir", dir, "--gpus", "0"});
    EXPECT_EQ(r.exit_code, 2) << listen << "\n" << r.out << r.err;
    EXPECT_THAT(r.out + r.err, HasSubstr("--no-auth is refused")) << listen;
  }
  std::filesystem::remove_all(dir);
}

TEST(Security, NoAuthOnLoopbackWarns) {
  TestServer server(1, {"--no-auth"});
  EXPECT_THAT(server.ServerLog(), HasSubstr("authentication is OFF"));
  EXPECT_EQ(server.admin_token(), "");
  EXPECT_EQ(Call(server, "", "GET", "/api/v1/jobs").status, 200);
  // Still no cross-origin requests nor foreign hosts.
  EXPECT_EQ(Call(server, "", "GET", "/api/v1/jobs", {}, {{"Host", "attacker.example"}}).status,
            403);
}

TEST(Security, TheDashboardSendsSecurityHeaders) {
  TestServer server(1);
  for (const char* path : {"/ui/", "/ui/app.js", "/ui/style.css"}) {
    Answer page = Call(server, "", "GET", path);
    ASSERT_EQ(page.status, 200) << path;
    const api::ClientResponse& r = page.response;
    std::string csp = r.Header("content-security-policy");
    EXPECT_THAT(csp, HasSubstr("default-src 'none'")) << path;
    EXPECT_THAT(csp, HasSubstr("script-src 'self'")) << path;
    EXPECT_THAT(csp, HasSubstr("connect-src 'self'")) << path;
    EXPECT_THAT(csp, HasSubstr("frame-ancestors 'none'")) << path;
    EXPECT_THAT(csp, Not(HasSubstr("unsafe-inline"))) << path;
    EXPECT_THAT(csp, Not(HasSubstr("unsafe-eval"))) << path;
    EXPECT_EQ(r.Header("x-frame-options"), "DENY") << path;
    EXPECT_EQ(r.Header("referrer-policy"), "no-referrer") << path;
    EXPECT_EQ(r.Header("x-content-type-options"), "nosniff") << path;
    EXPECT_EQ(r.headers.count("content-security-policy"), 1u) << path << ": one policy, not two";
  }
  // API answers too: never framed, sniffed or cached.
  Answer api = Call(server, server.admin_token(), "GET", "/api/v1/jobs");
  EXPECT_EQ(api.response.Header("x-frame-options"), "DENY");
  EXPECT_EQ(api.response.Header("x-content-type-options"), "nosniff");
  EXPECT_EQ(api.response.Header("cache-control"), "no-store");
  EXPECT_THAT(api.response.Header("content-security-policy"), HasSubstr("default-src 'none'"));
}

TEST(Security, TheDashboardsNotFoundBodyIsJson) {
  TestServer server(1);
  for (const char* path : {"/ui/%22quoted%22", "/ui/back%5Cslash%22", "/ui/a%22%7D%2C%22x%22%3A%22",
                           "/ui/ctl%01char", "/ui/%FF%FE"}) {
    Answer a = Call(server, "", "GET", path);
    EXPECT_EQ(a.status, 404) << path;
    ASSERT_FALSE(a.body.is_discarded()) << path << ": " << a.raw;
    EXPECT_EQ(a.body["error"]["code"], "NotFound") << path;
    EXPECT_EQ(a.body.size(), 1u) << path << ": nothing injected";
    EXPECT_EQ(a.body["error"].size(), 2u) << path << ": nothing injected";
  }
  Answer quoted = Call(server, "", "GET", "/ui/%22quoted%22");
  EXPECT_THAT(quoted.body["error"]["message"].get<std::string>(), HasSubstr("\"quoted\""));
}

TEST(Security, SessionsExpire) {
  TestServer server(1, {"--session-ttl", "2s"});
  std::string admin = server.admin_token();
  // A viewer may trade its token for a session too, which stays a viewer's.
  // (First: making a session drops the expired ones, and on a loaded machine
  // the admin's session below could be 2 s old by then.)
  std::string viewer = CreateToken(server, "watcher", "vision", "viewer");
  Answer viewer_session = Call(server, viewer, "POST", "/api/v1/sessions");
  ASSERT_EQ(viewer_session.status, 201) << viewer_session.raw;
  EXPECT_EQ(viewer_session.body["role"], "viewer");
  EXPECT_EQ(viewer_session.body["team"], "vision");
  EXPECT_EQ(Call(server, viewer_session.body["token"], "POST", "/api/v1/jobs", kIdleJob).status,
            403);
  Answer made = Call(server, admin, "POST", "/api/v1/sessions");
  ASSERT_EQ(made.status, 201) << made.raw;
  std::string session = made.body["token"];
  ASSERT_THAT(session, ::testing::StartsWith("hwu_"));
  EXPECT_EQ(made.body["role"], "admin");
  EXPECT_EQ(made.body["session_of"], "admin");
  EXPECT_TRUE(made.body["expires_at"].is_string());
  EXPECT_EQ(Call(server, session, "GET", "/api/v1/jobs").status, 200);

  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  Answer expired = Call(server, session, "GET", "/api/v1/jobs");
  EXPECT_EQ(expired.status, 401);
  EXPECT_EQ(expired.body["error"]["code"], "Unauthenticated");
  EXPECT_THAT(expired.body["error"]["message"].get<std::string>(), HasSubstr("token expired"));
  EXPECT_EQ(Call(server, admin, "GET", "/api/v1/jobs").status, 200) << "the admin token lives on";
  // A session cannot renew itself once expired.
  EXPECT_EQ(Call(server, session, "POST", "/api/v1/sessions").status, 401);
}

TEST(Security, TokensMayExpireAndSessionsDieWithTheirToken) {
  TestServer server(1);
  std::string brief = CreateToken(server, "brief", "vision", "member", {"--ttl", "1s"});
  EXPECT_EQ(Call(server, brief, "GET", "/api/v1/jobs").status, 200);
  CommandResult list = server.Cli({"token", "list"});
  EXPECT_THAT(list.out, HasSubstr("expires in"));
  EXPECT_EQ(server.Cli({"token", "create", "bad", "--team", "x", "--ttl", "soon"}).exit_code, 1);

  std::string alice = CreateToken(server, "alice", "vision", "member");
  Answer session = Call(server, alice, "POST", "/api/v1/sessions");
  ASSERT_EQ(session.status, 201);
  std::string secret = session.body["token"];
  EXPECT_EQ(Call(server, secret, "GET", "/api/v1/whoami").body["team"], "vision");
  // What a session creates is its user's (the dashboard's jobs, a notebook's home).
  Answer submitted = Call(server, secret, "POST", "/api/v1/jobs",
                          R"({"name": "from-session", "team": "vision", "command": "true"})");
  ASSERT_EQ(submitted.status, 201) << submitted.raw;
  EXPECT_EQ(submitted.body["created_by"], "user/alice");
  ASSERT_EQ(server.Cli({"token", "revoke", "alice"}).exit_code, 0);
  EXPECT_EQ(Call(server, secret, "GET", "/api/v1/jobs").status, 401)
      << "revoking a token revokes its sessions";
  server.Terminate();
  server.Restart();
  EXPECT_EQ(Call(server, secret, "GET", "/api/v1/jobs").status, 401) << "also after a restart";

  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  Answer expired = Call(server, brief, "GET", "/api/v1/jobs");
  EXPECT_EQ(expired.status, 401);
  EXPECT_THAT(expired.raw, HasSubstr("token expired"));
}

// A job's checkpoints are stored as "<job>.checkpoint": another team could
// take that name first and make the job's saves fail. Only the job's team may.
TEST(Security, AJobsCheckpointNameIsItsTeamsOnly) {
  TestServer server(1);
  const std::string admin = server.admin_token();
  const std::string a = CreateTokenAs(server, admin, "alice", "a", "member");
  const std::string b = CreateTokenAs(server, admin, "bob", "b", "member");
  ASSERT_EQ(Call(server, a, "POST", "/api/v1/jobs",
                 R"({"name": "train-a", "team": "a", "command": "sleep 30",
                     "termination_grace": "1s"})")
                .status,
            201);
  const std::string draft = R"({"kind": "checkpoint", "size": 3, "digest": "sha256:)" +
                            std::string(64, 'a') + R"(", "name": ")";
  for (const char* squatted : {"train-a.checkpoint", "not-yet-a-job.checkpoint"}) {
    Answer taken = Call(server, b, "POST", "/api/v1/artifacts", draft + squatted + R"("})");
    EXPECT_EQ(taken.status, 403) << squatted << " " << taken.body.dump();
    EXPECT_THAT(taken.body.dump(), HasSubstr("belong to the job of that name"));
  }
  // The job's own team may.
  Answer own = Call(server, a, "POST", "/api/v1/artifacts", draft + R"(train-a.checkpoint"})");
  EXPECT_EQ(own.status, 201) << own.body.dump();
  Call(server, admin, "POST", "/api/v1/jobs/train-a/stop");
}

TEST(Security, ReportsDoNotTellWhetherAJobExists) {
  TestServer server(1);
  ASSERT_EQ(Call(server, server.admin_token(), "POST", "/api/v1/jobs",
                 R"({"name": "real", "command": "sleep 30", "termination_grace": "1s"})")
                .status,
            201);
  const std::string kubeflow = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/";
  struct Endpoint {
    std::string existing, missing, body;
  } endpoints[] = {
      {"/api/v1/jobs/real/progress", "/api/v1/jobs/ghost/progress", R"({"step": 1})"},
      {kubeflow + "real/status", kubeflow + "ghost/status",
       R"({"trainerStatus": {"progressPercentage": 10}})"},
  };
  for (const Endpoint& e : endpoints) {
    for (const char* token : {"hwj_junk", "hwu_junk", "junk"}) {
      Answer existing = Call(server, token, "POST", e.existing, e.body);
      Answer missing = Call(server, token, "POST", e.missing, e.body);
      EXPECT_EQ(existing.status, 403) << e.existing << " " << token;
      EXPECT_EQ(existing.status, missing.status) << e.existing << " " << token;
      EXPECT_EQ(existing.raw, missing.raw) << e.existing << " " << token;
    }
    Answer existing = Call(server, "", "POST", e.existing, e.body);
    Answer missing = Call(server, "", "POST", e.missing, e.body);
    // Kubeflow's status server answers 403 without a token too.
    EXPECT_EQ(existing.status, e.existing.starts_with("/apis/") ? 403 : 401);
    EXPECT_EQ(existing.raw, missing.raw);
  }
  server.Cli({"stop", "real"});
}

TEST(Security, AMemberSeesNoOtherTeamsJobNamesInThePool) {
  TestServer server(2);
  std::string alice = CreateToken(server, "alice", "a", "member");
  std::string bob = CreateToken(server, "bob", "b", "member");
  auto job = [](const std::string& name, int gpus) {
    return R"({"name": ")" + name + R"(", "command": "sleep 60", "termination_grace": "1s",
               "resources": {"gpus_per_process": )" +
           std::to_string(gpus) + "}}";
  };
  ASSERT_EQ(Call(server, bob, "POST", "/api/v1/jobs", job("b-secret-run", 1)).status, 201);
  ASSERT_EQ(Call(server, alice, "POST", "/api/v1/jobs", job("a-mine", 1)).status, 201);
  ASSERT_TRUE(server.WaitForState("b-secret-run", "Running"));
  ASSERT_TRUE(server.WaitForState("a-mine", "Running"));
  ASSERT_EQ(Call(server, bob, "POST", "/api/v1/jobs", job("b-secret-wait", 2)).status, 201);
  // The admin sees every name once the pool has been refreshed.
  ASSERT_TRUE(WaitFor([&] {
    std::string all = Call(server, server.admin_token(), "GET", "/api/v1/queues").raw +
                      Call(server, server.admin_token(), "GET", "/api/v1/nodes").raw;
    return all.find("b-secret-wait") != std::string::npos &&
           all.find("b-secret-run") != std::string::npos;
  }));

  Answer nodes = Call(server, alice, "GET", "/api/v1/nodes");
  Answer queues = Call(server, alice, "GET", "/api/v1/queues");
  ASSERT_EQ(nodes.status, 200);
  ASSERT_EQ(queues.status, 200);
  EXPECT_THAT(nodes.raw + queues.raw, Not(HasSubstr("b-secret"))) << nodes.raw << queues.raw;
  ASSERT_EQ(nodes.body["nodes"].size(), 1u);
  EXPECT_EQ(nodes.body["nodes"][0]["jobs"], json::array({"a-mine"}));
  EXPECT_EQ(nodes.body["nodes"][0]["hidden_jobs"], 1) << "counted, not named";
  EXPECT_EQ(nodes.body["nodes"][0]["gpus_in_use"], 2);
  bool found_b = false;
  for (const json& q : queues.body["queues"]) {
    if (q["name"] != "b") continue;
    found_b = true;
    EXPECT_EQ(q["running"], 1);
    EXPECT_EQ(q["pending"], 1);
    EXPECT_EQ(q["next_job"], "");
  }
  EXPECT_TRUE(found_b) << queues.raw;
  // The CLI shows the same view.
  server.UseToken(alice);
  EXPECT_THAT(server.Cli({"get", "nodes"}).out + server.Cli({"get", "queues"}).out,
              Not(HasSubstr("b-secret")));
  // Bob sees his own.
  EXPECT_THAT(Call(server, bob, "GET", "/api/v1/queues").raw, HasSubstr("b-secret-wait"));
  server.UseToken(server.admin_token());
  server.Cli({"stop", "b-secret-run", "b-secret-wait", "a-mine"});
}

}  // namespace
}  // namespace headway::testing
