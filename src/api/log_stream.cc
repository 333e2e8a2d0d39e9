#include "api/log_stream.h"

namespace headway::api {

LogReader::Source LogReader::Open(LogFile file, const LogStart& start) {
  LogCursor cursor = start.tail_lines || start.tail_bytes
                         ? LogCursor::Tail(file.path, start.tail_lines, start.tail_bytes)
                         : LogCursor(file.path, /*from_rotated=*/true);
  return Source{std::move(file), std::move(cursor), {}, {}, -1};
}

LogReader::LogReader(std::vector<LogFile> files, bool prefix_ranks, LogStart start)
    : prefix_ranks_(prefix_ranks), start_(start) {
  for (auto& f : files) sources_.push_back(Open(std::move(f), start_));
}

void LogReader::AddMissing(const std::vector<LogFile>& files) {
  for (const LogFile& f : files) {
    bool known = false;
    for (const Source& s : sources_) known = known || s.file.path == f.path;
    if (!known) sources_.push_back(Open(f, start_));
  }
}

void LogReader::ReadNew(std::string& out, bool flush_partial) {
  constexpr std::size_t kMaxChunk = 1 << 20;  // bounds memory per poll on a huge log
  for (Source& s : sources_) {
    if (!prefix_ranks_ && !start_.needs_times()) {
      s.cursor.Read(out, kMaxChunk);
      continue;
    }
    // A chunk cut at kMaxChunk is not the end of the file: its last line goes on.
    bool at_end =
        s.cursor.Read(s.partial, kMaxChunk, start_.needs_times() ? &s.times : nullptr) < kMaxChunk;
    TakeLines(s, out, flush_partial, at_end);
  }
}

void LogReader::TakeLines(Source& s, std::string& out, bool flush_partial, bool at_end) {
  std::size_t next_time = 0;              // the first mark not applied yet
  std::int64_t in_effect = s.partial_ms;  // the time of the byte looked at
  auto time_at = [&](std::size_t pos) {
    while (next_time < s.times.size() && s.times[next_time].pos <= pos) {
      in_effect = s.times[next_time++].unix_ms;
    }
    return in_effect;
  };
  auto emit = [&](std::size_t from, std::size_t length, bool add_newline) {
    std::int64_t written = time_at(from);
    if (start_.since && written >= 0 && written < ToUnixMillis(*start_.since)) return;
    if (prefix_ranks_) out += "[rank " + std::to_string(s.file.rank) + "] ";
    if (start_.timestamps && written >= 0) out += FormatRfc3339(FromUnixMillis(written)) + " ";
    out.append(s.partial, from, length);
    if (add_newline) out += '\n';
  };
  std::size_t start = 0;
  for (std::size_t nl; (nl = s.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    emit(start, nl - start + 1, false);
  }
  if (flush_partial && at_end && start < s.partial.size()) {
    emit(start, s.partial.size() - start, true);
    start = s.partial.size();
  }
  // What is left starts at `start`: keep its time and the marks within it.
  s.partial_ms = time_at(start);
  s.partial.erase(0, start);
  std::vector<LogTimeAt> left;
  for (std::size_t i = next_time; i < s.times.size(); ++i) {
    left.push_back({s.times[i].pos - start, s.times[i].unix_ms});
  }
  s.times = std::move(left);
}

LogFollowStream::LogFollowStream(std::function<FollowView()> view, int attempt,
                                 std::vector<LogFile> files, bool prefix_ranks, bool pin_attempt,
                                 LogStart start, std::optional<std::uint64_t> limit_bytes)
    : view_(std::move(view)),
      attempt_(attempt),
      reader_(std::move(files), prefix_ranks, start),
      next_attempt_start_{
          .tail_lines = {}, .tail_bytes = {}, .since = start.since, .timestamps = start.timestamps},
      prefix_ranks_(prefix_ranks),
      pin_attempt_(pin_attempt),
      limit_bytes_(limit_bytes) {}

std::chrono::milliseconds LogFollowStream::interval() const {
  return busy_ ? std::chrono::milliseconds(0) : std::chrono::milliseconds(200);
}

bool LogFollowStream::Read(std::string& out) {
  // Look before reading: output written before the job ended or restarted is
  // then certainly read by this pass.
  FollowView view = view_();
  bool moved_on = !pin_attempt_ && view.attempt != attempt_;
  bool writer_done = view.finished || moved_on || (pin_attempt_ && view.attempt != attempt_);
  if (view.attempt == attempt_) reader_.AddMissing(view.files);
  std::size_t before = out.size();
  reader_.ReadNew(out, writer_done);
  busy_ = out.size() != before;
  if (busy_) return true;  // a chunk may have been capped: read again first
  if (moved_on) {
    attempt_ = view.attempt;
    reader_ = LogReader(std::move(view.files), prefix_ranks_, next_attempt_start_);
    out += "headway: job restarted, following attempt " + std::to_string(attempt_) + "\n";
    busy_ = true;
    return true;
  }
  return !writer_done;
}

bool LogFollowStream::Next(std::string& out) {
  if (!limit_bytes_) return Read(out);
  bool more = Read(held_);
  // Whole lines only, unless the writer is done: then a partial last line is final.
  std::size_t newline = held_.rfind('\n');
  std::size_t ready = more ? (newline == std::string::npos ? 0 : newline + 1) : held_.size();
  const std::uint64_t room = *limit_bytes_ - sent_;
  if (held_.size() <= room) {
    out.append(held_, 0, ready);
    held_.erase(0, ready);
    sent_ += ready;
    return more;
  }
  // Over the limit: the whole lines that fit, then say so.
  std::size_t fit = 0;
  if (room > 0) {
    std::size_t last = held_.rfind('\n', static_cast<std::size_t>(room) - 1);
    fit = last == std::string::npos ? 0 : last + 1;
  }
  out.append(held_, 0, fit);
  held_.clear();
  out += "headway: output cut at limit_bytes=" + std::to_string(*limit_bytes_) + "\n";
  busy_ = false;
  return false;
}

}  // namespace headway::api
