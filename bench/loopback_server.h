// What the benchmarks that drive a real `headway server` share: starting it
// on a free loopback port with its own data directory, a keep-alive HTTP
// connection, idle jobs whose report tokens they use, and percentiles.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace headway::bench {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// One keep-alive connection; Request throws on transport errors.
struct Connection {
  net::io_context io;
  beast::tcp_stream stream{io};
  std::string host = "127.0.0.1";
  // Per request, when set: a server that never answers fails it (throws)
  // instead of blocking the caller forever.
  std::chrono::milliseconds timeout{0};
  // Sent as Accept-Encoding when set (the body then comes back as sent).
  std::string accept_encoding;

  explicit Connection(int port) : port_(port) { Connect(); }
  std::pair<int, std::string> Request(http::verb verb, const std::string& target,
                                      const std::string& body, const std::string& token = "") {
    // The server ends the connection after a streamed answer (logs) or an
    // error, and says so (Connection: close): the next request reconnects.
    if (closed_) {
      beast::error_code ignored;
      stream.socket().close(ignored);
      Connect();
    }
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, host);
    req.keep_alive(true);
    if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
    if (!accept_encoding.empty()) req.set(http::field::accept_encoding, accept_encoding);
    if (!body.empty()) req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    if (timeout.count() > 0) stream.expires_after(timeout);
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    http::read(stream, buffer, parser);
    if (timeout.count() > 0) stream.expires_never();
    closed_ = !parser.get().keep_alive();
    return {parser.get().result_int(), parser.get().body()};
  }

 private:
  void Connect() {
    net::ip::tcp::resolver resolver(io);
    stream.connect(resolver.resolve(host, std::to_string(port_)));
    closed_ = false;
  }
  int port_;
  bool closed_ = false;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A process's user + system CPU seconds, from /proc/PID/stat.
inline double CpuSeconds(pid_t pid) {
  std::string stat = ReadAll("/proc/" + std::to_string(pid) + "/stat");
  std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 2));
  std::vector<std::string> f;
  for (std::string s; fields >> s && f.size() < 13;) f.push_back(s);
  if (f.size() < 13) return 0;
  // Fields 14 and 15 of proc(5) (utime, stime), counted from field 3 (state).
  return static_cast<double>(std::stoll(f[11]) + std::stoll(f[12])) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU time of `pid`'s threads to the nanosecond (/proc/PID/task/*/schedstat),
// where /proc/PID/stat counts whole clock ticks: a process that wakes for a
// few microseconds every few seconds is charged 0 or 10 ms per tick it
// happens to cross. Threads that have exited are not counted (stat keeps
// theirs), so this suits single-threaded processes such as the supervisors.
// Falls back to CpuSeconds.
inline double PreciseCpuSeconds(pid_t pid) {
  long long total_ns = 0;
  bool any = false;
  std::error_code ec;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::istringstream schedstat(ReadAll(task.path().string() + "/schedstat"));
    long long ns = -1;
    if (schedstat >> ns && ns >= 0) {
      total_ns += ns;
      any = true;
    }
  }
  return any ? static_cast<double>(total_ns) / 1e9 : CpuSeconds(pid);
}

// CPU seconds of every process whose command line contains `needle` (e.g.
// the job supervisors of one server: "shim DATA_DIR/"), summed.
inline double CpuSecondsOfMatching(const std::string& needle) {
  double total = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = ReadAll("/proc/" + pid + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(needle) != std::string::npos) {
      total += PreciseCpuSeconds(static_cast<pid_t>(std::stol(pid)));
    }
  }
  return total;
}

inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

// `headway server --listen 127.0.0.1:0 --data-dir <temp> --gpus GPUS --no-auth
// EXTRA...`, stopped (SIGTERM) and its directory removed on destruction.
// Without authentication (allowed on loopback only): the benchmarks measure
// the same thing they always have, and their user requests carry no token.
class ServerProcess {
 public:
  ServerProcess(const std::string& bin, const std::string& name,
                const std::vector<std::string>& extra = {}, int gpus = 0)
      : dir_(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()))) {
    std::filesystem::create_directories(dir_);
    std::string log = dir_ + "/server.log";
    std::vector<std::string> args = {bin,          "server", "--listen", "127.0.0.1:0",
                                     "--data-dir", dir_,     "--gpus",   std::to_string(gpus),
                                     "--no-auth"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+))");
    for (int i = 0; i < 200 && port_ == 0; ++i) {
      std::smatch m;
      std::string text = ReadAll(log);
      if (std::regex_search(text, m, listening)) port_ = std::stoi(m[1]);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (port_ == 0) std::fprintf(stderr, "server did not start:\n%s\n", ReadAll(log).c_str());
  }
  ~ServerProcess() {
    Terminate();
    std::filesystem::remove_all(dir_);
  }
  // SIGTERM, then waits for the server to exit; returns how long that took
  // (0 if it was already stopped).
  double Terminate() {
    if (pid_ <= 0) return 0;
    auto start = std::chrono::steady_clock::now();
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const std::string& dir() const { return dir_; }
  int port() const { return port_; }  // 0 if it did not start
  pid_t pid() const { return pid_; }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// Submits jobs PREFIX-0 .. PREFIX-(n-1) that print their report token and
// idle, and returns the tokens (an empty one for a job that printed none).
inline std::vector<std::string> StartIdleJobs(Connection& c, const std::string& prefix, int n) {
  for (int i = 0; i < n; ++i) {
    nlohmann::json spec = {{"name", prefix + "-" + std::to_string(i)},
                           {"command", "echo $HEADWAY_TOKEN; sleep 100000"},
                           {"termination_grace", "1s"}};
    auto [status, body] = c.Request(http::verb::post, "/api/v1/jobs", spec.dump());
    if (status / 100 != 2)
      std::fprintf(stderr, "submit %s-%d: HTTP %d %s\n", prefix.c_str(), i, status, body.c_str());
  }
  std::vector<std::string> tokens(static_cast<std::size_t>(n));
  std::regex token_line(R"(hwj_[0-9a-fA-F]+)");
  for (int i = 0; i < n; ++i) {
    std::smatch m;
    for (int tries = 0; tries < 400; ++tries) {
      std::string logs = c.Request(http::verb::get,
                                   "/api/v1/jobs/" + prefix + "-" + std::to_string(i) + "/logs", "")
                             .second;
      if (std::regex_search(logs, m, token_line)) {
        tokens[static_cast<std::size_t>(i)] = m.str();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }
  return tokens;
}

// Stops jobs PREFIX-0 .. PREFIX-(n-1) (StartIdleJobs' jobs).
inline void StopJobs(Connection& c, const std::string& prefix, int n) {
  for (int i = 0; i < n; ++i) {
    c.Request(http::verb::post, "/api/v1/jobs/" + prefix + "-" + std::to_string(i) + "/stop", "");
  }
}

}  // namespace headway::bench
