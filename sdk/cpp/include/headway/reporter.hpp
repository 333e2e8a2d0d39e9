// Headway progress reporting for C++ training loops. Header-only, no
// dependencies beyond POSIX sockets and the C++17 standard library.
//
//   headway::Reporter reporter;                     // reads HEADWAY_URL/JOB/TOKEN
//   for (...) reporter.Report(step, {{"loss", loss}}, total_steps);
//   reporter.Flush(std::chrono::seconds(5));        // optional; the destructor flushes too
//
// Contract:
//  - Report() never blocks on the network and never throws: it appends to a
//    bounded in-memory queue (when full, the oldest point is dropped; the
//    newest is always kept) and returns. A background thread sends batches
//    to POST {HEADWAY_URL}/api/v1/jobs/{HEADWAY_JOB}/progress.
//  - Server down or slow: points stay queued (bounded) and are retried with
//    capped exponential backoff. A 4xx other than 429 drops the batch.
//  - Outside Headway (no HEADWAY_URL or HEADWAY_JOB) and on ranks other than
//    0 (RANK, else LOCAL_RANK), Report() is a no-op unless all_ranks is set.
//  - Thread-safe. The destructor flushes for at most Options::exit_timeout.
#pragma once

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace headway {

class Reporter {
 public:
  struct Options {
    std::string url;    // default: $HEADWAY_URL
    std::string job;    // default: $HEADWAY_JOB
    std::string token;  // default: $HEADWAY_TOKEN
    bool all_ranks = false;
    std::size_t max_queue = 10000;
    std::size_t batch_size = 500;
    std::chrono::milliseconds interval{500};
    std::chrono::milliseconds request_timeout{10000};
    std::chrono::milliseconds max_backoff{30000};
    std::chrono::milliseconds exit_timeout{5000};
  };

  Reporter() : Reporter(Options{}) {}
  explicit Reporter(Options options) : options_(std::move(options)) {
    auto env = [](const char* name) {
      const char* v = std::getenv(name);
      return std::string(v ? v : "");
    };
    if (options_.url.empty()) options_.url = env("HEADWAY_URL");
    if (options_.job.empty()) options_.job = env("HEADWAY_JOB");
    if (options_.token.empty()) options_.token = env("HEADWAY_TOKEN");
    std::string rank = env("RANK").empty() ? env("LOCAL_RANK") : env("RANK");
    bool rank0 = rank.empty() || rank == "0";
    enabled_ = !options_.url.empty() && !options_.job.empty() && (rank0 || options_.all_ranks) &&
               ParseUrl();
    if (enabled_) thread_ = std::thread([this] { Run(); });
  }

  ~Reporter() {
    if (!enabled_) return;
    Flush(options_.exit_timeout);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  bool enabled() const { return enabled_; }

  // Queues one report. Metric values may be NaN/inf (sent as "NaN" etc.).
  void Report(std::int64_t step, const std::map<std::string, double>& metrics = {},
              std::optional<std::int64_t> total_steps = std::nullopt,
              std::optional<double> epoch = std::nullopt) noexcept {
    if (!enabled_ || step < 0) return;
    try {
      std::string point = Encode(step, metrics, total_steps, epoch);
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.size() >= options_.max_queue) {
        queue_.pop_front();
        // The oldest entries may be on the wire right now; they are
        // accounted for when that request ends.
        if (in_flight_ > overflow_in_flight_) {
          ++overflow_in_flight_;
        } else {
          ++dropped_;
        }
      }
      queue_.push_back(std::move(point));
      ++queued_total_;
      wake_.notify_one();
    } catch (...) {
      // Out of memory or similar: losing a progress point beats crashing training.
    }
  }

  // Waits until everything queued so far is acknowledged; false on timeout.
  bool Flush(std::chrono::milliseconds timeout) {
    if (!enabled_) return true;
    std::unique_lock<std::mutex> lock(mu_);
    std::uint64_t target = queued_total_;
    flush_requested_ = true;
    wake_.notify_one();
    return done_.wait_for(lock, timeout, [&] { return acked_total_ + dropped_ >= target; });
  }

  std::uint64_t acknowledged() const {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_total_;
  }
  std::uint64_t dropped() const {
    std::lock_guard<std::mutex> lock(mu_);
    return dropped_;
  }

 private:
  static std::string Number(double v) {
    if (std::isnan(v)) return "\"NaN\"";
    if (std::isinf(v)) return v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
  }

  static bool ValidName(const std::string& name) {
    if (name.empty() || name.size() > 128) return false;
    for (char c : name) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '.' || c == '/' || c == '-';
      if (!ok) return false;
    }
    return true;
  }

  static std::string Encode(std::int64_t step, const std::map<std::string, double>& metrics,
                            std::optional<std::int64_t> total_steps, std::optional<double> epoch) {
    std::string out = "{\"step\":" + std::to_string(step);
    if (total_steps && *total_steps > 0) out += ",\"total_steps\":" + std::to_string(*total_steps);
    if (epoch && std::isfinite(*epoch) && *epoch >= 0) out += ",\"epoch\":" + Number(*epoch);
    std::string m;
    for (const auto& kv : metrics) {
      if (!ValidName(kv.first)) continue;  // the server would refuse the whole report
      if (!m.empty()) m += ",";
      m += "\"" + kv.first + "\":" + Number(kv.second);
    }
    if (!m.empty()) out += ",\"metrics\":{" + m + "}";
    auto now = std::chrono::system_clock::now();
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
    std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char time[64];
    std::snprintf(time, sizeof time, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<int>(ms % 1000));
    out += ",\"time\":\"" + std::string(time) + "\"}";
    return out;
  }

  bool ParseUrl() {
    const std::string prefix = "http://";
    if (options_.url.compare(0, prefix.size(), prefix) != 0) return false;
    std::string rest = options_.url.substr(prefix.size());
    auto slash = rest.find('/');
    if (slash != std::string::npos) rest = rest.substr(0, slash);
    auto colon = rest.rfind(':');
    host_ = colon == std::string::npos ? rest : rest.substr(0, colon);
    port_ = colon == std::string::npos ? "80" : rest.substr(colon + 1);
    return !host_.empty();
  }

  // One HTTP/1.1 POST on a fresh connection; the status code, or -1.
  int Post(const std::string& body) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* addrs = nullptr;
    if (getaddrinfo(host_.c_str(), port_.c_str(), &hints, &addrs) != 0) return -1;
    int fd = -1;
    for (addrinfo* a = addrs; a != nullptr && fd < 0; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        ::close(fd);
        fd = -1;
      }
    }
    freeaddrinfo(addrs);
    if (fd < 0) return -1;
    timeval tv{static_cast<time_t>(options_.request_timeout.count() / 1000),
               static_cast<suseconds_t>((options_.request_timeout.count() % 1000) * 1000)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    std::string request = "POST /api/v1/jobs/" + options_.job + "/progress HTTP/1.1\r\nHost: " +
                          host_ + "\r\nAuthorization: Bearer " + options_.token +
                          "\r\nContent-Type: application/json\r\nConnection: close\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    std::size_t sent = 0;
    while (sent < request.size()) {
      ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) {
        ::close(fd);
        return -1;
      }
      sent += static_cast<std::size_t>(n);
    }
    char buf[512];
    ssize_t n = ::recv(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    if (n < 12) return -1;
    buf[n] = '\0';
    int status = -1;
    if (std::sscanf(buf, "HTTP/1.%*d %d", &status) != 1) return -1;
    return status;
  }

  void Run() {
    auto backoff = std::chrono::milliseconds(500);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait_for(lock, options_.interval,
                     [this] { return stopping_ || flush_requested_ || queue_.size() >= options_.batch_size; });
      if (queue_.empty()) {
        flush_requested_ = false;
        done_.notify_all();
        if (stopping_) return;
        continue;
      }
      if (stopping_ && !flush_requested_) return;
      std::size_t n = std::min(queue_.size(), options_.batch_size);
      std::string body = "{\"reports\":[";
      for (std::size_t i = 0; i < n; ++i) body += (i ? "," : "") + queue_[i];
      body += "]}";
      in_flight_ = n;
      overflow_in_flight_ = 0;
      lock.unlock();
      int status = Post(body);
      lock.lock();
      std::size_t already_gone = overflow_in_flight_;  // sent entries Report() evicted meanwhile
      in_flight_ = 0;
      overflow_in_flight_ = 0;
      bool delivered = status >= 200 && status < 300;
      bool refused = status >= 400 && status < 500 && status != 429;
      if (delivered || refused) {
        queue_.erase(queue_.begin(), queue_.begin() + static_cast<long>(n - already_gone));
        if (delivered) {
          acked_total_ += n;
        } else {
          dropped_ += n;
        }
        backoff = std::chrono::milliseconds(500);
        done_.notify_all();
      } else {
        dropped_ += already_gone;
        if (stopping_) return;
        wake_.wait_for(lock, backoff, [this] { return stopping_; });
        backoff = std::min(backoff * 2, options_.max_backoff);
      }
    }
  }

  Options options_;
  bool enabled_ = false;
  std::string host_, port_;
  mutable std::mutex mu_;
  std::condition_variable wake_, done_;
  std::deque<std::string> queue_;
  std::uint64_t queued_total_ = 0, acked_total_ = 0, dropped_ = 0;
  std::size_t in_flight_ = 0, overflow_in_flight_ = 0;
  bool flush_requested_ = false, stopping_ = false;
  std::thread thread_;
};

}  // namespace headway
