#include "api/log_stream.h"

namespace headway::api {

LogReader::LogReader(std::vector<LogFile> files, bool prefix_ranks) : prefix_ranks_(prefix_ranks) {
  for (auto& f : files) sources_.push_back({std::move(f), 0, {}});
}

void LogReader::ReadNew(std::string& out, bool flush_partial) {
  constexpr std::size_t kMaxChunk = 1 << 20;  // bounds memory per poll on a huge log
  for (Source& s : sources_) {
    FILE* f = std::fopen(s.file.path.c_str(), "rb");
    if (f == nullptr) continue;  // not created yet
    std::fseek(f, s.offset, SEEK_SET);
    std::string data(kMaxChunk, '\0');
    std::size_t n = std::fread(data.data(), 1, data.size(), f);
    std::fclose(f);
    data.resize(n);
    s.offset += static_cast<long>(n);
    if (!prefix_ranks_) {
      out += data;
      continue;
    }
    s.partial += data;
    std::size_t start = 0;
    for (std::size_t nl; (nl = s.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
      out += "[rank " + std::to_string(s.file.rank) + "] ";
      out.append(s.partial, start, nl - start + 1);
    }
    s.partial.erase(0, start);
    if (flush_partial && !s.partial.empty()) {
      out += "[rank " + std::to_string(s.file.rank) + "] " + s.partial + "\n";
      s.partial.clear();
    }
  }
}

bool LogFollowStream::Next(std::string& out) {
  // Check before reading: output written before the job ended is then
  // certainly read by this pass.
  bool finished = finished_();
  std::size_t before = out.size();
  reader_.ReadNew(out, finished);
  // A chunk may have been capped; keep going until a pass reads nothing.
  return !(finished && out.size() == before);
}

}  // namespace headway::api
