// The command line as a shell user meets it, against a real server:
// global flags anywhere, suggestions, waiting and following across a server
// restart, watching, sorting, top without a terminal, the config file,
// version and completion.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <sstream>
#include <thread>

#include "api/http_client.h"
#include "test_server.h"

namespace headway::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

// `headway ARGS...` with exactly the environment given (the harness's Cli
// always puts --server first and sets a token).
CommandResult Headway(const std::vector<std::string>& env, const std::vector<std::string>& args,
                      const std::string& input = {}) {
  std::vector<std::string> argv = {"/usr/bin/env", "-i", "PATH=/usr/bin:/bin"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.push_back(HEADWAY_BIN);
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, input);
}

// The environment the harness gives its CLI, without the server's URL.
std::vector<std::string> Env(const TestServer& server, const std::string& token) {
  return {"HEADWAY_DATA_DIR=" + server.base_dir() + "/cli",
          "XDG_CONFIG_HOME=" + server.base_dir() + "/cli-config", "HOME=" + server.base_dir(),
          "HEADWAY_API_TOKEN=" + token};
}

TEST(Cli, GlobalFlagsWorkAfterTheSubcommandToo) {
  TestServer server;
  server.Submit("name: anywhere\ncommand: \"true\"\n");
  std::vector<std::string> env = Env(server, "");
  // Before: "The following argument was not expected: --server".
  CommandResult after = Headway(env, {"get", "jobs", "--server", server.url(), "--token",
                                      server.admin_token(), "-o", "name"});
  EXPECT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(after.out, "anywhere\n");
  CommandResult between = Headway(env, {"get", "--server=" + server.url(), "jobs",
                                        "--token=" + server.admin_token(), "-o", "name"});
  EXPECT_EQ(between.exit_code, 0) << between.err;
  EXPECT_EQ(between.out, "anywhere\n");
}

