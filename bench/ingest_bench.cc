// Ingest benchmark: the real `headway server` on loopback, N concurrent
// reporters (one job each, keep-alive connections) posting single reports or
// batches for a fixed number of requests. Prints points/s and per-request
// latency p50/p99 for each configuration side by side. No assertions.
//
//   build/bench/ingest_bench [path/to/headway]
//   build/bench/ingest_bench --wrk [--seconds S] [--pushgateway PATH] [--rows 1x32,100x8]
//                            [--repeat N] [path/to/headway]
//
// --wrk drives both Headway and Prometheus' Pushgateway with the same load
// tool (wrk, Debian's `wrk`) in one run: single reports (a step and four
// metrics) at 1, 32 and 128 connections, and batches of 100 points at 1, 8
// and 32, with requests/s, p50 and p99 for each side and the ratio. --rows
// picks rows (points per request x connections); --repeat runs each N times.
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
#include <sstream>
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
using headway::bench::StopJobs;

struct WrkResult {
  double requests_per_second = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  long errors = 0;  // non-2xx answers and socket errors
  bool ok = false;
};

// "1.23ms" -> 1.23; wrk prints us, ms or s.
double WrkMillis(const std::string& text) {
  std::smatch m;
  if (!std::regex_match(text, m, std::regex(R"(([0-9.]+)(us|ms|s|m))"))) return 0;
  double v = std::stod(m[1]);
  if (m[2] == "us") return v / 1000;
  if (m[2] == "s") return v * 1000;
  if (m[2] == "m") return v * 60000;
  return v;
}

// `first_step`: where this run's steps start, past every earlier run's, so
// that each run stores new points (a step sent again replaces its row in
// place, which is cheaper and not what training jobs do).
WrkResult RunWrk(const std::string& url, const std::string& script, int connections, int seconds,
                 std::int64_t first_step) {
  int threads = std::min(connections, 2);
  std::string cmd = "wrk --latency -t" + std::to_string(threads) + " -c" +
                    std::to_string(connections) + " -d" + std::to_string(seconds) + "s -s " +
                    script + " " + url + " -- " + std::to_string(threads) + " " +
                    std::to_string(first_step) + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  WrkResult r;
  if (pipe == nullptr) return r;
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  if (pclose(pipe) != 0) {
    std::fprintf(stderr, "wrk failed:\n%s\n", out.c_str());
    return r;
  }
  std::smatch m;
  if (std::regex_search(out, m, std::regex(R"(Requests/sec:\s+([0-9.]+))"))) {
    r.requests_per_second = std::stod(m[1]);
    r.ok = true;
  }
  if (std::regex_search(out, m, std::regex(R"(\n\s+50%\s+(\S+))"))) r.p50_ms = WrkMillis(m[1]);
  if (std::regex_search(out, m, std::regex(R"(\n\s+99%\s+(\S+))"))) r.p99_ms = WrkMillis(m[1]);
  if (std::regex_search(out, m, std::regex(R"(Non-2xx or 3xx responses:\s+(\d+))"))) {
    r.errors += std::stol(m[1]);
  }
  if (std::regex_search(
          out, m,
          std::regex(R"(Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+))"))) {
    for (int i = 1; i <= 4; ++i) r.errors += std::stol(m[i]);
  }
  return r;
}

