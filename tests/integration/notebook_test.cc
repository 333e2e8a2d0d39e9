// Notebooks through a real server: Debian's Jupyter Notebook started as a
// job, a kernel run over the server's proxied WebSocket, the idle reclaim
// that gives the GPU back, and a restart that finds its home as it was.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>
#include <random>

#include "test_server.h"

namespace headway::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = boost::asio::ip::tcp;

// Short enough for a test: "gpu" is warned 4 s into an idle spell and culled
// at 6 s; "warned" is warned at 3 s and culled at 60 s.
constexpr const char* kProfiles = R"(profiles:
  - name: gpu
    description: one GPU for a test
    gpus: 1
    idle_timeout: 6s
    cull_warning: 2s
  - name: warned
    description: a long warning for a test
    idle_timeout: 60s
    cull_warning: 57s
)";

std::vector<std::string> NotebookArgs(const std::string& dir) {
  const std::string file = dir + "/notebook-profiles.yaml";
  WriteFile(file, kProfiles);
  return {"--notebook-profiles", file, "--notebook-check-interval", "1s"};
}

json Notebook(const TestServer& server, const std::string& token, const std::string& name) {
  Answer a = Call(server, token, "GET", "/api/v1/notebooks/" + name);
  return a.status == 200 ? a.body : json();
}

std::string RandomHex() {
  std::random_device random;
  char text[17];
  std::snprintf(text, sizeof text, "%08x%08x", random(), random());
  return text;
}

// Runs `code` in kernel `kernel` of notebook `name` over the server's
// WebSocket proxy, as Jupyter's own front end does (the kernel protocol's
// execute_request on the shell channel), and returns the text/plain of its
// execute_result, or the error it raised.
std::string Execute(const TestServer& server, const std::string& token, const std::string& name,
                    const std::string& kernel, const std::string& code) {
  boost::asio::io_context io;
  websocket::stream<beast::tcp_stream> ws(io);
  const std::string port = server.url().substr(server.url().rfind(':') + 1);
  auto endpoints = tcp::resolver(io).resolve("127.0.0.1", port);
  beast::get_lowest_layer(ws).connect(endpoints);
  beast::get_lowest_layer(ws).expires_after(std::chrono::seconds(30));
  ws.set_option(websocket::stream_base::decorator([&](websocket::request_type& req) {
    req.set(beast::http::field::authorization, "Bearer " + token);
  }));
  ws.handshake("127.0.0.1:" + port, "/notebooks/" + name + "/api/kernels/" + kernel + "/channels");
  const std::string msg_id = RandomHex();
  json request = {{"header",
                   {{"msg_id", msg_id},
                    {"username", "test"},
                    {"session", RandomHex()},
                    {"msg_type", "execute_request"},
                    {"version", "5.3"}}},
                  {"parent_header", json::object()},
                  {"metadata", json::object()},
                  {"content", {{"code", code}, {"silent", false}, {"store_history", false}}},
                  {"channel", "shell"},
                  {"buffers", json::array()}};
  ws.text(true);
  ws.write(boost::asio::buffer(request.dump()));
  std::string result;
  for (;;) {
    beast::flat_buffer buffer;
    ws.read(buffer);
    json message = json::parse(beast::buffers_to_string(buffer.data()), nullptr, false);
    if (!message.is_object() || message["parent_header"].value("msg_id", "") != msg_id) continue;
    const std::string type = message["header"].value("msg_type", "");
    if (type == "execute_result") {
      result = message["content"]["data"].value("text/plain", "");
    } else if (type == "error") {
      result = "error: " + message["content"].value("evalue", "");
    } else if (type == "status" && message["content"].value("execution_state", "") == "idle") {
      break;  // the request is done
    }
  }
  ws.close(websocket::close_code::normal);
  return result;
}

