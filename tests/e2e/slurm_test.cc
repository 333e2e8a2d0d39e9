// End-to-end: Headway submitting to a real single-node Slurm cluster.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "../integration/test_server.h"
#include "slurm_cluster.h"

namespace headway::testing {
namespace {

using ::testing::HasSubstr;

class SlurmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new SlurmCluster(); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (!cluster_->ok()) GTEST_SKIP() << "no Slurm cluster: " << cluster_->error();
  }
  static std::unique_ptr<TestServer> Server() {
    // The suite runs as root, and Slurm runs a job as the account that
    // submits it: a root server must be told that root jobs are intended.
    return std::make_unique<TestServer>(
        0,
        std::vector<std::string>{"--queue", "cluster=slurm:partition=debug", "--allow-root-jobs"});
  }
  static std::string SlurmId(const TestServer& server, const std::string& job) {
    std::regex id(R"(Slurm job (\d+))");
    for (const auto& e : server.Events(job)) {
      std::smatch m;
      std::string text = e["message"].get<std::string>();
      if (e["type"] == "Launched" && std::regex_search(text, m, id)) return m[1];
    }
    return "";
  }
  static SlurmCluster* cluster_;
};

SlurmCluster* SlurmTest::cluster_ = nullptr;

TEST_F(SlurmTest, TwoTaskJobRunsReportsProgressAndSucceeds) {
  auto server = Server();
  server->Submit(R"(
name: sl-two
queue: cluster
command: ["/bin/bash", "-c", "echo rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT; if [ $RANK = 0 ]; then for i in 1 2 3; do echo \"HEADWAY {\\\"step\\\": $i, \\\"total_steps\\\": 3, \\\"metrics\\\": {\\\"loss\\\": 0.$i}}\"; sleep 1; done; fi"]
resources: {processes_per_node: 2, gpus_per_process: 1}
)");
  ASSERT_TRUE(server->WaitForState("sl-two", "Running", std::chrono::seconds(30)));
  ASSERT_TRUE(server->WaitForState("sl-two", "Succeeded", std::chrono::seconds(60)));
  std::string id = SlurmId(*server, "sl-two");
  ASSERT_FALSE(id.empty());
  EXPECT_THAT(cluster_->ShowJob(id), HasSubstr("JobState=COMPLETED"));
  EXPECT_THAT(server->Cli({"logs", "sl-two", "--rank", "0"}).out,
              HasSubstr("rank=0 local=0 world=2 master=127.0.0.1:"));
  EXPECT_THAT(server->Cli({"logs", "sl-two", "--rank", "1"}).out,
              HasSubstr("rank=1 local=1 world=2"));
  // Each line with when it was written, to the second (what the task's awk can tell).
  std::istringstream stamped(server->Cli({"logs", "sl-two", "--rank", "0", "--timestamps"}).out);
  std::vector<std::string> times;
  for (std::string line; std::getline(stamped, line);) {
    std::smatch m;
    ASSERT_TRUE(
        std::regex_match(line, m, std::regex(R"((\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.000Z .+)")))
        << line;
    times.push_back(m[1].str());
  }
  ASSERT_EQ(times.size(), 4u);
  EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
  // The steps were a second apart, and each line reached the log as it was written.
  EXPECT_LT(times.front(), times.back());
  ASSERT_TRUE(WaitFor([&] { return server->Job("sl-two")["progress"]["step"] == 3; }));
  EXPECT_EQ(server->Job("sl-two")["executor"], "slurm");
}

