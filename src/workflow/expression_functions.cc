// The functions of `{{=...}}` expression tags (expression.h): expr-lang's
// builtins that Argo workflows use, Argo's own (asInt, asFloat, jsonpath,
// toJson) and the common sprig.* functions, on expr_internal::XValue.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include "workflow/expression.h"
#include "workflow/expression_internal.h"

namespace headway::workflow::expr_internal {

const char* TypeName(const XValue& v) {
  switch (v.type) {
    case XValue::kNil:
      return "nil";
    case XValue::kBool:
      return "bool";
    case XValue::kInt:
      return "int";
    case XValue::kFloat:
      return "float64";
    case XValue::kStr:
      return "string";
    case XValue::kList:
      return "array";
    case XValue::kMap:
      return "map";
  }
  return "?";
}

std::string XGoString(const XValue& v) {
  switch (v.type) {
    case XValue::kNil:
      return "<nil>";
    case XValue::kBool:
      return v.b ? "true" : "false";
    case XValue::kInt:
      return std::to_string(v.i);
    case XValue::kFloat:
      return FormatGoFloat(v.f);
    case XValue::kStr:
      return v.s;
    case XValue::kList: {
      std::string out = "[";
      for (size_t k = 0; k < v.list.size(); ++k) {
        if (k) out += " ";
        out += XGoString(v.list[k]);
      }
      return out + "]";
    }
    case XValue::kMap: {
      std::string out = "map[";
      bool first = true;
      for (auto it = v.map.begin(); it != v.map.end(); ++it) {  // keys sorted, as Go prints
        if (!first) out += " ";
        first = false;
        out += it.key() + ":" + XGoString(XFromJson(it.value()));
      }
      return out + "]";
    }
  }
  return "";
}

nlohmann::json XToJson(const XValue& v) {
  switch (v.type) {
    case XValue::kNil:
      return nullptr;
    case XValue::kBool:
      return v.b;
    case XValue::kInt:
      return v.i;
    case XValue::kFloat:
      return v.f;
    case XValue::kStr:
      return v.s;
    case XValue::kList: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& e : v.list) a.push_back(XToJson(e));
      return a;
    }
    case XValue::kMap:
      return v.map;
  }
  return nullptr;
}

XValue XFromJson(const nlohmann::json& j) {
  if (j.is_boolean()) return XValue::Bool(j.get<bool>());
  if (j.is_number()) return XValue::Float(j.get<double>());
  if (j.is_string()) return XValue::Str(j.get<std::string>());
  if (j.is_array()) {
    std::vector<XValue> list;
    for (const auto& e : j) list.push_back(XFromJson(e));
    return XValue::List(std::move(list));
  }
  if (j.is_object()) {
    XValue v;
    v.type = XValue::kMap;
    v.map = j;
    return v;
  }
  return XValue();
}

bool XEqual(const XValue& a, const XValue& b) {
  if (a.numeric() && b.numeric()) {
    if (a.type == XValue::kInt && b.type == XValue::kInt) return a.i == b.i;
    return a.AsDouble() == b.AsDouble();
  }
  if (a.type != b.type) return false;
  switch (a.type) {
    case XValue::kNil:
      return true;
    case XValue::kBool:
      return a.b == b.b;
    case XValue::kStr:
      return a.s == b.s;
    case XValue::kList:
      if (a.list.size() != b.list.size()) return false;
      for (size_t k = 0; k < a.list.size(); ++k) {
        if (!XEqual(a.list[k], b.list[k])) return false;
      }
      return true;
    case XValue::kMap:
      return a.map == b.map;
    default:
      return false;
  }
}

std::optional<int64_t> ParseInt(std::string_view s) {
  int64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> ParseFloat(std::string_view s) {
  double d = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), d);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return d;
}

