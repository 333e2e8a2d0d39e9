#include "store/sql/progress_chunks.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string_view>

#include "store/sql/line_codec.h"

namespace headway::sql {

using line_codec::AppendNumber;
using line_codec::AppendOptional;
using line_codec::Reader;

void NewPoints::AddStep(std::int64_t step, std::int64_t time_millis,
                        const std::optional<std::int64_t>& total_steps,
                        const std::optional<double>& epoch,
                        const std::optional<double>& total_epochs) {
  const auto begin = static_cast<std::uint32_t>(text_.size());
  text_ += ' ';
  AppendNumber(text_, time_millis);
  AppendOptional(text_, total_steps);
  AppendOptional(text_, epoch);
  AppendOptional(text_, total_epochs);
  text_ += '\n';
  points_.push_back({step, begin, static_cast<std::uint32_t>(text_.size())});
}

void NewPoints::AddMetric(std::int64_t step, double value) {
  const auto begin = static_cast<std::uint32_t>(text_.size());
  text_ += ' ';
  AppendNumber(text_, value);
  text_ += '\n';
  points_.push_back({step, begin, static_cast<std::uint32_t>(text_.size())});
}

std::vector<SeriesLine> NewPoints::Sorted() {
  std::stable_sort(points_.begin(), points_.end(),
                   [](const Point& a, const Point& b) { return a.step < b.step; });
  std::vector<SeriesLine> lines;
  lines.reserve(points_.size());
  const std::string_view text(text_);
  for (std::size_t i = 0; i < points_.size(); ++i) {
    if (i + 1 < points_.size() && points_[i + 1].step == points_[i].step) continue;
    lines.push_back(
        {points_[i].step, text.substr(points_[i].begin, points_[i].end - points_[i].begin)});
  }
  return lines;
}

Status SplitChunk(std::string_view text, std::vector<SeriesLine>& lines) {
  const char* p = text.data();
  const char* end = text.data() + text.size();
  bool first = true;
  std::int64_t step = 0;
  while (p != end) {
    std::int64_t number = 0;
    auto [after, ec] = std::from_chars(p, end, number);
    const void* newline = std::memchr(p, '\n', static_cast<std::size_t>(end - p));
    if (ec != std::errc() || after == end || *after != ' ' || newline == nullptr ||
        (!first && (number <= 0 || __builtin_add_overflow(step, number, &number)))) {
      return Internal("progress chunk: unreadable line at byte " + std::to_string(p - text.data()));
    }
    step = number;
    const char* next = static_cast<const char*>(newline) + 1;
    lines.push_back({step, std::string_view(after, static_cast<std::size_t>(next - after))});
    first = false;
    p = next;
  }
  return Status::Ok();
}

namespace {

Status Unreadable(const Reader& in) {
  return Internal("progress chunk: unreadable point near byte " + std::to_string(in.pos()));
}

// The step of the next line: absolute on the first, a positive difference after.
bool ReadStep(Reader& in, bool first, std::int64_t& step) {
  std::int64_t number = 0;
  if (!in.Number(number)) return false;
  if (first) {
    step = number;
    return true;
  }
  return number > 0 && !__builtin_add_overflow(step, number, &step);
}

}  // namespace

Status DecodeStepChunk(std::string_view text, const std::function<void(const StepPoint&)>& visit) {
  Reader in(text);
  StepPoint p;
  for (bool first = true; !in.done(); first = false) {
    std::int64_t millis = 0;
    if (!ReadStep(in, first, p.step) || !in.Expect(' ') || !in.Number(millis) ||
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
  for (bool first = true; !in.done(); first = false) {
    if (!ReadStep(in, first, p.step) || !in.Expect(' ') || !in.Number(p.value) ||
        !in.Expect('\n')) {
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
    for (std::size_t k = begin; k < end; ++k) bytes += merged[k].rest.size() + 4;
    chunk.text.reserve(bytes);
    for (std::size_t k = begin; k < end; ++k) {
      AppendNumber(chunk.text, k == begin ? merged[k].step : merged[k].step - merged[k - 1].step);
      chunk.text += merged[k].rest;
    }
  }
  for (const Chunk& chunk : rewritten) {
    const bool kept = std::any_of(changes.write.begin(), changes.write.end(),
                                  [&](const Chunk& c) { return c.first_step == chunk.first_step; });
    if (!kept) changes.remove.push_back(chunk.first_step);
  }
  return changes;
}

}  // namespace headway::sql