// A workflow whose steps run as Slurm jobs: outputs pass from one to the next
// through the step's home, which the batch host shares with the server.
TEST_F(SlurmTest, AWorkflowsStepsRunAsSlurmJobsAndPassTheirOutputs) {
  auto server = Server();
  CommandResult r = server->Cli({"workflow", "submit", "-", "--wait"}, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: sl-wf, labels: {headway.dev/queue: cluster}}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - [{name: make, template: make}]
    - [{name: use, template: use, arguments: {parameters: [{name: v, value: "{{steps.make.outputs.parameters.v}}"}]}}]
  - name: make
    outputs: {parameters: [{name: v, valueFrom: {path: /tmp/sl-wf-v}}]}
    container: {image: alpine, command: [sh, -c, "echo -n slurm-made > /tmp/sl-wf-v"]}
  - name: use
    inputs: {parameters: [{name: v}]}
    script: {image: python:3, command: [/usr/bin/python3], source: "print('got {{inputs.parameters.v}}')"}
)y");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  Answer wf = Call(*server, server->admin_token(), "GET", "/api/v1/workflows/default/sl-wf");
  ASSERT_EQ(wf.body["status"]["phase"], "Succeeded") << wf.raw;
  int steps = 0;
  for (const auto& [id, node] : wf.body["status"]["nodes"].items()) {
    if (node["type"] != "Pod") continue;
    ++steps;
    const std::string job = node["headway"]["job"];
    EXPECT_EQ(server->Job(job)["executor"], "slurm") << job;
    EXPECT_FALSE(SlurmId(*server, job).empty()) << job;
    if (node["displayName"] == "use") {
      EXPECT_EQ(node["outputs"]["result"], "got slurm-made");
    }
  }
  EXPECT_EQ(steps, 2);
}

TEST_F(SlurmTest, FailingJobKeepsItsExitCode) {
  auto server = Server();
  server->Submit("name: sl-fail\nqueue: cluster\ncommand: \"exit 3\"\n");
  ASSERT_TRUE(server->WaitForState("sl-fail", "Failed", std::chrono::seconds(60)));
  EXPECT_EQ(server->Job("sl-fail")["exit_code"], 3);
}

TEST_F(SlurmTest, StopCancelsTheSlurmJob) {
  auto server = Server();
  server->Submit("name: sl-cancel\nqueue: cluster\ncommand: \"sleep 300\"\n");
  ASSERT_TRUE(server->WaitForState("sl-cancel", "Running", std::chrono::seconds(30)));
  ASSERT_EQ(server->Cli({"stop", "sl-cancel"}).exit_code, 0);
  ASSERT_TRUE(server->WaitForState("sl-cancel", "Stopped", std::chrono::seconds(30)));
  EXPECT_THAT(cluster_->ShowJob(SlurmId(*server, "sl-cancel")), HasSubstr("JobState=CANCELLED"));
}

TEST_F(SlurmTest, TimeoutDeliversTheCheckpointSignalFirst) {
  auto server = Server();
  server->Submit(R"(
name: sl-timeout
queue: cluster
command: ["/bin/bash", "-c", "trap 'echo checkpoint requested' USR1; while true; do sleep 1; done"]
time_limit: 1m
checkpoint_warning: 45s
)");
  ASSERT_TRUE(server->WaitForState("sl-timeout", "Running", std::chrono::seconds(30)));
  ASSERT_TRUE(server->WaitForState("sl-timeout", "Failed", std::chrono::seconds(150)));
  auto job = server->Job("sl-timeout");
  EXPECT_EQ(job["reason"], "TimeLimitExceeded");
  EXPECT_THAT(server->Cli({"logs", "sl-timeout"}).out, HasSubstr("checkpoint requested"));
  EXPECT_THAT(cluster_->ShowJob(SlurmId(*server, "sl-timeout")), HasSubstr("JobState=TIMEOUT"));
}