Result<XValue> Member(const XValue& v, const XValue& key) {
  if (v.type == XValue::kMap) {
    if (key.type != XValue::kStr) {
      return InvalidArgument(std::string("cannot index a map with ") + TypeName(key));
    }
    auto it = v.map.find(key.s);
    return it == v.map.end() ? XValue() : XFromJson(*it);
  }
  if (v.type == XValue::kList || v.type == XValue::kStr) {
    if (key.type != XValue::kInt) {
      return InvalidArgument(std::string("cannot index an ") + TypeName(v) + " with " +
                             TypeName(key));
    }
    const int64_t size = v.type == XValue::kList ? static_cast<int64_t>(v.list.size())
                                                 : static_cast<int64_t>(v.s.size());
    const int64_t at = key.i < 0 ? key.i + size : key.i;
    if (at < 0 || at >= size) {
      return InvalidArgument("index out of range: " + std::to_string(key.i) + " (length " +
                             std::to_string(size) + ")");
    }
    if (v.type == XValue::kList) return v.list[static_cast<size_t>(at)];
    return XValue::Str(std::string(1, v.s[static_cast<size_t>(at)]));
  }
  if (v.type == XValue::kNil) return XValue();
  return InvalidArgument(std::string("cannot fetch ") + XGoString(key) + " from " + TypeName(v));
}

namespace {

bool IsBlank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string TrimChars(std::string_view s, std::string_view cut) {
  auto in_cut = [&](char c) { return cut.empty() ? IsBlank(c) : cut.find(c) != std::string::npos; };
  size_t b = 0, e = s.size();
  while (b < e && in_cut(s[b])) ++b;
  while (e > b && in_cut(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

std::string ReplaceAll(std::string s, std::string_view from, std::string_view to) {
  if (from.empty()) return s;
  std::string out;
  size_t pos = 0;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, pos)) {
    out.append(s, pos, at - pos).append(to);
    pos = at + from.size();
  }
  return out.append(s, pos);
}

std::vector<std::string> SplitOn(std::string_view s, std::string_view sep) {
  std::vector<std::string> out;
  if (sep.empty()) {
    for (char c : s) out.emplace_back(1, c);
    return out;
  }
  size_t pos = 0;
  for (size_t at = s.find(sep); at != std::string::npos; at = s.find(sep, pos)) {
    out.emplace_back(s.substr(pos, at - pos));
    pos = at + sep.size();
  }
  out.emplace_back(s.substr(pos));
  return out;
}

// Sprig's (and Go templates') idea of empty: nil, false, 0, "", [], {}.
bool IsEmpty(const XValue& v) {
  switch (v.type) {
    case XValue::kNil:
      return true;
    case XValue::kBool:
      return !v.b;
    case XValue::kInt:
      return v.i == 0;
    case XValue::kFloat:
      return v.f == 0;
    case XValue::kStr:
      return v.s.empty();
    case XValue::kList:
      return v.list.empty();
    case XValue::kMap:
      return v.map.empty();
  }
  return true;
}

// spf13/cast's ToInt64 and ToFloat64 as sprig uses them: what does not
// convert is 0.
int64_t CastInt(const XValue& v) {
  if (v.type == XValue::kInt) return v.i;
  if (v.type == XValue::kFloat) return static_cast<int64_t>(v.f);
  if (v.type == XValue::kBool) return v.b ? 1 : 0;
  if (v.type == XValue::kStr) {
    std::string s = v.s;
    if (auto dot = s.find('.');
        dot != std::string::npos && s.find_first_not_of('0', dot + 1) == std::string::npos) {
      s.resize(dot);  // "3.0" reads as 3, "3.5" does not
    }
    return ParseInt(s).value_or(0);
  }
  return 0;
}
double CastFloat(const XValue& v) {
  if (v.numeric()) return v.AsDouble();
  if (v.type == XValue::kBool) return v.b ? 1 : 0;
  if (v.type == XValue::kStr) return ParseFloat(v.s).value_or(0);
  return 0;
}

std::string Base64Encode(std::string_view in) {
  static const char* kTable = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t n = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int k = 3; k >= 0; --k) out += kTable[(n >> (6 * k)) & 63];
  }
  if (i < in.size()) {
    uint32_t n = uint8_t(in[i]) << 16;
    if (i + 1 < in.size()) n |= uint8_t(in[i + 1]) << 8;
    out += kTable[(n >> 18) & 63];
    out += kTable[(n >> 12) & 63];
    out += i + 1 < in.size() ? kTable[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view in) {
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    int v = c >= 'A' && c <= 'Z'   ? c - 'A'
            : c >= 'a' && c <= 'z' ? c - 'a' + 26
            : c >= '0' && c <= '9' ? c - '0' + 52
            : c == '+'             ? 62
            : c == '/'             ? 63
                                   : -1;
    if (v < 0) return std::nullopt;
    buffer = (buffer << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xff);
    }
  }
  return out;
}

