#include "server/marker_scanner.h"

#include <cstdio>

namespace headway {

std::vector<ProgressReport> MarkerScanner::Scan(const std::vector<LogFile>& files,
                                                int& malformed) {
  constexpr std::size_t kMaxRead = 1 << 20;  // per file per scan
  constexpr std::size_t kMaxLine = 1 << 16;  // longer lines are not markers
  constexpr std::string_view kMarker = "HEADWAY ";
  std::vector<ProgressReport> reports;
  for (const LogFile& file : files) {
    Cursor& c = cursors_[file.path];
    FILE* f = std::fopen(file.path.c_str(), "rb");
    if (f == nullptr) continue;
    std::fseek(f, c.offset, SEEK_SET);
    std::string data(kMaxRead, '\0');
    std::size_t n = std::fread(data.data(), 1, data.size(), f);
    std::fclose(f);
    data.resize(n);
    c.offset += static_cast<long>(n);
    c.partial += data;
    std::size_t start = 0;
    for (std::size_t nl; (nl = c.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string_view line(c.partial.data() + start, nl - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.substr(0, kMarker.size()) != kMarker) continue;
      auto decoded = DecodeProgressReports(line.substr(kMarker.size()));
      if (!decoded.ok()) {
        ++malformed;
        continue;
      }
      for (auto& r : *decoded) reports.push_back(std::move(r));
    }
    c.partial.erase(0, start);
    if (c.partial.size() > kMaxLine) c.partial.clear();
  }
  return reports;
}

void MarkerScanner::Forget(const std::vector<LogFile>& files) {
  for (const LogFile& f : files) cursors_.erase(f.path);
}

}  // namespace headway
