#include "test_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "api/http_client.h"

namespace headway::testing {

namespace fs = std::filesystem;

std::string TestTempRoot() {
  const char* root = std::getenv("HEADWAY_TEST_TMPDIR");
  return root != nullptr && *root != '\0' ? root : "/var/tmp";
}

std::string MakeTempDir(const std::string& prefix) {
  std::string pattern = (fs::path(TestTempRoot()) / (prefix + "-XXXXXX")).string();
  char* dir = ::mkdtemp(pattern.data());
  if (dir == nullptr) throw std::runtime_error("mkdtemp failed");
  return dir;
}

int SilentListener(int& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error("cannot listen on loopback");
  }
  port = ntohs(addr.sin_port);
  return fd;
}

RawConnection::RawConnection(const TestServer& server, const std::string& source) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (!source.empty()) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, source.c_str(), &local.sin_addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) return;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(
      static_cast<std::uint16_t>(std::stoi(server.url().substr(server.url().rfind(':') + 1))));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

void RawConnection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool RawConnection::Send(const std::string& bytes) {
  return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
         static_cast<ssize_t>(bytes.size());
}

std::string RawConnection::Receive(std::chrono::milliseconds timeout, bool* closed) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      if (closed) *closed = true;
      break;
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

bool RawConnection::ReceiveUntil(const std::string& text, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (received_.find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return received_.find(text) != std::string::npos;
    received_.append(buf, static_cast<std::size_t>(n));
  }
  return true;
}

bool RawConnection::ClosedByServer() {
  for (;;) {
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
    received_.append(buf, static_cast<std::size_t>(n));
  }
}

int UnusedLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

