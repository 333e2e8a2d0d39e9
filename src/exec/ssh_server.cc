#include "exec/ssh_server.h"

#include <fcntl.h>
#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <libssh/server.h>
#include <netdb.h>
#include <poll.h>
#include <pty.h>
#include <pwd.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utmp.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <list>
#include <memory>
#include <optional>
#include <sstream>

extern char** environ;

namespace headway {
namespace {

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

bool WriteAll(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// Copies `in` to the socket and the socket to `out` until the socket ends:
// libssh serves one socket, and `headway ssh --stdio` arrives on two pipes.
[[noreturn]] void Relay(int in, int out, int socket) {
  char buffer[64 * 1024];
  bool reading_in = true;
  for (;;) {
    pollfd fds[2] = {{socket, POLLIN, 0}, {reading_in ? in : -1, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      ::_exit(1);
    }
    if (fds[0].revents != 0) {
      ssize_t n = ::read(socket, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || !WriteAll(out, buffer, static_cast<std::size_t>(n))) ::_exit(0);
    }
    if (fds[1].revents != 0) {
      ssize_t n = ::read(in, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || !WriteAll(socket, buffer, static_cast<std::size_t>(n))) {
        ::shutdown(socket, SHUT_WR);  // the client is gone: the server sees the end
        reading_in = false;
      }
    }
  }
}

struct Server;

// One channel: a session (a command, a shell or sftp) or a forwarded connection.
struct Channel {
  Server* server = nullptr;
  ssh_channel channel = nullptr;
  bool forward = false;
  // The command's (or forwarded socket's) descriptors; with a terminal,
  // input and output are both the pty's master.
  int input = -1, output = -1, error = -1;
  bool output_ended = false, error_ended = false;
  bool output_watched = false, error_watched = false;
  bool terminal = false;  // input is the pty's master
  int pty_slave = -1;
  winsize size{};
  std::vector<std::string> env;  // the client's accepted variables
  pid_t pid = -1;
  std::optional<int> wait_status;
  bool client_closed = false;
  bool finished = false;  // its end was sent; freed once the command is reaped
  ssh_channel_callbacks_struct callbacks{};
};

struct Server {
  const SshServeOptions* options = nullptr;
  ssh_session session = nullptr;
  ssh_event event = nullptr;
  bool authenticated = false;
  std::list<std::unique_ptr<Channel>> channels;
};

void Watch(Channel& c, int fd, bool& watched);

bool AcceptedVariable(std::string_view name) {
  return name == "TERM" || name == "LANG" || name.starts_with("LC_") || name == "COLORTERM";
}

// Starts `argv` (the shell's `-c COMMAND` or `-l` when empty) for a session.
int Start(Channel& c, std::vector<std::string> argv) {
  if (c.pid > 0) return SSH_ERROR;  // one command per session
  const SshServeOptions& options = *c.server->options;
  if (argv.empty()) argv = {options.shell, "-l"};
  std::vector<std::string> env = options.env;
  for (const std::string& e : c.env) {
    const std::string name = e.substr(0, e.find('='));
    std::erase_if(env, [&](const std::string& have) { return have.rfind(name + "=", 0) == 0; });
    env.push_back(e);
  }
  std::vector<char*> args, envp;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string cwd = options.cwd;

  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  const bool terminal = c.pty_slave >= 0;
  if (!terminal && (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 ||
                    ::pipe2(err, O_CLOEXEC) != 0)) {
    for (int* p : {in, out, err}) CloseFd(p[0]), CloseFd(p[1]);
    return SSH_ERROR;
  }
  pid_t pid = ::fork();
  if (pid < 0) return SSH_ERROR;
  if (pid == 0) {
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGHUP, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::prctl(PR_SET_PDEATHSIG, SIGHUP);  // should the server die first, as if hung up on
    if (terminal) {
      if (::login_tty(c.pty_slave) != 0) ::_exit(126);  // a session with the terminal as its own
    } else {
      ::setsid();  // a process group of its own, to be hung up on as a whole
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
    }
    if (::chdir(cwd.c_str()) != 0 && ::chdir("/") != 0) ::_exit(126);
    environ = envp.data();
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "%s: %s\n", args[0], std::strerror(errno));
    ::_exit(errno == ENOENT ? 127 : 126);
  }
  c.pid = pid;
  if (terminal) {
    CloseFd(c.pty_slave);
    c.output = ::fcntl(c.input, F_DUPFD_CLOEXEC, 0);
    Watch(c, c.output, c.output_watched);
  } else {
    CloseFd(in[0]);
    CloseFd(out[1]);
    CloseFd(err[1]);
    c.input = in[1];
    c.output = out[0];
    c.error = err[0];
    Watch(c, c.output, c.output_watched);
    Watch(c, c.error, c.error_watched);
  }
  return SSH_OK;
}

// What the command or the forwarded socket writes goes to the client.
int OnReadable(socket_t fd, int revents, void* userdata) {
  (void)revents;
  auto& c = *static_cast<Channel*>(userdata);
  const bool is_error = fd == c.error;
  bool& ended = is_error ? c.error_ended : c.output_ended;
  if (ended) return 0;
  char buffer[32 * 1024];
  ssize_t n = ::read(fd, buffer, sizeof buffer);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
  if (n <= 0) {  // the end, or EIO: a terminal whose last process closed it
    ended = true;
    return 0;
  }
  if (c.client_closed) return 0;
  if (is_error) {
    ssh_channel_write_stderr(c.channel, buffer, static_cast<std::uint32_t>(n));
  } else {
    ssh_channel_write(c.channel, buffer, static_cast<std::uint32_t>(n));
  }
  return 0;
}

void Watch(Channel& c, int fd, bool& watched) {
  watched = ssh_event_add_fd(c.server->event, fd, POLLIN, OnReadable, &c) == SSH_OK;
}

// What the client sends goes to the command's input or the forwarded socket.
int OnData(ssh_session, ssh_channel, void* data, std::uint32_t len, int is_stderr, void* userdata) {
  auto& c = *static_cast<Channel*>(userdata);
  if (!is_stderr && c.input >= 0 && !WriteAll(c.input, static_cast<const char*>(data), len)) {
    if (c.forward) {
      ::shutdown(c.input, SHUT_WR);
    } else if (!c.terminal) {
      CloseFd(c.input);
    }
  }
  return static_cast<int>(len);
}

void OnEof(ssh_session, ssh_channel, void* userdata) {
  auto& c = *static_cast<Channel*>(userdata);
  if (c.forward) {
    ::shutdown(c.input, SHUT_WR);
  } else if (!c.terminal) {
    CloseFd(c.input);  // the command reads its end (a terminal has none to send)
  }
}

void OnClose(ssh_session, ssh_channel, void* userdata) {
  static_cast<Channel*>(userdata)->client_closed = true;
}

int OnPty(ssh_session, ssh_channel, const char* term, int columns, int rows, int width, int height,
          void* userdata) {
  auto& c = *static_cast<Channel*>(userdata);
  if (c.pid > 0 || c.pty_slave >= 0) return SSH_ERROR;
  c.size.ws_col = static_cast<unsigned short>(columns);
  c.size.ws_row = static_cast<unsigned short>(rows);
  c.size.ws_xpixel = static_cast<unsigned short>(width);
  c.size.ws_ypixel = static_cast<unsigned short>(height);
  int master = -1, slave = -1;
  if (::openpty(&master, &slave, nullptr, nullptr, &c.size) != 0) return SSH_ERROR;
  ::fcntl(master, F_SETFD, FD_CLOEXEC);
  ::fcntl(slave, F_SETFD, FD_CLOEXEC);
  c.input = master;
  c.terminal = true;
  c.pty_slave = slave;
  c.env.push_back(std::string("TERM=") + (term && *term ? term : "xterm"));
  return SSH_OK;
}

int OnResize(ssh_session, ssh_channel, int columns, int rows, int width, int height,
             void* userdata) {
  auto& c = *static_cast<Channel*>(userdata);
  if (!c.terminal) return SSH_ERROR;
  c.size.ws_col = static_cast<unsigned short>(columns);
  c.size.ws_row = static_cast<unsigned short>(rows);
  c.size.ws_xpixel = static_cast<unsigned short>(width);
  c.size.ws_ypixel = static_cast<unsigned short>(height);
  return ::ioctl(c.input, TIOCSWINSZ, &c.size) == 0 ? SSH_OK : SSH_ERROR;
}

int OnEnv(ssh_session, ssh_channel, const char* name, const char* value, void* userdata) {
  auto& c = *static_cast<Channel*>(userdata);
  if (!AcceptedVariable(name) || c.pid > 0) return SSH_ERROR;
  c.env.push_back(std::string(name) + "=" + value);
  return SSH_OK;
}

int OnShell(ssh_session, ssh_channel, void* userdata) {
  return Start(*static_cast<Channel*>(userdata), {});
}

int OnExec(ssh_session, ssh_channel, const char* command, void* userdata) {
  auto& c = *static_cast<Channel*>(userdata);
  return Start(c, {c.server->options->shell, "-c", command});
}

int OnSubsystem(ssh_session, ssh_channel, const char* subsystem, void* userdata) {
  auto& c = *static_cast<Channel*>(userdata);
  if (std::string_view(subsystem) != "sftp") return SSH_ERROR;
  for (const std::string& path : c.server->options->sftp_servers) {
    if (::access(path.c_str(), X_OK) == 0) return Start(c, {path});
  }
  return SSH_ERROR;
}

Channel& AddChannel(Server& server, ssh_channel channel, bool forward) {
  auto c = std::make_unique<Channel>();
  c->server = &server;
  c->channel = channel;
  c->forward = forward;
  ssh_channel_callbacks_struct& cb = c->callbacks;
  cb.userdata = c.get();
  cb.channel_data_function = OnData;
  cb.channel_eof_function = OnEof;
  cb.channel_close_function = OnClose;
  if (!forward) {
    cb.channel_pty_request_function = OnPty;
    cb.channel_pty_window_change_function = OnResize;
    cb.channel_env_request_function = OnEnv;
    cb.channel_shell_request_function = OnShell;
    cb.channel_exec_request_function = OnExec;
    cb.channel_subsystem_request_function = OnSubsystem;
  }
  ssh_callbacks_init(&cb);
  ssh_set_channel_callbacks(channel, &cb);
  server.channels.push_back(std::move(c));
  return *server.channels.back();
}

int OnAuthNone(ssh_session, const char*, void* userdata) {
  static_cast<Server*>(userdata)->authenticated = true;
  return SSH_AUTH_SUCCESS;
}

ssh_channel OnSessionOpen(ssh_session session, void* userdata) {
  auto& server = *static_cast<Server*>(userdata);
  if (!server.authenticated) return nullptr;
  ssh_channel channel = ssh_channel_new(session);
  if (channel != nullptr) AddChannel(server, channel, false);
  return channel;
}

constexpr int kConnectTimeoutMs = 10'000;

// A connection to HOST:PORT as the job would open it.
int Connect(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    // Not blocking: an address that never answers holds this connection's
    // other channels for at most kConnectTimeoutMs, not for TCP's minutes.
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      pollfd wait{fd, POLLOUT, 0};
      int error = 0;
      socklen_t length = sizeof error;
      if (errno != EINPROGRESS || ::poll(&wait, 1, kConnectTimeoutMs) != 1 ||
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
        CloseFd(fd);
        continue;
      }
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  }
  ::freeaddrinfo(found);
  return fd;
}

// Channel opens other than sessions: local port forwarding (ssh -L, -D, -W).
int OnMessage(ssh_session, ssh_message message, void* userdata) {
  auto& server = *static_cast<Server*>(userdata);
  if (!server.authenticated || ssh_message_type(message) != SSH_REQUEST_CHANNEL_OPEN ||
      ssh_message_subtype(message) != SSH_CHANNEL_DIRECT_TCPIP) {
    return 1;  // refused
  }
  const char* host = ssh_message_channel_request_open_destination(message);
  int fd = Connect(host ? host : "", ssh_message_channel_request_open_destination_port(message));
  if (fd < 0) return 1;
  ssh_channel channel = ssh_message_channel_request_open_reply_accept(message);
  if (channel == nullptr) {
    ::close(fd);
    return 0;
  }
  Channel& c = AddChannel(server, channel, true);
  c.input = fd;
  c.output = fd;
  Watch(c, fd, c.output_watched);
  return 0;
}

void Unwatch(Channel& c, int fd, bool& watched) {
  if (watched) ssh_event_remove_fd(c.server->event, fd);
  watched = false;
}

// Ends what is over: a command that exited and said all it had, a forwarded
// connection its far end closed, a channel the client closed.
void Tidy(Server& server) {
  for (auto it = server.channels.begin(); it != server.channels.end();) {
    Channel& c = **it;
    if (c.pid > 0 && !c.wait_status) {
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) == c.pid) c.wait_status = status;
    }
    // A descriptor at its end leaves the poll, where it would be readable forever.
    if (c.output_ended) Unwatch(c, c.output, c.output_watched);
    if (c.error_ended) Unwatch(c, c.error, c.error_watched);
    if (!c.finished && !c.client_closed) {
      bool over = false;
      if (c.forward) {
        over = c.output_ended;
      } else if (c.wait_status && c.output_ended && (c.error < 0 || c.error_ended)) {
        const int status = *c.wait_status;
        if (WIFSIGNALED(status)) {
          const char* name = sigabbrev_np(WTERMSIG(status));
          ssh_channel_request_send_exit_signal(c.channel, name ? name : "KILL", 0, "", "");
        } else {
          ssh_channel_request_send_exit_status(c.channel, WEXITSTATUS(status));
        }
        over = true;
      }
      if (over) {
        ssh_channel_send_eof(c.channel);
        ssh_channel_close(c.channel);
        c.finished = true;
      }
    }
    if (c.client_closed && c.pid > 0 && !c.wait_status) {
      ::kill(-c.pid, SIGHUP);  // as sshd hangs up on a session's command
    }
    const bool reaped = c.pid <= 0 || c.wait_status.has_value();
    if ((c.finished || c.client_closed) && reaped) {
      Unwatch(c, c.output, c.output_watched);
      Unwatch(c, c.error, c.error_watched);
      for (int* fd : {&c.input, &c.output, &c.error, &c.pty_slave}) {
        for (int* other : {&c.input, &c.output, &c.error, &c.pty_slave}) {
          if (other != fd && *other == *fd) *other = -1;  // the same descriptor, closed once
        }
        CloseFd(*fd);
      }
      // libssh keeps a channel the client has not closed yet until its close
      // arrives, and runs the channel's callbacks for it then: they must not
      // reach this Channel, freed below.
      ssh_remove_channel_callbacks(c.channel, &c.callbacks);
      ssh_channel_free(c.channel);
      it = server.channels.erase(it);
      continue;
    }
    ++it;
  }
}

