// The Kubeflow Trainer v2 status endpoint against the real server: what
// Kubeflow's status server accepts and refuses (as metav1.Status), whose
// token may write, how the clients' updates become steps, metrics and ETA,
// and the CA certificate a job gets when the server speaks HTTPS.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>

#include "test_server.h"

namespace headway::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string StatusPath(const std::string& job, const std::string& ns = "default") {
  return "/apis/trainer.kubeflow.org/v1alpha1/namespaces/" + ns + "/trainjobs/" + job + "/status";
}

// Now, as Python's datetime.now(timezone.utc).isoformat() writes it.
std::string Now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S.123456+00:00", &tm);
  return buf;
}

// {"trainerStatus": {FIELDS, "lastUpdatedTime": now}}
std::string Update(const std::string& fields) {
  return R"({"trainerStatus": {)" + fields + (fields.empty() ? "" : ", ") +
         R"("lastUpdatedTime": ")" + Now() + R"("}})";
}

std::string IdleJobToken(const TestServer& server, const std::string& name) {
  server.Submit("name: " + name +
                "\ncommand: \"cat $KUBEFLOW_TRAINER_SERVER_TOKEN; echo; while true; do sleep 0.2; "
                "done\"\ntermination_grace: 1s\n");
  std::string token;
  EXPECT_TRUE(WaitFor([&] {
    token = server.Cli({"logs", name}).out;
    return token.size() > 10 && token.back() == '\n';
  }));
  while (!token.empty() && token.back() == '\n') token.pop_back();
  return token;
}

void ExpectKubeStatus(const Answer& a, int code, const std::string& reason,
                      const std::string& message_part, const std::string& what) {
  EXPECT_EQ(a.status, code) << what << ": " << a.raw;
  EXPECT_EQ(a.body["kind"], "Status") << what;
  EXPECT_EQ(a.body["apiVersion"], "v1") << what;
  EXPECT_EQ(a.body["status"], "Failure") << what;
  EXPECT_EQ(a.body["reason"], reason) << what;
  EXPECT_EQ(a.body["code"], code) << what;
  EXPECT_THAT(a.body.value("message", ""), HasSubstr(message_part)) << what;
}

TEST(Kubeflow, AcceptsWhatKubeflowAccepts) {
  TestServer server(1);
  std::string token = IdleJobToken(server, "kf");
  const std::string path = StatusPath("kf");
  Answer a = Call(server, token, "POST", path, "{}");
  EXPECT_EQ(a.status, 200) << a.raw;
  EXPECT_EQ(a.body, json::object());
  EXPECT_EQ(Call(server, token, "POST", path, R"({"trainerStatus": null})").status, 200);
  // A spaced name, values that are not plain numbers, unknown fields.
  a = Call(server, token, "POST", path,
           Update(R"J("progressPercentage": 10, "somethingNew": {"x": 1},
                  "metrics": [{"name": "eval_f1 (macro)", "value": "0.5"}, {"name": "a:b", "value": "1"},
                              {"name": "t", "value": "tensor(0.25)"}, {"name": "na", "value": "N/A"},
                              {"name": "flag", "value": "True"}])J"));
  ASSERT_EQ(a.status, 200) << a.raw;
  EXPECT_EQ(a.body["trainerStatus"]["metrics"].size(), 5u) << "echoed as sent";
  // Metrics only.
  a = Call(server, token, "POST", path,
           Update(R"("metrics": [{"name": "eval_loss", "value": "0.7"}])"));
  ASSERT_EQ(a.status, 200) << a.raw;
  // ...and later updates still count (a refused name used to fail every one).
  ASSERT_EQ(Call(server, token, "POST", path, Update(R"("progressPercentage": 46)")).status, 200);
  json job = server.Job("kf");
  EXPECT_EQ(job["progress"]["percent"], 46.0);
  json metrics = job["progress"]["metrics"];
  EXPECT_EQ(metrics["eval_f1 (macro)"], 0.5);
  EXPECT_EQ(metrics["a:b"], 1.0);
  EXPECT_EQ(metrics["t"], 0.25);
  EXPECT_EQ(metrics["eval_loss"], 0.7);
  EXPECT_FALSE(metrics.contains("na"));
  EXPECT_FALSE(metrics.contains("flag"));
  Answer series =
      Call(server, server.admin_token(), "GET", "/api/v1/jobs/kf/metrics/eval_f1%20(macro)");
  EXPECT_EQ(series.status, 200) << series.raw;
  EXPECT_EQ(series.body["count"], 1);
  server.Cli({"stop", "kf"});
}

TEST(Kubeflow, OtherPathsAndMethodsAreNotFoundAsOnKubeflowsServer) {
  TestServer server(1);
  std::string token = IdleJobToken(server, "kf");
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"GET", StatusPath("kf")},
           {"PUT", StatusPath("kf")},
           {"POST", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/kf"},
           {"POST", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/kf/status/x"},
           {"GET", "/apis/trainer.kubeflow.org/v1alpha1"},
           {"POST", "/apis/other.example.org/v1/namespaces/default/trainjobs/kf/status"}}) {
    ExpectKubeStatus(Call(server, token, method, path, Update(R"("progressPercentage": 5)")), 404,
                     "NotFound", "Not found", method + " " + path);
  }
  EXPECT_TRUE(server.Job("kf")["progress"]["percent"].is_null()) << "nothing was stored";
  server.Cli({"stop", "kf"});
}

