// Load + soak benchmark: the real `headway server` on loopback with N idle
// running jobs, each reporting progress at M Hz from a pool of reporter
// threads (keep-alive connections, paced schedule), and R dashboard readers
// that each hold GET /api/v1/watch/jobs open for the whole run and poll a
// loss chart and GET /metrics once a second. Every 5 s prints points/s,
// report and read latency, the server's RSS and CPU, and errors; at the end a
// summary, where RSS growth per minute after the first 10 s shows whether
// memory stays flat. No assertions.
//
// Hostile peers (--hostile, or --idle-sockets N and --slow-webhooks N): N TCP
// connections to the server's port that send nothing (reopened whenever the
// server closes one) and N webhook URLs whose receivers answer only after
// 4 s (even ones) or never (odd ones). The summary then adds how many of the
// healthy, reporting jobs the server misjudged (turned Stalled, or out of
// Running) and how long the server took to exit on SIGTERM.
//
//   build/bench/soak_bench [--jobs 50] [--hz 10] [--seconds 60] [--readers 4]
//                          [--reporter-threads T] [--server path/to/headway]
//                          [--hostile] [--idle-sockets 60] [--slow-webhooks 10]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "loopback_server.h"

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

using headway::bench::Connection;
using headway::bench::CpuSeconds;
using headway::bench::Percentile;
using headway::bench::ReadAll;
using headway::bench::ServerProcess;
using headway::bench::StartIdleJobs;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The server's resident set (VmRSS) in MiB.
double RssMiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto tv = [](timeval t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return tv(u.ru_utime) + tv(u.ru_stime);
}

struct Options {
  int jobs = 50;
  double hz = 10;
  double seconds = 60;
  int readers = 4;
  int reporter_threads = 0;  // 0: chosen from the number of jobs
  std::string server = HEADWAY_BIN;
  int idle_sockets = 0;   // connections that send nothing
  int slow_webhooks = 0;  // webhook URLs with slow or hung receivers
};

// Requests of the load threads fail after this instead of blocking for ever
// on a server that stopped answering.
constexpr auto kRequestTimeout = std::chrono::seconds(10);

// A loopback listener on a free port; -1 on failure.
int Listen(int& port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 128) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  port = ntohs(addr.sin_port);
  return fd;
}

// Webhook receivers that misbehave: the even ones read a request and answer
// 204 only after `delay`; the odd ones accept and never answer.
class SlowReceivers {
 public:
  SlowReceivers(int n, std::chrono::milliseconds delay) : delay_(delay) {
    for (int i = 0; i < n; ++i) {
      int port = 0;
      int fd = Listen(port);
      if (fd < 0) continue;
      urls_.push_back("http://127.0.0.1:" + std::to_string(port) + "/hook-" + std::to_string(i));
      threads_.emplace_back([this, fd, slow = i % 2 == 0] { Accept(fd, slow); });
    }
  }
  ~SlowReceivers() { Stop(); }
  void Stop() {
    stopped_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
    std::lock_guard lock(mu_);
    for (auto& t : handlers_) t.join();
    handlers_.clear();
  }
  const std::vector<std::string>& urls() const { return urls_; }
  int requests() const { return requests_; }
  int answered() const { return answered_; }

 private:
  void Accept(int listener, bool slow) {
    while (!stopped_) {
      pollfd p{listener, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard lock(mu_);
      handlers_.emplace_back([this, fd, slow] { Handle(fd, slow); });
    }
    close(listener);
  }
  void Handle(int fd, bool slow) {
    std::string request;
    char buf[4096];
    while (!stopped_ && request.find("\r\n\r\n") == std::string::npos) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      request.append(buf, static_cast<std::size_t>(n));
    }
    if (request.find("\r\n\r\n") != std::string::npos) ++requests_;
    auto answer_at = Clock::now() + delay_;
    while (!stopped_ && (!slow || Clock::now() < answer_at)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (slow && !stopped_) {
      const char response[] = "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n";
      if (send(fd, response, sizeof response - 1, MSG_NOSIGNAL) > 0) ++answered_;
    }
    close(fd);
  }

  std::chrono::milliseconds delay_;
  std::vector<std::string> urls_;
  std::atomic<bool> stopped_{false};
  std::atomic<int> requests_{0}, answered_{0};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::vector<std::thread> handlers_;  // guarded by mu_
};

// Connections to the server that send nothing, from 127.0.0.2; one the
// server closes is opened again at once (checked every 200 ms), as a
// misbehaving client would.
class IdleSockets {
 public:
  IdleSockets(int port, int n) : port_(port) {
    for (int i = 0; i < n; ++i) fds_.push_back(Open());
    if (n > 0) thread_ = std::thread([this] { Keep(); });
  }
  ~IdleSockets() { Stop(); }
  void Stop() {
    stopped_ = true;
    if (thread_.joinable()) thread_.join();
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
    fds_.clear();
  }
  int closed_by_server() const { return closed_; }
  int open_now() const { return open_; }