// A hang-up or stop of the server (its client went away): the connection ends.
volatile sig_atomic_t g_stop = 0;
void Stop(int) { g_stop = 1; }

int Fail(const std::string& what, ssh_session session = nullptr) {
  std::fprintf(stderr, "headway ssh: %s%s%s\n", what.c_str(), session ? ": " : "",
               session ? ssh_get_error(session) : "");
  return 255;
}

}  // namespace

int ServeSshConnection(int in, int out, const SshServeOptions& options) {
  ::signal(SIGPIPE, SIG_IGN);
  struct sigaction stop {};
  stop.sa_handler = Stop;  // no SA_RESTART: the poll returns at once
  ::sigaction(SIGHUP, &stop, nullptr);
  ::sigaction(SIGTERM, &stop, nullptr);
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return Fail("socketpair");
  pid_t relay = ::fork();
  if (relay < 0) return Fail("fork");
  if (relay == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::close(pair[0]);
    Relay(in, out, pair[1]);
  }
  ::close(pair[1]);
  if (in > 2) ::close(in);
  if (out > 2) ::close(out);

  ssh_key key = nullptr;
  if (ssh_pki_import_privkey_base64(options.host_key.c_str(), nullptr, nullptr, nullptr, &key) !=
      SSH_OK) {
    return Fail("the host key is not readable");
  }
  ssh_bind bind = ssh_bind_new();
  ssh_session session = ssh_new();
  ssh_bind_options_set(bind, SSH_BIND_OPTIONS_IMPORT_KEY, key);  // the bind owns it now
  Server server;
  server.options = &options;
  server.session = session;
  int code = 255;
  // Lives as long as the session: libssh keeps a pointer to it until ssh_free.
  ssh_server_callbacks_struct callbacks{};
  if (ssh_bind_accept_fd(bind, session, pair[0]) != SSH_OK) {
    code = Fail("cannot start the session", session);
  } else {
    callbacks.userdata = &server;
    callbacks.auth_none_function = OnAuthNone;
    callbacks.channel_open_request_session_function = OnSessionOpen;
    ssh_callbacks_init(&callbacks);
    ssh_set_server_callbacks(session, &callbacks);
    ssh_set_message_callback(session, OnMessage, &server);
    ssh_set_auth_methods(session, SSH_AUTH_METHOD_NONE);
    if (ssh_handle_key_exchange(session) != SSH_OK) {
      code = Fail("key exchange failed", session);
    } else {
      server.event = ssh_event_new();
      ssh_event_add_session(server.event, session);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while ((ssh_get_status(session) & (SSH_CLOSED | SSH_CLOSED_ERROR)) == 0 && g_stop == 0) {
        if (!server.authenticated && std::chrono::steady_clock::now() > deadline) break;
        if (ssh_event_dopoll(server.event, 100) == SSH_ERROR &&
            (ssh_get_status(session) & (SSH_CLOSED | SSH_CLOSED_ERROR)) != 0) {
          break;
        }
        Tidy(server);
      }
      code = server.authenticated ? 0 : Fail("the client never authenticated");
      // The connection is gone: what it started is hung up on, as sshd does.
      for (auto& c : server.channels) {
        if (c->pid > 0 && !c->wait_status) ::kill(-c->pid, SIGHUP);
        for (int fd : {c->output, c->error}) {
          if (fd >= 0) ssh_event_remove_fd(server.event, fd);
        }
      }
      ssh_event_remove_session(server.event, session);
      ssh_event_free(server.event);
    }
  }
  ssh_disconnect(session);
  ssh_free(session);
  ssh_bind_free(bind);
  ::close(pair[0]);
  ::waitpid(relay, nullptr, 0);
  return code;
}

