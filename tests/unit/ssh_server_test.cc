// The SSH server of `headway ssh --stdio` (src/exec/ssh_server.h), served in
// a forked child over a socket pair and driven by libssh's client, which
// (unlike OpenSSH's, in tests/integration/exec_test.cc) lets the test choose
// when each message goes out. Milliseconds, no server and no job.
#include "exec/ssh_server.h"

#include <gtest/gtest.h>
#include <libssh/libssh.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace headway {
namespace {

struct CommandOutput {
  std::string out;
  int exit_status = -1;
};

// Runs `command` on a channel of its own, reads it to its end and closes the
// channel after the server has closed its side.
CommandOutput RunOnChannel(ssh_session client, const char* command) {
  CommandOutput result;
  ssh_channel channel = ssh_channel_new(client);
  if (channel == nullptr || ssh_channel_open_session(channel) != SSH_OK ||
      ssh_channel_request_exec(channel, command) != SSH_OK) {
    ADD_FAILURE() << "cannot run " << command << ": " << ssh_get_error(client);
    if (channel != nullptr) ssh_channel_free(channel);
    return result;
  }
  char buffer[4096];
  int n = 0;
  while ((n = ssh_channel_read(channel, buffer, sizeof buffer, 0)) > 0)
    result.out.append(buffer, n);
  result.exit_status = ssh_channel_get_exit_status(channel);
  // The server sends its close with the exit status; ours answers it.
  ssh_channel_close(channel);
  ssh_channel_free(channel);
  return result;
}

// A channel's close that the client sends only after the server has closed
// and let go of the channel still reaches libssh, which keeps the channel
// until then and runs its callbacks: the server must have taken them off.
TEST(SshServer, AClientThatClosesItsChannelsAfterTheServerKeepsTheConnection) {
  char dir_template[] = "/tmp/ssh-server-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  Result<std::string> key = LoadOrCreateSshHostKey(dir + "/host_key");
  ASSERT_TRUE(key.ok()) << key.status().message();

  int sockets[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets), 0);
  const pid_t server = ::fork();
  ASSERT_GE(server, 0);
  if (server == 0) {
    ::close(sockets[0]);
    SshServeOptions options;
    options.host_key = *key;
    options.env = {"PATH=/usr/bin:/bin"};
    options.cwd = dir;
    ::_exit(ServeSshConnection(sockets[1], sockets[1], options));
  }
  ::close(sockets[1]);

  ssh_session client = ssh_new();
  socket_t fd = sockets[0];
  int no = 0;
  ssh_options_set(client, SSH_OPTIONS_FD, &fd);
  ssh_options_set(client, SSH_OPTIONS_HOST, "trainer.headway");
  ssh_options_set(client, SSH_OPTIONS_USER, "someone");
  ssh_options_set(client, SSH_OPTIONS_PROCESS_CONFIG, &no);  // not this machine's ~/.ssh/config
  ASSERT_EQ(ssh_connect(client), SSH_OK) << ssh_get_error(client);
  ASSERT_EQ(ssh_userauth_none(client, nullptr), SSH_AUTH_SUCCESS) << ssh_get_error(client);

  CommandOutput first = RunOnChannel(client, "echo first; exit 3");
  EXPECT_EQ(first.out, "first\n");
  EXPECT_EQ(first.exit_status, 3);
  // The connection serves on after the late close: a second command runs.
  CommandOutput second = RunOnChannel(client, "pwd");
  EXPECT_EQ(second.out, dir + "\n");
  EXPECT_EQ(second.exit_status, 0);

  ssh_disconnect(client);
  ssh_free(client);
  ::close(sockets[0]);  // libssh leaves a descriptor it was given open
  int status = 0;
  ASSERT_EQ(::waitpid(server, &status, 0), server);
  // 0: an authenticated connection that ended as the client left.
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "server status " << status;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace headway