TEST_F(SlurmTest, ServerRestartMidJobReadoptsBySlurmId) {
  auto server = Server();
  server->Submit("name: sl-restart\nqueue: cluster\ncommand: \"sleep 6; echo finished\"\n");
  ASSERT_TRUE(server->WaitForState("sl-restart", "Running", std::chrono::seconds(30)));
  std::string id = SlurmId(*server, "sl-restart");
  server->Kill();
  server->Restart();
  ASSERT_TRUE(server->WaitForState("sl-restart", "Succeeded", std::chrono::seconds(60)));
  EXPECT_EQ(SlurmId(*server, "sl-restart"), id);
  int launches = 0;
  for (const auto& e : server->Events("sl-restart")) launches += e["type"] == "Launched";
  EXPECT_EQ(launches, 1);  // not submitted twice
  EXPECT_EQ(server->Cli({"logs", "sl-restart"}).out, "finished\n");
}

// Fault injection: the server dies just before and just after sbatch, before
// the Slurm job id is stored. After the restart the job is submitted to
// Slurm exactly once: adopted if sbatch took it, submitted again only if not.
TEST_F(SlurmTest, ACrashAroundSbatchSubmitsTheAttemptToSlurmExactlyOnce) {
  for (std::string point : {"launch:before", "launch:after"}) {
    SCOPED_TRACE(point);
    const std::string name = point == "launch:before" ? "sl-crash-before" : "sl-crash-after";
    ::setenv("HEADWAY_TEST_CRASH_AT", point.c_str(), 1);
    auto server = Server();
    ::unsetenv("HEADWAY_TEST_CRASH_AT");
    // The server may die before it answers.
    server->Cli({"submit", "-f", "-"},
                "name: " + name + "\nqueue: cluster\ncommand: \"sleep 3; echo finished\"\n");
    ASSERT_TRUE(WaitFor([&] {
      return server->ServerLog().find("crash point " + point + " reached") != std::string::npos;
    })) << server->ServerLog();
    server->Kill();
    server->Restart();
    ASSERT_TRUE(server->WaitForState(name, "Succeeded", std::chrono::seconds(60)))
        << server->ServerLog();
    CommandResult jobs = RunCommand({"/usr/bin/scontrol", "show", "job", "-o"});
    int submitted = 0;
    for (std::size_t at = jobs.out.find("JobName=headway-" + name + " "); at != std::string::npos;
         at = jobs.out.find("JobName=headway-" + name + " ", at + 1)) {
      ++submitted;
    }
    EXPECT_EQ(submitted, 1) << jobs.exit_code << jobs.out << jobs.err;
    if (point == "launch:after") {
      EXPECT_TRUE(server->HasEvent(name, "Readopted", "had started"));
    }
    EXPECT_EQ(server->Cli({"logs", name}).out, "finished\n");
  }
}

