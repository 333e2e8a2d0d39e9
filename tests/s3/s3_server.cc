#include "s3_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#ifndef HEADWAY_S3_LAUNCHER
#error "HEADWAY_S3_LAUNCHER must name tests/s3/swift_s3"
#endif

namespace headway::testing {

namespace fs = std::filesystem;

namespace {

int FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string Tail(const std::string& text, size_t bytes) {
  return text.size() <= bytes ? text : "..." + text.substr(text.size() - bytes);
}

bool WaitExit(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || r < 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

S3TestServer::S3TestServer(bool tls) {
  // A port found free can be taken by another test before Swift binds it: try anew.
  for (int attempt = 0; attempt < 3; ++attempt) {
    error_ = Start(tls);
    if (error_.find("Could not bind") == std::string::npos) break;
    std::error_code ec;
    fs::remove_all(dir_, ec);
    dir_.clear();
  }
  if (!error_.empty()) error_ = "S3 test server (OpenStack Swift + s3api) did not start: " + error_;
}

std::string S3TestServer::Start(bool tls) {
  const std::string launcher = HEADWAY_S3_LAUNCHER;
  if (::access("/usr/bin/swift-proxy-server", X_OK) != 0 ||
      ::access("/usr/bin/swift-object-server", X_OK) != 0) {
    return "OpenStack Swift is not installed: apt-get install swift-proxy swift-account "
           "swift-container swift-object (scripts/setup --test installs it)";
  }
  std::string pattern = (fs::temp_directory_path() / "headway-s3-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) return "mkdtemp failed";
  dir_ = pattern;
  const std::string base = dir_ + "/swift", log = dir_ + "/launcher.log";
  int port = FreeLoopbackPort();
  if (port < 0) return "no free loopback port";

  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return "pipe failed";
  auto started = std::chrono::steady_clock::now();
  pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) return "fork failed";
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
    int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, 0);
    ::dup2(out[1], 1);
    ::dup2(err, 2);
    std::string port_arg = std::to_string(port);
    const char* argv[] = {launcher.c_str(), "--base-dir", base.c_str(), "--port",
                          port_arg.c_str(), "--timeout",  "80",         tls ? "--tls" : nullptr,
                          nullptr};
    ::execv(argv[0], const_cast<char* const*>(argv));
    ::_exit(127);
  }
  ::close(out[1]);

  // One JSON line on stdout means up; EOF means the launcher gave up.
  std::string line;
  auto deadline = started + std::chrono::seconds(90);
  while (line.find('\n') == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::close(out[0]);
      return "no answer within 90 s; launcher log:\n" + Logs();
    }
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) {
      ::close(out[0]);
      WaitExit(pid_, std::chrono::seconds(5));
      pid_ = -1;
      return "the launcher exited:\n" + Logs();
    }
    line.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);  // the launcher writes nothing more to stdout
  startup_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  nlohmann::json info = nlohmann::json::parse(line.substr(0, line.find('\n')), nullptr, false);
  if (!info.is_object() || !info.contains("endpoint") || !info.contains("secret_key")) {
    return "the launcher printed no JSON line: " + line;
  }
  endpoint_ = info.value("endpoint", "");
  region_ = info.value("region", "");
  access_key_ = info.value("access_key", "");
  secret_key_ = info.value("secret_key", "");
  bucket_hint_ = info.value("bucket_hint", "");
  ca_file_ = info.value("ca_file", "");
  return "";
}

std::string S3TestServer::Logs() const {
  if (dir_.empty()) return "";
  std::string text = Tail(Slurp(dir_ + "/launcher.log"), 4000);
  std::string swift_log = Slurp(dir_ + "/swift/swift.log");
  if (!swift_log.empty()) text += "\n--- swift.log:\n" + Tail(swift_log, 4000);
  return text;
}

S3TestServer::~S3TestServer() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    if (!WaitExit(pid_, std::chrono::seconds(15))) {
      ::kill(pid_, SIGKILL);
      WaitExit(pid_, std::chrono::seconds(5));
    }
  }
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

}  // namespace headway::testing
