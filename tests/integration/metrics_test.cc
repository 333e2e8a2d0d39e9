// GET /metrics: checked by Prometheus' own tools. promtool validates the
// exposition format, and a real Prometheus server scrapes the real Headway
// server and answers queries over what it scraped.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <regex>

#include "api/http_client.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

bool Installed(const std::string& program) { return std::filesystem::exists(program); }

std::string Scrape(const TestServer& server, std::optional<std::string> token = std::nullopt) {
  api::HttpClient http(server.url(), token.value_or(server.token()));
  auto resp = http.Request("GET", "/metrics");
  if (!resp.ok() || resp->status != 200) return {};
  return resp->body;
}

// A job that reports step i of 1000 with a NaN metric and then idles.
void SubmitReporter(const TestServer& server, const std::string& name, const std::string& team) {
  server.Submit("name: " + name + "\nteam: " + team +
                "\ncommand: [\"/bin/sh\", \"-c\", \"for i in 1 2 3 4 5; do echo HEADWAY "
                "'{\\\"step\\\": '$i'0, \\\"total_steps\\\": 200, \\\"metrics\\\": {\\\"loss\\\": "
                "0.5, \\\"grad_norm\\\": \\\"NaN\\\"}}'; sleep 0.2; done; sleep 60\"]\n"
                "termination_grace: 1s\nresources: {gpus_per_process: 1}\n");
}