TEST(Notebooks, AKernelRunsThroughTheProxyTheIdleNotebookIsCulledAndItsHomeOutlivesIt) {
  const std::string dir = MakeTempDir("headway-notebook-profiles");
  TestServer server(1, NotebookArgs(dir));
  const std::string alice = CreateToken(server, "alice", "vision", "member");
  const std::string bob = CreateToken(server, "bob", "nlp", "member");
  const std::string watcher = CreateToken(server, "watcher", "vision", "viewer");

  server.UseToken(alice);
  CommandResult started = server.Cli({"notebook", "start", "lab", "--gpus", "1", "--wait"});
  ASSERT_EQ(started.exit_code, 0) << started.err << server.ServerLog();
  EXPECT_THAT(started.out, HasSubstr("notebook/lab Ready"));
  json lab = Notebook(server, alice, "lab");
  EXPECT_EQ(lab["team"], "vision");
  EXPECT_EQ(lab["gpus"], 1);
  const std::string first_job = lab["job"];
  EXPECT_TRUE(server.HasEvent(first_job, "NotebookReady", "after it was queued"));
  // The notebook holds the pool's only GPU: a GPU job waits behind it.
  server.Submit(R"(name: waits-for-gpu
team: vision
command: ["sleep", "300"]
resources: {gpus_per_process: 1}
)");
  EXPECT_EQ(server.State("waits-for-gpu"), "Queued");

  // The notebook has an origin of its own, lab.localhost: a browser that
  // asks the server's own origin for it is sent there, and there it is the
  // only thing served (no API, no dashboard, no other notebook).
  const std::string port = server.url().substr(server.url().rfind(':') + 1);
  const std::vector<std::pair<std::string, std::string>> at_lab = {
      {"Host", "lab.localhost:" + port}};
  Answer sent = Call(server, "", "GET", "/notebooks/lab/api/kernels");
  EXPECT_EQ(sent.status, 302);
  EXPECT_EQ(sent.response.Header("location"),
            "http://lab.localhost:" + port + "/notebooks/lab/api/kernels");
  EXPECT_EQ(Call(server, "", "GET", "/notebooks/lab/api/kernels", {}, at_lab).status, 401);
  EXPECT_EQ(Call(server, alice, "GET", "/api/v1/jobs", {}, at_lab).status, 404);
  EXPECT_EQ(Call(server, alice, "GET", "/notebooks/other/api/kernels", {}, at_lab).status, 404);
  EXPECT_EQ(Call(server, alice, "GET", "/", {}, at_lab).status, 404);
  // Only its team's members reach it; viewers and other teams do not.
  EXPECT_EQ(Call(server, bob, "GET", "/notebooks/lab/api/kernels").status, 403);
  EXPECT_EQ(Call(server, bob, "GET", "/api/v1/notebooks/lab").status, 403);
  EXPECT_EQ(Call(server, watcher, "GET", "/notebooks/lab/api/kernels").status, 403);
  EXPECT_EQ(Call(server, watcher, "GET", "/api/v1/notebooks/lab").status, 200);
  Answer bobs_list = Call(server, bob, "GET", "/api/v1/notebooks");
  EXPECT_TRUE(bobs_list.body["notebooks"].empty()) << bobs_list.raw;
  // Names are the server's: another team cannot take this one over.
  EXPECT_EQ(Call(server, bob, "POST", "/api/v1/notebooks", R"({"name": "lab"})").status, 403);

  Answer kernel =
      Call(server, alice, "POST", "/notebooks/lab/api/kernels", R"({"name": "python3"})");
  ASSERT_EQ(kernel.status, 201) << kernel.raw;
  const std::string kernel_id = kernel.body["id"];
  EXPECT_EQ(Execute(server, alice, "lab", kernel_id, "1+1"), "2");
  EXPECT_EQ(
      Execute(server, alice, "lab", kernel_id,
              "import os\nopen('kept.txt', 'w').write('written before the cull')\nos.getcwd()"),
      "'" + server.data_dir() + "/homes/vision/alice'");

  // Jupyter's own uploads go through the proxy whole (its pieces are 1 MiB
  // of base64 in JSON, more than the API's own request limit).
  const std::string large(1500 * 1024, 'x');
  Answer upload = Call(server, alice, "PUT", "/notebooks/lab/api/contents/large.txt",
                       json{{"type", "file"}, {"format", "text"}, {"content", large}}.dump());
  EXPECT_EQ(upload.status, 201) << upload.raw.substr(0, 300);
  // The server's token is in no file the job or a checkpoint upload could
  // take along: the launcher leaves only its port.
  const std::string left =
      ReadFile(server.data_dir() + "/jobs/" + first_job + "/checkpoints/notebook-server.json");
  EXPECT_THAT(left, HasSubstr("\"port\""));
  EXPECT_THAT(left, ::testing::Not(HasSubstr("token")));

  // A one-time link signs a browser in with a cookie for this notebook only.
  // It leads to the notebook's own origin, where the cookie is set (a
  // host-only cookie: no other origin gets it).
  Answer link = Call(server, alice, "POST", "/api/v1/notebooks/lab/login", "{}");
  ASSERT_EQ(link.status, 200) << link.raw;
  const std::string url = link.body["url"];
  const std::string origin = "http://lab.localhost:" + port;
  ASSERT_EQ(url.rfind(origin + "/notebooks/lab/headway-login?code=", 0), 0u) << url;
  const std::string login_path = url.substr(origin.size());
  Answer login = Call(server, "", "GET", login_path, {}, at_lab);
  ASSERT_EQ(login.status, 302) << login.raw;
  const std::string cookie = login.response.Header("set-cookie");
  EXPECT_THAT(cookie, HasSubstr("HttpOnly"));
  EXPECT_THAT(cookie, HasSubstr("Path=/notebooks/lab/"));
  EXPECT_THAT(cookie, ::testing::Not(HasSubstr("Domain")));
  const std::string pair = cookie.substr(0, cookie.find(';'));
  std::vector<std::pair<std::string, std::string>> with_cookie = at_lab;
  with_cookie.emplace_back("Cookie", pair);
  Answer by_cookie = Call(server, "", "GET", "/notebooks/lab/api/status", {}, with_cookie);
  EXPECT_EQ(by_cookie.status, 200);
  // Its pages may be framed by its own origin at most.
  EXPECT_THAT(by_cookie.response.Header("content-security-policy"), HasSubstr("frame-ancestors"));
  EXPECT_EQ(Call(server, "", "GET", login_path, {}, at_lab).status, 404)
      << "a login link works once";

  // Idle kernels and no GPU use: warned, then culled, and the GPU goes back.
  ASSERT_TRUE(WaitFor([&] { return Notebook(server, alice, "lab")["state"] == "Culled"; },
                      std::chrono::seconds(60)))
      << Notebook(server, alice, "lab").dump();
  EXPECT_TRUE(server.HasEvent(first_job, "NotebookIdle", "will be culled at"));
  EXPECT_THAT(Notebook(server, alice, "lab")["message"].get<std::string>(),
              HasSubstr("home is kept"));
  EXPECT_TRUE(server.WaitForState(first_job, "Stopped"));
  EXPECT_TRUE(server.WaitForState("waits-for-gpu", "Running"));
  EXPECT_EQ(Call(server, alice, "GET", "/notebooks/lab/api/status").status, 503);
  EXPECT_EQ(Call(server, alice, "POST", "/api/v1/jobs/waits-for-gpu/stop").status, 200);

  // Started again: a new server on the same home.
  CommandResult again = server.Cli({"notebook", "start", "lab", "--profile", "warned", "--wait"});
  ASSERT_EQ(again.exit_code, 0) << again.err << again.out;
  lab = Notebook(server, alice, "lab");
  EXPECT_NE(lab["job"], first_job);
  Answer kept = Call(server, alice, "GET", "/notebooks/lab/api/contents/kept.txt");
  ASSERT_EQ(kept.status, 200) << kept.raw;
  EXPECT_EQ(kept.body["content"], "written before the cull");

  // Inside Jupyter: every page loads custom.js, which now ends with the
  // banner; once warned, the status it reads says so, and "Keep it running"
  // ends the idle spell.
  Answer custom = Call(server, alice, "GET", "/notebooks/lab/custom/custom.js");
  ASSERT_EQ(custom.status, 200) << custom.raw;
  EXPECT_THAT(custom.raw, HasSubstr("headway-idle-banner"));
  EXPECT_THAT(custom.raw, HasSubstr("var base = '/notebooks/lab/';"));
  EXPECT_EQ(Call(server, bob, "GET", "/notebooks/lab/headway-status").status, 403);
  ASSERT_TRUE(WaitFor(
      [&] {
        return Call(server, alice, "GET", "/notebooks/lab/headway-status")
            .body.value("warned", false);
      },
      std::chrono::seconds(30)));
  json status = Call(server, alice, "GET", "/notebooks/lab/headway-status").body;
  EXPECT_TRUE(status["cull_at"].is_string()) << status.dump();
  EXPECT_TRUE(status["idle_since"].is_string()) << status.dump();
  EXPECT_EQ(Call(server, alice, "POST", "/notebooks/lab/headway-keep").status, 204);
  EXPECT_EQ(Call(server, alice, "GET", "/notebooks/lab/headway-status").body["warned"], false);
  EXPECT_EQ(Notebook(server, alice, "lab")["state"], "Running");

  CommandResult listed = server.Cli({"notebook", "list"});
  EXPECT_THAT(listed.out, HasSubstr("lab"));
  EXPECT_THAT(listed.out, HasSubstr("Ready"));
  CommandResult stopped = server.Cli({"notebook", "stop", "lab"});
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_EQ(Notebook(server, alice, "lab")["state"], "Stopped");
  EXPECT_TRUE(server.WaitForState(lab["job"], "Stopped"));
}