// ---- jsonpath (the subset of github.com/evilmonkeyinc/jsonpath workflows
// use): $, .key, ['key'], [n] (negative from the end), [*], .*, ..key.
// A path with a wildcard or `..` returns the list of what it matched; a
// definite one the value itself, and an error when it is not there.
Result<nlohmann::json> JsonPath(const nlohmann::json& doc, std::string_view path) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("jsonpath '" + std::string(path) + "': " + why);
  };
  if (path.empty() || path[0] != '$') return bad("must start with '$'");
  std::vector<const nlohmann::json*> nodes = {&doc};
  bool definite = true;
  size_t i = 1;
  auto child = [&](const std::string& key) {
    std::vector<const nlohmann::json*> next;
    for (const nlohmann::json* n : nodes) {
      if (n->is_object() && n->contains(key)) next.push_back(&(*n)[key]);
    }
    nodes = std::move(next);
  };
  auto all_children = [&]() {
    std::vector<const nlohmann::json*> next;
    for (const nlohmann::json* n : nodes) {
      if (n->is_object() || n->is_array()) {
        for (const auto& e : *n) next.push_back(&e);
      }
    }
    nodes = std::move(next);
    definite = false;
  };
  auto name_at = [&](size_t& k) {
    size_t start = k;
    while (k < path.size() && path[k] != '.' && path[k] != '[') ++k;
    return std::string(path.substr(start, k - start));
  };
  while (i < path.size()) {
    if (path.compare(i, 2, "..") == 0) {
      i += 2;
      std::string key = name_at(i);
      if (key.empty()) return bad("expected a name after '..'");
      std::vector<const nlohmann::json*> found;
      std::vector<const nlohmann::json*> stack(nodes.rbegin(), nodes.rend());
      while (!stack.empty()) {
        const nlohmann::json* n = stack.back();
        stack.pop_back();
        if (n->is_object() && n->contains(key)) found.push_back(&(*n)[key]);
        if (n->is_object() || n->is_array()) {
          std::vector<const nlohmann::json*> kids;
          for (const auto& e : *n) kids.push_back(&e);
          stack.insert(stack.end(), kids.rbegin(), kids.rend());
        }
      }
      nodes = std::move(found);
      definite = false;
    } else if (path[i] == '.') {
      ++i;
      if (i < path.size() && path[i] == '*') {
        ++i;
        all_children();
        continue;
      }
      std::string key = name_at(i);
      if (key.empty()) return bad("expected a name after '.'");
      child(key);
    } else if (path[i] == '[') {
      size_t close = path.find(']', i);
      if (close == std::string_view::npos) return bad("unclosed '['");
      std::string_view inside = path.substr(i + 1, close - i - 1);
      i = close + 1;
      if (inside == "*") {
        all_children();
      } else if (inside.size() >= 2 && (inside.front() == '\'' || inside.front() == '"') &&
                 inside.back() == inside.front()) {
        child(std::string(inside.substr(1, inside.size() - 2)));
      } else if (auto index = ParseInt(inside)) {
        std::vector<const nlohmann::json*> next;
        for (const nlohmann::json* n : nodes) {
          if (!n->is_array()) continue;
          const int64_t size = static_cast<int64_t>(n->size());
          const int64_t at = *index < 0 ? *index + size : *index;
          if (at >= 0 && at < size) next.push_back(&(*n)[static_cast<size_t>(at)]);
        }
        nodes = std::move(next);
      } else {
        return bad("unsupported selector [" + std::string(inside) + "]");
      }
    } else {
      return bad("unexpected '" + std::string(1, path[i]) + "'");
    }
  }
  if (definite) {
    if (nodes.empty()) return bad("not found");
    return *nodes.front();
  }
  nlohmann::json out = nlohmann::json::array();
  for (const nlohmann::json* n : nodes) out.push_back(*n);
  return out;
}

using Args = std::vector<XValue>;
using Fn = Result<XValue> (*)(const Args&);

Status TypeError(std::string_view name, const XValue& v) {
  return InvalidArgument("cannot use " + std::string(TypeName(v)) + " '" + XGoString(v) +
                         "' as argument of " + std::string(name) + "()");
}