TEST(Metrics, TheExpositionPassesPromtool) {
  if (!Installed("/usr/bin/promtool"))
    GTEST_SKIP() << "promtool not installed (scripts/setup installs prometheus)";
  TestServer server(2, {"--quota", "vision=1:borrow=1"});
  SubmitReporter(server, "alpha", "vision");
  SubmitReporter(server, "beta", "nlp");
  server.Submit(
      "name: gamma\nteam: vision\ncommand: \"sleep 60\"\nresources: {gpus_per_process: 1}\n");
  ASSERT_TRUE(WaitFor([&] { return server.Job("alpha")["progress"]["step"] == 50; }));
  ASSERT_TRUE(WaitFor([&] { return server.Job("beta")["progress"]["step"] == 50; }));
  WriteFile(server.work_dir() + "/model.bin", std::string(1000, 'm'));
  ASSERT_EQ(server
                .Cli({"artifacts", "put", server.work_dir() + "/model.bin", "--name", "m", "--kind",
                      "model", "--team", "vision"})
                .exit_code,
            0);
  std::string text = Scrape(server);
  CommandResult check = RunCommand({"/usr/bin/promtool", "check", "metrics"}, text);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err << "\n" << text;

  EXPECT_THAT(text,
              HasSubstr("headway_job_progress_ratio{job_name=\"alpha\",team=\"vision\"} 0.25\n"));
  EXPECT_THAT(text, HasSubstr("headway_job_step{job_name=\"beta\",team=\"nlp\"} 50\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "headway_job_metric{job_name=\"alpha\",team=\"vision\",metric=\"grad_norm\"} NaN\n"));
  EXPECT_THAT(
      text,
      HasSubstr("headway_job_state{job_name=\"gamma\",team=\"vision\",state=\"Queued\"} 1\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "headway_job_health{job_name=\"alpha\",team=\"vision\",health=\"Progressing\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("headway_gpus 2\n"));
  EXPECT_THAT(text, HasSubstr("headway_gpus_allocated 2\n"));
  EXPECT_THAT(text,
              HasSubstr("headway_queue_pending_jobs{queue=\"vision\",executor=\"local\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("headway_queue_nominal_gpus{queue=\"vision\",executor=\"local\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("headway_jobs{state=\"Running\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("headway_job_eta_seconds{job_name=\"alpha\",team=\"vision\"} "));
  EXPECT_THAT(text, HasSubstr("headway_artifact_bytes{team=\"vision\"} 1000\n"));
  EXPECT_THAT(
      text,
      HasSubstr("headway_artifact_versions{team=\"vision\",kind=\"model\",state=\"Ready\"} 1\n"));

  // Ended jobs leave the per-job series.
  server.Cli({"stop", "alpha"});
  ASSERT_TRUE(server.WaitForState("alpha", "Stopped"));
  text = Scrape(server);
  EXPECT_THAT(text, ::testing::Not(HasSubstr("job_name=\"alpha\"")));
  EXPECT_THAT(text, HasSubstr("headway_jobs{state=\"Stopped\"} 1\n"));
  for (const char* name : {"beta", "gamma"}) server.Cli({"stop", name});
}

// Runs a Prometheus server scraping `target` every second.
class Prometheus {
 public:
  Prometheus(const std::string& target, const std::string& credentials_file)
      : dir_(MakeTempDir("headway-prometheus")), port_(UnusedLoopbackPort()) {
    std::string config =
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: headway\n"
        "    static_configs: [{targets: ['" +
        target + "']}]\n";
    if (!credentials_file.empty()) {
      config += "    authorization: {credentials_file: '" + credentials_file + "'}\n";
    }
    WriteFile(dir_ + "/prometheus.yml", config);
    pid_ = ::fork();
    if (pid_ == 0) {
      int log = ::open((dir_ + "/log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(log, 1);
      ::dup2(log, 2);
      std::string config_arg = "--config.file=" + dir_ + "/prometheus.yml";
      std::string storage_arg = "--storage.tsdb.path=" + dir_ + "/data";
      std::string listen_arg = "--web.listen-address=127.0.0.1:" + std::to_string(port_);
      ::execl("/usr/bin/prometheus", "prometheus", config_arg.c_str(), storage_arg.c_str(),
              listen_arg.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~Prometheus() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // The result vector of an instant query, or null.
  json Query(const std::string& promql) const {
    json body = Ask(promql);
    return body.is_object() && body["status"] == "success" ? body["data"]["result"] : json(nullptr);
  }

  // Prometheus' whole answer to an instant query: {"status": ..., "data"|"error": ...}.
  json Ask(const std::string& promql) const {
    api::HttpClient http("http://127.0.0.1:" + std::to_string(port_));
    std::string encoded;
    for (unsigned char c : promql) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      encoded += std::isalnum(c) ? std::string(1, static_cast<char>(c)) : std::string(buf);
    }
    auto resp = http.Request("GET", "/api/v1/query?query=" + encoded);
    if (!resp.ok()) return nullptr;
    return json::parse(resp->body, nullptr, false);
  }

  std::string Log() const { return ReadFile(dir_ + "/log"); }

 private:
  std::string dir_;
  int port_;
  pid_t pid_ = -1;
};

TEST(Metrics, ARealPrometheusScrapesTheServer) {
  if (!Installed("/usr/bin/prometheus"))
    GTEST_SKIP() << "prometheus not installed (scripts/setup installs it)";
  // With --auth, Prometheus scrapes with a viewer token of every team ("*"),
  // as a deployment would.
  TestServer server(2, {"--auth"});
  std::string admin = ReadFile(server.data_dir() + "/admin-token");
  admin.pop_back();
  server.UseToken(admin);
  CommandResult viewer = server.Cli(
      {"--token", admin, "token", "create", "prometheus", "--team", "*", "--role", "viewer"});
  ASSERT_EQ(viewer.exit_code, 0) << viewer.err;
  std::string credentials = server.data_dir() + "/prometheus-token";
  WriteFile(credentials, viewer.out);
  ASSERT_EQ(server
                .Cli({"--token", admin, "submit", "-f", "-"},
                     "name: scraped\nteam: vision\ncommand: [\"/bin/sh\", \"-c\", \"echo HEADWAY "
                     "'{\\\"step\\\": 30, \\\"total_steps\\\": 120}'; sleep 60\"]\n"
                     "termination_grace: 1s\nresources: {gpus_per_process: 1}\n")
                .exit_code,
            0);

  Prometheus prometheus(server.url().substr(std::string("http://").size()), credentials);
  json result;
  bool scraped = WaitFor(
      [&] {
        result = prometheus.Query("headway_job_progress_ratio{job_name=\"scraped\"}");
        return result.is_array() && !result.empty();
      },
      std::chrono::seconds(60));
  ASSERT_TRUE(scraped) << prometheus.Log();
  EXPECT_EQ(result[0]["metric"]["team"], "vision");
  EXPECT_EQ(result[0]["metric"]["job"], "headway") << "Prometheus' own job label is untouched";
  EXPECT_EQ(result[0]["value"][1], "0.25");
  json up = prometheus.Query("up{job=\"headway\"}");
  ASSERT_TRUE(up.is_array() && !up.empty());
  EXPECT_EQ(up[0]["value"][1], "1");
  json gpus = prometheus.Query("headway_gpus_allocated");
  ASSERT_TRUE(gpus.is_array() && !gpus.empty());
  EXPECT_EQ(gpus[0]["value"][1], "1");

  // Every query of the shipped Grafana dashboard is valid PromQL over these
  // metrics, and the job panels find the job.
  json dashboard =
      json::parse(ReadFile(std::string(HEADWAY_SOURCE_DIR) + "/deploy/grafana/headway.json"));
  int queries = 0;
  for (const json& panel : dashboard["panels"]) {
    for (const json& target : panel["targets"]) {
      std::string expr = target["expr"];
      for (auto [from, to] : {std::pair<std::string, std::string>{"$__rate_interval", "1m"},
                              {"$team", ".*"},
                              {"$job_name", ".*"}}) {
        for (auto at = expr.find(from); at != std::string::npos; at = expr.find(from)) {
          expr.replace(at, from.size(), to);
        }
      }
      json answer = prometheus.Ask(expr);
      EXPECT_EQ(answer["status"], "success") << panel["title"] << ": " << expr << "\n"
                                             << answer.dump();
      ++queries;
    }
    if (panel["title"] == "Progress" || panel["title"] == "GPUs in use per node") {
      std::string expr = panel["targets"][0]["expr"];
      expr = std::regex_replace(expr, std::regex(R"(\$[a-z_]+)"), ".*");
      json result = prometheus.Query(expr);
      EXPECT_TRUE(result.is_array() && !result.empty()) << panel["title"] << ": " << expr;
    }
  }
  EXPECT_GE(queries, 14);
  server.Cli({"--token", admin, "stop", "scraped"});
}

}  // namespace
}  // namespace headway::testing
