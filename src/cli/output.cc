#include "cli/output.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "core/terminal_text.h"

namespace headway::cli {

std::string Safe(std::string_view text) { return EscapeForTerminal(text); }

namespace {

std::vector<std::string> SafeRow(const std::vector<std::string>& row) {
  std::vector<std::string> out;
  out.reserve(row.size());
  for (const std::string& cell : row) out.push_back(Safe(cell));
  return out;
}

// Serialised JSON or YAML with the control characters their writers leave
// raw (DEL, C1 in UTF-8, bidi overrides) written as \u escapes. Such
// characters occur only inside double-quoted strings there, where both
// formats read \uXXXX as the same character.
std::string EscapeRawControls(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    auto third = i + 2 < text.size() ? static_cast<unsigned char>(text[i + 2]) : 0;
    char buf[8];
    if (c == 0x7F) {
      out += "\\u007f";
    } else if (c == 0xC2 && next >= 0x80 && next <= 0x9F) {
      std::snprintf(buf, sizeof buf, "\\u%04x", next);
      out += buf;
      ++i;
    } else if (c == 0xE2 && ((next == 0x80 && (third == 0x8E || third == 0x8F ||
                                               (third >= 0xAA && third <= 0xAE))) ||
                             (next == 0x81 && third >= 0xA6 && third <= 0xA9))) {
      unsigned int cp = 0x2000 + ((next & 0x3F) << 6) + (third & 0x3F);
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      out += buf;
      i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace

std::string ToJson(const nlohmann::json& value) {
  return EscapeRawControls(value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::vector<std::size_t> TableWidths(const std::vector<std::string>& header,
                                     const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], DisplayWidth(Safe(row[i])));
    }
  };
  measure(header);
  for (const auto& row : rows) measure(row);
  return width;
}

std::string FormatTableRow(const std::vector<std::string>& raw_row,
                           const std::vector<std::size_t>& width) {
  std::vector<std::string> row = SafeRow(raw_row);
  std::string line;
  for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) {
    line += row[i];
    std::size_t shown = DisplayWidth(row[i]);
    if (i + 1 < row.size()) line += std::string(width[i] > shown ? width[i] - shown + 3 : 3, ' ');
  }
  return line + "\n";
}

std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows, bool with_header) {
  std::vector<std::size_t> width = TableWidths(header, rows);
  std::string out;
  if (with_header) out += FormatTableRow(header, width);
  for (const auto& row : rows) out += FormatTableRow(row, width);
  return out;
}