namespace {

// /proc/PID/FILE, whole; empty when the process is gone.
std::string ReadProcFile(const fs::path& process, const char* file) {
  std::string text;
  // A process may end between the listing and the read (ESRCH): read
  // with read(2), which reports that as an error instead of throwing.
  int fd = ::open((process / file).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return text;
}

}  // namespace

std::vector<pid_t> ProcessesWith(const std::string& marker, const std::string& environment) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = ReadProcFile(entry.path(), "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(marker) == std::string::npos) continue;
    if (!environment.empty()) {
      const std::string env = '\0' + ReadProcFile(entry.path(), "environ");
      if (env.find('\0' + environment + '\0') == std::string::npos &&
          !env.ends_with('\0' + environment)) {
        continue;
      }
    }
    pids.push_back(std::stoi(name));
  }
  return pids;
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

CommandResult RunCommand(const std::vector<std::string>& argv, const std::string& input) {
  std::string dir = MakeTempDir("headway-cmd");
  std::string in_path = dir + "/in", out_path = dir + "/out", err_path = dir + "/err";
  WriteFile(in_path, input);
  pid_t pid = ::fork();
  if (pid == 0) {
    int in = ::open(in_path.c_str(), O_RDONLY);
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = ReadFile(out_path);
  result.err = ReadFile(err_path);
  fs::remove_all(dir);
  return result;
}

bool SomeoneConnectedTo(const std::string& url) {
  const int port = std::stoi(url.substr(url.rfind(':') + 1));
  char wanted[16];
  std::snprintf(wanted, sizeof wanted, "0100007F:%04X", port);
  std::istringstream table(ReadFile("/proc/net/tcp"));
  std::string line;
  std::getline(table, line);  // the header
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (remote == wanted && state == "01") return true;
  }
  return false;
}

std::string HeadwayBinary() {
  const char* chosen = std::getenv("HEADWAY_BIN");
  return chosen != nullptr && *chosen != '\0' ? chosen : HEADWAY_BIN;
}

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

TestServer::TestServer(int gpus, std::vector<std::string> extra_args)
    : gpus_(gpus), extra_args_(std::move(extra_args)), base_dir_(MakeTempDir("headway-test")) {
  for (std::size_t i = 0; i + 1 < extra_args_.size(); ++i) {
    if (extra_args_[i] == "--tls-cert") ca_file_ = extra_args_[i + 1];
  }
  data_dir_ = base_dir_ + "/data";
  // Jobs may run as another user (nobody, when the tests run as root): they
  // must be able to pass through the base directory and write in work/,
  // while the server's data directory stays its own.
  fs::permissions(base_dir_, fs::perms(0755));
  fs::create_directories(work_dir());
  fs::permissions(work_dir(), fs::perms(0777));
  fs::create_directories(base_dir_ + "/cli");
  log_path_ = base_dir_ + "/server.log";
  Start();
}

TestServer::TestServer(const TestServer& primary, std::vector<std::string> extra_args)
    : gpus_(primary.gpus_),
      extra_args_(std::move(extra_args)),
      base_dir_(primary.base_dir_),
      data_dir_(primary.data_dir_),
      ca_file_(primary.ca_file_),
      owns_base_dir_(false) {
  for (int n = 1;; ++n) {
    log_path_ = base_dir_ + "/server-" + std::to_string(n) + ".log";
    if (!fs::exists(log_path_)) break;
  }
  Start();
}

TestServer::~TestServer() {
  if (pid_ > 0) Terminate();
  if (!owns_base_dir_) return;
  // Jobs outlive the server by design; end any a test left running: each
  // supervisor leads its attempt's process group, and its death takes the
  // attempt's PID namespace with it.
  for (pid_t supervisor : ProcessesWith("shim " + data_dir_ + "/")) ::kill(-supervisor, SIGKILL);
  std::error_code ec;
  fs::remove_all(base_dir_, ec);
}

void TestServer::Start() {
  std::string listen = "127.0.0.1:" + std::to_string(port_);
  std::vector<std::string> argv = {HeadwayBinary(), "server",     "--listen",
                                   listen,          "--data-dir", data_dir_};
  if (gpus_ >= 0) argv.insert(argv.end(), {"--gpus", std::to_string(gpus_)});
  argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
  std::size_t log_offset = ReadFile(log_path_).size();
  log_offset_ = log_offset;
  pid_ = ::fork();
  if (pid_ == 0) {
    int log = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(log, 1);
    ::dup2(log, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  std::regex listening(R"(listening on (https?://127\.0\.0\.1:(\d+)))");
  std::smatch match;
  bool up = WaitFor([&] {
    std::string log = ReadFile(log_path_).substr(log_offset);
    return std::regex_search(log, match, listening);
  });
  if (!up) throw std::runtime_error("server did not start:\n" + ReadFile(log_path_));
  std::string log = ReadFile(log_path_).substr(log_offset);
  std::regex_search(log, match, listening);
  url_ = match[1];
  port_ = std::stoi(match[2]);
  // Written before the server listens, on its first start with authentication.
  admin_token_ = ReadFile(data_dir_ + "/admin-token");
  while (!admin_token_.empty() && (admin_token_.back() == '\n' || admin_token_.back() == '\r')) {
    admin_token_.pop_back();
  }
  if (!token_chosen_) token_ = admin_token_;
}

void TestServer::Restart() { Start(); }

void TestServer::Restart(std::vector<std::string> extra_args) {
  extra_args_ = std::move(extra_args);
  Start();
}

void TestServer::Kill() {
  if (pid_ <= 0) return;  // (kill(-1) would signal every process we may)
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void TestServer::Terminate() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string TestServer::LogSinceStart() const { return ReadFile(log_path_).substr(log_offset_); }

bool TestServer::Running() {
  if (pid_ <= 0) return false;
  if (::waitpid(pid_, nullptr, WNOHANG) != pid_) return true;
  pid_ = -1;
  return false;
}

CommandResult TestServer::Cli(std::vector<std::string> args, const std::string& input) const {
  std::vector<std::string> argv = {"/usr/bin/env",
                                   "HEADWAY_DATA_DIR=" + base_dir_ + "/cli",
                                   "HEADWAY_API_TOKEN=" + token_,
                                   "XDG_CONFIG_HOME=" + base_dir_ + "/cli-config",
                                   HeadwayBinary(),
                                   "--server",
                                   url_};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, input);
}

void TestServer::Submit(const std::string& yaml) const {
  CommandResult r = Cli({"submit", "-f", "-"}, yaml);
  ASSERT_EQ(r.exit_code, 0) << r.err << "\nspec:\n" << yaml;
}

nlohmann::json TestServer::Job(const std::string& name) const {
  api::HttpClient client(url_, token_, ca_file_);
  auto resp = client.Request("GET", "/api/v1/jobs/" + name);
  if (!resp.ok() || resp->status != 200) return nullptr;
  return nlohmann::json::parse(resp->body);
}

std::string TestServer::State(const std::string& name) const {
  auto job = Job(name);
  return job.is_null() ? "<missing>" : job["state"].get<std::string>();
}

bool TestServer::WaitForState(const std::string& name, const std::string& state,
                              std::chrono::milliseconds timeout) const {
  return WaitFor([&] { return State(name) == state; }, timeout);
}

std::vector<nlohmann::json> TestServer::Events(const std::string& name) const {
  api::HttpClient client(url_, token_, ca_file_);
  auto resp = client.Request("GET", "/api/v1/jobs/" + name + "/events");
  if (!resp.ok() || resp->status != 200) return {};
  return nlohmann::json::parse(resp->body)["events"].get<std::vector<nlohmann::json>>();
}

bool TestServer::HasEvent(const std::string& name, const std::string& type,
                          const std::string& text) const {
  for (const auto& e : Events(name)) {
    if (e["type"] == type && e["message"].get<std::string>().find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

std::string TestServer::ServerLog() const { return ReadFile(log_path_); }

Answer Call(const TestServer& server, const std::string& token, const std::string& method,
            const std::string& path, const std::string& body,
            std::vector<std::pair<std::string, std::string>> headers,
            const std::string& content_type) {
  api::HttpClient http(server.url(), token);
  auto resp = http.Request(method, path, body, content_type, headers);
  if (!resp.ok()) return {};
  return {resp->status, nlohmann::json::parse(resp->body, nullptr, false), resp->body, *resp};
}

namespace {

std::string CreatedSecret(const CommandResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string secret = r.out;
  while (!secret.empty() && secret.back() == '\n') secret.pop_back();
  return secret;
}

}  // namespace

std::string CreateToken(const TestServer& server, const std::string& name, const std::string& team,
                        const std::string& role, const std::vector<std::string>& more) {
  std::vector<std::string> args = {"token", "create", name, "--team", team, "--role", role};
  args.insert(args.end(), more.begin(), more.end());
  return CreatedSecret(server.Cli(args));
}

std::string CreateTokenAs(const TestServer& server, const std::string& admin,
                          const std::string& name, const std::string& team,
                          const std::string& role) {
  return CreatedSecret(
      server.Cli({"--token", admin, "token", "create", name, "--team", team, "--role", role}));
}

int Post(const TestServer& server, const std::string& path, const std::string& token,
         const std::string& body, std::string* response) {
  api::HttpClient http(server.url(), token);
  auto resp = http.Request("POST", path, body);
  if (!resp.ok()) return -1;
  if (response) *response = resp->body;
  return resp->status;
}

nlohmann::json Get(const TestServer& server, const std::string& path) {
  api::HttpClient http = server.Http();
  auto resp = http.Request("GET", path);
  if (!resp.ok()) return nullptr;
  return nlohmann::json::parse(resp->body, nullptr, false);
}

}  // namespace headway::testing
