// Numbers written as text and read back bit for bit, for the store's own
// compact text forms (progress_log.h, progress_chunks.h). Internal to store/.
//
// std::to_chars gives the shortest text that reads back as the same double;
// every NaN is written "nan" (the stores keep no payload), the infinities
// "inf" and "-inf". An absent optional is "-".
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace headway::sql::line_codec {

inline void AppendNumber(std::string& out, std::int64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

inline void AppendNumber(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "nan";
    return;
  }
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

// " <v>" or " -".
template <typename T>
void AppendOptional(std::string& out, const std::optional<T>& v) {
  out += ' ';
  if (v) {
    AppendNumber(out, *v);
  } else {
    out += '-';
  }
}

// Reads what the Append functions wrote, left to right.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  bool done() const { return pos_ == text_.size(); }
  std::size_t pos() const { return pos_; }

  template <typename T>
  bool Number(T& v) {
    const char* first = text_.data() + pos_;
    const char* last = text_.data() + text_.size();
    auto [end, ec] = std::from_chars(first, last, v);
    if (ec != std::errc() || end == first) return false;
    pos_ += static_cast<std::size_t>(end - first);
    return true;
  }

  // " <v>" or " -".
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

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace headway::sql::line_codec