std::string SessionShell(const std::string& account_shell, const std::vector<std::string>& env) {
  std::string shell = account_shell;
  for (const std::string& e : env) {
    if (shell.empty() && e.rfind("SHELL=", 0) == 0) shell = e.substr(6);
  }
  if (shell.empty() || shell.find("nologin") != std::string::npos ||
      shell.find("false") != std::string::npos || ::access(shell.c_str(), X_OK) != 0) {
    shell = ::access("/bin/bash", X_OK) == 0 ? "/bin/bash" : "/bin/sh";
  }
  return shell;
}

int ServeSshFromEnvironment() {
  const char* key = std::getenv("HEADWAY_SSH_HOST_KEY");
  if (key == nullptr || *key == '\0') return Fail("no host key in HEADWAY_SSH_HOST_KEY");
  SshServeOptions options;
  options.host_key = key;
  ::unsetenv("HEADWAY_SSH_HOST_KEY");
  for (char** e = environ; *e != nullptr; ++e) options.env.emplace_back(*e);
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) != nullptr) options.cwd = cwd;
  const passwd* account = ::getpwuid(::getuid());
  options.shell = SessionShell(account ? account->pw_shell : "", options.env);
  return ServeSshConnection(0, 1, options);
}

Result<std::string> LoadOrCreateSshHostKey(const std::string& path) {
  std::ifstream existing(path);
  if (existing) {
    std::stringstream text;
    text << existing.rdbuf();
    return text.str();
  }
  ssh_key key = nullptr;
  if (ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &key) != SSH_OK) {
    return Internal("cannot make an SSH host key");
  }
  char* base64 = nullptr;
  int exported = ssh_pki_export_privkey_base64(key, nullptr, nullptr, nullptr, &base64);
  ssh_key_free(key);
  if (exported != SSH_OK || base64 == nullptr) return Internal("cannot write an SSH host key");
  std::string text = base64;
  ssh_string_free_char(base64);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) return LoadOrCreateSshHostKey(path);  // another server made it
  if (fd < 0 || !WriteAll(fd, text.data(), text.size())) {
    if (fd >= 0) ::close(fd);
    return Unavailable("cannot write the SSH host key " + path + ": " + std::strerror(errno));
  }
  ::close(fd);
  return text;
}

}  // namespace headway
