// What the expression files of workflow/ share: the character classes,
// limits and errors of the parsers of `depends` (expression.cc), `when`
// (expression_when.cc) and `{{=...}}` tags (expression_tags.cc); and the
// values of `{{=...}}` tags and the functions they may call (expression.h's
// EvaluateExprTag), shared by expression_tags.cc (the parser and operators)
// and expression_functions.cc (the functions). Internal to workflow/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace headway::workflow::expr_internal {

inline bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }
inline bool IsAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Evaluation recurses along chains like `a && b && c`, so the length of an
// expression is bounded as well as its nesting.
inline constexpr size_t kMaxTokens = 4096;
inline constexpr int kMaxNesting = 200;

inline Status ErrorAt(std::string_view what, std::string_view text, size_t pos,
                      std::string message) {
  return InvalidArgument(std::string(what) + " '" + std::string(text) + "': " + message +
                         " at position " + std::to_string(pos));
}

// A value as expr-lang has it in Argo: nil, bool, int, float64, string,
// array, or map (a JSON object, e.g. what jsonpath or fromJSON returns).
struct XValue {
  enum Type { kNil, kBool, kInt, kFloat, kStr, kList, kMap } type = kNil;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<XValue> list;
  nlohmann::json map;  // kMap: an object

  static XValue Bool(bool x) {
    XValue v;
    v.type = kBool;
    v.b = x;
    return v;
  }
  static XValue Int(int64_t x) {
    XValue v;
    v.type = kInt;
    v.i = x;
    return v;
  }
  static XValue Float(double x) {
    XValue v;
    v.type = kFloat;
    v.f = x;
    return v;
  }
  static XValue Str(std::string x) {
    XValue v;
    v.type = kStr;
    v.s = std::move(x);
    return v;
  }
  static XValue List(std::vector<XValue> x) {
    XValue v;
    v.type = kList;
    v.list = std::move(x);
    return v;
  }
  bool numeric() const { return type == kInt || type == kFloat; }
  double AsDouble() const { return type == kInt ? static_cast<double>(i) : f; }
};

// Go's type names: "nil", "bool", "int", "float64", "string", "array", "map".
const char* TypeName(const XValue& v);
// Go's fmt "%v": `[1 2 3]`, `map[a:1 b:x]` (keys sorted).
std::string XGoString(const XValue& v);
nlohmann::json XToJson(const XValue& v);
// JSON numbers read as Go's encoding/json reads them: float64.
XValue XFromJson(const nlohmann::json& j);
bool XEqual(const XValue& a, const XValue& b);

// Whether `name` is a function expressions may call: expr-lang's builtins
// that Headway has, Argo's (asInt, asFloat, jsonpath, toJson) and the
// sprig.* ones listed in expression.h.
bool IsFunction(std::string_view name);

// Calls a function (not one taking a predicate: filter, map, all, any, none,
// one are the evaluator's). InvalidArgument with a message naming it (no
// position: the caller adds one).
Result<XValue> CallFunction(std::string_view name, const std::vector<XValue>& args);

// Member access: `v[index]` on an array (negative from the end) or a string,
// `v['key']` / `v.key` on a map (nil when absent, as expr-lang).
Result<XValue> Member(const XValue& v, const XValue& key);

// Go's strconv for a float parsed from text, and a whole number.
std::optional<int64_t> ParseInt(std::string_view s);
std::optional<double> ParseFloat(std::string_view s);

}  // namespace headway::workflow::expr_internal
