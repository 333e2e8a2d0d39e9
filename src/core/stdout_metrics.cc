#include "core/stdout_metrics.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace headway {
namespace {

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '|' ||
         c == '.' || c == '/';
}

}  // namespace

std::set<std::string> StdoutMetricNames(const JobSpec& spec) {
  std::set<std::string> names;
  auto label = spec.labels.find(std::string(kStdoutMetricsLabel));
  if (label == spec.labels.end()) return names;
  std::string_view rest = label->second;
  while (!rest.empty()) {
    std::size_t comma = rest.find(',');
    std::string_view name = rest.substr(0, comma);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (!name.empty()) names.emplace(name);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return names;
}

std::map<std::string, double> ParseStdoutMetrics(std::string_view line,
                                                 const std::set<std::string>& names) {
  std::map<std::string, double> found;
  if (names.empty()) return found;
  for (std::size_t eq = line.find('='); eq != std::string_view::npos; eq = line.find('=', eq + 1)) {
    // The name: the run of name characters before '=' (spaces allowed between).
    std::size_t end = eq;
    while (end > 0 && line[end - 1] == ' ') --end;
    std::size_t begin = end;
    while (begin > 0 && IsNameChar(line[begin - 1])) --begin;
    if (begin == end) continue;
    std::string name(line.substr(begin, end - begin));
    if (!names.count(name)) continue;
    // The value: a number right after '=' (spaces allowed between).
    std::size_t at = eq + 1;
    while (at < line.size() && line[at] == ' ') ++at;
    std::size_t stop = at;
    if (stop < line.size() && (line[stop] == '+' || line[stop] == '-')) ++stop;
    bool digits = false;
    while (stop < line.size() && std::isdigit(static_cast<unsigned char>(line[stop])))
      ++stop, digits = true;
    if (stop < line.size() && line[stop] == '.') {
      ++stop;
      while (stop < line.size() && std::isdigit(static_cast<unsigned char>(line[stop])))
        ++stop, digits = true;
    }
    if (!digits) continue;
    if (stop < line.size() && (line[stop] == 'e' || line[stop] == 'E')) {
      std::size_t exp = stop + 1;
      if (exp < line.size() && (line[exp] == '+' || line[exp] == '-')) ++exp;
      std::size_t exp_digits = exp;
      while (exp_digits < line.size() && std::isdigit(static_cast<unsigned char>(line[exp_digits])))
        ++exp_digits;
      if (exp_digits > exp) stop = exp_digits;
    }
    std::string text(line.substr(at, stop - at));
    double value = std::strtod(text.c_str(), nullptr);
    if (std::isfinite(value)) found[name] = value;
  }
  return found;
}

}  // namespace headway