TEST(Kubeflow, TheSdksPercentAndStepLoopShowsItsPercentAndKeepsItsSteps) {
  // The Kubeflow SDK's documented loop: a percent, and metrics {loss, step}
  // with no total; then a percent-only update at the end.
  TestServer server(1);
  std::string token = IdleJobToken(server, "kf");
  const std::string path = StatusPath("kf");
  for (int step : {100, 200, 300}) {
    ASSERT_EQ(
        Call(server, token, "POST", path,
             Update(R"("progressPercentage": )" + std::to_string(step / 10) +
                    R"(, "metrics": [{"name": "loss", "value": ")" + std::to_string(1.0 / step) +
                    R"("}, {"name": "step", "value": ")" + std::to_string(step) + R"("}])"))
            .status,
        200);
  }
  json progress = server.Job("kf")["progress"];
  EXPECT_EQ(progress["percent"], 30.0) << progress.dump();
  EXPECT_EQ(progress["step"], 300);
  EXPECT_TRUE(progress["total_steps"].is_null()) << "no total of 100 invented";
  ASSERT_EQ(Call(server, token, "POST", path, Update(R"("progressPercentage": 100)")).status, 200);
  progress = server.Job("kf")["progress"];
  EXPECT_EQ(progress["percent"], 100.0);
  EXPECT_EQ(progress["step"], 300) << "a percent is never a step";
  Answer steps = Call(server, server.admin_token(), "GET", "/api/v1/jobs/kf/metrics/loss");
  ASSERT_EQ(steps.status, 200) << steps.raw;
  EXPECT_EQ(steps.body["count"], 3);
  server.Cli({"stop", "kf"});
}