 private:
  int Open() {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    // From another client address than the bench's own clients, as a
    // misbehaving client elsewhere on the network would be.
    sockaddr_in source{};
    source.sin_family = AF_INET;
    source.sin_addr.s_addr = htonl(0x7f000002);  // 127.0.0.2
    (void)bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof source);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port_));
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  }
  void Keep() {
    while (!stopped_) {
      int open = 0;
      for (int& fd : fds_) {
        char c;
        if (fd >= 0) {
          ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
            close(fd);
            fd = -1;
            ++closed_;
          }
        }
        if (fd < 0) fd = Open();
        open += fd >= 0 ? 1 : 0;
      }
      open_ = open;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  int port_;
  std::vector<int> fds_;  // the keeper thread's
  std::atomic<bool> stopped_{false};
  std::atomic<int> closed_{0}, open_{0};
  std::thread thread_;
};

// Everything the load threads measure; one lock, taken once per request.
struct Stats {
  std::mutex mu;
  // Since the last progress line.
  std::int64_t interval_reports = 0;
  std::vector<double> interval_report_ms;
  std::vector<double> interval_read_ms;
  // Whole run.
  std::int64_t reports = 0;
  std::vector<double> report_ms;
  std::vector<double> chart_ms;
  std::vector<double> prom_ms;
  double max_lag_ms = 0;  // how late a report went out against its schedule
  std::size_t prom_bytes = 0;
  std::string last_prom;
  std::map<std::string, int> errors;
  int error_count = 0;

  void Error(const std::string& kind) {
    std::lock_guard lock(mu);
    ++errors[kind];
    ++error_count;
  }
};

// One dashboard reader's event stream: what it received, over all its connections.
struct WatchCounts {
  std::atomic<std::int64_t> bytes{0};
  std::atomic<int> snapshots{0};
  std::atomic<int> updates{0};
  std::atomic<std::int64_t> job_views{0};  // jobs carried by the snapshot and updates
  std::atomic<int> keep_alives{0};
  std::atomic<int> snapshot_jobs{0};
  std::atomic<int> connections{0};
  // The open stream's socket, so that Stop() can end a blocking read.
  std::mutex mu;
  int fd = -1;
  bool stopped = false;

  // False once stopped; else opens `c` and records its socket.
  bool Open(std::unique_ptr<Connection>& c, int port);
  void Close(std::unique_ptr<Connection>& c) {
    std::lock_guard lock(mu);
    fd = -1;
    c.reset();
  }
  void Stop() {
    std::lock_guard lock(mu);
    stopped = true;
    if (fd >= 0) shutdown(fd, SHUT_RDWR);
  }
  bool Stopped() {
    std::lock_guard lock(mu);
    return stopped;
  }
};

bool WatchCounts::Open(std::unique_ptr<Connection>& c, int port) {
  std::lock_guard lock(mu);
  if (stopped) return false;
  c = std::make_unique<Connection>(port);
  fd = c->stream.socket().native_handle();
  ++connections;
  return true;
}