// A notebook's job is named for its start ("notebook-NAME-N"): another team
// taking that name first does not keep the notebook from starting.
TEST(Notebooks, ANameTakenByAnotherTeamDoesNotKeepANotebookFromStarting) {
  const std::string dir = MakeTempDir("headway-notebook-profiles");
  TestServer server(1, NotebookArgs(dir));
  const std::string alice = CreateToken(server, "alice", "a", "member");
  const std::string bob = CreateToken(server, "bob", "b", "member");
  ASSERT_EQ(Call(server, bob, "POST", "/api/v1/jobs",
                 R"({"name": "notebook-nb-1", "team": "b", "command": "sleep 60",
                     "termination_grace": "1s"})")
                .status,
            201);
  Answer started =
      Call(server, alice, "POST", "/api/v1/notebooks", R"({"name": "nb", "team": "a"})");
  ASSERT_EQ(started.status, 201) << started.raw;
  EXPECT_EQ(started.body["job"], "notebook-nb-2");
  json squatter = server.Job("notebook-nb-1");
  EXPECT_EQ(squatter["team"], "b") << "bob's job is left alone";
  EXPECT_EQ(Call(server, alice, "POST", "/api/v1/notebooks/nb/stop", "{}").status, 200);
  Call(server, bob, "POST", "/api/v1/jobs/notebook-nb-1/stop");
}