// As for local jobs, a rank's output cannot fill the shared disk: each rank
// log is moved aside at half of --max-log-bytes, keeping the newest output.
TEST_F(SlurmTest, RankLogsAreRotatedAtTheLogLimit) {
  auto server = std::make_unique<TestServer>(
      0, std::vector<std::string>{"--queue", "cluster=slurm:partition=debug", "--allow-root-jobs",
                                  "--max-log-bytes", "65536"});
  server->Submit("name: sl-flood\nqueue: cluster\ncommand: [seq, '1', '200000']\n");
  ASSERT_TRUE(server->WaitForState("sl-flood", "Succeeded", std::chrono::seconds(60)));
  const std::string run_dir = server->data_dir() + "/jobs/sl-flood/attempt-0";
  std::error_code ec;
  std::uint64_t kept = std::filesystem::file_size(run_dir + "/rank-0.log", ec) +
                       std::filesystem::file_size(run_dir + "/rank-0.log.1", ec);
  EXPECT_LE(kept, 65536u);
  EXPECT_GE(kept, 32768u - 16);
  EXPECT_FALSE(std::filesystem::exists(run_dir + "/rank-0.log.2"));
  EXPECT_EQ(server->Cli({"logs", "sl-flood", "--tail", "2"}).out, "199999\n200000\n");
  EXPECT_TRUE(std::regex_match(server->Cli({"logs", "sl-flood", "--tail", "1", "--timestamps"}).out,
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z 200000\n)")));
  // The command's own exit status still decides the job's.
  server->Submit("name: sl-fail-rotated\nqueue: cluster\ncommand: \"seq 1 10; exit 7\"\n");
  ASSERT_TRUE(server->WaitForState("sl-fail-rotated", "Failed", std::chrono::seconds(60)));
  EXPECT_EQ(server->Job("sl-fail-rotated")["exit_code"], 7);
}

// Pull mode on a cluster: the server reads the endpoint on the batch host.
TEST_F(SlurmTest, PullModeReadsTheEndpointOnTheBatchHost) {
  auto server = Server();
  const std::string script = server->work_dir() + "/serve.py";
  std::ofstream(script) << "import http.server, json, threading, time\n"
                           "state = {'currentStep': 0, 'totalSteps': 5}\n"
                           "class H(http.server.BaseHTTPRequestHandler):\n"
                           "    def log_message(self, *a): pass\n"
                           "    def do_GET(self):\n"
                           "        self.send_response(200); self.end_headers()\n"
                           "        self.wfile.write(json.dumps(state).encode())\n"
                           "s = http.server.HTTPServer(('0.0.0.0', 28123), H)\n"
                           "threading.Thread(target=s.serve_forever, daemon=True).start()\n"
                           "for i in range(1, 6):\n"
                           "    time.sleep(0.4); state['currentStep'] = i\n"
                           "time.sleep(2.5)\n";
  server->Submit("name: sl-pulled\nqueue: cluster\ncommand: [/usr/bin/python3, " + script +
                 "]\nprogress_endpoint: {port: 28123, interval: 1s}\n");
  ASSERT_TRUE(server->WaitForState("sl-pulled", "Succeeded", std::chrono::seconds(60)));
  ASSERT_TRUE(WaitFor([&] { return server->Job("sl-pulled")["progress"]["step"] == 5; }))
      << server->Job("sl-pulled")["progress"].dump()
      << nlohmann::json(server->Events("sl-pulled")).dump();
}

// As on a cluster where the next attempt may land on another node: the
// checkpoint comes back from the artifact store, not from the first
// attempt's files (they are deleted before it fails).
TEST_F(SlurmTest, ARestartedJobResumesFromItsStoredCheckpoint) {
  auto server = Server();
  server->Submit(
      "name: sl-resume\nqueue: cluster\n"
      "env: {PYTHONPATH: \"" HEADWAY_SOURCE_DIR
      "/sdk/python\"}\n"
      "restart_policy: {max_restarts: 1}\n"
      "command: [/usr/bin/python3, -c, \"import headway, os, sys\\n"
      "d = os.environ['HEADWAY_CHECKPOINT_DIR']\\n"
      "step = headway.restore_checkpoint()\\n"
      "if step is None:\\n"
      "  open(os.path.join(d, 'model.pt'), 'w').write('weights at 9')\\n"
      "  headway.save_checkpoint(step=9)\\n"
      "  [os.remove(os.path.join(d, f)) for f in os.listdir(d)]\\n"
      "  sys.exit(1)\\n"
      "print('resumed at', step, open(os.path.join(d, 'model.pt')).read())\\n\"]\n");
  ASSERT_TRUE(server->WaitForState("sl-resume", "Succeeded", std::chrono::seconds(90)))
      << server->Cli({"logs", "sl-resume", "--attempt", "0"}).out;
  EXPECT_EQ(server->Job("sl-resume")["restarts"], 1);
  EXPECT_EQ(server->Cli({"logs", "sl-resume"}).out, "resumed at 9 weights at 9\n");
  EXPECT_THAT(server->Cli({"artifacts", "lineage", "sl-resume.checkpoint"}).out,
              HasSubstr("job/sl-resume"));
}

// `headway exec` and `headway ssh` into a Slurm job: a step of its own in the
// job's allocation, with the job's environment (never the server's) and the
// rank's variables; a command whose client goes away ends with it.
TEST_F(SlurmTest, ExecAndSshRunAStepInsideTheSlurmJob) {
  // A variable only the server has: neither the job nor a command may see it.
  ::setenv("HEADWAY_TEST_SERVER_ONLY", "server-secret", 1);
  auto server = Server();
  ::unsetenv("HEADWAY_TEST_SERVER_ONLY");
  server->Submit(R"(name: sl-exec
queue: cluster
env: {FROM_SPEC: spec-value}
command: ["/bin/bash", "-c", "echo server-env=$(env | grep -c HEADWAY_TEST_SERVER_ONLY); exec sleep 300"]
resources: {processes_per_node: 2}
)");
  ASSERT_TRUE(server->WaitForState("sl-exec", "Running", std::chrono::seconds(30)));
  const std::string id = SlurmId(*server, "sl-exec");
  ASSERT_TRUE(WaitFor([&] {
    return server->Cli({"logs", "sl-exec", "--rank", "0"}).out == "server-env=0\n";
  })) << server->Cli({"logs", "sl-exec"}).out;

  CommandResult inside = server->Cli(
      {"exec", "sl-exec", "--rank", "1", "--", "sh", "-c",
       "echo rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE spec=$FROM_SPEC slurm=$SLURM_JOB_ID "
       "server-env=$(env | grep -c HEADWAY_TEST_SERVER_ONLY) attempt=$HEADWAY_ATTEMPT; exit 4"});
  EXPECT_EQ(inside.exit_code, 4) << inside.err;
  EXPECT_EQ(inside.out,
            "rank=1 local=1 world=2 spec=spec-value slurm=" + id + " server-env=0 attempt=0\n");
  CommandResult piped = server->Cli({"exec", "-i", "sl-exec", "--", "tr", "a-z", "A-Z"}, "hello\n");
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.out, "HELLO\n");

  // A login shell on a terminal (`script` gives the client one).
  const std::string command = std::string(HEADWAY_BIN) + " --server " + server->url() +
                              " --token " + server->admin_token() + " ssh sl-exec";
  CommandResult session = RunCommand({"/usr/bin/script", "-qec", command, "/dev/null"},
                                     "tty; echo shell-$((6*7)) in $SLURM_JOB_ID; exit 3\n");
  EXPECT_EQ(session.exit_code, 3) << session.out << session.err;
  EXPECT_THAT(session.out, HasSubstr("/dev/pts/"));
  EXPECT_THAT(session.out, HasSubstr("shell-42 in " + id));
  EXPECT_TRUE(server->HasEvent("sl-exec", "Exec", "ran a login shell in rank 0 on a terminal"));

  // An SSH connection (OpenSSH's client through `headway ssh --stdio`),
  // served from a step of its own, with the rank's environment.
  const std::string ssh_dir = MakeTempDir("slurm-ssh");
  WriteFile(ssh_dir + "/config", "Host *.headway\n  ProxyCommand " + std::string(HEADWAY_BIN) +
                                     " --server " + server->url() + " --token " +
                                     server->admin_token() +
                                     " ssh --stdio --rank 1 %n\n"
                                     "  StrictHostKeyChecking accept-new\n"
                                     "  UserKnownHostsFile " +
                                     ssh_dir +
                                     "/known_hosts\n"
                                     "  BatchMode yes\n  LogLevel ERROR\n");
  CommandResult over_ssh =
      RunCommand({"/usr/bin/ssh", "-F", ssh_dir + "/config", "sl-exec.headway",
                  "echo rank=$RANK slurm=$SLURM_JOB_ID key=${HEADWAY_SSH_HOST_KEY:-none}; exit 6"});
  EXPECT_EQ(over_ssh.exit_code, 6) << over_ssh.err;
  EXPECT_EQ(over_ssh.out, "rank=1 slurm=" + id + " key=none\n");
  EXPECT_TRUE(server->HasEvent("sl-exec", "Exec", "ran an SSH session in rank 1"));

  // A command whose client is killed ends with it; the job goes on.
  const std::string marker = "sl-exec-test-" + std::to_string(::getpid());
  pid_t client = ::fork();
  if (client == 0) {
    ::execl(HEADWAY_BIN, HEADWAY_BIN, "--server", server->url().c_str(), "--token",
            server->admin_token().c_str(), "exec", "sl-exec", "--", "bash", "-c",
            ("exec -a " + marker + " sleep 600").c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_TRUE(WaitFor([&] { return !ProcessesWith(marker).empty(); }));
  ::kill(client, SIGKILL);
  ::waitpid(client, nullptr, 0);
  EXPECT_TRUE(WaitFor([&] { return ProcessesWith(marker).empty(); }, std::chrono::seconds(30)))
      << "the command outlived its client";
  EXPECT_TRUE(WaitFor([&] {
    int started = 0, ended = 0;
    for (const auto& e : server->Events("sl-exec")) {
      started += e.value("type", "") == "Exec";
      ended += e.value("type", "") == "ExecEnded";
    }
    return started == ended;
  })) << "every command's end is recorded";
  EXPECT_EQ(server->State("sl-exec"), "Running");
  EXPECT_THAT(cluster_->ShowJob(id), HasSubstr("JobState=RUNNING"));
  // Its node's CPUs go back to Slurm for the next test.
  EXPECT_EQ(server->Cli({"stop", "sl-exec"}).exit_code, 0);
  EXPECT_TRUE(server->WaitForState("sl-exec", "Stopped", std::chrono::seconds(60)));
}

// A notebook on a Slurm node: its server listens there, the proxy reaches it
// at the node's address, and its home is the persistent one in the shared
// data directory.
TEST_F(SlurmTest, ANotebookRunsAsASlurmJobBehindTheProxy) {
  const std::string profiles = cluster_->conf() + ".notebook-profiles.yaml";
  std::ofstream(profiles)
      << "profiles:\n  - name: cluster\n    queue: cluster\n    idle_timeout: 1h\n";
  auto server = std::make_unique<TestServer>(
      0, std::vector<std::string>{"--queue", "cluster=slurm:partition=debug", "--allow-root-jobs",
                                  "--notebook-profiles", profiles});
  CommandResult started = server->Cli({"notebook", "start", "lab", "--team", "vision", "--wait"});
  ASSERT_EQ(started.exit_code, 0) << started.err << started.out;
  const nlohmann::json lab =
      Call(*server, server->admin_token(), "GET", "/api/v1/notebooks/lab").body;
  const std::string job = lab["job"];
  EXPECT_EQ(server->Job(job)["executor"], "slurm");
  EXPECT_FALSE(SlurmId(*server, job).empty());

  Answer status = Call(*server, server->admin_token(), "GET", "/notebooks/lab/api/status");
  EXPECT_EQ(status.status, 200) << status.raw;
  Answer kernel = Call(*server, server->admin_token(), "POST", "/notebooks/lab/api/kernels",
                       R"({"name": "python3"})");
  EXPECT_EQ(kernel.status, 201) << kernel.raw;
  Answer saved = Call(*server, server->admin_token(), "PUT", "/notebooks/lab/api/contents/kept.txt",
                      R"({"type": "file", "format": "text", "content": "on the node"})");
  EXPECT_EQ(saved.status, 201) << saved.raw;
  bool in_home = false;
  for (const auto& user :
       std::filesystem::directory_iterator(server->data_dir() + "/homes/vision")) {
    in_home = in_home || std::filesystem::exists(user.path() / "kept.txt");
  }
  EXPECT_TRUE(in_home) << "written to the persistent home";

  EXPECT_EQ(server->Cli({"notebook", "stop", "lab"}).exit_code, 0);
  EXPECT_TRUE(server->WaitForState(job, "Stopped", std::chrono::seconds(60)));
}

}  // namespace
}  // namespace headway::testing