std::string FormatSeconds(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  auto s = static_cast<std::int64_t>(std::llround(std::max(0.0, seconds)));
  char text[48];
  if (s < 60) {
    std::snprintf(text, sizeof text, "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(text, sizeof text, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(text, sizeof text, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>((s % 3600) / 60));
  } else {
    std::snprintf(text, sizeof text, "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>((s % 86400) / 3600));
  }
  return text;
}

std::string Age(const std::string& rfc3339, Time now) {
  auto t = ParseRfc3339(rfc3339);
  if (!t) return "-";
  return FormatSeconds(static_cast<double>((now - *t).count()) / 1000.0);
}

namespace {

// |value| rounded to `k` significant decimal digits the way JavaScript's
// toExponential, toPrecision and toFixed round: on the exact decimal value
// of the double, a tie going away from zero (C's printf rounds ties to
// even). Returns the digits; `exp10` is the power of ten of the first.
// With k <= 0 the result is "0" or, when it rounds up, "1" one place higher.
std::string RoundDigits(double value, int k, int& exp10) {
  char text[128];
  std::snprintf(text, sizeof text, "%.80e", std::fabs(value));
  std::string mantissa;
  const char* e = std::strchr(text, 'e');
  for (const char* c = text; c < e; ++c) {
    if (*c != '.') mantissa += *c;
  }
  exp10 = std::atoi(e + 1);
  if (k <= 0) {
    bool up = k == 0 && mantissa[0] >= '5';
    if (up) exp10 += 1;
    return up ? "1" : "0";
  }
  bool up = static_cast<std::size_t>(k) < mantissa.size() && mantissa[k] >= '5';
  std::string digits = mantissa.substr(0, static_cast<std::size_t>(k));
  if (up) {
    int i = k - 1;
    while (i >= 0 && digits[i] == '9') digits[i--] = '0';
    if (i < 0) {
      digits = "1" + digits.substr(0, digits.size() - 1);
      exp10 += 1;
    } else {
      ++digits[i];
    }
  }
  return digits;
}

// The double the digits stand for.
double FromDigits(bool negative, const std::string& digits, int exp10) {
  std::string text = std::string(negative ? "-" : "") + digits.substr(0, 1) + "." +
                     (digits.size() > 1 ? digits.substr(1) : "0") + "e" + std::to_string(exp10);
  return std::strtod(text.c_str(), nullptr);
}

// JavaScript's toExponential(2): "1.23e+5", the exponent without padding.
std::string Exponential(double value) {
  int exp10 = 0;
  std::string digits = RoundDigits(value, 3, exp10);
  return std::string(value < 0 ? "-" : "") + digits.substr(0, 1) + "." + digits.substr(1) + "e" +
         (exp10 < 0 ? "-" : "+") + std::to_string(std::abs(exp10));
}

}  // namespace

std::string FormatMetric(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();  // NaN, Infinity
  if (!value.is_number()) return "-";
  double v = value.get<double>();
  if (v == 0) return "0";
  if (!std::isfinite(v)) return v != v ? "NaN" : v > 0 ? "Infinity" : "-Infinity";
  double a = std::fabs(v);
  if (a >= 1e5 || a < 1e-3) return Exponential(v);
  // Number(v.toPrecision(4)), printed as JavaScript prints a number: the
  // shortest text that reads back the same.
  int exp10 = 0;
  std::string digits = RoundDigits(v, 4, exp10);
  double rounded = FromDigits(v < 0, digits, exp10);
  char out[64];
  auto result = std::to_chars(out, out + sizeof out, rounded, std::chars_format::fixed);
  return std::string(out, result.ptr);
}

std::string FormatFixed(const nlohmann::json& value, int digits) {
  if (!value.is_number()) return "-";
  if (value.is_number_integer()) return value.dump();
  double v = value.get<double>();
  if (!std::isfinite(v)) return "-";
  if (v == std::trunc(v) && std::fabs(v) < 1e15) {
    return std::to_string(static_cast<long long>(v));
  }
  // toFixed(digits): rounded on the decimal value, ties away from zero.
  char text[128];
  std::snprintf(text, sizeof text, "%.80e", std::fabs(v));
  int exp10 = std::atoi(std::strchr(text, 'e') + 1);
  std::string rounded = RoundDigits(v, exp10 + 1 + digits, exp10);
  double r = FromDigits(v < 0, rounded, exp10);
  std::snprintf(text, sizeof text, "%.*f", digits, r);
  return text;
}

std::string FormatPercent(double percent) {
  if (!std::isfinite(percent)) return "-";
  return std::to_string(static_cast<long long>(std::floor(percent))) + "%";
}

namespace {

void Emit(YAML::Emitter& out, const nlohmann::json& v) {
  if ((v.is_object() || v.is_array()) && v.empty()) out << YAML::Flow;
  if (v.is_object()) {
    out << YAML::BeginMap;
    for (auto it = v.begin(); it != v.end(); ++it) {
      out << YAML::Key;
      if (Safe(it.key()) != it.key()) out << YAML::DoubleQuoted;
      out << it.key() << YAML::Value;
      Emit(out, it.value());
    }
    out << YAML::EndMap;
  } else if (v.is_array()) {
    out << YAML::BeginSeq;
    for (const auto& item : v) Emit(out, item);
    out << YAML::EndSeq;
  } else if (v.is_string()) {
    // Quote only what a YAML reader would otherwise take for a number or bool.
    const std::string& text = v.get_ref<const std::string&>();
    static const char* const kAmbiguous[] = {"true", "false", "null", "yes",   "no",  "on",
                                             "off",  "~",     "True", "False", "Null"};
    bool ambiguous = text.empty() || std::isdigit(static_cast<unsigned char>(text[0])) ||
                     text[0] == '-' || text[0] == '.' || text[0] == '+' ||
                     std::any_of(std::begin(kAmbiguous), std::end(kAmbiguous),
                                 [&](const char* word) { return text == word; });
    // Control characters only inside double quotes, where YAML escapes them.
    if (ambiguous || Safe(text) != text) out << YAML::DoubleQuoted;
    out << text;
  } else if (v.is_null()) {
    out << YAML::Null;
  } else {
    out << v.dump();
  }
}

}  // namespace

std::string ToYaml(const nlohmann::json& value) {
  YAML::Emitter out;
  Emit(out, value);
  return EscapeRawControls(std::string(out.c_str())) + "\n";
}

}  // namespace headway::cli
