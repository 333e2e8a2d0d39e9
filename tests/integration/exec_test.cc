// `headway exec` and `headway ssh` against running jobs of a real server:
// the command runs inside the job (its namespaces, account, environment),
// only the job's team may run one, every one is audited, and a command
// whose client goes away does not outlive it.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_server.h"

namespace headway::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kTwoRanks = R"(name: trainer
team: vision
command: ["sleep", "300"]
resources: {processes_per_node: 2}
)";

TEST(Exec, ACommandRunsInsideTheJobAsItsAccountOnlyForItsTeamAndIsAudited) {
  TestServer server(1);
  const std::string alice = CreateToken(server, "alice", "vision", "member");
  const std::string bob = CreateToken(server, "bob", "nlp", "member");
  const std::string watcher = CreateToken(server, "watcher", "vision", "viewer");
  server.Submit(kTwoRanks);
  ASSERT_TRUE(server.WaitForState("trainer", "Running"));

  server.UseToken(alice);
  // Rank 1's environment, the job's account, and only the job's processes.
  CommandResult inside = server.Cli(
      {"exec", "trainer", "--rank", "1", "--", "sh", "-c",
       "echo rank=$RANK; id -un; ps -e -o comm= | sort | tr '\\n' ' '; test -e " +
           server.data_dir() + "/admin-token && echo token-visible || echo token-hidden; exit 5"});
  EXPECT_EQ(inside.exit_code, 5) << inside.err;
  EXPECT_THAT(inside.out, HasSubstr("rank=1\n"));
  EXPECT_THAT(inside.out, HasSubstr("nobody\n"));
  EXPECT_THAT(inside.out, HasSubstr("headway ps sh sleep sleep sort tr "))
      << "the job's own processes and the command's, nothing of the server's";
  EXPECT_THAT(inside.out, HasSubstr("token-hidden")) << "the server's data directory is hidden";

  // stdin reaches it with -i, and its end ends the command's.
  CommandResult piped = server.Cli({"exec", "-i", "trainer", "--", "tr", "a-z", "A-Z"}, "hello\n");
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.out, "HELLO\n");
  CommandResult errors = server.Cli({"exec", "trainer", "--", "sh", "-c", "echo oops >&2"});
  EXPECT_EQ(errors.err, "oops\n");

  // Only its team's members (and admins).
  server.UseToken(bob);
  CommandResult other = server.Cli({"exec", "trainer", "--", "true"});
  EXPECT_NE(other.exit_code, 0);
  EXPECT_THAT(other.err, HasSubstr("sees team 'nlp' only"));
  server.UseToken(watcher);
  CommandResult viewer = server.Cli({"exec", "trainer", "--", "true"});
  EXPECT_NE(viewer.exit_code, 0);
  EXPECT_THAT(viewer.err, HasSubstr("may not change team 'vision'"));
  server.UseToken(alice);
  CommandResult bad_rank = server.Cli({"exec", "trainer", "--rank", "2", "--", "true"});
  EXPECT_THAT(bad_rank.err, HasSubstr("rank must be from 0 to 1"));

  // Audited with who ran what, and how it ended.
  EXPECT_TRUE(server.HasEvent("trainer", "Exec", "user/alice ran `sh -c echo rank=$RANK"));
  EXPECT_TRUE(server.HasEvent("trainer", "Exec", "in rank 1"));
  EXPECT_TRUE(server.HasEvent("trainer", "ExecEnded", "exited with 5"));
  EXPECT_FALSE(server.HasEvent("trainer", "Exec", "user/bob"));
  // describe counts them after the job's own events instead of listing each.
  const std::string described = server.Cli({"describe", "job", "trainer"}).out;
  EXPECT_THAT(described, ::testing::ContainsRegex("Exec: +[0-9]+ commands run in the job; the "
                                                  "latest at [-0-9T:.Z]+: user/alice ran"))
      << described;
  EXPECT_THAT(described, Not(HasSubstr("ExecEnded")));
  EXPECT_THAT(described, HasSubstr("Launched"));

  // A command whose client is killed is ended with it (and the job goes on).
  // Every command's end is recorded (a finished one's just after its client returns).
  auto all_ended = [&] {
    int started = 0, ended = 0;
    for (const auto& e : server.Events("trainer")) {
      started += e.value("type", "") == "Exec";
      ended += e.value("type", "") == "ExecEnded";
    }
    return started == ended;
  };
  EXPECT_TRUE(WaitFor(all_ended));
  const std::string marker = "exec-test-" + std::to_string(::getpid());
  pid_t client = ::fork();
  if (client == 0) {
    ::execl(HEADWAY_BIN, HEADWAY_BIN, "--server", server.url().c_str(), "--token", alice.c_str(),
            "exec", "trainer", "--", "sh", "-c", ("sleep 600; : " + marker).c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // (The shell stays, named by the marker, while its sleep runs: dash has
  // no `exec -a`, and a shell that failed on it was gone before a look.)
  ASSERT_TRUE(
      WaitFor([&] { return !ProcessesWith(marker, "HEADWAY_URL=" + server.url()).empty(); }));
  ::kill(client, SIGKILL);
  ::waitpid(client, nullptr, 0);
  EXPECT_TRUE(WaitFor([&] { return ProcessesWith(marker, "HEADWAY_URL=" + server.url()).empty(); }))
      << "the command outlived its client";
  EXPECT_TRUE(WaitFor(all_ended));
  EXPECT_EQ(server.State("trainer"), "Running");

  // Once the job has ended there is nothing to enter.
  ASSERT_EQ(Call(server, server.admin_token(), "POST", "/api/v1/jobs/trainer/stop").status, 200);
  ASSERT_TRUE(server.WaitForState("trainer", "Stopped", std::chrono::seconds(60)));
  CommandResult ended = server.Cli({"exec", "trainer", "--", "true"});
  EXPECT_THAT(ended.err, HasSubstr("is not running (Stopped)"));
}

TEST(Exec, SshGivesALoginShellOnATerminal) {
  TestServer server(1);
  server.Submit(R"(name: shell-host
command: ["sleep", "300"]
)");
  ASSERT_TRUE(server.WaitForState("shell-host", "Running"));
  // `script` gives the client a terminal, as a person's would be.
  const std::string command = std::string(HEADWAY_BIN) + " --server " + server.url() + " --token " +
                              server.admin_token() + " ssh shell-host";
  CommandResult session = RunCommand({"/usr/bin/script", "-qec", command, "/dev/null"},
                                     "tty; echo shell-$((6*7)) as $(id -un); exit 3\n");
  EXPECT_EQ(session.exit_code, 3) << session.out << session.err;
  EXPECT_THAT(session.out, HasSubstr("/dev/pts/"));
  EXPECT_THAT(session.out, HasSubstr("shell-42 as nobody"));
  EXPECT_THAT(session.out, Not(HasSubstr("not a tty")));
  EXPECT_TRUE(server.HasEvent("shell-host", "Exec", "ran a login shell in rank 0 on a terminal"));
}

// `headway ssh --stdio` as OpenSSH's ProxyCommand: the real ssh, scp and
// port forwarding (what VS Code's Remote-SSH rides on) with a job as host.
TEST(Exec, SshOverStdioServesOpenSshClientsForwardingAndFileCopies) {
  TestServer server(1);
  const std::string alice = CreateToken(server, "alice", "vision", "member");
  const std::string bob = CreateToken(server, "bob", "nlp", "member");
  const int port = UnusedLoopbackPort();
  const std::string work = MakeTempDir("ssh-job");  // the job's own directory, its account's
  ::chmod(work.c_str(), 0777);
  server.Submit("name: trainer\nteam: vision\nworking_dir: " + work +
                "\ncommand: [\"sh\", \"-c\", \"echo served-inside > index.html && exec "
                "/usr/bin/python3 -m http.server --bind 127.0.0.1 " +
                std::to_string(port) + "\"]\n");
  ASSERT_TRUE(server.WaitForState("trainer", "Running"));
  // Serving: the page is there and the port answers, in the job's own network.
  const std::string page = "http://127.0.0.1:" + std::to_string(port) + "/index.html";
  ASSERT_TRUE(WaitFor([&] {
    return server.Cli({"exec", "trainer", "--", "/usr/bin/curl", "-sf", page}).exit_code == 0;
  }));
  // A service on the host's loopback, which the job's network does not reach.
  int host_port = 0;
  const int host_fd = SilentListener(host_port);
  ASSERT_GE(host_fd, 0);

  const std::string dir = MakeTempDir("ssh-stdio");
  auto config_for = [&](const std::string& token) {
    const std::string path = dir + "/config-" + token.substr(0, 8);
    WriteFile(path,
              "Host *.headway\n"
              "  ProxyCommand " +
                  std::string(HEADWAY_BIN) + " --server " + server.url() + " --token " + token +
                  " ssh --stdio %n\n"
                  "  StrictHostKeyChecking accept-new\n"
                  "  UserKnownHostsFile " +
                  dir +
                  "/known_hosts\n"
                  "  BatchMode yes\n"
                  "  LogLevel ERROR\n");
    return path;
  };
  const std::string config = config_for(alice);
  auto ssh = [&](std::vector<std::string> args, const std::string& input = {}) {
    args.insert(args.begin(), {"/usr/bin/ssh", "-F", config});
    return RunCommand(args, input);
  };

  // A command with its exit status, as the job's account in the rank's environment.
  CommandResult command = ssh({"trainer.headway", "echo rank=$RANK as $(id -un); exit 7"});
  EXPECT_EQ(command.exit_code, 7) << command.err;
  EXPECT_EQ(command.out, "rank=0 as nobody\n");
  // stdin and its end, stderr apart.
  CommandResult piped = ssh({"trainer.headway", "tr a-z A-Z; echo done >&2"}, "hello\n");
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.out, "HELLO\n");
  EXPECT_EQ(piped.err, "done\n");
  // A terminal when asked for one.
  CommandResult terminal = ssh({"-tt", "trainer.headway", "tty"});
  EXPECT_EQ(terminal.exit_code, 0) << terminal.err;
  EXPECT_THAT(terminal.out, HasSubstr("/dev/pts/"));
  // Forwarding to a port inside the job (ssh -W is what -L and -D open).
  CommandResult forwarded = ssh({"-W", "127.0.0.1:" + std::to_string(port), "trainer.headway"},
                                "GET /index.html HTTP/1.0\r\n\r\n");
  EXPECT_THAT(forwarded.out, HasSubstr("200 OK"));
  EXPECT_THAT(forwarded.out, HasSubstr("served-inside"));
  // ...and only inside it: the host's loopback service is out of reach.
  CommandResult to_host =
      ssh({"-W", "127.0.0.1:" + std::to_string(host_port), "trainer.headway"}, "hello\n");
  EXPECT_NE(to_host.exit_code, 0) << to_host.out;
  pollfd pending{host_fd, POLLIN, 0};
  EXPECT_EQ(::poll(&pending, 1, 0), 0) << "the host's service got a connection from the job";
  ::close(host_fd);
  // Files both ways over sftp (scp's protocol), into the job's directory.
  WriteFile(dir + "/local.txt", "copied-in\n");
  CommandResult put =
      RunCommand({"/usr/bin/scp", "-F", config, dir + "/local.txt", "trainer.headway:copied.txt"});
  EXPECT_EQ(put.exit_code, 0) << put.err;
  CommandResult get = RunCommand(
      {"/usr/bin/scp", "-F", config, "trainer.headway:index.html", dir + "/fetched.html"});
  EXPECT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(ReadFile(dir + "/fetched.html"), "served-inside\n");
  EXPECT_EQ(ssh({"trainer.headway", "cat copied.txt"}).out, "copied-in\n");

  // One host key for the server: known after the first connection, the same since.
  EXPECT_EQ(RunCommand({"/usr/bin/ssh-keygen", "-F", "trainer.headway", "-f", dir + "/known_hosts"})
                .exit_code,
            0);

  // Another team's member gets no connection; the refusal says why.
  CommandResult other =
      RunCommand({"/usr/bin/ssh", "-F", config_for(bob), "trainer.headway", "true"});
  EXPECT_EQ(other.exit_code, 255);
  EXPECT_THAT(other.err, HasSubstr("sees team 'nlp' only"));

  // Audited like any command.
  EXPECT_TRUE(server.HasEvent("trainer", "Exec", "user/alice ran an SSH session in rank 0"));
  EXPECT_TRUE(WaitFor([&] { return server.HasEvent("trainer", "ExecEnded", "SSH session"); }));
  EXPECT_FALSE(server.HasEvent("trainer", "Exec", "user/bob"));
}

}  // namespace
}  // namespace headway::testing