// One reporter thread: the jobs in `slice`, each due every 1/hz seconds from its
// own offset, sent in due order over one keep-alive connection.
void Report(int port, const std::vector<int>& slice, const std::vector<std::string>& tokens,
            const Options& opt, Clock::time_point start, Clock::time_point end, Stats& stats) {
  struct Due {
    int job;
    Clock::time_point next;
    std::int64_t step = 0;
  };
  auto period =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / opt.hz));
  std::vector<Due> due;
  for (int j : slice) {
    // Spread the jobs evenly over one period so the load is smooth.
    due.push_back({j, start + period * j / opt.jobs});
  }
  std::unique_ptr<Connection> c;
  while (!due.empty()) {
    auto it = std::min_element(due.begin(), due.end(),
                               [](const Due& a, const Due& b) { return a.next < b.next; });
    if (it->next >= end) break;
    std::this_thread::sleep_until(it->next);
    double step = static_cast<double>(it->step);
    nlohmann::json report = {
        {"step", it->step},
        {"metrics",
         {{"loss", 0.2 + 2.3 * std::exp(-step / 3000.0) + 0.01 * std::sin(step / 7.0 + it->job)},
          {"learning_rate", 3e-4 * (0.5 + 0.5 * std::cos(step / 20000.0))},
          {"grad_norm", 1.0 + 0.3 * std::sin(step / 11.0)}}}};
    std::string target = "/api/v1/jobs/soak-" + std::to_string(it->job) + "/progress";
    auto t0 = Clock::now();
    int status = 0;
    try {
      if (!c) {
        c = std::make_unique<Connection>(port);
        c->timeout = kRequestTimeout;
      }
      status = c->Request(http::verb::post, target, report.dump(),
                          tokens[static_cast<std::size_t>(it->job)])
                   .first;
    } catch (const std::exception& e) {
      stats.Error(std::string("report transport: ") + e.what());
      c.reset();
    }
    double ms = Ms(Clock::now() - t0);
    if (status != 0 && status != 202) stats.Error("report HTTP " + std::to_string(status));
    if (status == 202) {
      std::lock_guard lock(stats.mu);
      ++stats.reports;
      ++stats.interval_reports;
      stats.report_ms.push_back(ms);
      stats.interval_report_ms.push_back(ms);
      stats.max_lag_ms = std::max(stats.max_lag_ms, Ms(t0 - it->next));
    }
    // Keep the schedule: a thread that fell behind catches up, and the lag shows it.
    it->next += period;
    ++it->step;
  }
}

// Holds GET /api/v1/watch/jobs open until the main thread shuts the socket down,
// counting bytes and events ("event: TYPE\ndata: JSON\n\n"; ':' lines keep alive).
void WatchOnce(int port, WatchCounts& counts, Stats& stats) {
  std::unique_ptr<Connection> conn;
  try {
    if (!counts.Open(conn, port)) return;
    Connection& c = *conn;
    http::request<http::empty_body> req{http::verb::get, "/api/v1/watch/jobs", 11};
    req.set(http::field::host, c.host);
    req.set(http::field::accept, "text/event-stream");
    http::write(c.stream, req);
    beast::flat_buffer buffer;
    http::response_parser<http::empty_body> parser;
    parser.body_limit(boost::none);
    http::read_header(c.stream, buffer, parser);
    if (parser.get().result_int() != 200) {
      stats.Error("watch HTTP " + std::to_string(parser.get().result_int()));
      counts.Close(conn);
      return;
    }
    std::string pending;
    auto on_body = [&](std::uint64_t, beast::string_view body, beast::error_code&) -> std::size_t {
      counts.bytes += static_cast<std::int64_t>(body.size());
      pending.append(body.data(), body.size());
      for (std::size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
        std::string message = pending.substr(0, end);
        pending.erase(0, end + 2);
        std::string event, data;
        std::istringstream lines(message);
        for (std::string line; std::getline(lines, line);) {
          if (line.rfind("event: ", 0) == 0) event = line.substr(7);
          if (line.rfind("data: ", 0) == 0) data += line.substr(6);
        }
        if (event.empty()) {
          ++counts.keep_alives;
          continue;
        }
        auto json = nlohmann::json::parse(data, nullptr, false);
        std::size_t jobs = json.is_object() && json.contains("jobs") ? json["jobs"].size() : 0;
        counts.job_views += static_cast<std::int64_t>(jobs);
        if (event == "snapshot") {
          ++counts.snapshots;
          counts.snapshot_jobs = static_cast<int>(jobs);
        } else if (event == "update") {
          ++counts.updates;
        }
      }
      return body.size();
    };
    parser.on_chunk_body(on_body);
    beast::error_code ec;
    while (!parser.is_done()) {
      http::read(c.stream, buffer, parser, ec);
      if (!ec) continue;
      if (ec == http::error::end_of_chunk) {
        ec = {};
        continue;
      }
      break;
    }
    if (!counts.Stopped()) {
      stats.Error("watch stream ended early: " +
                  (ec ? ec.message() : std::string("server closed it")));
    }
  } catch (const std::exception& e) {
    if (!counts.Stopped()) stats.Error(std::string("watch transport: ") + e.what());
  }
  counts.Close(conn);
}

