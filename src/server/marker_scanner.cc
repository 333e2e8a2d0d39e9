#include "server/marker_scanner.h"

#include <sys/stat.h>

#include <cstdio>

#include "core/stdout_metrics.h"

namespace headway {

std::vector<ProgressReport> MarkerScanner::Scan(const std::vector<LogFile>& files, int& malformed,
                                                std::vector<LogFile>* rotated,
                                                const std::set<std::string>* stdout_metrics,
                                                std::string* why) {
  constexpr std::size_t kMaxRead = 1 << 20;  // per file per scan
  constexpr std::size_t kMaxLine = 1 << 16;  // longer lines are not markers
  constexpr std::string_view kMarker = "HEADWAY ";
  std::vector<ProgressReport> reports;
  const auto now = std::chrono::steady_clock::now();
  Sweep(now);
  for (const LogFile& file : files) {
    Cursor& c = cursors_.try_emplace(file.path, file.path).first->second;
    c.last_scan = now;
    c.file.Read(c.partial, kMaxRead);
    if (!c.rotated && rotated != nullptr) {
      struct stat st {};
      if (c.file.rotations() > 0 || ::stat((file.path + ".1").c_str(), &st) == 0) {
        c.rotated = true;
        rotated->push_back(file);
      }
    }
    std::size_t start = 0;
    for (std::size_t nl; (nl = c.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string_view line(c.partial.data() + start, nl - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.substr(0, kMarker.size()) != kMarker) {
        if (stdout_metrics != nullptr && file.rank == 0) {
          auto metrics = ParseStdoutMetrics(line, *stdout_metrics);
          if (!metrics.empty()) {
            ProgressReport r;
            r.step = ++c.stdout_observations;
            r.metrics = std::move(metrics);
            reports.push_back(std::move(r));
          }
        }
        continue;
      }
      auto decoded = DecodeMarkerReports(line.substr(kMarker.size()));
      if (!decoded.ok()) {
        ++malformed;
        if (why != nullptr && why->empty()) {
          const Status& e = decoded.status();
          *why = "rank " + std::to_string(file.rank) + ": " +
                 (e.field().empty() ? "" : e.field() + ": ") + e.message();
        }
        continue;
      }
      for (auto& r : *decoded) reports.push_back(std::move(r));
    }
    c.partial.erase(0, start);
    if (c.partial.size() > kMaxLine) c.partial.clear();
  }
  return reports;
}

void MarkerScanner::Sweep(std::chrono::steady_clock::time_point now) {
  constexpr auto kIdle = std::chrono::minutes(1);
  if (now - last_sweep_ < kIdle / 4) return;
  last_sweep_ = now;
  std::erase_if(cursors_, [&](const auto& entry) { return now - entry.second.last_scan > kIdle; });
}

void MarkerScanner::Forget(const std::vector<LogFile>& files) {
  for (const LogFile& f : files) cursors_.erase(f.path);
}

}  // namespace headway