// A wrk script whose requests go round the given targets, each with a
// growing step. `body_of` is Lua returning the body for `step`. Its
// arguments: wrk's thread count, and the first step.
std::string WrkScript(const std::vector<std::pair<std::string, std::string>>& targets,
                      const std::string& content_type, const std::string& body_of) {
  std::string lua = "local targets = {\n";
  for (const auto& [path, token] : targets) {
    lua += "  {path = \"" + path + "\", token = \"" + token + "\"},\n";
  }
  lua +=
      "}\n"
      "local next_id = 0\n"
      "function setup(thread)\n"
      "  thread:set(\"id\", next_id)\n"
      "  next_id = next_id + 1\n"
      "end\n"
      // Each thread reports for its own share of the targets, so each
      // target's steps grow as they would from one training job.
      "local counter, threads = 0, 1\n"
      "function init(args)\n"
      "  threads = tonumber(args[1]) or 1\n"
      "  counter = tonumber(args[2]) or 0\n"
      "end\n"
      "local function body_of(step)\n" +
      body_of +
      "\nend\n"
      "function request()\n"
      "  counter = counter + 1\n"
      "  local t = targets[((counter * threads + id) % #targets) + 1]\n"
      "  local headers = {[\"Content-Type\"] = \"" +
      content_type +
      "\"}\n"
      "  if t.token ~= \"\" then headers[\"Authorization\"] = \"Bearer \" .. t.token end\n"
      "  return wrk.format(\"POST\", t.path, headers, body_of(counter))\n"
      "end\n";
  return lua;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// Prometheus' Pushgateway on a free loopback port, stopped on destruction.
class Pushgateway {
 public:
  Pushgateway(const std::string& bin, const std::string& dir) {
    for (int attempt = 0; attempt < 20 && port_ == 0; ++attempt) {
      int port = 20000 + static_cast<int>((getpid() * 31 + attempt * 977) % 30000);
      pid_ = fork();
      if (pid_ == 0) {
        int fd = open((dir + "/pushgateway.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(port);
        execl(bin.c_str(), bin.c_str(), listen.c_str(), static_cast<char*>(nullptr));
        _exit(127);
      }
      for (int i = 0; i < 100; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
          pid_ = -1;
          break;
        }
        try {
          Connection c(port);
          if (c.Request(http::verb::get, "/-/ready", "").first == 200) {
            port_ = port;
            break;
          }
        } catch (const std::exception&) {
        }
      }
      if (port_ == 0 && pid_ > 0) {
        kill(pid_, SIGTERM);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
      }
    }
  }
  ~Pushgateway() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

struct WrkRow {
  int batch;  // points per request: 1 or 100
  int connections;
};

int WrkComparison(const std::string& bin, const std::string& pushgateway_bin, int seconds,
                  const std::vector<WrkRow>& rows, int repeat) {
  // Runs of batches store some 10M points: past the default limit per job
  // (1M), which would answer 429 and make a fast run of refusals.
  ServerProcess server_process(bin, "headway-bench", {"--max-points-per-job", "1000000000"});
  int port = server_process.port();
  if (port == 0) return 1;
  const int kJobs = 32;
  std::vector<std::string> tokens;
  {
    Connection c(port);
    tokens = StartIdleJobs(c, "bench", kJobs);
  }
  Pushgateway gateway(pushgateway_bin, server_process.dir());
  if (gateway.port() == 0) {
    std::fprintf(stderr, "Pushgateway (%s) did not start\n", pushgateway_bin.c_str());
    return 1;
  }
  const std::string dir = server_process.dir();
  std::vector<std::pair<std::string, std::string>> headway_targets, gateway_targets;
  for (int i = 0; i < kJobs; ++i) {
    headway_targets.push_back({"/api/v1/jobs/bench-" + std::to_string(i) + "/progress",
                               tokens[static_cast<std::size_t>(i)]});
    gateway_targets.push_back({"/metrics/job/bench/instance/" + std::to_string(i), ""});
  }
  // The same content on both sides: a step and four metrics per point.
  const std::string json_point =
      "string.format('{\"step\":%d,\"metrics\":{\"loss\":%.6f,\"learning_rate\":0.0003,"
      "\"grad_norm\":1.25,\"samples_per_second\":812.5}}', s, 1 / (s + 1))";
  const std::string text_point =
      "string.format('step%s %d\\nloss%s %.6f\\nlearning_rate%s 0.0003\\ngrad_norm%s "
      "1.25\\nsamples_per_second%s 812.5\\n', l, s, l, 1 / (s + 1), l, l, l)";
  WriteFile(dir + "/headway-single.lua", WrkScript(headway_targets, "application/json",
                                                   "  local s = step\n  return " + json_point));
  WriteFile(dir + "/gateway-single.lua",
            WrkScript(gateway_targets, "text/plain; version=0.0.4",
                      "  local s, l = step, ''\n  return " + text_point));
  // A batch of 100 points; on the Pushgateway each point is a label value
  // in one group, since it keeps no series.
  WriteFile(dir + "/headway-batch.lua",
            WrkScript(headway_targets, "application/json",
                      "  local parts = {}\n"
                      "  for i = 0, 99 do\n"
                      "    local s = step * 100 + i\n"
                      "    parts[#parts + 1] = " +
                          json_point +
                          "\n"
                          "  end\n"
                          "  return '{\"reports\":[' .. table.concat(parts, ',') .. ']}'"));
  WriteFile(dir + "/gateway-batch.lua", WrkScript(gateway_targets, "text/plain; version=0.0.4",
                                                  "  local parts = {}\n"
                                                  "  for i = 0, 99 do\n"
                                                  "    local s = step * 100 + i\n"
                                                  "    local l = '{point=\"' .. i .. '\"}'\n"
                                                  "    parts[#parts + 1] = " +
                                                      text_point +
                                                      "\n"
                                                      "  end\n"
                                                      "  return table.concat(parts)"));

  const std::string headway_url = "http://127.0.0.1:" + std::to_string(port);
  const std::string gateway_url = "http://127.0.0.1:" + std::to_string(gateway.port());
  std::printf(
      "wrk, %d s per run; Headway commits every acknowledged report to SQLite "
      "(synchronous=FULL), the Pushgateway keeps them in memory\n\n",
      seconds);
  std::printf("%-7s %6s | %10s %8s %8s %6s | %10s %8s %8s %6s | %7s\n", "points", "conns",
              "Headway/s", "p50 ms", "p99 ms", "errors", "Pushgw/s", "p50 ms", "p99 ms", "errors",
              "ratio");
  std::int64_t first_step = 0;
  for (const WrkRow& row : rows) {
    const char* kind = row.batch == 1 ? "single" : "batch";
    for (int r = 0; r < repeat; ++r) {
      first_step += 100'000'000;
      // A batch script's steps are its counter x 100 + 0..99: its counter
      // starts at first_step / 100, so that steps start at first_step too
      // whatever order the rows come in.
      const std::int64_t first_counter = first_step / row.batch;
      WrkResult h = RunWrk(headway_url, dir + "/headway-" + kind + ".lua", row.connections, seconds,
                           first_counter);
      WrkResult g = RunWrk(gateway_url, dir + "/gateway-" + kind + ".lua", row.connections, seconds,
                           first_counter);
      std::printf("%-7d %6d | %10.0f %8.2f %8.2f %6ld | %10.0f %8.2f %8.2f %6ld | %6.2fx\n",
                  row.batch, row.connections, h.requests_per_second, h.p50_ms, h.p99_ms, h.errors,
                  g.requests_per_second, g.p50_ms, g.p99_ms, g.errors,
                  g.requests_per_second > 0 ? h.requests_per_second / g.requests_per_second : 0.0);
    }
  }
  std::printf("(requests/s; a batch request carries 100 points: points/s = 100 x requests/s)\n");
  {
    Connection c(port);
    StopJobs(c, "bench", kJobs);
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string bin = HEADWAY_BIN;
  bool wrk = false;
  int seconds = 10;
  std::string pushgateway = "/usr/bin/prometheus-pushgateway";
  std::vector<WrkRow> rows = {{1, 1}, {1, 32}, {1, 128}, {100, 1}, {100, 8}, {100, 32}};
  int repeat = 1;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--wrk") {
      wrk = true;
    } else if (arg == "--seconds" && i + 1 < argc) {
      seconds = std::stoi(argv[++i]);
    } else if (arg == "--pushgateway" && i + 1 < argc) {
      pushgateway = argv[++i];
    } else if (arg == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::stoi(argv[++i]));
    } else if (arg == "--rows" && i + 1 < argc) {
      rows.clear();
      std::stringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');) {
        WrkRow row{};
        if (std::sscanf(item.c_str(), "%dx%d", &row.batch, &row.connections) != 2 ||
            (row.batch != 1 && row.batch != 100) || row.connections < 1) {
          std::fprintf(stderr, "--rows: '%s' is not 1xC or 100xC\n", item.c_str());
          return 2;
        }
        rows.push_back(row);
      }
    } else {
      bin = arg;
    }
  }
  if (wrk) return WrkComparison(bin, pushgateway, seconds, rows, repeat);
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
  std::vector<Config> configs = {{1, 1, 400},   {8, 1, 200},  {32, 1, 100},
                                 {1, 100, 100}, {8, 100, 50}, {32, 100, 25}};
  std::printf("%-10s %-6s %10s %12s %10s %10s %7s\n", "reporters", "batch", "requests", "points/s",
              "p50 ms", "p99 ms", "errors");
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
            reports.push_back(
                {{"step", step},
                 {"metrics",
                  {{"loss", 1.0 / static_cast<double>(step + 1)}, {"learning_rate", 3e-4}}}});
          }
          std::string body =
              cfg.batch == 1 ? reports[0].dump() : nlohmann::json{{"reports", reports}}.dump();
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
  std::printf(
      "(every acknowledged report is committed to SQLite with synchronous=FULL;\n"
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
        body += "{\"step\":" + std::to_string(s) +
                ",\"metrics\":{\"loss\":" + std::to_string(1.0 / (s + 1)) + "}}";
      }
      body += "]}";
      c.Request(http::verb::post, "/api/v1/jobs/bench-0/progress", body, tokens[0]);
    }
    double ingest_s = std::chrono::duration<double>(Clock::now() - t0).count();
    // The first read scans the series and keeps its summary; later reads,
    // with reports arriving between them, are answered from the summary.
    auto read = [&] {
      auto r0 = Clock::now();
      auto [status, text] =
          c.Request(http::verb::get, "/api/v1/jobs/bench-0/metrics/loss?buckets=500", "");
      if (status != 200) std::printf("read failed: %d\n", status);
      return std::chrono::duration<double, std::milli>(Clock::now() - r0).count();
    };
    double first = read();
    std::vector<double> reads;
    for (int i = 0; i < 20; ++i) {
      std::string body =
          "{\"step\":" + std::to_string(kPoints + i) + ",\"metrics\":{\"loss\":0.5}}";
      c.Request(http::verb::post, "/api/v1/jobs/bench-0/progress", body, tokens[0]);
      reads.push_back(read());
    }
    std::printf(
        "\n1M-point series: ingest %.1f s (%.0f points/s in 10k batches)\n"
        "chart read (500 buckets): first (scans the store) %.1f ms; "
        "then from its summary p50 %.2f ms, p99 %.2f ms (20 reads, a report before each)\n",
        ingest_s, kPoints / ingest_s, first, Percentile(reads, 0.5), Percentile(reads, 0.99));
  }

  {
    Connection c(port);
    StopJobs(c, "bench", kMaxReporters);
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  return 0;
}