// A stream that ends early counts as an error and is opened again, as a
// browser's EventSource does.
void Watch(int port, WatchCounts& counts, Stats& stats) {
  while (!counts.Stopped()) {
    WatchOnce(port, counts, stats);
    if (!counts.Stopped()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// One dashboard reader's polling: a loss chart of a rotating job and /metrics,
// once a second on one keep-alive connection.
void Poll(int port, int reader, const Options& opt, Clock::time_point start, Clock::time_point end,
          Stats& stats) {
  std::unique_ptr<Connection> c;
  auto get = [&](const std::string& target, const std::string& what,
                 std::vector<double> Stats::*series) {
    auto t0 = Clock::now();
    int status = 0;
    std::string body;
    try {
      if (!c) {
        c = std::make_unique<Connection>(port);
        c->timeout = kRequestTimeout;
      }
      std::tie(status, body) = c->Request(http::verb::get, target, "");
    } catch (const std::exception& e) {
      stats.Error(what + " transport: " + e.what());
      c.reset();
      return;
    }
    double ms = Ms(Clock::now() - t0);
    if (status != 200) {
      stats.Error(what + " HTTP " + std::to_string(status));
      return;
    }
    std::lock_guard lock(stats.mu);
    (stats.*series).push_back(ms);
    stats.interval_read_ms.push_back(ms);
    if (series == &Stats::prom_ms) {
      stats.prom_bytes = body.size();
      stats.last_prom = std::move(body);
    }
  };
  auto offset = std::chrono::milliseconds(1000 * reader / std::max(1, opt.readers));
  // From the second second on: a chart read before the job's first report is a 404.
  for (int tick = 1;; ++tick) {
    auto when = start + offset + std::chrono::seconds(tick);
    if (when >= end) break;
    std::this_thread::sleep_until(when);
    int k = (reader + tick * opt.readers) % opt.jobs;
    get("/api/v1/jobs/soak-" + std::to_string(k) + "/metrics/loss?buckets=300", "chart",
        &Stats::chart_ms);
    get("/metrics", "metrics", &Stats::prom_ms);
  }
}

bool ParseOptions(int argc, char** argv, Options& opt) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--hostile") {
      opt.idle_sockets = 60;
      opt.slow_webhooks = 10;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", flag.c_str());
      return false;
    }
    std::string value = argv[++i];
    if (flag == "--jobs")
      opt.jobs = std::stoi(value);
    else if (flag == "--hz")
      opt.hz = std::stod(value);
    else if (flag == "--seconds")
      opt.seconds = std::stod(value);
    else if (flag == "--readers")
      opt.readers = std::stoi(value);
    else if (flag == "--reporter-threads")
      opt.reporter_threads = std::stoi(value);
    else if (flag == "--server")
      opt.server = value;
    else if (flag == "--idle-sockets")
      opt.idle_sockets = std::stoi(value);
    else if (flag == "--slow-webhooks")
      opt.slow_webhooks = std::stoi(value);
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return false;
    }
  }
  if (opt.jobs < 1 || opt.hz <= 0 || opt.seconds <= 0 || opt.readers < 0 || opt.idle_sockets < 0 ||
      opt.slow_webhooks < 0) {
    std::fprintf(stderr, "--jobs, --hz and --seconds must be positive, --readers not negative\n");
    return false;
  }
  if (opt.reporter_threads <= 0) opt.reporter_threads = std::clamp(opt.jobs / 8, 4, 32);
  opt.reporter_threads = std::min(opt.reporter_threads, opt.jobs);
  return true;
}

