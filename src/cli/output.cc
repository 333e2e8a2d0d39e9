#include "cli/output.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
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

std::string FormatTable(const std::vector<std::string>& raw_header,
                        const std::vector<std::vector<std::string>>& raw_rows) {
  std::vector<std::string> header = SafeRow(raw_header);
  std::vector<std::vector<std::string>> rows;
  rows.reserve(raw_rows.size());
  for (const auto& row : raw_rows) rows.push_back(SafeRow(row));
  std::vector<std::size_t> width(header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  };
  measure(header);
  for (const auto& row : rows) measure(row);
  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 3, ' ');
    }
    out += line + "\n";
  };
  emit(header);
  for (const auto& row : rows) emit(row);
  return out;
}

std::string Age(const std::string& rfc3339, Time now) {
  auto t = ParseRfc3339(rfc3339);
  if (!t) return "<unknown>";
  std::int64_t s = std::max<std::int64_t>(0, (now - *t).count() / 1000);
  if (s < 120) return std::to_string(s) + "s";
  if (s < 2 * 3600) return std::to_string(s / 60) + "m";
  if (s < 2 * 86400) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
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
    static const char* const kAmbiguous[] = {"true", "false", "null", "yes", "no", "on", "off",
                                             "~", "True", "False", "Null"};
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
