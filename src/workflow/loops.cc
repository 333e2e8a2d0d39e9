#include "workflow/loops.h"

#include <charconv>
#include <cstdint>
#include <cstdlib>

namespace headway::workflow {

namespace {

Status TooMany(std::string_view field, size_t n) {
  return InvalidArgument(std::string(field) + ": " + std::to_string(n) +
                         " items is more than the limit of " + std::to_string(kMaxLoopItems));
}

// Go's "%v" of a list of items: "[a 1 {"x":1}]".
std::string ListDescription(const nlohmann::json& list) {
  std::string s = "[";
  bool first = true;
  for (const auto& e : list) {
    if (!first) s += " ";
    first = false;
    s += ItemString(e);
  }
  return s + "]";
}

Result<LoopItem> MakeItem(std::string_view field, size_t index, const nlohmann::json& value) {
  LoopItem item;
  item.index = index;
  item.value = value;
  std::string description;
  if (value.is_string() || value.is_number() || value.is_boolean()) {
    description = ItemString(value);
    item.vars["item"] = description;
  } else if (value.is_object()) {
    std::string joined;
    for (auto it = value.begin(); it != value.end(); ++it) {  // sorted keys
      std::string v = ItemString(it.value());
      if (it.value().is_null()) {
        return InvalidArgument(std::string(field) + "[" + std::to_string(index) + "]." + it.key() +
                               ": null is not a valid item value");
      }
      item.vars["item." + it.key()] = v;
      if (!joined.empty()) joined += ",";
      joined += it.key() + ":" + v;
    }
    description = joined;
    item.vars["item"] = value.dump();
  } else if (value.is_array()) {
    description = ListDescription(value);
    item.vars["item"] = value.dump();
  } else {
    return InvalidArgument(std::string(field) + "[" + std::to_string(index) +
                           "]: expected string, number, list, or map, received null");
  }
  item.node_suffix = "(" + std::to_string(index) + ":" + description + ")";
  return item;
}

Result<std::vector<LoopItem>> MakeItems(std::string_view field, const nlohmann::json& list) {
  if (list.size() > kMaxLoopItems) return TooMany(field, list.size());
  std::vector<LoopItem> out;
  out.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    auto item = MakeItem(field, i, list[i]);
    if (!item.ok()) return item.status();
    out.push_back(std::move(*item));
  }
  return out;
}

Result<int64_t> ParseInt(std::string_view field, const std::string& text) {
  std::string_view s = text;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  int64_t v = 0;
  const char* b = s.data();
  if (!s.empty() && s.front() == '+') ++b;
  auto r = std::from_chars(b, s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) {
    return InvalidArgument("withSequence." + std::string(field) + ": '" + text +
                           "' is not an integer");
  }
  return v;
}

std::string Digits(uint64_t v, int base, bool upper) {
  if (v == 0) return "0";
  const char* chars = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string s;
  while (v) {
    s.insert(s.begin(), chars[v % static_cast<uint64_t>(base)]);
    v /= static_cast<uint64_t>(base);
  }
  return s;
}

}  // namespace

std::string ItemString(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) return value.dump();
  if (value.is_number_float()) return FormatJsonNumber(value.get<double>());
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_null()) return "null";
  return value.dump();
}

Result<std::vector<LoopItem>> ExpandWithItems(const nlohmann::json& items) {
  if (!items.is_array()) return InvalidArgument("withItems: expected a list");
  return MakeItems("withItems", items);
}

Result<std::vector<LoopItem>> ExpandWithItems(const std::vector<nlohmann::json>& items) {
  if (items.size() > kMaxLoopItems) return TooMany("withItems", items.size());
  return MakeItems("withItems", nlohmann::json(items));
}

Result<std::vector<LoopItem>> ExpandWithParam(std::string_view text) {
  auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_array()) {
    std::string_view t = text;
    while (!t.empty() && (t.front() == ' ' || t.front() == '\n' || t.front() == '\t')) {
      t.remove_prefix(1);
    }
    while (!t.empty() && (t.back() == ' ' || t.back() == '\n' || t.back() == '\t')) {
      t.remove_suffix(1);
    }
    std::string shown(t.substr(0, 200));
    if (t.size() > 200) shown += "...";
    return InvalidArgument("withParam value could not be parsed as a JSON list: " + shown);
  }
  return MakeItems("withParam", parsed);
}

