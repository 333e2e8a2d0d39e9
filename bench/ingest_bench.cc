// Ingest benchmark: the real `headway server` on loopback, N concurrent
// reporters (one job each, keep-alive connections) posting single reports or
// batches for a fixed number of requests. Prints points/s and per-request
// latency p50/p99 for each configuration side by side. No assertions.
//
//   build/bench/ingest_bench [path/to/headway]
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
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
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
using headway::bench::Percentile;
using headway::bench::ServerProcess;
using headway::bench::StartIdleJobs;

}  // namespace

int main(int argc, char** argv) {
  std::string bin = argc > 1 ? argv[1] : HEADWAY_BIN;
  ServerProcess server_process(bin, "headway-bench");
  int port = server_process.port();
  if (port == 0) return 1;

  const int kMaxReporters = 32;
  std::vector<std::string> tokens;
  {
    Connection c(port);
    tokens = StartIdleJobs(c, "bench", kMaxReporters);
  }

  struct Config {
    int reporters;
    int batch;
    int requests_each;
  };
  std::vector<Config> configs = {{1, 1, 400}, {8, 1, 200}, {32, 1, 100},
                                 {1, 100, 100}, {8, 100, 50}, {32, 100, 25}};
  std::printf("%-10s %-6s %10s %12s %10s %10s %7s\n", "reporters", "batch", "requests",
              "points/s", "p50 ms", "p99 ms", "errors");
  std::int64_t step_base = 0;
  for (const Config& cfg : configs) {
    std::vector<std::vector<double>> latencies(static_cast<std::size_t>(cfg.reporters));
    std::vector<int> errors(static_cast<std::size_t>(cfg.reporters), 0);
    auto start = Clock::now();
    std::vector<std::thread> threads;
    for (int r = 0; r < cfg.reporters; ++r) {
      threads.emplace_back([&, r] {
        Connection c(port);
        std::string job = "bench-" + std::to_string(r);
        for (int i = 0; i < cfg.requests_each; ++i) {
          nlohmann::json reports = nlohmann::json::array();
          for (int b = 0; b < cfg.batch; ++b) {
            std::int64_t step = step_base + static_cast<std::int64_t>(i) * cfg.batch + b;
            reports.push_back({{"step", step},
                               {"metrics", {{"loss", 1.0 / static_cast<double>(step + 1)},
                                            {"learning_rate", 3e-4}}}});
          }
          std::string body = cfg.batch == 1 ? reports[0].dump()
                                            : nlohmann::json{{"reports", reports}}.dump();
          auto t0 = Clock::now();
          auto [status, text] = c.Request(http::verb::post, "/api/v1/jobs/" + job + "/progress",
                                          body, tokens[static_cast<std::size_t>(r)]);
          latencies[static_cast<std::size_t>(r)].push_back(
              std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
          if (status != 202) ++errors[static_cast<std::size_t>(r)];
        }
      });
    }
    for (auto& t : threads) t.join();
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<double> all;
    int error_count = 0;
    for (std::size_t r = 0; r < latencies.size(); ++r) {
      all.insert(all.end(), latencies[r].begin(), latencies[r].end());
      error_count += errors[r];
    }
    double points = static_cast<double>(cfg.reporters) * cfg.requests_each * cfg.batch;
    std::printf("%-10d %-6d %10d %12.0f %10.2f %10.2f %7d\n", cfg.reporters, cfg.batch,
                cfg.reporters * cfg.requests_each, points / seconds, Percentile(all, 0.5),
                Percentile(all, 0.99), error_count);
    step_base += static_cast<std::int64_t>(cfg.requests_each) * cfg.batch;
  }
  std::printf("(every acknowledged report is committed to SQLite with synchronous=FULL;\n"
              " concurrent requests share a transaction: group commit)\n");

  // A 1M-point series: ingest in batches of 10k, then read it chart-sized.
  {
    Connection c(port);
    const int kPoints = 1000000, kBatch = 10000;
    auto t0 = Clock::now();
    for (int first = 0; first < kPoints; first += kBatch) {
      std::string body = "{\"reports\":[";
      for (int s = first; s < first + kBatch; ++s) {
        if (s > first) body += ",";
        body += "{\"step\":" + std::to_string(s) + ",\"metrics\":{\"loss\":" +
                std::to_string(1.0 / (s + 1)) + "}}";
      }
      body += "]}";
      c.Request(http::verb::post, "/api/v1/jobs/bench-0/progress", body, tokens[0]);
    }
    double ingest_s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<double> reads;
    for (int i = 0; i < 5; ++i) {
      auto r0 = Clock::now();
      auto [status, text] = c.Request(http::verb::get, "/api/v1/jobs/bench-0/metrics/loss?buckets=500", "");
      reads.push_back(std::chrono::duration<double, std::milli>(Clock::now() - r0).count());
      if (status != 200) std::printf("read failed: %d\n", status);
    }
    std::printf("\n1M-point series: ingest %.1f s (%.0f points/s in 10k batches); "
                "chart read (500 buckets) p50 %.0f ms over 5 reads\n",
                ingest_s, kPoints / ingest_s, Percentile(reads, 0.5));
  }

  {
    Connection c(port);
    for (int i = 0; i < kMaxReporters; ++i) {
      c.Request(http::verb::post, "/api/v1/jobs/bench-" + std::to_string(i) + "/stop", "");
    }
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  return 0;
}