struct Spec {
  size_t min_args;
  size_t max_args;  // SIZE_MAX: any number
  Fn fn;
};

Result<XValue> ToIntFn(const XValue& a, std::string_view name) {
  if (a.numeric()) return XValue::Int(a.type == XValue::kInt ? a.i : static_cast<int64_t>(a.f));
  if (a.type != XValue::kStr) return TypeError(name, a);
  auto v = ParseInt(a.s);
  if (!v)
    return InvalidArgument(std::string(name) + "(): cannot parse '" + a.s + "' as an integer");
  return XValue::Int(*v);
}
Result<XValue> ToFloatFn(const XValue& a, std::string_view name) {
  if (a.numeric()) return XValue::Float(a.AsDouble());
  if (a.type != XValue::kStr) return TypeError(name, a);
  auto v = ParseFloat(a.s);
  if (!v) return InvalidArgument(std::string(name) + "(): cannot parse '" + a.s + "' as a number");
  return XValue::Float(*v);
}

Result<XValue> Str1(const Args& a, std::string_view name, size_t index = 0) {
  if (a[index].type != XValue::kStr) return TypeError(name, a[index]);
  return a[index];
}

XValue Strings(const std::vector<std::string>& parts) {
  std::vector<XValue> list;
  for (const auto& p : parts) list.push_back(XValue::Str(p));
  return XValue::List(std::move(list));
}

std::string CaseOf(std::string s, bool upper) {
  for (char& c : s) {
    c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c))
                                : std::tolower(static_cast<unsigned char>(c)));
  }
  return s;
}

