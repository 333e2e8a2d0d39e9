#include "core/time.h"

#include <cctype>
#include <cstdio>
#include <ctime>

namespace headway {

std::string FormatRfc3339(Time t) {
  std::int64_t ms = ToUnixMillis(t);
  std::int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
  int millis = static_cast<int>(ms - secs * 1000);
  std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  return buf;
}

namespace {

bool ReadInt(std::string_view s, std::size_t& pos, int digits, int& out) {
  if (pos + digits > s.size()) return false;
  out = 0;
  for (int i = 0; i < digits; ++i) {
    char c = s[pos + i];
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  pos += digits;
  return true;
}

bool Expect(std::string_view s, std::size_t& pos, char c) {
  if (pos >= s.size() || (s[pos] != c && !(c == 'T' && s[pos] == 't'))) return false;
  ++pos;
  return true;
}

}  // namespace

std::optional<Time> ParseRfc3339(std::string_view s) {
  std::size_t pos = 0;
  int year, month, day, hour, minute, second;
  if (!ReadInt(s, pos, 4, year) || !Expect(s, pos, '-') || !ReadInt(s, pos, 2, month) ||
      !Expect(s, pos, '-') || !ReadInt(s, pos, 2, day) || !Expect(s, pos, 'T') ||
      !ReadInt(s, pos, 2, hour) || !Expect(s, pos, ':') || !ReadInt(s, pos, 2, minute) ||
      !Expect(s, pos, ':') || !ReadInt(s, pos, 2, second)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  int millis = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int scale = 100;
    std::size_t start = pos;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
      millis += (s[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return std::nullopt;
  }
  int offset_minutes = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int sign = s[pos] == '-' ? -1 : 1;
    ++pos;
    int oh, om;
    if (!ReadInt(s, pos, 2, oh) || !Expect(s, pos, ':') || !ReadInt(s, pos, 2, om)) {
      return std::nullopt;
    }
    offset_minutes = sign * (oh * 60 + om);
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  std::int64_t secs = static_cast<std::int64_t>(timegm(&tm)) - offset_minutes * 60;
  return FromUnixMillis(secs * 1000 + millis);
}

std::optional<Duration> ParseDuration(std::string_view s) {
  if (s.empty()) return std::nullopt;
  bool all_digits = true;
  for (char c : s) all_digits = all_digits && std::isdigit(static_cast<unsigned char>(c));
  if (all_digits) {
    if (s.size() > 12) return std::nullopt;
    return Duration(std::stoll(std::string(s)) * 1000);
  }
  std::int64_t total_ms = 0;
  std::size_t pos = 0;
  while (pos < s.size()) {
    std::size_t start = pos;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
    if (pos == start || pos == s.size() || pos - start > 9) return std::nullopt;
    std::int64_t n = std::stoll(std::string(s.substr(start, pos - start)));
    std::int64_t unit_ms;
    if (s.substr(pos, 2) == "ms") {
      unit_ms = 1;
      pos += 2;
    } else {
      switch (s[pos]) {
        case 's':
          unit_ms = 1000;
          break;
        case 'm':
          unit_ms = 60 * 1000;
          break;
        case 'h':
          unit_ms = 3600 * 1000;
          break;
        case 'd':
          unit_ms = 86400 * 1000;
          break;
        default:
          return std::nullopt;
      }
      ++pos;
    }
    total_ms += n * unit_ms;
  }
  return Duration(total_ms);
}

std::string FormatDuration(Duration d) {
  std::int64_t s = d.count() / 1000;
  if (s < 0) s = 0;
  std::int64_t days = s / 86400, hours = (s % 86400) / 3600, minutes = (s % 3600) / 60,
               seconds = s % 60;
  auto part = [](std::int64_t v, const char* unit) { return std::to_string(v) + unit; };
  if (days > 0) return part(days, "d") + (hours ? part(hours, "h") : "");
  if (hours > 0) return part(hours, "h") + (minutes ? part(minutes, "m") : "");
  if (minutes > 0) return part(minutes, "m") + (seconds ? part(seconds, "s") : "");
  return part(seconds, "s");
}

}  // namespace headway
