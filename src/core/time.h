// Time as a value and as an injected dependency. Pure logic takes a Time
// parameter; components that need "now" take a Clock&, so tests drive them
// with a ManualClock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace headway {

using Time = std::chrono::time_point<std::chrono::system_clock, std::chrono::milliseconds>;
using Duration = std::chrono::milliseconds;

inline std::int64_t ToUnixMillis(Time t) { return t.time_since_epoch().count(); }
inline Time FromUnixMillis(std::int64_t ms) { return Time(Duration(ms)); }
inline double ToUnixSeconds(Time t) { return static_cast<double>(ToUnixMillis(t)) / 1000.0; }

// RFC 3339 in UTC with milliseconds: "2026-12-02T10:00:00.123Z".
std::string FormatRfc3339(Time t);
// Accepts "YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)"; nullopt when malformed.
std::optional<Time> ParseRfc3339(std::string_view text);

// "90" (seconds), "45s", "30m", "2h", "1h30m", "1d"; nullopt when malformed or negative.
std::optional<Duration> ParseDuration(std::string_view text);
// The inverse for display: "1h30m", "45s", "2d3h".
std::string FormatDuration(Duration d);

// Thread-safe source of the current time.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual Time Now() const = 0;
};

class SystemClock final : public Clock {
 public:
  Time Now() const override {
    return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
  }
};

// A clock that moves only when told to; for deterministic tests.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Time start) : now_ms_(ToUnixMillis(start)) {}
  Time Now() const override { return FromUnixMillis(now_ms_.load()); }
  void Advance(Duration d) { now_ms_ += d.count(); }

 private:
  std::atomic<std::int64_t> now_ms_;
};

}  // namespace headway
