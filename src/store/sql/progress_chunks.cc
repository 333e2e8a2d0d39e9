#include "store/sql/progress_chunks.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "store/sql/line_codec.h"

namespace headway::sql {

using line_codec::AppendNumber;
using line_codec::AppendOptional;
using line_codec::Reader;

void AppendStepLine(std::string& out, std::int64_t step, std::int64_t time_millis,
                    const std::optional<std::int64_t>& total_steps,
                    const std::optional<double>& epoch, const std::optional<double>& total_epochs) {
  AppendNumber(out, step);
  out += ' ';
  AppendNumber(out, time_millis);
  AppendOptional(out, total_steps);
  AppendOptional(out, epoch);
  AppendOptional(out, total_epochs);
  out += '\n';
}

void AppendMetricLine(std::string& out, std::int64_t step, double value) {
  AppendNumber(out, step);
  out += ' ';
  AppendNumber(out, value);
  out += '\n';
}

Status SplitChunk(std::string_view text, std::vector<SeriesLine>& lines) {
  const char* p = text.data();
  const char* end = text.data() + text.size();
  bool first = true;
  std::int64_t previous = 0;
  while (p != end) {
    std::int64_t step = 0;
    auto [after, ec] = std::from_chars(p, end, step);
    const void* newline = std::memchr(p, '\n', static_cast<std::size_t>(end - p));
    if (ec != std::errc() || after == end || *after != ' ' || newline == nullptr ||
        (!first && step <= previous)) {
      return Internal("progress chunk: unreadable line at byte " + std::to_string(p - text.data()));
    }
    const char* next = static_cast<const char*>(newline) + 1;
    lines.push_back({step, std::string_view(p, static_cast<std::size_t>(next - p))});
    previous = step;
    first = false;
    p = next;
  }
  return Status::Ok();
}

namespace {

Status Unreadable(const Reader& in) {
  return Internal("progress chunk: unreadable point near byte " + std::to_string(in.pos()));
}

}  // namespace

Status DecodeStepChunk(std::string_view text, const std::function<void(const StepPoint&)>& visit) {
  Reader in(text);
  StepPoint p;
  while (!in.done()) {
    std::int64_t millis = 0;
    if (!in.Number(p.step) || !in.Expect(' ') || !in.Number(millis) ||
        !in.Optional(p.total_steps) || !in.Optional(p.epoch) || !in.Optional(p.total_epochs) ||
        !in.Expect('\n')) {
      return Unreadable(in);
    }
    p.time = FromUnixMillis(millis);
    visit(p);
  }
  return Status::Ok();
}

Status DecodeMetricChunk(std::string_view text,
                         const std::function<void(const MetricPoint&)>& visit) {
  Reader in(text);
  MetricPoint p;
  while (!in.done()) {
    if (!in.Number(p.step) || !in.Expect(' ') || !in.Number(p.value) || !in.Expect('\n')) {
      return Unreadable(in);
    }
    visit(p);
  }
  return Status::Ok();
}

bool LeavesChunkAlone(std::size_t points, std::size_t new_points, std::size_t max_points) {
  return points >= max_points || (2 * points >= max_points && points + new_points > max_points);
}

Result<ChunkChanges> MergeIntoChunks(std::span<const Chunk> stored,
                                     std::span<const SeriesLine> fresh, std::size_t max_points) {
  if (fresh.empty()) return InvalidArgument("no points to merge");
  max_points = std::max<std::size_t>(1, max_points);
  std::span<const Chunk> rewritten = stored;
  if (!stored.empty() && stored.front().last_step < fresh.front().step &&
      LeavesChunkAlone(stored.front().points, fresh.size(), max_points)) {
    rewritten = stored.subspan(1);
  }
  std::vector<SeriesLine> old;
  for (const Chunk& chunk : rewritten) {
    const std::size_t before = old.size();
    HEADWAY_RETURN_IF_ERROR(SplitChunk(chunk.text, old));
    if (before > 0 && old.size() > before && old[before].step <= old[before - 1].step) {
      return Internal("progress chunks overlap at step " + std::to_string(old[before].step));
    }
  }
  std::vector<SeriesLine> merged;
  merged.reserve(old.size() + fresh.size());
  std::size_t i = 0, j = 0;
  while (i < old.size() || j < fresh.size()) {
    if (j == fresh.size() || (i < old.size() && old[i].step < fresh[j].step)) {
      merged.push_back(old[i++]);
    } else {
      if (i < old.size() && old[i].step == fresh[j].step) ++i;  // replaced
      merged.push_back(fresh[j++]);
    }
  }
  ChunkChanges changes;
  for (std::size_t begin = 0; begin < merged.size(); begin += max_points) {
    const std::size_t end = std::min(merged.size(), begin + max_points);
    Chunk& chunk = changes.write.emplace_back();
    chunk.first_step = merged[begin].step;
    chunk.last_step = merged[end - 1].step;
    chunk.points = end - begin;
    std::size_t bytes = 0;
    for (std::size_t k = begin; k < end; ++k) bytes += merged[k].line.size();
    chunk.text.reserve(bytes);
    for (std::size_t k = begin; k < end; ++k) chunk.text += merged[k].line;
  }
  for (const Chunk& chunk : rewritten) {
    const bool kept = std::any_of(changes.write.begin(), changes.write.end(),
                                  [&](const Chunk& c) { return c.first_step == chunk.first_step; });
    if (!kept) changes.remove.push_back(chunk.first_step);
  }
  return changes;
}

}  // namespace headway::sql
