#include "store/sql/progress_log.h"

#include "store/sql/line_codec.h"

namespace headway::sql {
namespace {

// A report: "<step> <time ms> <total_steps> <epoch> <total_epochs> <n>"
// then n times " <name length>:<name> <value>", then "\n". An absent
// optional field is "-"; numbers as line_codec.h writes them.
using line_codec::AppendNumber;
using line_codec::AppendOptional;
using line_codec::Reader;

void AppendReport(std::string& out, const ProgressReport& r, std::int64_t received_millis) {
  AppendNumber(out, r.step);
  out += ' ';
  AppendNumber(out, r.time ? ToUnixMillis(*r.time) : received_millis);
  AppendOptional(out, r.total_steps);
  AppendOptional(out, r.epoch);
  AppendOptional(out, r.total_epochs);
  out += ' ';
  AppendNumber(out, static_cast<std::int64_t>(r.metrics.size()));
  for (const auto& [name, value] : r.metrics) {
    out += ' ';
    AppendNumber(out, static_cast<std::int64_t>(name.size()));
    out += ':';
    out += name;
    out += ' ';
    AppendNumber(out, value);
  }
  out += '\n';
}

bool ReadReport(Reader& in, ProgressReport& r) {
  std::int64_t millis = 0, count = 0;
  if (!in.Number(r.step) || !in.Expect(' ') || !in.Number(millis)) return false;
  r.time = FromUnixMillis(millis);
  if (!in.Optional(r.total_steps) || !in.Optional(r.epoch) || !in.Optional(r.total_epochs)) {
    return false;
  }
  if (!in.Expect(' ') || !in.Number(count) || count < 0) return false;
  r.metrics.clear();
  std::string name;
  for (std::int64_t i = 0; i < count; ++i) {
    std::int64_t length = 0;
    double value = 0;
    if (!in.Expect(' ') || !in.Number(length) || length < 0 || !in.Expect(':') ||
        !in.Take(static_cast<std::size_t>(length), name) || !in.Expect(' ') || !in.Number(value)) {
      return false;
    }
    r.metrics.insert_or_assign(name, value);
  }
  return in.Expect('\n');
}

}  // namespace

std::vector<std::string> EncodeProgressLog(const std::vector<ProgressReport>& reports,
                                           std::int64_t received_millis, std::size_t max_bytes) {
  std::vector<std::string> texts;
  std::string text;
  for (const ProgressReport& r : reports) {
    std::size_t before = text.size();
    AppendReport(text, r, received_millis);
    if (text.size() > max_bytes && before > 0) {
      std::string last = text.substr(before);
      text.resize(before);
      texts.push_back(std::move(text));
      text = std::move(last);
    }
  }
  if (!text.empty()) texts.push_back(std::move(text));
  return texts;
}

Status DecodeProgressLog(std::string_view text,
                         const std::function<void(const ProgressReport&)>& visit) {
  Reader in(text);
  ProgressReport r;
  while (!in.done()) {
    if (!ReadReport(in, r)) {
      return InvalidArgument("progress log: unreadable report near byte " +
                             std::to_string(in.pos()));
    }
    visit(r);
  }
  return Status::Ok();
}

}  // namespace headway::sql