TEST(Kubeflow, RefusesWhatKubeflowRefusesWithAKubernetesStatus) {
  TestServer server(1);
  std::string token = IdleJobToken(server, "kf");
  const std::string path = StatusPath("kf");
  ASSERT_EQ(Call(server, token, "POST", path, Update(R"("progressPercentage": 30)")).status, 200);
  std::string many;
  for (int i = 0; i < 257; ++i) {
    many +=
        (i ? "," : "") + std::string(R"({"name": "m)") + std::to_string(i) + R"(", "value": "1"})";
  }
  const std::string long65(65, 'x');
  struct Case {
    std::string what, body, message;
  } cases[] = {
      {"42.5 percent", Update(R"("progressPercentage": 42.5)"), "must be an integer"},
      {"99.5 percent", Update(R"("progressPercentage": 99.5)"), "must be an integer"},
      {"101 percent", Update(R"("progressPercentage": 101)"), "from 0 to 100"},
      {"257 metrics", Update(R"("metrics": [)" + many + "]"), "at most 256"},
      {"long name", Update(R"("metrics": [{"name": ")" + long65 + R"(", "value": "1"}])"),
       "Too long"},
      {"long value", Update(R"("metrics": [{"name": "loss", "value": ")" + long65 + R"("}])"),
       "Too long"},
      {"negative ETA", Update(R"("estimatedRemainingSeconds": -1)"), "greater than or equal to 0"},
      {"fractional ETA", Update(R"("estimatedRemainingSeconds": 2.5)"), "must be an integer"},
      {"no lastUpdatedTime", R"({"trainerStatus": {"progressPercentage": 90}})",
       "lastUpdatedTime is required"},
      {"numeric value", Update(R"("metrics": [{"name": "loss", "value": 0.5}])"),
       "must be a string"},
      {"not JSON", "{", "Invalid payload"},
  };
  for (const Case& c : cases) {
    ExpectKubeStatus(Call(server, token, "POST", path, c.body), 422, "Invalid", c.message, c.what);
  }
  std::string big = Update(R"("metrics": [)" + many + "]");
  big.insert(big.size() - 2, std::string(66000 - big.size(), ' '));
  ExpectKubeStatus(Call(server, token, "POST", path, big), 413, "RequestEntityTooLarge",
                   "Payload too large", "over 64 KiB");
  EXPECT_EQ(server.Job("kf")["progress"]["percent"], 30.0) << "nothing refused was stored";
  EXPECT_FALSE(server.Job("kf")["progress"]["metrics"].contains("loss"));
  server.Cli({"stop", "kf"});
}

TEST(Kubeflow, ATokenWritesOnlyItsOwnRunningJobInItsNamespace) {
  TestServer server(2);
  std::string a = IdleJobToken(server, "a");
  std::string b = IdleJobToken(server, "b");
  const std::string body = Update(R"("progressPercentage": 5)");
  ExpectKubeStatus(Call(server, b, "POST", StatusPath("a"), body), 403, "Forbidden", "Forbidden",
                   "another job's token");
  ExpectKubeStatus(Call(server, "", "POST", StatusPath("a"), body), 403, "Forbidden", "Forbidden",
                   "no token");
  ExpectKubeStatus(Call(server, a, "POST", StatusPath("a", "team-x"), body), 403, "Forbidden",
                   "namespace", "another namespace");
  ExpectKubeStatus(Call(server, a, "POST", StatusPath("ghost"), body), 403, "Forbidden",
                   "Forbidden", "no such job");
  EXPECT_EQ(Call(server, a, "POST", StatusPath("a"), body).status, 200);
  ASSERT_EQ(server.Cli({"stop", "a"}).exit_code, 0);
  ASSERT_TRUE(server.WaitForState("a", "Stopped"));
  ExpectKubeStatus(Call(server, a, "POST", StatusPath("a"), Update(R"("progressPercentage": 100)")),
                   403, "Forbidden", "has ended", "a finished job");
  EXPECT_EQ(server.Job("a")["progress"]["percent"], 5.0);
  server.Cli({"stop", "b"});
}

// What HF Transformers' KubeflowCallback sends: 0% and total_steps at the
// start, then per step current_step/total_steps/current_epoch with every
// logged value so far (eval values re-sent until the next eval), then 100%.
TEST(Kubeflow, TheCallbacksUpdatesAreStepsMetricsAndEta) {
  TestServer server(1);
  std::string token = IdleJobToken(server, "hf");
  const std::string path = StatusPath("hf");
  ASSERT_EQ(
      Call(server, token, "POST", path,
           Update(
               R"("progressPercentage": 0, "metrics": [{"name": "total_steps", "value": "200"}])"))
          .status,
      200);
  EXPECT_EQ(server.Job("hf")["progress"]["total_steps"], 200);
  EXPECT_EQ(server.Job("hf")["progress"]["step"], 0);
  for (int i = 1; i <= 6; ++i) {
    int step = 10 * i;
    std::string metrics =
        R"({"name": "loss", "value": ")" + std::to_string(1.0 / i) +
        R"("}, {"name": "learning_rate", "value": "5e-05"}, {"name": "epoch", "value": ")" +
        std::to_string(step / 100.0) + R"("})";
    if (i >= 2)
      metrics +=
          R"J(, {"name": "eval_loss", "value": "0.5"}, {"name": "eval_acc (top-1)", "value": "0.8"})J";
    metrics +=
        R"(, {"name": "current_step", "value": ")" + std::to_string(step) +
        R"("}, {"name": "total_steps", "value": "200"}, {"name": "current_epoch", "value": ")" +
        std::to_string(step / 100.0) + R"("})";
    Answer a = Call(server, token, "POST", path,
                    Update(R"("progressPercentage": )" + std::to_string(step * 100 / 200) +
                           R"(, "estimatedRemainingSeconds": 900, "metrics": [)" + metrics + "]"));
    ASSERT_EQ(a.status, 200) << a.raw;
  }
  json progress = server.Job("hf")["progress"];
  EXPECT_EQ(progress["step"], 60);
  EXPECT_EQ(progress["total_steps"], 200);
  EXPECT_EQ(progress["percent"], 30.0);
  EXPECT_NEAR(progress["epoch"].get<double>(), 0.6, 1e-9);
  ASSERT_TRUE(progress["eta_seconds"].is_number()) << progress;
  EXPECT_GT(progress["eta_seconds"].get<double>(), 880) << "the job's own 900 s, few reports yet";
  EXPECT_LE(progress["eta_seconds"].get<double>(), 900);
  auto count = [&](const std::string& metric) {
    return Call(server, server.admin_token(), "GET", "/api/v1/jobs/hf/metrics/" + metric)
        .body["count"];
  };
  EXPECT_EQ(count("loss"), 6);
  EXPECT_EQ(count("eval_loss"), 1) << "re-sent values are not new points";
  EXPECT_EQ(count("learning_rate"), 1);
  EXPECT_EQ(count("eval_acc%20(top-1)"), 1);
  EXPECT_EQ(
      Call(server, server.admin_token(), "GET", "/api/v1/jobs/hf/metrics/current_step").status, 404)
      << "progress, not a series";
  EXPECT_NE(server.Job("hf")["health"], "Plateaued");
  // on_train_end: 100% and the final logs, no step: the known total.
  ASSERT_EQ(Call(server, token, "POST", path,
                 Update(R"("progressPercentage": 100, "estimatedRemainingSeconds": 0,
                          "metrics": [{"name": "train_loss", "value": "0.3"}, {"name": "eval_loss", "value": "0.5"}])"))
                .status,
            200);
  progress = server.Job("hf")["progress"];
  EXPECT_EQ(progress["step"], 200);
  EXPECT_EQ(progress["percent"], 100.0);
  EXPECT_EQ(count("eval_loss"), 1);
  EXPECT_EQ(count("train_loss"), 1);
  server.Cli({"stop", "hf"});
}

