// Dashboard streams over many queued jobs: the real `headway server` on
// loopback with one GPU held by one job and N jobs queued behind it, then R
// open GET /api/v1/watch/jobs streams (what a dashboard tab holds). Prints the
// server's CPU (utime+stime from /proc/PID/stat) over a window without
// streams and one with them, and the latency of an unrelated
// GET /api/v1/queues call in each. With --compare BIN, the same run against
// another build (e.g. main's), side by side. No assertions.
//
// Then the server's RSS over rounds of four clients at once that each list
// every job and take one stream's snapshot, and 5 s after the last round.
//
//   build/bench/watch_bench [--jobs 10000] [--streams 10] [--seconds 15]
//                           [--memory-rounds 10]
//                           [--server path/to/headway] [--compare other/headway]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "loopback_server.h"

namespace {

using headway::bench::Connection;
using headway::bench::CpuSeconds;
using headway::bench::Percentile;
using headway::bench::ReadAll;
using headway::bench::ServerProcess;
namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;

// One open event stream, drained by its own thread until Close().
class Stream {
 public:
  explicit Stream(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return;
    std::string req = "GET /api/v1/watch/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size()))
      return;
    reader_ = std::thread([this] {
      std::string window;
      char buf[65536];
      for (;;) {
        ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n <= 0) break;
        bytes_ += static_cast<std::size_t>(n);
        if (!snapshot_) {
          window.append(buf, static_cast<std::size_t>(n));
          std::size_t at = window.find("event: snapshot");
          if (at != std::string::npos && window.find("\n\n", at) != std::string::npos) {
            snapshot_ = true;
            window.clear();
          } else if (window.size() > 64 && at == std::string::npos) {
            window.erase(0, window.size() - 64);
          }
        }
      }
    });
  }
  ~Stream() { Close(); }
  void Close() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
    if (reader_.joinable()) reader_.join();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool snapshot() const { return snapshot_; }
  std::size_t bytes() const { return bytes_; }

 private:
  int fd_ = -1;
  std::atomic<bool> snapshot_{false};
  std::atomic<std::size_t> bytes_{0};
  std::thread reader_;
};

// A process's resident set in MiB, from /proc/PID/status.
double RssMiB(pid_t pid) {
  std::string status = ReadAll("/proc/" + std::to_string(pid) + "/status");
  std::size_t at = status.find("VmRSS:");
  if (at == std::string::npos) return 0;
  return std::stod(status.substr(at + 6)) / 1024.0;  // kB
}

struct Figures {
  bool ok = false;
  // Memory: before the rounds, the most after any round of one job list and
  // one stream's snapshot (each round from 4 clients at once), and 5 s after
  // the last; the list's size.
  double rss_start = 0, rss_peak = 0, rss_idle = 0, list_mib = 0;
  double list_gzip_mib = 0;  // the same list for a client that accepts gzip
  double submit_s = 0;
  double idle_cpu = 0;     // % of one core, no streams
  double streams_cpu = 0;  // % of one core, with the streams open
  double snapshot_s = 0;   // until every stream had its snapshot
  double idle_p50_ms = 0, idle_max_ms = 0;
  double streams_p50_ms = 0, streams_max_ms = 0;
};

