#include "api/log_stream.h"

namespace headway::api {

LogReader::LogReader(std::vector<LogFile> files, bool prefix_ranks) : prefix_ranks_(prefix_ranks) {
  for (auto& f : files) sources_.push_back({std::move(f), 0, {}});
}

void LogReader::AddMissing(const std::vector<LogFile>& files) {
  for (const LogFile& f : files) {
    bool known = false;
    for (const Source& s : sources_) known = known || s.file.path == f.path;
    if (!known) sources_.push_back({f, 0, {}});
  }
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

LogFollowStream::LogFollowStream(std::function<FollowView()> view, int attempt,
                                 std::vector<LogFile> files, bool prefix_ranks, bool pin_attempt)
    : view_(std::move(view)),
      attempt_(attempt),
      reader_(std::move(files), prefix_ranks),
      prefix_ranks_(prefix_ranks),
      pin_attempt_(pin_attempt) {}

bool LogFollowStream::Next(std::string& out) {
  // Look before reading: output written before the job ended or restarted is
  // then certainly read by this pass.
  FollowView view = view_();
  bool moved_on = !pin_attempt_ && view.attempt != attempt_;
  bool writer_done = view.finished || moved_on || (pin_attempt_ && view.attempt != attempt_);
  if (view.attempt == attempt_) reader_.AddMissing(view.files);
  std::size_t before = out.size();
  reader_.ReadNew(out, writer_done);
  if (out.size() != before) return true;  // a chunk may have been capped: read again first
  if (moved_on) {
    attempt_ = view.attempt;
    reader_ = LogReader(std::move(view.files), prefix_ranks_);
    out += "headway: job restarted, following attempt " + std::to_string(attempt_) + "\n";
    return true;
  }
  return !writer_done;
}

}  // namespace headway::api