TEST(Notebooks, BadStartsAreRefusedWithTheReason) {
  const std::string dir = MakeTempDir("headway-notebook-profiles");
  TestServer server(1, NotebookArgs(dir));
  Answer unknown = Call(server, server.admin_token(), "POST", "/api/v1/notebooks",
                        R"({"name": "x", "profile": "huge"})");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_THAT(unknown.raw, HasSubstr("unknown notebook profile 'huge' (profiles: gpu, warned)"));
  Answer greedy = Call(server, server.admin_token(), "POST", "/api/v1/notebooks",
                       R"({"name": "x", "gpus": 2})");
  EXPECT_EQ(greedy.status, 400);
  EXPECT_THAT(greedy.raw, HasSubstr("at most 1 GPU"));
  Answer field = Call(server, server.admin_token(), "POST", "/api/v1/notebooks",
                      R"({"name": "x", "image": "jupyter/scipy"})");
  EXPECT_EQ(field.status, 400);
  EXPECT_THAT(field.raw, HasSubstr("unknown field 'image'"));
  EXPECT_EQ(
      Call(server, server.admin_token(), "POST", "/api/v1/notebooks", R"({"name": "Bad_Name"})")
          .status,
      400);
  EXPECT_EQ(Call(server, server.admin_token(), "POST", "/api/v1/notebooks", "not json").status,
            400);
  EXPECT_EQ(Call(server, server.admin_token(), "GET", "/notebooks/nothing/tree").status, 404);
}

}  // namespace
}  // namespace headway::testing