Result<std::string> FormatSequenceValue(std::string_view format, int64_t value) {
  std::string out;
  bool used = false;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c != '%') {
      out.push_back(c);
      continue;
    }
    size_t start = i++;
    if (i < format.size() && format[i] == '%') {
      out.push_back('%');
      continue;
    }
    bool minus = false, plus = false, space = false, zero = false, sharp = false;
    for (; i < format.size(); ++i) {
      char f = format[i];
      if (f == '-') {
        minus = true;
      } else if (f == '+') {
        plus = true;
      } else if (f == ' ') {
        space = true;
      } else if (f == '0') {
        zero = true;
      } else if (f == '#') {
        sharp = true;
      } else {
        break;
      }
    }
    size_t width = 0;
    while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
      width = width * 10 + static_cast<size_t>(format[i] - '0');
      if (width > 1000) return InvalidArgument("withSequence.format: width too large");
      ++i;
    }
    std::optional<size_t> precision;
    if (i < format.size() && format[i] == '.') {
      ++i;
      size_t p = 0;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        p = p * 10 + static_cast<size_t>(format[i] - '0');
        if (p > 1000) return InvalidArgument("withSequence.format: precision too large");
        ++i;
      }
      precision = p;
    }
    if (i >= format.size()) {
      return InvalidArgument("withSequence.format '" + std::string(format) +
                             "': incomplete verb at position " + std::to_string(start));
    }
    char verb = format[i];
    int base = 0;
    bool upper = false;
    std::string prefix;
    switch (verb) {
      case 'd':
      case 'v':
        base = 10;
        break;
      case 'x':
        base = 16;
        prefix = sharp ? "0x" : "";
        break;
      case 'X':
        base = 16;
        upper = true;
        prefix = sharp ? "0X" : "";
        break;
      case 'o':
        base = 8;
        prefix = sharp ? "0" : "";
        break;
      case 'b':
        base = 2;
        break;
      default:
        return InvalidArgument("withSequence.format '" + std::string(format) +
                               "': unsupported verb '%" + std::string(1, verb) +
                               "' (use an integer verb: d, v, x, X, o, b)");
    }
    if (used) {
      return InvalidArgument("withSequence.format '" + std::string(format) +
                             "': more than one verb (the sequence gives one value)");
    }
    used = true;
    bool negative = value < 0;
    uint64_t mag =
        negative ? static_cast<uint64_t>(-(value + 1)) + 1 : static_cast<uint64_t>(value);
    std::string digits = Digits(mag, base, upper);
    if (precision) {
      if (*precision == 0 && mag == 0) digits.clear();
      while (digits.size() < *precision) digits.insert(digits.begin(), '0');
    }
    if (verb == 'o' && sharp && !digits.empty() && digits[0] == '0') prefix.clear();
    std::string sign = negative ? "-" : plus ? "+" : space ? " " : "";
    std::string body = sign + prefix + digits;
    if (body.size() < width) {
      size_t pad = width - body.size();
      if (minus) {
        body += std::string(pad, ' ');
      } else if (zero && !precision) {
        body = sign + prefix + std::string(pad, '0') + digits;
      } else {
        body = std::string(pad, ' ') + body;
      }
    }
    out += body;
  }
  if (!used) {
    return InvalidArgument("withSequence.format '" + std::string(format) +
                           "': needs one integer verb such as %d");
  }
  return out;
}

Result<std::vector<LoopItem>> ExpandWithSequence(const LoopSequence& seq) {
  if (seq.count && seq.end) {
    return InvalidArgument("withSequence: only one of count or end can be defined");
  }
  if (!seq.count && !seq.end) {
    return InvalidArgument("withSequence: neither end nor count was specified");
  }
  int64_t start = 0;
  if (seq.start) {
    auto s = ParseInt("start", *seq.start);
    if (!s.ok()) return s.status();
    start = *s;
  }
  const std::string format = seq.format.empty() ? "%d" : seq.format;
  // Validate the format once, even for an empty sequence.
  {
    auto probe = FormatSequenceValue(format, start);
    if (!probe.ok()) return probe.status();
  }
  int64_t step = 1;
  uint64_t n = 0;
  if (seq.count) {
    auto c = ParseInt("count", *seq.count);
    if (!c.ok()) return c.status();
    if (*c < 0) return InvalidArgument("withSequence.count: must be >= 0, got " + *seq.count);
    n = static_cast<uint64_t>(*c);
  } else {
    auto e = ParseInt("end", *seq.end);
    if (!e.ok()) return e.status();
    int64_t end = *e;
    step = start > end ? -1 : 1;
    // |end - start| + 1 without overflow.
    uint64_t span = start > end ? static_cast<uint64_t>(start) - static_cast<uint64_t>(end)
                                : static_cast<uint64_t>(end) - static_cast<uint64_t>(start);
    n = span >= kMaxLoopItems ? kMaxLoopItems + 1 : span + 1;
  }
  if (n > kMaxLoopItems) {
    return InvalidArgument("withSequence: more than the limit of " + std::to_string(kMaxLoopItems) +
                           " items");
  }
  std::vector<LoopItem> out;
  out.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    int64_t v = 0;
    if (__builtin_add_overflow(start, static_cast<int64_t>(i) * step, &v)) {
      return InvalidArgument("withSequence: values overflow a 64-bit integer");
    }
    auto text = FormatSequenceValue(format, v);
    if (!text.ok()) return text.status();
    auto item = MakeItem("withSequence", i, nlohmann::json(*text));
    if (!item.ok()) return item.status();
    out.push_back(std::move(*item));
  }
  return out;
}

}  // namespace headway::workflow