// CPU % of one core over `seconds`, and /api/v1/queues latencies meanwhile (ms).
double Window(pid_t pid, int port, double seconds, std::vector<double>& latencies) {
  Connection c(port);
  double cpu0 = CpuSeconds(pid);
  auto start = Clock::now();
  while (Clock::now() - start < std::chrono::duration<double>(seconds)) {
    auto t = Clock::now();
    c.Request(http::verb::get, "/api/v1/queues", "");
    latencies.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  double wall = std::chrono::duration<double>(Clock::now() - start).count();
  return 100.0 * (CpuSeconds(pid) - cpu0) / wall;
}

Figures Run(const std::string& bin, int jobs, int streams, double seconds, int memory_rounds) {
  Figures f;
  ServerProcess server(bin, "watch-bench", {}, /*gpus=*/1);
  if (server.port() == 0) return f;
  {
    Connection c(server.port());
    nlohmann::json holder = {{"name", "holder"},
                             {"command", "sleep 100000"},
                             {"termination_grace", "1s"},
                             {"resources", {{"gpus_per_process", 1}}}};
    c.Request(http::verb::post, "/api/v1/jobs", holder.dump());
  }
  auto submit_start = Clock::now();
  std::vector<std::thread> submitters;
  std::atomic<int> refused{0};
  constexpr int kSubmitters = 4;
  for (int t = 0; t < kSubmitters; ++t) {
    submitters.emplace_back([&, t] {
      Connection c(server.port());
      for (int i = t; i < jobs; i += kSubmitters) {
        nlohmann::json spec = {{"name", "q-" + std::to_string(i)},
                               {"command", "true"},
                               {"resources", {{"gpus_per_process", 1}}}};
        if (c.Request(http::verb::post, "/api/v1/jobs", spec.dump()).first != 201) ++refused;
      }
    });
  }
  for (auto& t : submitters) t.join();
  f.submit_s = std::chrono::duration<double>(Clock::now() - submit_start).count();
  if (refused > 0) std::fprintf(stderr, "%d submissions refused\n", refused.load());
  std::this_thread::sleep_for(std::chrono::seconds(2));  // settle

  std::vector<double> idle;
  f.idle_cpu = Window(server.pid(), server.port(), seconds, idle);
  f.idle_p50_ms = Percentile(idle, 0.5);
  f.idle_max_ms = Percentile(idle, 1.0);

  auto open_start = Clock::now();
  std::vector<std::unique_ptr<Stream>> open;
  for (int i = 0; i < streams; ++i) open.push_back(std::make_unique<Stream>(server.port()));
  for (auto& s : open) {
    while (!s->snapshot() && Clock::now() - open_start < std::chrono::seconds(120)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  f.snapshot_s = std::chrono::duration<double>(Clock::now() - open_start).count();
  std::this_thread::sleep_for(std::chrono::seconds(2));  // past the snapshots
  std::vector<double> busy;
  f.streams_cpu = Window(server.pid(), server.port(), seconds, busy);
  f.streams_p50_ms = Percentile(busy, 0.5);
  f.streams_max_ms = Percentile(busy, 1.0);
  for (auto& s : open) s->Close();

  // What a list and a dashboard's first render cost in memory, and whether
  // the server gives it back: `memory_rounds` rounds, each with 4 clients
  // that each list every job and open one stream until its snapshot.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  f.rss_start = RssMiB(server.pid());
  for (int round = 0; round < memory_rounds; ++round) {
    std::vector<std::thread> clients;
    std::atomic<std::size_t> list_bytes{0};
    for (int c = 0; c < 4; ++c) {
      clients.emplace_back([&] {
        Connection conn(server.port());
        list_bytes = conn.Request(http::verb::get, "/api/v1/jobs", "").second.size();
        Stream stream(server.port());
        auto start = Clock::now();
        while (!stream.snapshot() && Clock::now() - start < std::chrono::seconds(120)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      });
    }
    for (auto& t : clients) t.join();
    f.list_mib = static_cast<double>(list_bytes.load()) / (1 << 20);
    f.rss_peak = std::max(f.rss_peak, RssMiB(server.pid()));
  }
  std::this_thread::sleep_for(std::chrono::seconds(5));
  f.rss_idle = RssMiB(server.pid());
  {
    Connection conn(server.port());
    conn.accept_encoding = "gzip, deflate, br";  // as browsers send it
    f.list_gzip_mib =
        static_cast<double>(conn.Request(http::verb::get, "/api/v1/jobs", "").second.size()) /
        (1 << 20);
  }
  f.ok = true;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 10000, streams = 10, memory_rounds = 10;
  double seconds = 15;
  std::string bin = HEADWAY_BIN, compare;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--jobs")
      jobs = std::stoi(value);
    else if (flag == "--streams")
      streams = std::stoi(value);
    else if (flag == "--seconds")
      seconds = std::stod(value);
    else if (flag == "--memory-rounds")
      memory_rounds = std::stoi(value);
    else if (flag == "--server")
      bin = value;
    else if (flag == "--compare")
      compare = value;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // figures show up as they come, also in a file
  std::printf("watch_bench: %d queued jobs, %d /api/v1/watch/jobs streams, %.0f s windows\n", jobs,
              streams, seconds);
  std::vector<std::pair<std::string, Figures>> runs = {
      {bin, Run(bin, jobs, streams, seconds, memory_rounds)}};
  if (!compare.empty()) {
    runs.emplace_back(compare, Run(compare, jobs, streams, seconds, memory_rounds));
  }
  for (const auto& [path, f] : runs) {
    if (!f.ok) {
      std::printf("%s: server did not start\n", path.c_str());
      continue;
    }
    std::printf("\n%s\n", path.c_str());
    std::printf("  submit %d jobs            %8.1f s\n", jobs, f.submit_s);
    std::printf("  server CPU, no streams    %8.1f %% of a core\n", f.idle_cpu);
    std::printf("  server CPU, %2d streams    %8.1f %% of a core (+%.1f, %.2f per stream)\n",
                streams, f.streams_cpu, f.streams_cpu - f.idle_cpu,
                (f.streams_cpu - f.idle_cpu) / std::max(1, streams));
    std::printf("  all snapshots in          %8.2f s\n", f.snapshot_s);
    std::printf("  /api/v1/queues, no streams  p50 %7.1f ms  max %7.1f ms\n", f.idle_p50_ms,
                f.idle_max_ms);
    std::printf("  /api/v1/queues, %2d streams  p50 %7.1f ms  max %7.1f ms\n", streams,
                f.streams_p50_ms, f.streams_max_ms);
    std::printf(
        "  RSS: %.0f MiB before %d rounds of 4 x (list %.1f MiB + snapshot), "
        "%.0f MiB at most after one, %.0f MiB 5 s after\n",
        f.rss_start, memory_rounds, f.list_mib, f.rss_peak, f.rss_idle);
    std::printf("  job list on the wire       %8.2f MiB, %.2f MiB for a client that accepts gzip\n",
                f.list_mib, f.list_gzip_mib);
  }
  if (runs.size() == 2 && runs[0].second.ok && runs[1].second.ok) {
    const Figures& a = runs[0].second;
    const Figures& b = runs[1].second;
    double extra_a = std::max(0.1, a.streams_cpu - a.idle_cpu);
    double extra_b = std::max(0.1, b.streams_cpu - b.idle_cpu);
    std::printf(
        "\nratio (compare / server): streams' extra CPU %.1fx, queues p50 with streams %.1fx, "
        "RSS after the rounds %.1fx\n",
        extra_b / extra_a, b.streams_p50_ms / std::max(0.1, a.streams_p50_ms),
        b.rss_idle / std::max(1.0, a.rss_idle));
  }
  return 0;
}
