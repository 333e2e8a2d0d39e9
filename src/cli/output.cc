#include "cli/output.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <iterator>

namespace headway::cli {

std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows) {
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
      out << YAML::Key << it.key() << YAML::Value;
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
    if (ambiguous) out << YAML::DoubleQuoted;
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
  return std::string(out.c_str()) + "\n";
}

}  // namespace headway::cli