// Least-squares slope of y over x.
double Slope(const std::vector<std::pair<double, double>>& xy) {
  if (xy.size() < 2) return 0;
  double n = static_cast<double>(xy.size()), sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (auto [x, y] : xy) {
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  double d = n * sxx - sx * sx;
  return d == 0 ? 0 : (n * sxy - sx * sy) / d;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!ParseOptions(argc, argv, opt)) return 2;
  signal(SIGPIPE, SIG_IGN);

  SlowReceivers receivers(opt.slow_webhooks, std::chrono::seconds(4));
  std::vector<std::string> server_args = {"--max-connections", "4096"};
  for (const std::string& url : receivers.urls()) {
    server_args.push_back("--webhook");
    server_args.push_back(url);
  }
  ServerProcess server_process(opt.server, "headway-soak", server_args);
  int port = server_process.port();
  pid_t server = server_process.pid();
  if (port == 0) return 1;

  // N jobs that run idle; each prints its report token first.
  auto setup_start = Clock::now();
  std::vector<std::string> tokens;
  {
    Connection c(port);
    tokens = StartIdleJobs(c, "soak", opt.jobs);
  }
  for (int i = 0; i < opt.jobs; ++i) {
    if (tokens[static_cast<std::size_t>(i)].empty()) {
      std::fprintf(stderr, "soak-%d printed no token\n", i);
      return 1;
    }
  }
  std::printf(
      "soak: %d jobs x %g Hz = %g reports/s for %g s, %d reporter threads, %d dashboard readers\n"
      "(%d jobs running after %.1f s; each report is one request with loss, learning_rate, "
      "grad_norm)\n\n",
      opt.jobs, opt.hz, opt.jobs * opt.hz, opt.seconds, opt.reporter_threads, opt.readers, opt.jobs,
      Seconds(Clock::now() - setup_start));

  if (opt.idle_sockets > 0 || opt.slow_webhooks > 0) {
    std::printf(
        "hostile peers: %d idle connections to the server's port; %d webhook URLs, half "
        "answering after 4 s, half never\n\n",
        opt.idle_sockets, static_cast<int>(receivers.urls().size()));
  }
  IdleSockets idle(port, opt.idle_sockets);

  Stats stats;
  std::vector<std::unique_ptr<WatchCounts>> watch_counts;
  std::vector<std::thread> watchers;
  for (int r = 0; r < opt.readers; ++r) {
    watch_counts.push_back(std::make_unique<WatchCounts>());
    watchers.emplace_back(Watch, port, std::ref(*watch_counts.back()), std::ref(stats));
  }

  auto start = Clock::now() + std::chrono::milliseconds(200);
  auto end = start + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(opt.seconds));
  std::vector<std::thread> load;
  for (int t = 0; t < opt.reporter_threads; ++t) {
    std::vector<int> slice;
    for (int j = t; j < opt.jobs; j += opt.reporter_threads) slice.push_back(j);
    load.emplace_back(Report, port, slice, std::cref(tokens), std::cref(opt), start, end,
                      std::ref(stats));
  }
  for (int r = 0; r < opt.readers; ++r) {
    load.emplace_back(Poll, port, r, std::cref(opt), start, end, std::ref(stats));
  }

  // Sample the server once a second; print every 5 s.
  std::this_thread::sleep_until(start);
  std::vector<std::pair<double, double>> rss;  // (seconds since start, MiB)
  double first_cpu = CpuSeconds(server), last_cpu = first_cpu;
  // The jobs' supervisors (one `headway shim` per job, and its PID
  // namespace's first process): what idle jobs cost beside the server.
  const std::string supervisors = " shim " + server_process.dir() + "/";
  const double first_supervisor_cpu = headway::bench::CpuSecondsOfMatching(supervisors);
  double first_self = SelfCpuSeconds(), last_self = first_self;
  rss.emplace_back(0, RssMiB(server));
  auto last_print = start;
  std::printf("%6s %9s %10s %10s %11s %8s %11s %10s %7s\n", "time", "points/s", "rep p50 ms",
              "rep p99 ms", "read p99 ms", "RSS MiB", "server CPU%", "bench CPU%", "errors");
  for (int sec = 1;; ++sec) {
    auto when = start + std::chrono::seconds(sec);
    if (when > end) when = end;
    std::this_thread::sleep_until(when);
    double t = Seconds(when - start);
    rss.emplace_back(t, RssMiB(server));
    if (sec % 5 == 0 || when == end) {
      double dt = Seconds(Clock::now() - last_print);
      last_print = Clock::now();
      double cpu = CpuSeconds(server), self = SelfCpuSeconds();
      std::int64_t n;
      std::vector<double> rep, read;
      int errors;
      {
        std::lock_guard lock(stats.mu);
        n = stats.interval_reports;
        stats.interval_reports = 0;
        rep.swap(stats.interval_report_ms);
        read.swap(stats.interval_read_ms);
        errors = stats.error_count;
      }
      std::printf("%5.0fs %9.0f %10.2f %10.2f %11.2f %8.1f %11.0f %10.0f %7d\n", t,
                  static_cast<double>(n) / dt, Percentile(rep, 0.5), Percentile(rep, 0.99),
                  Percentile(read, 0.99), rss.back().second, 100 * (cpu - last_cpu) / dt,
                  100 * (self - last_self) / dt, errors);
      std::fflush(stdout);
      last_cpu = cpu;
      last_self = self;
    }
    if (when == end) break;
  }
  for (auto& t : load) t.join();
  double run_s = Seconds(Clock::now() - start);
  double server_cpu = CpuSeconds(server) - first_cpu;
  double supervisor_cpu = headway::bench::CpuSecondsOfMatching(supervisors) - first_supervisor_cpu;
  double self_cpu = SelfCpuSeconds() - first_self;
  for (auto& w : watch_counts) w->Stop();
  for (auto& t : watchers) t.join();

  std::lock_guard lock(stats.mu);
  std::vector<std::pair<double, double>> settled, last_half;
  for (auto p : rss) {
    if (p.first >= 10) settled.push_back(p);
    if (p.first >= run_s / 2) last_half.push_back(p);
  }
  double max_rss = 0;
  for (auto p : rss) max_rss = std::max(max_rss, p.second);
  std::smatch m;
  std::regex ingested(R"(\nheadway_ingest_points_total (\d+))");
  std::string server_points =
      std::regex_search(stats.last_prom, m, ingested) ? m[1].str() : std::string("?");

  std::printf("\nsummary (%d jobs x %g Hz, %d readers, %.0f s, %d reporter threads)\n", opt.jobs,
              opt.hz, opt.readers, opt.seconds, opt.reporter_threads);
  std::printf(
      "reports          %lld acknowledged (202), %.0f points/s (target %g); server's ingest "
      "counter at the last scrape (<= 1 s before the end): %s\n",
      static_cast<long long>(stats.reports), static_cast<double>(stats.reports) / run_s,
      opt.jobs * opt.hz, server_points.c_str());
  std::printf(
      "report latency   p50 %.2f ms, p99 %.2f ms, max %.2f ms; sends at most %.1f ms behind "
      "schedule\n",
      Percentile(stats.report_ms, 0.5), Percentile(stats.report_ms, 0.99),
      Percentile(stats.report_ms, 1.0), stats.max_lag_ms);
  std::printf(
      "chart reads      %zu, p50 %.2f ms, p99 %.2f ms, max %.2f ms "
      "(GET /api/v1/jobs/NAME/metrics/loss?buckets=300)\n",
      stats.chart_ms.size(), Percentile(stats.chart_ms, 0.5), Percentile(stats.chart_ms, 0.99),
      Percentile(stats.chart_ms, 1.0));
  std::printf("/metrics reads   %zu, p50 %.2f ms, p99 %.2f ms, max %.2f ms (%zu bytes each)\n",
              stats.prom_ms.size(), Percentile(stats.prom_ms, 0.5), Percentile(stats.prom_ms, 0.99),
              Percentile(stats.prom_ms, 1.0), stats.prom_bytes);
  std::printf(
      "server RSS       first %.1f MiB, last %.1f MiB, max %.1f MiB; growth %+.2f MiB/min "
      "after 10 s, %+.2f MiB/min over the last half (least squares, 1 sample/s)\n",
      rss.front().second, rss.back().second, max_rss, 60 * Slope(settled), 60 * Slope(last_half));
  std::printf("CPU              server %.0f%%, this benchmark %.0f%% (of one core; %u cores)\n",
              100 * server_cpu / run_s, 100 * self_cpu / run_s,
              std::thread::hardware_concurrency());
  std::printf("job supervisors  %.2f%% of a core for %d idle jobs, %.4f%% per job\n",
              100 * supervisor_cpu / run_s, opt.jobs, 100 * supervisor_cpu / run_s / opt.jobs);
  for (int r = 0; r < opt.readers; ++r) {
    const WatchCounts& w = *watch_counts[static_cast<std::size_t>(r)];
    std::printf(
        "watch stream %d   %d connection(s), %d snapshot(s) (%d jobs), %d updates, %lld job views, "
        "%d keep-alives, %.2f MB\n",
        r, w.connections.load(), w.snapshots.load(), w.snapshot_jobs.load(), w.updates.load(),
        static_cast<long long>(w.job_views.load()), w.keep_alives.load(),
        static_cast<double>(w.bytes.load()) / 1e6);
  }
  std::printf("errors           %d\n", stats.error_count);
  for (const auto& [kind, count] : stats.errors) std::printf("  %6d  %s\n", count, kind.c_str());
  std::fflush(stdout);

  // Healthy jobs the server misjudged: every job reported all along, so any
  // Stalled (or Unknown after its first report) or leaving Running is wrong.
  int misjudged = 0, unread = 0;
  try {
    Connection c(port);
    c.timeout = kRequestTimeout;
    for (int i = 0; i < opt.jobs; ++i) {
      auto [status, body] =
          c.Request(http::verb::get, "/api/v1/jobs/soak-" + std::to_string(i) + "/events", "");
      auto events = nlohmann::json::parse(body, nullptr, false);
      if (status != 200 || !events.is_object()) {
        ++unread;
        continue;
      }
      bool wrong = false;
      for (const auto& e : events["events"]) {
        std::string type = e.value("type", ""), message = e.value("message", "");
        if (type == "HealthChanged" &&
            (message.find("-> Stalled") != std::string::npos ||
             message.find("Progressing -> Unknown") != std::string::npos)) {
          wrong = true;
        }
        if (type == "StateChanged" && message.rfind("Running -> ", 0) == 0) wrong = true;
      }
      misjudged += wrong ? 1 : 0;
    }
  } catch (const std::exception& e) {
    std::printf("job check        failed: %s\n", e.what());
  }
  std::printf("misjudged jobs   %d of %d reporting jobs turned Stalled or left Running%s\n",
              misjudged, opt.jobs,
              unread > 0 ? (" (" + std::to_string(unread) + " unreadable)").c_str() : "");
  std::fflush(stdout);

  try {
    Connection c(port);
    c.timeout = kRequestTimeout;
    headway::bench::StopJobs(c, "soak", opt.jobs);
    // Wait for the jobs to end (SIGTERM, SIGKILL after the 1 s grace).
    auto deadline = Clock::now() + std::chrono::seconds(15);
    for (int i = 0; i < opt.jobs && Clock::now() < deadline;) {
      auto [status, body] =
          c.Request(http::verb::get, "/api/v1/jobs/soak-" + std::to_string(i), "");
      auto job = nlohmann::json::parse(body, nullptr, false);
      std::string state = job.is_object() ? job.value("state", "") : "";
      if (status != 200 || state == "Stopped" || state == "Failed" || state == "Succeeded") {
        ++i;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  } catch (const std::exception& e) {
    std::printf("stopping jobs    failed: %s\n", e.what());
  }
  // The stops above are fresh webhook events, so slow receivers still hold
  // deliveries while the server shuts down: it must not wait on them.
  int idle_open = idle.open_now(), idle_closed = idle.closed_by_server();
  double shutdown_s = server_process.Terminate();
  std::printf("shutdown         %.2f s from SIGTERM to exit (%s)\n", shutdown_s,
              shutdown_s < 5 ? "prompt" : "NOT prompt: over 5 s");
  if (opt.idle_sockets > 0 || opt.slow_webhooks > 0) {
    std::printf(
        "hostile peers    %d idle connections, %d open at the end, %d closed by the "
        "server before its shutdown (each reopened); webhook receivers got %d posts, answered %d\n",
        opt.idle_sockets, idle_open, idle_closed, receivers.requests(), receivers.answered());
  }
  idle.Stop();
  receivers.Stop();
  return 0;
}