// Every function by name. Arguments are checked for count by the table and
// for type by each function.
const std::map<std::string, Spec, std::less<>>& Functions() {
  static const std::map<std::string, Spec, std::less<>> kFunctions = {
      // --- Argo's and expr-lang's
      {"asInt", {1, 1, [](const Args& a) { return ToIntFn(a[0], "asInt"); }}},
      {"int", {1, 1, [](const Args& a) { return ToIntFn(a[0], "int"); }}},
      {"asFloat", {1, 1, [](const Args& a) { return ToFloatFn(a[0], "asFloat"); }}},
      {"float", {1, 1, [](const Args& a) { return ToFloatFn(a[0], "float"); }}},
      {"string", {1, 1, [](const Args& a) -> Result<XValue> { return XValue::Str(XGoString(a[0])); }}},
      {"toJson",
       {1, 1, [](const Args& a) -> Result<XValue> { return XValue::Str(XToJson(a[0]).dump()); }}},
      {"toJSON",
       {1, 1, [](const Args& a) -> Result<XValue> { return XValue::Str(XToJson(a[0]).dump()); }}},
      {"fromJSON",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          if (a[0].type != XValue::kStr) return TypeError("fromJSON", a[0]);
          auto j = nlohmann::json::parse(a[0].s, nullptr, false);
          if (j.is_discarded()) return InvalidArgument("fromJSON(): '" + a[0].s + "' is not JSON");
          return XFromJson(j);
        }}},
      {"jsonpath",
       {2, 2,
        [](const Args& a) -> Result<XValue> {
          if (a[0].type != XValue::kStr) return TypeError("jsonpath", a[0]);
          if (a[1].type != XValue::kStr) return TypeError("jsonpath", a[1]);
          auto doc = nlohmann::json::parse(a[0].s, nullptr, false);
          if (doc.is_discarded()) return InvalidArgument("jsonpath(): '" + a[0].s + "' is not JSON");
          auto found = JsonPath(doc, a[1].s);
          if (!found.ok()) return found.status();
          return XFromJson(*found);
        }}},
      {"len",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          if (a[0].type == XValue::kStr) return XValue::Int(static_cast<int64_t>(a[0].s.size()));
          if (a[0].type == XValue::kList) return XValue::Int(static_cast<int64_t>(a[0].list.size()));
          if (a[0].type == XValue::kMap) return XValue::Int(static_cast<int64_t>(a[0].map.size()));
          return TypeError("len", a[0]);
        }}},
      {"lower",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          auto s = Str1(a, "lower");
          if (!s.ok()) return s;
          return XValue::Str(CaseOf(s->s, false));
        }}},
      {"upper",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          auto s = Str1(a, "upper");
          if (!s.ok()) return s;
          return XValue::Str(CaseOf(s->s, true));
        }}},
      {"trim",
       {1, 2,
        [](const Args& a) -> Result<XValue> {
          auto s = Str1(a, "trim");
          if (!s.ok()) return s;
          if (a.size() == 2 && a[1].type != XValue::kStr) return TypeError("trim", a[1]);
          return XValue::Str(TrimChars(s->s, a.size() == 2 ? a[1].s : ""));
        }}},
      {"trimPrefix",
       {2, 2,
        [](const Args& a) -> Result<XValue> {
          if (a[0].type != XValue::kStr || a[1].type != XValue::kStr) return TypeError("trimPrefix", a[0]);
          return XValue::Str(a[0].s.rfind(a[1].s, 0) == 0 ? a[0].s.substr(a[1].s.size()) : a[0].s);
        }}},
      {"trimSuffix",
       {2, 2,
        [](const Args& a) -> Result<XValue> {
          if (a[0].type != XValue::kStr || a[1].type != XValue::kStr) return TypeError("trimSuffix", a[0]);
          const std::string& s = a[0].s;
          const std::string& x = a[1].s;
          bool ends = s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
          return XValue::Str(ends ? s.substr(0, s.size() - x.size()) : s);
        }}},
      {"split",
       {2, 2,
        [](const Args& a) -> Result<XValue> {
          if (a[0].type != XValue::kStr || a[1].type != XValue::kStr) return TypeError("split", a[0]);
          return Strings(SplitOn(a[0].s, a[1].s));
        }}},
      {"join",
       {1, 2,
        [](const Args& a) -> Result<XValue> {
          if (a[0].type != XValue::kList) return TypeError("join", a[0]);
          std::string sep = a.size() == 2 ? a[1].s : "";
          std::string out;
          for (size_t k = 0; k < a[0].list.size(); ++k) {
            if (a[0].list[k].type != XValue::kStr) return TypeError("join", a[0].list[k]);
            if (k) out += sep;
            out += a[0].list[k].s;
          }
          return XValue::Str(out);
        }}},
      {"replace",
       {3, 3,
        [](const Args& a) -> Result<XValue> {
          for (const XValue& v : a) {
            if (v.type != XValue::kStr) return TypeError("replace", v);
          }
          return XValue::Str(ReplaceAll(a[0].s, a[1].s, a[2].s));
        }}},
      {"indexOf",
       {2, 2,
        [](const Args& a) -> Result<XValue> {
          if (a[0].type != XValue::kStr || a[1].type != XValue::kStr) return TypeError("indexOf", a[0]);
          size_t at = a[0].s.find(a[1].s);
          return XValue::Int(at == std::string::npos ? -1 : static_cast<int64_t>(at));
        }}},
      {"abs",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          if (a[0].type == XValue::kInt) return XValue::Int(a[0].i < 0 ? -a[0].i : a[0].i);
          if (a[0].type == XValue::kFloat) return XValue::Float(std::fabs(a[0].f));
          return TypeError("abs", a[0]);
        }}},
      {"ceil",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          if (!a[0].numeric()) return TypeError("ceil", a[0]);
          return XValue::Float(std::ceil(a[0].AsDouble()));
        }}},
      {"floor",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          if (!a[0].numeric()) return TypeError("floor", a[0]);
          return XValue::Float(std::floor(a[0].AsDouble()));
        }}},
      {"round",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          if (!a[0].numeric()) return TypeError("round", a[0]);
          return XValue::Float(std::round(a[0].AsDouble()));
        }}},
      {"max",
       {1, SIZE_MAX,
        [](const Args& a) -> Result<XValue> {
          const Args& xs = a.size() == 1 && a[0].type == XValue::kList ? a[0].list : a;
          if (xs.empty()) return InvalidArgument("max(): no values");
          XValue best = xs[0];
          for (const XValue& v : xs) {
            if (!v.numeric()) return TypeError("max", v);
            if (v.AsDouble() > best.AsDouble()) best = v;
          }
          return best;
        }}},
      {"min",
       {1, SIZE_MAX,
        [](const Args& a) -> Result<XValue> {
          const Args& xs = a.size() == 1 && a[0].type == XValue::kList ? a[0].list : a;
          if (xs.empty()) return InvalidArgument("min(): no values");
          XValue best = xs[0];
          for (const XValue& v : xs) {
            if (!v.numeric()) return TypeError("min", v);
            if (v.AsDouble() < best.AsDouble()) best = v;
          }
          return best;
        }}},
      {"sum",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          if (a[0].type != XValue::kList) return TypeError("sum", a[0]);
          bool ints = true;
          int64_t i = 0;
          double f = 0;
          for (const XValue& v : a[0].list) {
            if (!v.numeric()) return TypeError("sum", v);
            ints = ints && v.type == XValue::kInt;
            i += v.type == XValue::kInt ? v.i : 0;
            f += v.AsDouble();
          }
          return ints ? XValue::Int(i) : XValue::Float(f);
        }}},
      {"first",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          if (a[0].type != XValue::kList) return TypeError("first", a[0]);
          return a[0].list.empty() ? XValue() : a[0].list.front();
        }}},
      {"last",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          if (a[0].type != XValue::kList) return TypeError("last", a[0]);
          return a[0].list.empty() ? XValue() : a[0].list.back();
        }}},
      {"reverse",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          if (a[0].type != XValue::kList) return TypeError("reverse", a[0]);
          return XValue::List(std::vector<XValue>(a[0].list.rbegin(), a[0].list.rend()));
        }}},
      {"keys",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          if (a[0].type != XValue::kMap) return TypeError("keys", a[0]);
          std::vector<std::string> keys;
          for (auto it = a[0].map.begin(); it != a[0].map.end(); ++it) keys.push_back(it.key());
          return Strings(keys);
        }}},
      {"values",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          if (a[0].type != XValue::kMap) return TypeError("values", a[0]);
          std::vector<XValue> values;
          for (const auto& v : a[0].map) values.push_back(XFromJson(v));
          return XValue::List(std::move(values));
        }}},
      // --- sprig (argument order as in sprig: the string comes last)
      {"sprig.upper", {1, 1, [](const Args& a) -> Result<XValue> { return XValue::Str(CaseOf(XGoString(a[0]), true)); }}},
      {"sprig.lower", {1, 1, [](const Args& a) -> Result<XValue> { return XValue::Str(CaseOf(XGoString(a[0]), false)); }}},
      {"sprig.trim", {1, 1, [](const Args& a) -> Result<XValue> { return XValue::Str(TrimChars(XGoString(a[0]), "")); }}},
      {"sprig.trimAll",
       {2, 2, [](const Args& a) -> Result<XValue> { return XValue::Str(TrimChars(XGoString(a[1]), XGoString(a[0]))); }}},
      {"sprig.trimPrefix",
       {2, 2,
        [](const Args& a) -> Result<XValue> {
          std::string s = XGoString(a[1]), p = XGoString(a[0]);
          return XValue::Str(s.rfind(p, 0) == 0 ? s.substr(p.size()) : s);
        }}},
      {"sprig.trimSuffix",
       {2, 2,
        [](const Args& a) -> Result<XValue> {
          std::string s = XGoString(a[1]), x = XGoString(a[0]);
          bool ends = s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
          return XValue::Str(ends ? s.substr(0, s.size() - x.size()) : s);
        }}},
      {"sprig.replace",
       {3, 3,
        [](const Args& a) -> Result<XValue> {
          return XValue::Str(ReplaceAll(XGoString(a[2]), XGoString(a[0]), XGoString(a[1])));
        }}},
      {"sprig.contains",
       {2, 2,
        [](const Args& a) -> Result<XValue> {
          return XValue::Bool(XGoString(a[1]).find(XGoString(a[0])) != std::string::npos);
        }}},
      {"sprig.hasPrefix",
       {2, 2, [](const Args& a) -> Result<XValue> { return XValue::Bool(XGoString(a[1]).rfind(XGoString(a[0]), 0) == 0); }}},
      {"sprig.hasSuffix",
       {2, 2,
        [](const Args& a) -> Result<XValue> {
          std::string s = XGoString(a[1]), x = XGoString(a[0]);
          return XValue::Bool(s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0);
        }}},
      {"sprig.splitList",
       {2, 2, [](const Args& a) -> Result<XValue> { return Strings(SplitOn(XGoString(a[1]), XGoString(a[0]))); }}},
      {"sprig.join",
       {2, 2,
        [](const Args& a) -> Result<XValue> {
          if (a[1].type != XValue::kList) return XValue::Str(XGoString(a[1]));
          std::string out;
          for (size_t k = 0; k < a[1].list.size(); ++k) {
            if (k) out += XGoString(a[0]);
            out += XGoString(a[1].list[k]);
          }
          return XValue::Str(out);
        }}},
      {"sprig.repeat",
       {2, 2,
        [](const Args& a) -> Result<XValue> {
          const int64_t n = CastInt(a[0]);
          if (n < 0 || n > 10000) return InvalidArgument("sprig.repeat(): count out of range");
          std::string out;
          for (int64_t k = 0; k < n; ++k) out += XGoString(a[1]);
          return XValue::Str(out);
        }}},
      {"sprig.substr",
       {3, 3,
        [](const Args& a) -> Result<XValue> {
          std::string s = XGoString(a[2]);
          int64_t start = CastInt(a[0]), end = CastInt(a[1]);
          if (start < 0) return XValue::Str(s.substr(0, static_cast<size_t>(std::max<int64_t>(0, end))));
          if (end < 0 || end > static_cast<int64_t>(s.size())) end = static_cast<int64_t>(s.size());
          if (start > end) return XValue::Str("");
          return XValue::Str(s.substr(static_cast<size_t>(start), static_cast<size_t>(end - start)));
        }}},
      {"sprig.trunc",
       {2, 2,
        [](const Args& a) -> Result<XValue> {
          std::string s = XGoString(a[1]);
          int64_t n = CastInt(a[0]);
          const int64_t size = static_cast<int64_t>(s.size());
          if (n >= 0) return XValue::Str(n < size ? s.substr(0, static_cast<size_t>(n)) : s);
          return XValue::Str(-n < size ? s.substr(static_cast<size_t>(size + n)) : s);
        }}},
      {"sprig.nospace",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          std::string s = XGoString(a[0]);
          s.erase(std::remove_if(s.begin(), s.end(), IsBlank), s.end());
          return XValue::Str(s);
        }}},
      {"sprig.title",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          std::string s = XGoString(a[0]);
          bool start = true;
          for (char& c : s) {
            if (start && std::isalpha(static_cast<unsigned char>(c))) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
            start = IsBlank(c);
          }
          return XValue::Str(s);
        }}},
      {"sprig.quote",
       {1, SIZE_MAX,
        [](const Args& a) -> Result<XValue> {
          std::string out;
          for (size_t k = 0; k < a.size(); ++k) {
            if (a[k].type == XValue::kNil) continue;
            if (!out.empty()) out += " ";
            out += nlohmann::json(XGoString(a[k])).dump();
          }
          return XValue::Str(out);
        }}},
      {"sprig.squote",
       {1, SIZE_MAX,
        [](const Args& a) -> Result<XValue> {
          std::string out;
          for (size_t k = 0; k < a.size(); ++k) {
            if (a[k].type == XValue::kNil) continue;
            if (!out.empty()) out += " ";
            out += "'" + XGoString(a[k]) + "'";
          }
          return XValue::Str(out);
        }}},
      {"sprig.default",
       {1, 2,
        [](const Args& a) -> Result<XValue> {
          if (a.size() == 1 || IsEmpty(a[1])) return a[0];
          return a[1];
        }}},
      {"sprig.empty", {1, 1, [](const Args& a) -> Result<XValue> { return XValue::Bool(IsEmpty(a[0])); }}},
      {"sprig.coalesce",
       {1, SIZE_MAX,
        [](const Args& a) -> Result<XValue> {
          for (const XValue& v : a) {
            if (!IsEmpty(v)) return v;
          }
          return XValue();
        }}},
      {"sprig.ternary",
       {3, 3,
        [](const Args& a) -> Result<XValue> {
          if (a[2].type != XValue::kBool) return TypeError("sprig.ternary", a[2]);
          return a[2].b ? a[0] : a[1];
        }}},
      {"sprig.toString", {1, 1, [](const Args& a) -> Result<XValue> { return XValue::Str(XGoString(a[0])); }}},
      {"sprig.toJson", {1, 1, [](const Args& a) -> Result<XValue> { return XValue::Str(XToJson(a[0]).dump()); }}},
      {"sprig.fromJson",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          auto j = nlohmann::json::parse(XGoString(a[0]), nullptr, false);
          return j.is_discarded() ? XValue() : XFromJson(j);
        }}},
      {"sprig.int", {1, 1, [](const Args& a) -> Result<XValue> { return XValue::Int(CastInt(a[0])); }}},
      {"sprig.int64", {1, 1, [](const Args& a) -> Result<XValue> { return XValue::Int(CastInt(a[0])); }}},
      {"sprig.atoi",
       {1, 1, [](const Args& a) -> Result<XValue> { return XValue::Int(ParseInt(XGoString(a[0])).value_or(0)); }}},
      {"sprig.float64", {1, 1, [](const Args& a) -> Result<XValue> { return XValue::Float(CastFloat(a[0])); }}},
      {"sprig.add",
       {1, SIZE_MAX,
        [](const Args& a) -> Result<XValue> {
          int64_t sum = 0;
          for (const XValue& v : a) sum += CastInt(v);
          return XValue::Int(sum);
        }}},
      {"sprig.sub", {2, 2, [](const Args& a) -> Result<XValue> { return XValue::Int(CastInt(a[0]) - CastInt(a[1])); }}},
      {"sprig.mul",
       {1, SIZE_MAX,
        [](const Args& a) -> Result<XValue> {
          int64_t product = 1;
          for (const XValue& v : a) product *= CastInt(v);
          return XValue::Int(product);
        }}},
      {"sprig.div",
       {2, 2,
        [](const Args& a) -> Result<XValue> {
          if (CastInt(a[1]) == 0) return InvalidArgument("sprig.div(): integer divide by zero");
          return XValue::Int(CastInt(a[0]) / CastInt(a[1]));
        }}},
      {"sprig.mod",
       {2, 2,
        [](const Args& a) -> Result<XValue> {
          if (CastInt(a[1]) == 0) return InvalidArgument("sprig.mod(): integer divide by zero");
          return XValue::Int(CastInt(a[0]) % CastInt(a[1]));
        }}},
      {"sprig.max",
       {1, SIZE_MAX,
        [](const Args& a) -> Result<XValue> {
          int64_t best = CastInt(a[0]);
          for (const XValue& v : a) best = std::max(best, CastInt(v));
          return XValue::Int(best);
        }}},
      {"sprig.min",
       {1, SIZE_MAX,
        [](const Args& a) -> Result<XValue> {
          int64_t best = CastInt(a[0]);
          for (const XValue& v : a) best = std::min(best, CastInt(v));
          return XValue::Int(best);
        }}},
      {"sprig.b64enc", {1, 1, [](const Args& a) -> Result<XValue> { return XValue::Str(Base64Encode(XGoString(a[0]))); }}},
      {"sprig.b64dec",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          auto decoded = Base64Decode(XGoString(a[0]));
          return XValue::Str(decoded ? *decoded : "illegal base64 data");
        }}},
      {"sprig.list", {0, SIZE_MAX, [](const Args& a) -> Result<XValue> { return XValue::List(a); }}},
      {"sprig.first",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          return a[0].type == XValue::kList && !a[0].list.empty() ? a[0].list.front() : XValue();
        }}},
      {"sprig.last",
       {1, 1,
        [](const Args& a) -> Result<XValue> {
          return a[0].type == XValue::kList && !a[0].list.empty() ? a[0].list.back() : XValue();
        }}},
  };
  return kFunctions;
}

}  // namespace

bool IsFunction(std::string_view name) { return Functions().count(name) > 0; }

Result<XValue> CallFunction(std::string_view name, const std::vector<XValue>& args) {
  auto it = Functions().find(name);
  if (it == Functions().end())
    return InvalidArgument("unknown function '" + std::string(name) + "'");
  const Spec& spec = it->second;
  if (args.size() < spec.min_args || args.size() > spec.max_args) {
    std::string want = spec.min_args == spec.max_args ? std::to_string(spec.min_args)
                       : spec.max_args == SIZE_MAX
                           ? "at least " + std::to_string(spec.min_args)
                           : std::to_string(spec.min_args) + " to " + std::to_string(spec.max_args);
    return InvalidArgument(std::string(name) + "() takes " + want + " argument" +
                           (want == "1" ? "" : "s") + ", got " + std::to_string(args.size()));
  }
  return spec.fn(args);
}

}  // namespace headway::workflow::expr_internal
