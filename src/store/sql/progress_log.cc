#include "store/sql/progress_log.h"

#include <charconv>
#include <cmath>

namespace headway::sql {
namespace {

// A report: "<step> <time ms> <total_steps> <epoch> <total_epochs> <n>"
// then n times " <name length>:<name> <value>", then "\n". An absent
// optional field is "-". Numbers by std::to_chars: the shortest text that
// reads back as the same double, "nan", "inf" and "-inf" included.
void AppendNumber(std::string& out, std::int64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

void AppendNumber(std::string& out, double v) {
  char buf[32];
  if (std::isnan(v)) {
    // Every NaN the same: the keyed tables keep no payload either.
    out += "nan";
    return;
  }
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

template <typename T>
void AppendOptional(std::string& out, const std::optional<T>& v) {
  out += ' ';
  if (v) {
    AppendNumber(out, *v);
  } else {
    out += '-';
  }
}

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

class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  bool done() const { return pos_ == text_.size(); }

  template <typename T>
  bool Number(T& v) {
    const char* first = text_.data() + pos_;
    const char* last = text_.data() + text_.size();
    auto [end, ec] = std::from_chars(first, last, v);
    if (ec != std::errc() || end == first) return false;
    pos_ += static_cast<std::size_t>(end - first);
    return true;
  }

  template <typename T>
  bool Optional(std::optional<T>& v) {
    if (!Expect(' ')) return false;
    if (pos_ < text_.size() && text_[pos_] == '-' &&
        (pos_ + 1 == text_.size() || text_[pos_ + 1] == ' ' || text_[pos_ + 1] == '\n')) {
      ++pos_;
      v.reset();
      return true;
    }
    T x{};
    if (!Number(x)) return false;
    v = x;
    return true;
  }

  bool Expect(char c) {
    if (pos_ >= text_.size() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  bool Take(std::size_t n, std::string& out) {
    if (text_.size() - pos_ < n) return false;
    out.assign(text_.substr(pos_, n));
    pos_ += n;
    return true;
  }

  std::size_t pos() const { return pos_; }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
};

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