TEST(Cli, AMistypedCommandGetsTheNearestOneSuggested) {
  TestServer server;
  CommandResult typo = server.Cli({"lgos", "x"});
  EXPECT_EQ(typo.exit_code, 2);
  // Before: "A subcommand is required".
  EXPECT_THAT(typo.err, HasSubstr("unknown command 'lgos'"));
  EXPECT_THAT(typo.err, HasSubstr("did you mean 'logs'?"));
  CommandResult nested = server.Cli({"token", "lsit"});
  EXPECT_EQ(nested.exit_code, 2);
  EXPECT_THAT(nested.err, HasSubstr("did you mean 'list'?"));
  CommandResult help = Headway({}, {"server", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--gpus N "));
  EXPECT_THAT(help.out, Not(HasSubstr("INT:INT")));
  EXPECT_THAT(help.out, Not(HasSubstr("FLOAT:")));
}

TEST(Cli, WaitRefusesAStateNoJobCanReachAndListsTheValidOnes) {
  TestServer server;
  server.Submit("name: w\ncommand: \"true\"\n");
  // Before: it waited forever (or until --timeout) for "Bogus".
  CommandResult bogus = server.Cli({"wait", "w", "--until", "Bogus"});
  EXPECT_EQ(bogus.exit_code, 2);
  EXPECT_THAT(bogus.err, HasSubstr("not a job state"));
  EXPECT_THAT(bogus.err,
              HasSubstr("Queued, Starting, Running, Succeeded, Failed, Stopped, Preempted"));
  CommandResult health = server.Cli({"wait", "w", "--until", "health=Sick"});
  EXPECT_EQ(health.exit_code, 2);
  EXPECT_THAT(health.err, HasSubstr("Progressing"));
  // Case does not matter for a real one.
  EXPECT_EQ(server.Cli({"wait", "w", "--until", "succeeded", "--timeout", "20s"}).exit_code, 0);
}

TEST(Cli, WaitRidesOutAServerRestart) {
  TestServer server(/*gpus=*/1);
  server.Submit("name: slow\ncommand: \"sleep 5\"\n");
  ASSERT_TRUE(server.WaitForState("slow", "Running"));
  std::vector<std::string> env = Env(server, server.token());
  std::string url = server.url();
  auto waiting = std::async(std::launch::async, [env, url] {
    return Headway(env,
                   {"--server", url, "wait", "slow", "--until", "Succeeded", "--timeout", "60s"});
  });
  // (It polls, so it is not connected all the time; started is enough: one
  // that meets the server already gone must ride that out too.)
  ASSERT_TRUE(WaitFor([&] { return !ProcessesWith("wait slow --until").empty(); }));
  server.Kill();
  std::this_thread::sleep_for(std::chrono::seconds(2));  // away for a while
  server.Restart();
  CommandResult waited = waiting.get();
  // Before: exit 3 ("cannot reach the Headway server") as soon as it was killed.
  EXPECT_EQ(waited.exit_code, 0) << waited.err;
  EXPECT_EQ(waited.out, "job/slow Succeeded\n");
  EXPECT_THAT(waited.err, HasSubstr("reconnecting"));
}

// A server that goes away between two of `wait`'s looks must be waited for
// like one that was away at the first. A real server cannot be killed at that
// exact moment, so this one is a script on a loopback socket: it answers the
// first request (Running), drops the second without an answer, and answers
// the rest (Succeeded). Before: `wait` asked twice per look, and the second
// request, dropped, ended it with exit 3.
TEST(Cli, WaitRidesOutAServerThatDropsARequestBetweenLooks) {
  int port = 0;
  const int listener = SilentListener(port);
  std::atomic<bool> done{false};
  std::atomic<int> requests{0};
  std::thread scripted([&] {
    while (!done) {
      pollfd p{listener, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0) continue;
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        request.append(buf, static_cast<std::size_t>(n));
      }
      const int n = ++requests;
      if (n != 2) {
        const std::string body = json{
            {"name", "slow"},
            {"state", n == 1 ? "Running" : "Succeeded"},
            {"health", "Unknown"},
            {"progress",
             json::object()}}.dump();
        const std::string response =
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            "Connection: close\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body;
        (void)::send(fd, response.data(), response.size(), MSG_NOSIGNAL);
      }
      ::close(fd);
    }
  });
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  const std::string home = MakeTempDir("headway-cli-wait-");
  CommandResult waited =
      Headway({"HOME=" + home, "XDG_CONFIG_HOME=" + home, "HEADWAY_API_TOKEN=t"},
              {"--server", url, "wait", "slow", "--until", "Succeeded", "--timeout", "60s"});
  done = true;
  scripted.join();
  ::close(listener);
  std::filesystem::remove_all(home);
  EXPECT_EQ(waited.exit_code, 0) << waited.err;
  EXPECT_EQ(waited.out, "job/slow Succeeded\n");
  EXPECT_THAT(waited.err, HasSubstr("reconnecting"));
  EXPECT_GE(requests.load(), 3);
}

TEST(Cli, LogsFollowResumesAcrossAServerRestartWithoutRepeatsOrGaps) {
  TestServer server(/*gpus=*/1);
  server.Submit(
      "name: talker\ncommand: \"for i in $(seq 1 16); do echo line $i; sleep 0.4; done\"\n");
  ASSERT_TRUE(server.WaitForState("talker", "Running"));
  std::vector<std::string> env = Env(server, server.token());
  std::string url = server.url();
  auto following = std::async(std::launch::async, [env, url] {
    return Headway(env, {"--server", url, "logs", "-f", "talker"});
  });
  // Cut once it follows: a client slow to start (sanitizers) must not meet
  // a server already gone.
  ASSERT_TRUE(WaitFor([&] { return SomeoneConnectedTo(url); }));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  server.Kill();
  std::this_thread::sleep_for(std::chrono::seconds(2));  // lines written while it is away
  server.Restart();
  CommandResult followed = following.get();
  EXPECT_EQ(followed.exit_code, 0) << followed.err;
  std::string expected;
  for (int i = 1; i <= 16; ++i) expected += "line " + std::to_string(i) + "\n";
  EXPECT_EQ(followed.out, expected);
  EXPECT_THAT(followed.err, HasSubstr("reconnect"));
}

TEST(Cli, LogsFollowOfManyRanksResumesEachRankWhereItWasCut) {
  TestServer server(/*gpus=*/1);
  server.Submit(
      "name: pair\nresources: {processes_per_node: 2}\n"
      "command: \"for i in $(seq 1 12); do echo line $i; sleep 0.4; done\"\n");
  ASSERT_TRUE(server.WaitForState("pair", "Running"));
  std::vector<std::string> env = Env(server, server.token());
  std::string url = server.url();
  auto following = std::async(std::launch::async, [env, url] {
    return Headway(env, {"--server", url, "logs", "-f", "pair"});
  });
  ASSERT_TRUE(WaitFor([&] { return SomeoneConnectedTo(url); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  server.Kill();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  server.Restart();
  CommandResult followed = following.get();
  EXPECT_EQ(followed.exit_code, 0) << followed.err;
  for (int rank = 0; rank < 2; ++rank) {
    std::string prefix = "[rank " + std::to_string(rank) + "] ";
    std::string mine;
    std::size_t start = 0;
    while (start < followed.out.size()) {
      std::size_t end = followed.out.find('\n', start);
      std::string line = followed.out.substr(start, end - start);
      if (line.rfind(prefix, 0) == 0) mine += line.substr(prefix.size()) + "\n";
      start = end + 1;
    }
    std::string expected;
    for (int i = 1; i <= 12; ++i) expected += "line " + std::to_string(i) + "\n";
    EXPECT_EQ(mine, expected) << "rank " << rank << ":\n" << followed.out;
  }
}

TEST(Cli, GetSortsWatchesAndLeavesOutTheHeader) {
  TestServer server(/*gpus=*/4);
  server.Submit("name: bravo\ncommand: \"sleep 30\"\nresources: {gpus_per_process: 1}\n");
  server.Submit("name: alpha\ncommand: \"sleep 30\"\nresources: {gpus_per_process: 2}\n");
  // charlie ends when the test says, once the watch below is under way.
  const std::string release = server.work_dir() + "/release-charlie";
  server.Submit("name: charlie\ncommand: \"while [ ! -e " + release + " ]; do sleep 0.1; done\"\n");
  ASSERT_TRUE(server.WaitForState("charlie", "Running"));
  EXPECT_EQ(server.Cli({"get", "jobs", "--sort-by", "name", "-o", "name"}).out,
            "alpha\nbravo\ncharlie\n");
  EXPECT_EQ(server.Cli({"get", "jobs", "--sort-by", ".gpus", "-o", "name"}).out,
            "charlie\nbravo\nalpha\n");
  CommandResult bare = server.Cli({"get", "jobs", "--sort-by", "name", "--no-headers"});
  EXPECT_THAT(bare.out, Not(HasSubstr("NAME")));
  EXPECT_EQ(bare.out.substr(0, 5), "alpha");
  CommandResult bad = server.Cli({"get", "jobs", "--sort-by", "colour"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("expected one of name"));
  // -w: the table once, then a line when charlie ends; stopped by SIGINT.
  std::vector<std::string> env = Env(server, server.token());
  std::vector<std::string> argv = {"/usr/bin/timeout", "-s", "INT", "10", "/usr/bin/env", "-i"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.insert(argv.end(), {HEADWAY_BIN, "get", "jobs", "-w", "--server", server.url()});
  std::thread ender([&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    WriteFile(release, "");
  });
  CommandResult watched = RunCommand(argv);
  ender.join();
  EXPECT_EQ(watched.exit_code, 124) << watched.err;  // still watching when interrupted
  EXPECT_EQ(std::count(watched.out.begin(), watched.out.end(), 'N') > 0, true);
  std::size_t header = watched.out.find("NAME");
  EXPECT_EQ(header, 0u);
  EXPECT_EQ(watched.out.find("NAME", header + 1), std::string::npos);
  std::size_t first = watched.out.find("charlie");
  ASSERT_NE(first, std::string::npos);
  std::size_t again = watched.out.find("charlie", first + 1);
  ASSERT_NE(again, std::string::npos) << watched.out;
  EXPECT_THAT(watched.out.substr(again), HasSubstr("Succeeded"));
  server.Cli({"stop", "alpha", "bravo"});
}

TEST(Cli, TablesLineUpWithAndWithoutAProgressBar) {
  TestServer server;
  server.Submit("name: barred\ncommand: \"echo $HEADWAY_TOKEN; sleep 30\"\n");
  server.Submit("name: plain\ncommand: \"sleep 30\"\n");
  std::string token;
  ASSERT_TRUE(WaitFor([&] {
    token = server.Cli({"logs", "barred"}).out;
    return token.size() > 10;
  }));
  token.pop_back();
  api::HttpClient http(server.url(), token);
  auto posted = http.Request("POST", "/api/v1/jobs/barred/progress",
                             json{{"step", 420}, {"total_steps", 1000}}.dump());
  ASSERT_TRUE(posted.ok());
  ASSERT_EQ(posted->status, 202) << posted->body;
  std::string table = server.Cli({"get", "jobs", "--sort-by", "name"}).out;
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < table.size()) {
    std::size_t end = table.find('\n', start);
    lines.push_back(table.substr(start, end - start));
    start = end + 1;
  }
  ASSERT_EQ(lines.size(), 3u) << table;
  // The AGE column starts at the same screen column on every line; the bar
  // (3 bytes a cell) used to push the rows without one 16 columns right.
  auto column = [](const std::string& line, std::size_t byte) {
    std::size_t cols = 0;
    for (std::size_t i = 0; i < byte; ++i) {
      if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80) ++cols;
    }
    return cols;
  };
  std::size_t age = column(lines[0], lines[0].find("AGE"));
  for (std::size_t i = 1; i < lines.size(); ++i) {
    std::size_t last_gap = lines[i].rfind("   ");
    ASSERT_NE(last_gap, std::string::npos);
    std::size_t cell = lines[i].find_first_not_of(' ', last_gap);
    EXPECT_EQ(column(lines[i], cell), age) << table;
  }
  server.Cli({"stop", "barred", "plain"});
}

TEST(Cli, TopWithoutATerminalPrintsOnePlainTable) {
  TestServer server;
  server.Submit("name: topped\ncommand: \"sleep 30\"\n");
  ASSERT_TRUE(server.WaitForState("topped", "Running"));
  // Before: it cleared the screen with escapes and looped until interrupted.
  CommandResult top = server.Cli({"top", "--sort-by", "name"});
  EXPECT_EQ(top.exit_code, 0) << top.err;
  EXPECT_THAT(top.out, HasSubstr("topped"));
  EXPECT_THAT(top.out, HasSubstr("sort: name"));
  EXPECT_EQ(top.out.find('\x1b'), std::string::npos);
  EXPECT_EQ(top.out.find("headway top"), top.out.rfind("headway top"));  // one table
  server.Cli({"stop", "topped"});
}

// `headway top` on a pseudo-terminal of 8 rows and 50 columns.
class TopOnATerminal {
 public:
  TopOnATerminal(const TestServer& server) {
    winsize size{};
    size.ws_row = 8;
    size.ws_col = 50;
    std::string token = "HEADWAY_API_TOKEN=" + server.token();
    std::string config = "XDG_CONFIG_HOME=" + server.base_dir() + "/cli-config";
    std::string url = server.url();
    pid_ = ::forkpty(&fd_, nullptr, nullptr, &size);
    if (pid_ == 0) {
      ::putenv(token.data());
      ::putenv(config.data());
      ::execl(HEADWAY_BIN, "headway", "top", "-n", "0.3", "--server", url.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~TopOnATerminal() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) ::close(fd_);
  }
  // Reads what it drew for `ms` milliseconds.
  void Read(int ms) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) return;
      screen_.append(buf, static_cast<std::size_t>(n));
    }
  }
  void Key(char c) { ASSERT_EQ(::write(fd_, &c, 1), 1); }
  // Its exit code once it ended within 5 s; -1 if it did not.
  int Exit() {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        Read(200);  // what it wrote just before it ended
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      Read(50);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  pid_t pid() const { return pid_; }
  const std::string& screen() const { return screen_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string screen_;
};

TEST(Cli, TopOnATerminalFitsItSortsOnKeysAndQuitsOnQ) {
  TestServer server;
  for (int i = 0; i < 9; ++i) {
    server.Submit("name: job-" + std::to_string(i) + "\ncommand: \"sleep 30\"\n");
  }
  ASSERT_TRUE(server.WaitForState("job-8", "Running"));
  TopOnATerminal top(server);
  // However long a slow machine takes to draw a whole first screen.
  for (int i = 0; i < 20 && top.screen().find("more (a taller terminal") == std::string::npos;
       ++i) {
    top.Read(500);
  }
  top.Read(300);
  // Before: no alternate screen, every row printed (the header scrolled off),
  // lines wrapped at 100 columns, and q did nothing.
  EXPECT_THAT(top.screen(), HasSubstr("\x1b[?1049h"));
  EXPECT_THAT(top.screen(), HasSubstr("NAME"));
  EXPECT_THAT(top.screen(), HasSubstr("more (a taller terminal"));
  std::size_t last_frame = top.screen().rfind("\x1b[H");
  ASSERT_NE(last_frame, std::string::npos);
  std::string frame = top.screen().substr(last_frame + 3);
  int lines = 1;
  std::size_t start = 0;
  while (true) {
    std::size_t end = frame.find('\n', start);
    std::string line = frame.substr(start, end == std::string::npos ? end : end - start);
    // Escapes and "\r" take no columns; everything else here is ASCII but "…".
    std::string shown;
    for (std::size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '\x1b') {
        while (i < line.size() && !std::isalpha(static_cast<unsigned char>(line[i]))) ++i;
        continue;
      }
      if (line[i] != '\r') shown += line[i];
    }
    std::size_t columns = 0;
    for (unsigned char c : shown) columns += (c & 0xC0) != 0x80;
    EXPECT_LE(columns, 50u) << shown;
    if (end == std::string::npos) break;
    ++lines;
    start = end + 1;
  }
  EXPECT_LE(lines, 8);
  top.Key('n');
  top.Read(500);
  EXPECT_THAT(top.screen(), HasSubstr("sort: name (asc)"));
  top.Key('r');
  top.Read(500);
  EXPECT_THAT(top.screen(), HasSubstr("sort: name (desc)"));
  top.Key('q');
  EXPECT_EQ(top.Exit(), 0);
  // The terminal is given back: the cursor shown, the normal screen.
  EXPECT_THAT(top.screen().substr(top.screen().rfind("\x1b[J")), HasSubstr("\x1b[?25h\x1b[?1049l"));
}

TEST(Cli, TopGivesTheTerminalBackOnSigterm) {
  TestServer server;
  TopOnATerminal top(server);
  // However long a slow machine takes to draw the first screen.
  for (int i = 0; i < 20 && top.screen().find("\x1b[?1049h") == std::string::npos; ++i)
    top.Read(500);
  ASSERT_THAT(top.screen(), HasSubstr("\x1b[?1049h"));
  ::kill(top.pid(), SIGTERM);
  EXPECT_EQ(top.Exit(), 0);
  EXPECT_THAT(top.screen(), HasSubstr("\x1b[?1049l"));
}

TEST(Cli, TheConfigFileSuppliesServerAndTokenBelowEnvironmentAndFlags) {
  TestServer server;
  server.Submit("name: configured\ncommand: \"true\"\n");
  std::string dir = server.base_dir() + "/xdg";
  std::filesystem::create_directories(dir + "/headway");
  std::string path = dir + "/headway/config";
  WriteFile(path, "server: " + server.url() + "\ntoken: " + server.admin_token() + "\n");
  ::chmod(path.c_str(), 0600);
  std::vector<std::string> env = {"XDG_CONFIG_HOME=" + dir, "HOME=" + server.base_dir(),
                                  "HEADWAY_DATA_DIR=" + server.base_dir() + "/cli"};
  CommandResult from_file = Headway(env, {"get", "jobs", "-o", "name"});
  EXPECT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_EQ(from_file.out, "configured\n");
  // The environment wins over the file, and a flag over both.
  std::vector<std::string> with_env = env;
  with_env.push_back("HEADWAY_SERVER=http://127.0.0.1:1");
  EXPECT_EQ(Headway(with_env, {"get", "jobs"}).exit_code, 3);
  EXPECT_EQ(Headway(with_env, {"get", "jobs", "-o", "name", "--server", server.url()}).out,
            "configured\n");
  with_env.push_back("HEADWAY_API_TOKEN=hw_not_a_token");
  CommandResult refused = Headway(with_env, {"get", "jobs", "--server", server.url()});
  EXPECT_EQ(refused.exit_code, 1);
  // A refusal says which token was sent and the ways to send another.
  EXPECT_THAT(refused.err, HasSubstr("hint: the token came from $HEADWAY_API_TOKEN; pass --token"));
  EXPECT_THAT(refused.err, HasSubstr("DIR/admin-token (HEADWAY_DATA_DIR=DIR finds it)"));
  CommandResult none = Headway({"HOME=" + server.base_dir(), "XDG_CONFIG_HOME=" + server.base_dir(),
                                "HEADWAY_DATA_DIR=" + server.base_dir() + "/nowhere"},
                               {"get", "jobs", "--server", server.url()});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_THAT(none.err, HasSubstr("hint: no token was found; pass --token"));
  // A file others may read is not used for its token.
  ::chmod(path.c_str(), 0644);
  CommandResult loose = Headway(env, {"get", "jobs"});
  EXPECT_EQ(loose.exit_code, 2);
  EXPECT_THAT(loose.err, HasSubstr("chmod 600"));
  EXPECT_THAT(loose.err, Not(HasSubstr(server.admin_token())));
  // --config names another file.
  std::string other = server.base_dir() + "/other-config";
  WriteFile(other, "server: " + server.url() + "\n");
  ::chmod(other.c_str(), 0600);
  CommandResult named =
      Headway({"HOME=" + server.base_dir()},
              {"get", "jobs", "-o", "name", "--config", other, "--token", server.admin_token()});
  EXPECT_EQ(named.exit_code, 0) << named.err;
  EXPECT_EQ(named.out, "configured\n");
}

TEST(Cli, VersionShowsTheClientsAndTheServers) {
  TestServer server;
  CommandResult version = server.Cli({"version"});
  EXPECT_EQ(version.exit_code, 0) << version.err;
  EXPECT_THAT(version.out, HasSubstr("Client Version: "));
  EXPECT_THAT(version.out, HasSubstr("Server Version: "));
  json both = json::parse(server.Cli({"version", "-o", "json"}).out);
  EXPECT_EQ(both["client"]["version"], both["server"]["version"]);
  EXPECT_EQ(Headway({}, {"version", "--client"}).out,
            "Client Version: " + both["client"]["version"].get<std::string>() + "\n");
  EXPECT_EQ(Headway({}, {"--version"}).out,
            "headway " + both["client"]["version"].get<std::string>() + "\n");
  // Like every endpoint, it wants a token.
  EXPECT_EQ(Call(server, "", "GET", "/api/v1/version").status, 401);
  Answer answer = Call(server, server.admin_token(), "GET", "/api/v1/version");
  EXPECT_EQ(answer.body["version"], both["server"]["version"]);
  // And Argo Server's shape, whose eight fields Hera requires as strings.
  for (const char* field : {"buildDate", "compiler", "gitCommit", "gitTag", "gitTreeState",
                            "goVersion", "platform", "version"}) {
    EXPECT_TRUE(answer.body[field].is_string()) << field << " in " << answer.raw;
  }
}

// `headway exec JOB ls -la`: the parser takes -la for its own; the error
// says to put the command after --.
TEST(Cli, ExecWithTheCommandsOptionsBeforeDashesSaysToUseThem) {
  CommandResult r = Headway({}, {"exec", "some-job", "ls", "-la"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("-la"));
  EXPECT_THAT(r.err, HasSubstr("hint: put the command after --"));
}

// describe of an ended job says how long it ran, when its last report came
// relative to its end (not an age that keeps growing), and its limits as
// durations, not raw seconds.
TEST(Cli, DescribeOfAnEndedJobSaysHowLongItRanAndWhenItLastReported) {
  TestServer server(0);
  server.Submit(
      "name: brief\ntime_limit: 2h\n"
      "command: \"echo 'HEADWAY {\\\"step\\\": 3}'; sleep 1.2\"\n");
  ASSERT_TRUE(server.WaitForState("brief", "Succeeded"));
  const std::string text = server.Cli({"describe", "job", "brief"}).out;
  EXPECT_THAT(text, HasSubstr("Time limit:     2h00m\n"));
  // How long the server took to see it end depends on the machine's load:
  // whole seconds, the run's at least.
  EXPECT_THAT(text, ::testing::ContainsRegex("Duration: +[1-9][0-9]*s\n")) << text;
  EXPECT_THAT(text, ::testing::ContainsRegex("Last report: +[0-9]+s before it ended \\(")) << text;
  EXPECT_THAT(text, Not(::testing::ContainsRegex("Last report:[^\n]* ago")));
  // While it runs: so far, and ago.
  server.Submit(
      "name: longer\ncommand: \"echo 'HEADWAY {\\\"step\\\": 1}'; sleep 300\"\n"
      "termination_grace: 1s\n");
  ASSERT_TRUE(WaitFor([&] { return server.Job("longer")["progress"]["step"] == 1; }));
  const std::string running = server.Cli({"describe", "job", "longer"}).out;
  EXPECT_THAT(running, ::testing::ContainsRegex("Duration: +[0-9]+s so far\n")) << running;
  EXPECT_THAT(running, ::testing::ContainsRegex("Last report: +[0-9]+s ago \\(")) << running;
  server.Cli({"stop", "longer"});
}

// get, describe and delete take every resource by its plural, singular or
// short name, kubectl-style, and print what the resource's own command does.
TEST(Cli, GetDescribeAndDeleteTakeEveryResourceByAnyOfItsNames) {
  TestServer server(0);
  ASSERT_EQ(server
                .Cli({"exp", "create", "-f", "-"},
                     "name: tune\nobjective: {metric: loss, direction: minimize}\n"
                     "algorithm: {name: random}\nmax_trials: 1\n"
                     "parameters:\n  - {name: lr, type: double, min: 0, max: 1}\n"
                     "trial_template:\n  command: [/bin/echo, 'HEADWAY {\"step\": 1, \"metrics\": "
                     "{\"loss\": 1}}']\n")
                .exit_code,
            0);
  ASSERT_TRUE(
      WaitFor([&] { return Get(server, "/api/v1/experiments/tune")["state"] == "Succeeded"; }));
  // The same answer (the table's AGE column moves on between two calls, so
  // the tables are compared up to it).
  const std::string listed = server.Cli({"exp", "get", "-o", "json"}).out;
  ASSERT_THAT(listed, HasSubstr("\"tune\""));
  const std::string table = server.Cli({"exp", "get"}).out;
  const std::string up_to_age = table.substr(0, table.find("tune-0 1") + 8);
  ASSERT_THAT(up_to_age, HasSubstr("tune   Succeeded   random"));
  for (const char* kind : {"experiments", "experiment", "exp"}) {
    EXPECT_EQ(server.Cli({"get", kind, "-o", "json"}).out, listed) << kind;
    EXPECT_THAT(server.Cli({"get", kind}).out, ::testing::StartsWith(up_to_age)) << kind;
  }
  EXPECT_EQ(server.Cli({"get", "exp", "-o", "name"}).out, "tune\n");
  EXPECT_EQ(server.Cli({"describe", "experiment", "tune"}).out,
            server.Cli({"exp", "describe", "tune"}).out);
  CommandResult notebooks = server.Cli({"get", "nb"});
  EXPECT_EQ(notebooks.exit_code, 0) << notebooks.err;
  EXPECT_THAT(notebooks.err, HasSubstr("No notebooks found."));

  const std::string file = MakeTempDir("headway-grammar") + "/weights.bin";
  WriteFile(file, "0123456789");
  ASSERT_EQ(server.Cli({"artifacts", "put", file, "--name", "weights"}).exit_code, 0);
  EXPECT_THAT(server.Cli({"get", "artifacts"}).out, HasSubstr("weights"));
  EXPECT_THAT(server.Cli({"describe", "art", "weights:1"}).out, HasSubstr("weights"));
  EXPECT_EQ(server.Cli({"delete", "artifact", "weights:1"}).exit_code, 0);
  EXPECT_THAT(server.Cli({"get", "art", "-o", "name"}).out, Not(HasSubstr("weights")));

  // What a verb cannot do to a kind is a usage error that says so.
  CommandResult queue = server.Cli({"describe", "queue", "default"});
  EXPECT_EQ(queue.exit_code, 2);
  EXPECT_THAT(queue.err, HasSubstr("queue not in"));
  CommandResult force = server.Cli({"delete", "exp", "tune", "--force"});
  EXPECT_EQ(force.exit_code, 2);
  EXPECT_THAT(force.err, HasSubstr("--force applies to jobs only"));
  EXPECT_EQ(server.Cli({"delete", "experiments", "tune"}).exit_code, 0);
  EXPECT_EQ(server.Cli({"get", "exp", "-o", "name"}).out, "");
}

// Completion offers the names of the kind the command wants (experiments
// after `get exp`, workflows after `wf logs`), asked of the binary that was
// typed, whether it is on PATH or not.
TEST(Cli, CompletionOffersTheNamesOfTheKindTheCommandWants) {
  TestServer server(0);
  server.Submit("name: a-job\ncommand: \"true\"\n");
  ASSERT_EQ(server
                .Cli({"exp", "create", "-f", "-"},
                     "name: a-sweep\nobjective: {metric: loss, direction: minimize}\n"
                     "algorithm: {name: random}\nmax_trials: 1\n"
                     "parameters:\n  - {name: lr, type: double, min: 0, max: 1}\n"
                     "trial_template:\n  command: [\"true\"]\n")
                .exit_code,
            0);
  ASSERT_TRUE(server.WaitForState("a-job", "Succeeded"));
  ASSERT_TRUE(WaitFor([&] { return !server.Job("a-sweep-0").is_null(); }));  // its trial
  const std::string script = MakeTempDir("headway-completion-names") + "/headway.bash";
  WriteFile(script, Headway({}, {"completion", "bash"}).out);
  auto complete = [&](const std::string& words, int cword) {
    return RunCommand({"/usr/bin/env", "HEADWAY_SERVER=" + server.url(),
                       "HEADWAY_API_TOKEN=" + server.admin_token(),
                       "XDG_CONFIG_HOME=" + server.work_dir() + "/no-config", "/bin/bash", "-c",
                       "source " + script + "; COMP_WORDS=(" + HeadwayBinary() + " " + words +
                           "); COMP_CWORD=" + std::to_string(cword) +
                           "; _headway; echo \"${COMPREPLY[@]}\""})
        .out;
  };
  EXPECT_EQ(complete("get exp a", 3), "a-sweep\n");
  EXPECT_EQ(complete("describe job a", 3), "a-job a-sweep-0\n");  // the trial is a job too
  EXPECT_EQ(complete("exp stop a", 3), "a-sweep\n");
  EXPECT_EQ(complete("logs a", 2), "a-job a-sweep-0\n");
  EXPECT_EQ(complete("get ex", 2), "experiments experiment exp\n");
}

TEST(Cli, CompletionScriptsLoadAndCompleteCommands) {
  CommandResult bash = Headway({}, {"completion", "bash"});
  ASSERT_EQ(bash.exit_code, 0);
  std::string script = MakeTempDir("headway-completion") + "/headway.bash";
  WriteFile(script, bash.out);
  CommandResult completed = RunCommand(
      {"/bin/bash", "-c",
       "source " + script +
           "; COMP_WORDS=(headway lo); COMP_CWORD=1; _headway; echo \"${COMPREPLY[@]}\"; "
           "COMP_WORDS=(headway get --sort); COMP_CWORD=2; _headway; echo \"${COMPREPLY[@]}\""});
  EXPECT_EQ(completed.exit_code, 0) << completed.err;
  EXPECT_EQ(completed.out, "logs\n--sort-by\n");
  CommandResult zsh = Headway({}, {"completion", "zsh"});
  EXPECT_EQ(zsh.exit_code, 0);
  EXPECT_THAT(zsh.out, HasSubstr("#compdef headway"));
  EXPECT_EQ(Headway({}, {"completion", "fish"}).exit_code, 2);
  std::filesystem::remove_all(std::filesystem::path(script).parent_path());
}

}  // namespace
}  // namespace headway::testing