TEST(Kubeflow, AnHttpsServerGivesJobsItsCertificateToVerifyWith) {
  std::string dir = MakeTempDir("headway-kf-tls");
  std::string cert = dir + "/cert.pem", key = dir + "/key.pem";
  ASSERT_EQ(RunCommand({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                        "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=headway-test",
                        "-addext", "subjectAltName=IP:127.0.0.1"})
                .exit_code,
            0);
  TestServer server(1, {"--tls-cert", cert, "--tls-key", key});
  // The job posts as the Kubeflow clients do: urllib, verifying with the CA file.
  const std::string script =
      "import json, os, ssl, urllib.request\n"
      "ctx = ssl.create_default_context(cafile=os.environ['KUBEFLOW_TRAINER_SERVER_CA_CERT'])\n"
      "token = open(os.environ['KUBEFLOW_TRAINER_SERVER_TOKEN']).read().strip()\n"
      "body = {'trainerStatus': {'progressPercentage': 64, 'lastUpdatedTime': "
      "'2026-12-02T10:00:00+00:00',\n"
      "        'metrics': [{'name': 'eval_f1 (macro)', 'value': '0.5'}]}}\n"
      "req = urllib.request.Request(os.environ['KUBEFLOW_TRAINER_SERVER_URL'], "
      "data=json.dumps(body).encode(),\n"
      "    headers={'Authorization': 'Bearer ' + token, 'Content-Type': 'application/json'}, "
      "method='POST')\n"
      "with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:\n"
      "    print('STATUS', resp.status)\n";
  WriteFile(server.work_dir() + "/kf.py", script);
  ASSERT_EQ(server
                .Cli({"--cacert", cert, "submit", "-f", "-"},
                     "name: kftls\ncommand: [/usr/bin/python3, " + server.work_dir() + "/kf.py]\n")
                .exit_code,
            0);
  ASSERT_TRUE(server.WaitForState("kftls", "Succeeded"))
      << server.Cli({"--cacert", cert, "logs", "kftls"}).out;
  EXPECT_THAT(server.Cli({"--cacert", cert, "logs", "kftls"}).out, HasSubstr("STATUS 200"));
  json job = server.Job("kftls");
  EXPECT_EQ(job["progress"]["metrics"]["eval_f1 (macro)"], 0.5);
}

}  // namespace
}  // namespace headway::testing
