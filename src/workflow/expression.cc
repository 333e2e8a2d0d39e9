#include "workflow/expression.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <utility>
#include <variant>

#include "workflow/expression_internal.h"

namespace headway::workflow {

namespace {

bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
// govaluate uses unicode.IsLetter; any byte of a multi-byte UTF-8 sequence is
// taken as part of a letter here.
bool IsLetter(char c) { return IsAsciiAlpha(c) || static_cast<unsigned char>(c) >= 0x80; }

// Evaluation recurses along chains like `a && b && c`, so the length of an
// expression is bounded as well as its nesting.
constexpr size_t kMaxTokens = 4096;

Status ErrorAt(std::string_view what, std::string_view text, size_t pos, std::string message) {
  return InvalidArgument(std::string(what) + " '" + std::string(text) + "': " + message +
                         " at position " + std::to_string(pos));
}

// Splits the shortest round-trip representation of a finite, non-zero |v|
// into its digits and decimal exponent: v = 0.DIGITS * 10^point.
void ShortestDigits(double v, std::string* digits, int* point) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), std::fabs(v), std::chars_format::scientific);
  std::string s(buf, res.ptr);
  size_t e = s.find('e');
  std::string mant = s.substr(0, e);
  int exp = std::atoi(s.c_str() + e + 1);
  digits->clear();
  for (char c : mant) {
    if (c != '.') digits->push_back(c);
  }
  while (digits->size() > 1 && digits->back() == '0') digits->pop_back();
  *point = exp + 1;
}

std::string FixedFromDigits(const std::string& digits, int point) {
  std::string out;
  if (point <= 0) {
    out = "0." + std::string(static_cast<size_t>(-point), '0') + digits;
  } else if (static_cast<size_t>(point) >= digits.size()) {
    out = digits + std::string(static_cast<size_t>(point) - digits.size(), '0');
  } else {
    out = digits.substr(0, point) + "." + digits.substr(point);
  }
  return out;
}

std::string ExpFromDigits(const std::string& digits, int point, int min_exp_digits) {
  std::string out(1, digits[0]);
  if (digits.size() > 1) out += "." + digits.substr(1);
  int exp = point - 1;
  out += exp < 0 ? "e-" : "e+";
  std::string e = std::to_string(std::abs(exp));
  while (static_cast<int>(e.size()) < min_exp_digits) e = "0" + e;
  return out + e;
}

}  // namespace

std::string FormatJsonNumber(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == 0) return "0";
  std::string digits;
  int point = 0;
  ShortestDigits(value, &digits, &point);
  double a = std::fabs(value);
  std::string body;
  if (a < 1e-6 || a >= 1e21) {
    body = ExpFromDigits(digits, point, 2);
    // encoding/json cleans "e-07" to "e-7".
    size_t n = body.size();
    if (n >= 4 && body[n - 4] == 'e' && body[n - 3] == '-' && body[n - 2] == '0') {
      body.erase(n - 2, 1);
    }
  } else {
    body = FixedFromDigits(digits, point);
  }
  return value < 0 ? "-" + body : body;
}

std::string FormatGoFloat(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == 0) return std::signbit(value) ? "-0" : "0";
  std::string digits;
  int point = 0;
  ShortestDigits(value, &digits, &point);
  int exp = point - 1;
  std::string body =
      (exp < -4 || exp >= 6) ? ExpFromDigits(digits, point, 2) : FixedFromDigits(digits, point);
  return value < 0 ? "-" + body : body;
}

// ===========================================================================
// depends
// ===========================================================================

namespace {
constexpr std::pair<NodePhase, std::string_view> kPhaseNames[] = {
    {NodePhase::kPending, "Pending"},     {NodePhase::kRunning, "Running"},
    {NodePhase::kSucceeded, "Succeeded"}, {NodePhase::kFailed, "Failed"},
    {NodePhase::kError, "Error"},         {NodePhase::kSkipped, "Skipped"},
    {NodePhase::kOmitted, "Omitted"}};
}  // namespace

std::optional<NodePhase> ParseNodePhase(std::string_view name) {
  for (const auto& [p, n] : kPhaseNames) {
    if (n == name) return p;
  }
  return std::nullopt;
}

std::string_view NodePhaseName(NodePhase phase) {
  for (const auto& [p, n] : kPhaseNames) {
    if (p == phase) return n;
  }
  return "Unknown";
}

namespace {

using TaskResult = DependsExpr::ResultKind;

std::optional<TaskResult> ParseTaskResult(std::string_view s) {
  static const std::pair<std::string_view, TaskResult> kResults[] = {
      {"Succeeded", TaskResult::kSucceeded},       {"Failed", TaskResult::kFailed},
      {"Errored", TaskResult::kErrored},           {"Skipped", TaskResult::kSkipped},
      {"Omitted", TaskResult::kOmitted},           {"Daemoned", TaskResult::kDaemoned},
      {"AnySucceeded", TaskResult::kAnySucceeded}, {"AllFailed", TaskResult::kAllFailed},
  };
  for (const auto& [name, r] : kResults) {
    if (name == s) return r;
  }
  return std::nullopt;
}

bool IsTaskNameStart(char c) { return IsAsciiAlpha(c) || IsAsciiDigit(c); }
bool IsTaskNameChar(char c) { return IsTaskNameStart(c) || c == '-' || c == '_'; }

}  // namespace

namespace {

struct DependsToken {
  enum Kind { kName, kAnd, kOr, kNot, kLParen, kRParen, kEnd } kind;
  size_t pos;
  std::string task;
  TaskResult result = TaskResult::kBare;
};

class DependsParser {
 public:
  DependsParser(std::string_view text, std::vector<DependsExpr::Node>* nodes)
      : text_(text), nodes_(nodes) {}

  Status Lex() {
    size_t i = 0;
    while (i < text_.size()) {
      char c = text_[i];
      if (IsSpace(c)) {
        ++i;
        continue;
      }
      if (c == '&' || c == '|') {
        if (i + 1 >= text_.size() || text_[i + 1] != c) {
          return Err(i, std::string("expected '") + c + c + "'");
        }
        tokens_.push_back({c == '&' ? DependsToken::kAnd : DependsToken::kOr, i, {}});
        i += 2;
        continue;
      }
      if (c == '!') {
        tokens_.push_back({DependsToken::kNot, i, {}});
        ++i;
        continue;
      }
      if (c == '(' || c == ')') {
        tokens_.push_back({c == '(' ? DependsToken::kLParen : DependsToken::kRParen, i, {}});
        ++i;
        continue;
      }
      if (IsTaskNameStart(c)) {
        size_t start = i;
        while (i < text_.size() && IsTaskNameChar(text_[i])) ++i;
        DependsToken t{DependsToken::kName, start, std::string(text_.substr(start, i - start))};
        if (i < text_.size() && text_[i] == '.') {
          size_t rstart = ++i;
          while (i < text_.size() && IsAsciiAlpha(text_[i])) ++i;
          std::string_view r = text_.substr(rstart, i - rstart);
          if (r.empty()) return Err(rstart, "expected a task result after '" + t.task + ".'");
          auto result = ParseTaskResult(r);
          if (!result) {
            return Err(rstart, "task result '" + std::string(r) + "' for task '" + t.task +
                                   "' is invalid (expected Succeeded, Failed, Errored, Skipped, "
                                   "Omitted, Daemoned, AnySucceeded or AllFailed)");
          }
          t.result = *result;
        }
        tokens_.push_back(std::move(t));
        continue;
      }
      return Err(i, std::string("unexpected character '") + c + "'");
    }
    if (tokens_.size() > kMaxTokens) {
      return Err(0, "expression too long (more than " + std::to_string(kMaxTokens) + " tokens)");
    }
    tokens_.push_back({DependsToken::kEnd, text_.size(), {}});
    return Status::Ok();
  }

  Result<int> ParseAll() {
    auto root = ParseOr(0);
    if (!root.ok()) return root.status();
    if (Peek().kind != DependsToken::kEnd) {
      const auto& t = Peek();
      return Err(t.pos,
                 t.kind == DependsToken::kRParen ? "unbalanced ')'" : "expected '&&' or '||'");
    }
    return root;
  }

 private:
  static constexpr int kMaxDepth = 200;

  const DependsToken& Peek() const { return tokens_[next_]; }

  Status Err(size_t pos, std::string message) const {
    return ErrorAt("depends", text_, pos, std::move(message));
  }

  int Add(DependsExpr::Node n) {
    nodes_->push_back(std::move(n));
    return static_cast<int>(nodes_->size()) - 1;
  }

  Result<int> ParseOr(int depth) {
    auto left = ParseAnd(depth);
    if (!left.ok()) return left;
    int l = *left;
    while (Peek().kind == DependsToken::kOr) {
      ++next_;
      auto right = ParseAnd(depth);
      if (!right.ok()) return right;
      DependsExpr::Node n;
      n.kind = DependsExpr::Node::kOr;
      n.left = l;
      n.right = *right;
      l = Add(std::move(n));
    }
    return l;
  }

  Result<int> ParseAnd(int depth) {
    auto left = ParseUnary(depth);
    if (!left.ok()) return left;
    int l = *left;
    while (Peek().kind == DependsToken::kAnd) {
      ++next_;
      auto right = ParseUnary(depth);
      if (!right.ok()) return right;
      DependsExpr::Node n;
      n.kind = DependsExpr::Node::kAnd;
      n.left = l;
      n.right = *right;
      l = Add(std::move(n));
    }
    return l;
  }

  Result<int> ParseUnary(int depth) {
    if (depth > kMaxDepth) return Err(Peek().pos, "expression nested too deeply");
    const DependsToken& t = Peek();
    switch (t.kind) {
      case DependsToken::kNot: {
        ++next_;
        auto operand = ParseUnary(depth + 1);
        if (!operand.ok()) return operand;
        DependsExpr::Node n;
        n.kind = DependsExpr::Node::kNot;
        n.left = *operand;
        return Add(std::move(n));
      }
      case DependsToken::kLParen: {
        ++next_;
        auto inner = ParseOr(depth + 1);
        if (!inner.ok()) return inner;
        if (Peek().kind != DependsToken::kRParen) return Err(Peek().pos, "expected ')'");
        ++next_;
        return inner;
      }
      case DependsToken::kName: {
        ++next_;
        DependsExpr::Node n;
        n.task = t.task;
        n.result = t.result;
        return Add(std::move(n));
      }
      case DependsToken::kEnd:
        return Err(t.pos, next_ == 0 ? "empty expression" : "expected a task after operator");
      default:
        return Err(t.pos, "expected a task, '!' or '('");
    }
  }

  std::string_view text_;
  std::vector<DependsExpr::Node>* nodes_;
  std::vector<DependsToken> tokens_;
  size_t next_ = 0;
};

bool Finished(NodePhase p) { return p != NodePhase::kPending && p != NodePhase::kRunning; }

bool OperandHolds(const TaskOutcome& o, TaskResult r) {
  switch (r) {
    case TaskResult::kSucceeded:
      return o.phase == NodePhase::kSucceeded;
    case TaskResult::kFailed:
      return o.phase == NodePhase::kFailed;
    case TaskResult::kErrored:
      return o.phase == NodePhase::kError;
    case TaskResult::kSkipped:
      return o.phase == NodePhase::kSkipped;
    case TaskResult::kOmitted:
      return o.phase == NodePhase::kOmitted;
    case TaskResult::kDaemoned:
      return o.daemoned && o.phase != NodePhase::kPending;
    case TaskResult::kAnySucceeded:
      return o.fanned_out && std::any_of(o.children.begin(), o.children.end(),
                                         [](NodePhase p) { return p == NodePhase::kSucceeded; });
    case TaskResult::kAllFailed:
      return o.fanned_out && !o.children.empty() &&
             std::all_of(o.children.begin(), o.children.end(),
                         [](NodePhase p) { return p == NodePhase::kFailed; });
    case TaskResult::kBare:
      return OperandHolds(o, TaskResult::kSucceeded) || OperandHolds(o, TaskResult::kSkipped) ||
             OperandHolds(o, TaskResult::kDaemoned) ||
             (o.continue_on_error && OperandHolds(o, TaskResult::kErrored)) ||
             (o.continue_on_failed && OperandHolds(o, TaskResult::kFailed));
  }
  return false;
}

}  // namespace

Result<DependsExpr> DependsExpr::Parse(std::string_view text) {
  DependsExpr e;
  e.text_ = std::string(text);
  DependsParser p(e.text_, &e.nodes_);
  HEADWAY_RETURN_IF_ERROR(p.Lex());
  auto root = p.ParseAll();
  if (!root.ok()) return root.status();
  e.root_ = *root;
  return e;
}

Result<DependsExpr> DependsExpr::FromDependencies(const std::vector<std::string>& names) {
  if (names.empty()) return InvalidArgument("dependencies: the list is empty");
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    bool ok = !n.empty() && IsTaskNameStart(n[0]) &&
              std::all_of(n.begin(), n.end(), [](char c) { return IsTaskNameChar(c); });
    if (!ok) {
      return InvalidArgument("dependencies[" + std::to_string(i) + "]: '" + n +
                             "' is not a task name");
    }
    if (i > 0) text += " && ";
    text += n;
  }
  return Parse(text);
}

std::vector<std::string> DependsExpr::Tasks() const {
  std::set<std::string> s;
  for (const auto& n : nodes_) {
    if (n.kind == Node::kOperand) s.insert(n.task);
  }
  return {s.begin(), s.end()};
}

std::vector<std::string> DependsExpr::ItemTasks() const {
  std::set<std::string> s;
  for (const auto& n : nodes_) {
    if (n.kind == Node::kOperand &&
        (n.result == TaskResult::kAnySucceeded || n.result == TaskResult::kAllFailed)) {
      s.insert(n.task);
    }
  }
  return {s.begin(), s.end()};
}

DependsDecision DependsExpr::Evaluate(const std::map<std::string, TaskOutcome>& outcomes) const {
  for (const auto& n : nodes_) {
    if (n.kind != Node::kOperand) continue;
    auto it = outcomes.find(n.task);
    if (it == outcomes.end() || !Finished(it->second.phase)) return DependsDecision::kWait;
  }
  std::function<bool(int)> eval = [&](int i) -> bool {
    const Node& n = nodes_[i];
    switch (n.kind) {
      case Node::kOperand:
        return OperandHolds(outcomes.at(n.task), n.result);
      case Node::kNot:
        return !eval(n.left);
      case Node::kAnd:
        return eval(n.left) && eval(n.right);
      case Node::kOr:
        return eval(n.left) || eval(n.right);
    }
    return false;
  };
  return eval(root_) ? DependsDecision::kRun : DependsDecision::kOmit;
}

// ===========================================================================
// when (govaluate)
// ===========================================================================

namespace {

constexpr int kMaxNesting = 200;

struct GValue {
  enum Type { kNil, kNum, kStr, kBool, kList } type = kNil;
  double num = 0;
  std::string str;
  bool b = false;
  std::vector<GValue> list;

  static GValue Num(double d) {
    GValue v;
    v.type = kNum;
    v.num = d;
    return v;
  }
  static GValue Str(std::string s) {
    GValue v;
    v.type = kStr;
    v.str = std::move(s);
    return v;
  }
  static GValue Bool(bool x) {
    GValue v;
    v.type = kBool;
    v.b = x;
    return v;
  }
};

// Go's fmt "%v" of a govaluate value, used in error messages and for string
// concatenation.
std::string GoString(const GValue& v) {
  switch (v.type) {
    case GValue::kNil:
      return "<nil>";
    case GValue::kNum:
      return FormatGoFloat(v.num);
    case GValue::kStr:
      return v.str;
    case GValue::kBool:
      return v.b ? "true" : "false";
    case GValue::kList: {
      std::string s = "[";
      for (size_t i = 0; i < v.list.size(); ++i) {
        if (i) s += " ";
        s += GoString(v.list[i]);
      }
      return s + "]";
    }
  }
  return "";
}

bool DeepEqual(const GValue& a, const GValue& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case GValue::kNil:
      return true;
    case GValue::kNum:
      return a.num == b.num;
    case GValue::kStr:
      return a.str == b.str;
    case GValue::kBool:
      return a.b == b.b;
    case GValue::kList:
      if (a.list.size() != b.list.size()) return false;
      for (size_t i = 0; i < a.list.size(); ++i) {
        if (!DeepEqual(a.list[i], b.list[i])) return false;
      }
      return true;
  }
  return false;
}

struct GToken {
  enum Kind { kNum, kStr, kBool, kWord, kOp, kLParen, kRParen, kComma, kEnd } kind;
  size_t pos;
  std::string text;  // operator text, string value or word
  double num = 0;
  bool b = false;
};

struct GNode {
  enum Kind { kLiteral, kList, kUnary, kBinary } kind = kLiteral;
  GValue value;    // kLiteral
  std::string op;  // kUnary, kBinary
  size_t pos = 0;  // operator position
  std::vector<int> kids;
};

class WhenParser {
 public:
  explicit WhenParser(std::string_view text) : text_(text) {}

  Status Lex() {
    size_t i = 0;
    while (i < text_.size()) {
      char c = text_[i];
      if (IsSpace(c)) {
        ++i;
        continue;
      }
      size_t start = i;
      if (IsAsciiDigit(c) || c == '.') {
        if (c == '0' && i + 1 < text_.size() && text_[i + 1] == 'x') {
          i += 2;
          size_t hs = i;
          while (i < text_.size() && std::isxdigit(static_cast<unsigned char>(text_[i]))) ++i;
          std::string hex(text_.substr(hs, i - hs));
          if (hex.empty()) return Err(start, "unable to parse hex value '" + hex + "'");
          GToken t{GToken::kNum, start, {}};
          t.num = static_cast<double>(std::strtoull(hex.c_str(), nullptr, 16));
          tokens_.push_back(t);
          continue;
        }
        while (i < text_.size() && (IsAsciiDigit(text_[i]) || text_[i] == '.')) ++i;
        std::string s(text_.substr(start, i - start));
        double d = 0;
        auto res = std::from_chars(s.data(), s.data() + s.size(), d);
        if (res.ec != std::errc() || res.ptr != s.data() + s.size()) {
          return Err(start, "unable to parse numeric value '" + s + "'");
        }
        GToken t{GToken::kNum, start, s};
        t.num = d;
        tokens_.push_back(t);
        continue;
      }
      if (c == ',') {
        tokens_.push_back({GToken::kComma, start, ","});
        ++i;
        continue;
      }
      if (c == '[') {
        return Err(start, "unsupported: [escaped] parameter names (quote the text instead)");
      }
      if (IsLetter(c)) {
        while (i < text_.size() && (IsLetter(text_[i]) || IsAsciiDigit(text_[i]) ||
                                    text_[i] == '_' || text_[i] == '.')) {
          ++i;
        }
        std::string w(text_.substr(start, i - start));
        if (w == "true" || w == "false") {
          GToken t{GToken::kBool, start, w};
          t.b = w == "true";
          tokens_.push_back(t);
        } else if (w == "in" || w == "IN") {
          tokens_.push_back({GToken::kOp, start, "in"});
        } else if (w.find('.') != std::string::npos) {
          return Err(start, "unsupported: the dotted word '" + w +
                                "' (govaluate reads it as a field access); quote it");
        } else {
          tokens_.push_back({GToken::kWord, start, w});
        }
        continue;
      }
      if (c == '\'' || c == '"') {
        ++i;
        std::string s;
        bool closed = false;
        while (i < text_.size()) {
          char d = text_[i];
          if (d == '\\' && i + 1 < text_.size()) {
            s.push_back(text_[i + 1]);
            i += 2;
            continue;
          }
          if (d == '\'' || d == '"') {
            closed = true;
            ++i;
            break;
          }
          s.push_back(d);
          ++i;
        }
        if (!closed) return Err(start, "unclosed string literal");
        tokens_.push_back({GToken::kStr, start, s});
        continue;
      }
      if (c == '(' || c == ')') {
        tokens_.push_back({c == '(' ? GToken::kLParen : GToken::kRParen, start, std::string(1, c)});
        ++i;
        continue;
      }
      // A run of symbol characters, as govaluate reads operators.
      while (i < text_.size() && !IsSpace(text_[i]) && !IsAsciiDigit(text_[i]) &&
             !IsLetter(text_[i]) && text_[i] != '(' && text_[i] != ')' && text_[i] != '[' &&
             text_[i] != ']' && text_[i] != '\'' && text_[i] != '"') {
        ++i;
      }
      std::string op(text_.substr(start, i - start));
      static const std::set<std::string> kOps = {"==", "!=", ">", ">=", "<", "<=", "=~", "!~", "&&",
                                                 "||", "+",  "-", "*",  "/", "%",  "**", "!"};
      static const std::set<std::string> kUnsupported = {"&", "|", "^", "<<", ">>",
                                                         "~", "?", ":", "??"};
      if (kOps.count(op)) {
        tokens_.push_back({GToken::kOp, start, op});
      } else if (kUnsupported.count(op)) {
        return Err(start, "unsupported operator '" + op + "'");
      } else {
        return Err(start,
                   "invalid token '" + op + "' (hint: try wrapping the affected text in quotes)");
      }
    }
    if (tokens_.size() > kMaxTokens) {
      return Err(0, "expression too long (more than " + std::to_string(kMaxTokens) + " tokens)");
    }
    tokens_.push_back({GToken::kEnd, text_.size(), {}});
    return Status::Ok();
  }

  Result<int> ParseAll() {
    if (tokens_.size() == 1) return Err(0, "empty expression");
    auto root = ParseBinary(0, 0);
    if (!root.ok()) return root;
    if (Peek().kind != GToken::kEnd) return Unexpected(Peek());
    return root;
  }

  // Recursion depth is bounded by the token count (kMaxTokens).
  Result<GValue> Eval(int i, int depth) const {
    const GNode& n = nodes_[i];
    switch (n.kind) {
      case GNode::kLiteral:
        return n.value;
      case GNode::kList: {
        GValue v;
        v.type = GValue::kList;
        for (int k : n.kids) {
          auto e = Eval(k, depth + 1);
          if (!e.ok()) return e;
          v.list.push_back(std::move(*e));
        }
        return v;
      }
      case GNode::kUnary: {
        auto e = Eval(n.kids[0], depth + 1);
        if (!e.ok()) return e;
        if (n.op == "-") {
          if (e->type != GValue::kNum) return TypeErr(n, *e, "it is not a number");
          return GValue::Num(-e->num);
        }
        if (e->type != GValue::kBool) return TypeErr(n, *e, "it is not a boolean");
        return GValue::Bool(!e->b);
      }
      case GNode::kBinary:
        return EvalBinary(n, depth);
    }
    return Err(0, "internal error");
  }

 private:
  static int Precedence(const GToken& t) {
    if (t.kind != GToken::kOp) return -1;
    const std::string& o = t.text;
    if (o == "||") return 0;
    if (o == "&&") return 1;
    if (o == "==" || o == "!=" || o == "<" || o == "<=" || o == ">" || o == ">=" || o == "=~" ||
        o == "!~" || o == "in") {
      return 2;
    }
    if (o == "+" || o == "-") return 3;
    if (o == "*" || o == "/" || o == "%") return 4;
    if (o == "**") return 5;
    return -1;
  }

  const GToken& Peek() const { return tokens_[next_]; }

  Status Err(size_t pos, std::string message) const {
    return ErrorAt("when", text_, pos, std::move(message));
  }
  Status Unexpected(const GToken& t) const {
    if (t.kind == GToken::kEnd) return Err(t.pos, "unexpected end of expression");
    return Err(t.pos, "unexpected '" + t.text + "'");
  }
  Status TypeErr(const GNode& n, const GValue& v, std::string_view why) const {
    return Err(n.pos, "value '" + GoString(v) + "' cannot be used with the operator '" + n.op +
                          "', " + std::string(why));
  }

  int Add(GNode n) {
    nodes_.push_back(std::move(n));
    return static_cast<int>(nodes_.size()) - 1;
  }

  Result<int> ParseBinary(int min_prec, int depth) {
    if (depth > kMaxNesting) return Err(Peek().pos, "expression nested too deeply");
    auto left = ParseUnary(depth);
    if (!left.ok()) return left;
    int l = *left;
    while (true) {
      const GToken& t = Peek();
      int prec = Precedence(t);
      if (prec < min_prec || prec < 0) break;
      ++next_;
      auto right = ParseBinary(prec + 1, depth + 1);
      if (!right.ok()) return right;
      GNode n;
      n.kind = GNode::kBinary;
      n.op = t.text;
      n.pos = t.pos;
      n.kids = {l, *right};
      l = Add(std::move(n));
    }
    return l;
  }

  Result<int> ParseUnary(int depth) {
    if (depth > kMaxNesting) return Err(Peek().pos, "expression nested too deeply");
    const GToken& t = Peek();
    if (t.kind == GToken::kOp && (t.text == "-" || t.text == "!")) {
      ++next_;
      auto operand = ParseUnary(depth + 1);
      if (!operand.ok()) return operand;
      GNode n;
      n.kind = GNode::kUnary;
      n.op = t.text;
      n.pos = t.pos;
      n.kids = {*operand};
      return Add(std::move(n));
    }
    return ParsePrimary(depth);
  }

  Result<int> ParsePrimary(int depth) {
    const GToken& t = Peek();
    GNode n;
    switch (t.kind) {
      case GToken::kNum:
        n.value = GValue::Num(t.num);
        break;
      case GToken::kStr:
      case GToken::kWord:  // Argo turns every govaluate variable into a string
        n.value = GValue::Str(t.text);
        break;
      case GToken::kBool:
        n.value = GValue::Bool(t.b);
        break;
      case GToken::kLParen: {
        ++next_;
        std::vector<int> items;
        while (true) {
          auto e = ParseBinary(0, depth + 1);
          if (!e.ok()) return e;
          items.push_back(*e);
          if (Peek().kind == GToken::kComma) {
            ++next_;
            continue;
          }
          break;
        }
        if (Peek().kind != GToken::kRParen) {
          return Peek().kind == GToken::kEnd ? Err(Peek().pos, "unbalanced parenthesis")
                                             : Unexpected(Peek());
        }
        ++next_;
        if (items.size() == 1) return items[0];
        GNode list;
        list.kind = GNode::kList;
        list.pos = t.pos;
        list.kids = std::move(items);
        return Add(std::move(list));
      }
      default:
        return Unexpected(t);
    }
    ++next_;
    n.pos = t.pos;
    return Add(std::move(n));
  }

  Result<GValue> EvalBinary(const GNode& n, int depth) const {
    auto lr = Eval(n.kids[0], depth + 1);
    if (!lr.ok()) return lr;
    const GValue& l = *lr;
    const std::string& op = n.op;
    // govaluate short-circuits before type-checking the right side.
    if (op == "&&" && l.type == GValue::kBool && !l.b) return GValue::Bool(false);
    if (op == "||" && l.type == GValue::kBool && l.b) return GValue::Bool(true);
    auto rr = Eval(n.kids[1], depth + 1);
    if (!rr.ok()) return rr;
    const GValue& r = *rr;
    if (op == "&&" || op == "||") {
      if (l.type != GValue::kBool) return TypeErr(n, l, "it is not a boolean");
      if (r.type != GValue::kBool) return TypeErr(n, r, "it is not a boolean");
      return GValue::Bool(op == "&&" ? (l.b && r.b) : (l.b || r.b));
    }
    if (op == "==") return GValue::Bool(DeepEqual(l, r));
    if (op == "!=") return GValue::Bool(!DeepEqual(l, r));
    if (op == "<" || op == "<=" || op == ">" || op == ">=") {
      int cmp = 0;
      if (l.type == GValue::kNum && r.type == GValue::kNum) {
        cmp = l.num < r.num ? -1 : (l.num > r.num ? 1 : 0);
        if (std::isnan(l.num) || std::isnan(r.num)) return GValue::Bool(false);
      } else if (l.type == GValue::kStr && r.type == GValue::kStr) {
        cmp = l.str.compare(r.str);
      } else {
        const GValue& bad = (l.type == GValue::kNum || l.type == GValue::kStr) ? r : l;
        return TypeErr(n, bad, "it is not a number (both sides must be numbers or strings)");
      }
      bool res = op == "<" ? cmp < 0 : op == "<=" ? cmp <= 0 : op == ">" ? cmp > 0 : cmp >= 0;
      return GValue::Bool(res);
    }
    if (op == "=~" || op == "!~") {
      if (l.type != GValue::kStr) return TypeErr(n, l, "it is not a string");
      if (r.type != GValue::kStr) return TypeErr(n, r, "it is not a string");
      std::regex re;
      try {
        re = std::regex(r.str, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        return Err(n.pos, "invalid regular expression '" + r.str + "'");
      }
      bool m = std::regex_search(l.str, re);
      return GValue::Bool(op == "=~" ? m : !m);
    }
    if (op == "in") {
      if (r.type != GValue::kList) return TypeErr(n, r, "it is not a array (write (a, b, c))");
      for (const auto& e : r.list) {
        if (DeepEqual(l, e)) return GValue::Bool(true);
      }
      return GValue::Bool(false);
    }
    if (op == "+") {
      if (l.type == GValue::kNum && r.type == GValue::kNum) return GValue::Num(l.num + r.num);
      if (l.type == GValue::kStr || r.type == GValue::kStr) {
        return GValue::Str(GoString(l) + GoString(r));
      }
      return TypeErr(n, l, "it is not a number");
    }
    // - * / % **
    if (l.type != GValue::kNum) return TypeErr(n, l, "it is not a number");
    if (r.type != GValue::kNum) return TypeErr(n, r, "it is not a number");
    if (op == "-") return GValue::Num(l.num - r.num);
    if (op == "*") return GValue::Num(l.num * r.num);
    if (op == "/") return GValue::Num(l.num / r.num);
    if (op == "%") return GValue::Num(std::fmod(l.num, r.num));
    return GValue::Num(std::pow(l.num, r.num));
  }

  std::string_view text_;
  std::vector<GToken> tokens_;
  std::vector<GNode> nodes_;
  size_t next_ = 0;
};

}  // namespace

Result<bool> EvaluateWhen(std::string_view expression) {
  bool blank = std::all_of(expression.begin(), expression.end(), IsSpace);
  if (expression.empty()) return true;
  WhenParser p(expression);
  if (blank) return InvalidArgument("when '" + std::string(expression) + "': empty expression");
  HEADWAY_RETURN_IF_ERROR(p.Lex());
  auto root = p.ParseAll();
  if (!root.ok()) return root.status();
  auto v = p.Eval(*root, 0);
  if (!v.ok()) return v.status();
  if (v->type != GValue::kBool) {
    return InvalidArgument("when '" + std::string(expression) +
                           "': expected a boolean result, got '" + GoString(*v) + "'");
  }
  return v->b;
}

// ===========================================================================
// {{= ...}} expression tags (expr-lang subset)
// ===========================================================================

namespace {

using namespace expr_internal;

struct XToken {
  enum Kind { kInt, kFloat, kStr, kIdent, kOp, kEnd } kind;
  size_t pos;
  std::string text;
  int64_t i = 0;
  double f = 0;
};

// Parses and evaluates in one pass over the tokens; short-circuiting
// operators evaluate their skipped side with `skip` set, which checks syntax
// and variable names without computing values.
class ExprEvaluator {
 public:
  ExprEvaluator(std::string_view text, const ExprVars& vars) : text_(text), vars_(vars) {}

  Status Lex() {
    size_t i = 0;
    while (i < text_.size()) {
      char c = text_[i];
      if (IsSpace(c)) {
        ++i;
        continue;
      }
      size_t start = i;
      if (IsAsciiDigit(c) || (c == '.' && i + 1 < text_.size() && IsAsciiDigit(text_[i + 1]))) {
        bool is_float = false;
        while (i < text_.size() && (IsAsciiDigit(text_[i]) || text_[i] == '_')) ++i;
        if (i < text_.size() && text_[i] == '.' && i + 1 < text_.size() &&
            IsAsciiDigit(text_[i + 1])) {
          is_float = true;
          ++i;
          while (i < text_.size() && IsAsciiDigit(text_[i])) ++i;
        }
        if (i < text_.size() && (text_[i] == 'e' || text_[i] == 'E')) {
          size_t save = i;
          ++i;
          if (i < text_.size() && (text_[i] == '+' || text_[i] == '-')) ++i;
          if (i < text_.size() && IsAsciiDigit(text_[i])) {
            is_float = true;
            while (i < text_.size() && IsAsciiDigit(text_[i])) ++i;
          } else {
            i = save;
          }
        }
        std::string num;
        for (char d : text_.substr(start, i - start)) {
          if (d != '_') num.push_back(d);
        }
        XToken t{is_float ? XToken::kFloat : XToken::kInt, start, num};
        if (is_float) {
          auto r = std::from_chars(num.data(), num.data() + num.size(), t.f);
          if (r.ec != std::errc()) return Err(start, "invalid number '" + num + "'");
        } else {
          auto r = std::from_chars(num.data(), num.data() + num.size(), t.i);
          if (r.ec != std::errc()) return Err(start, "invalid integer '" + num + "'");
        }
        tokens_.push_back(t);
        continue;
      }
      if (IsAsciiAlpha(c) || c == '_' || c == '$') {
        while (i < text_.size() && (IsAsciiAlpha(text_[i]) || IsAsciiDigit(text_[i]) ||
                                    text_[i] == '_' || text_[i] == '$')) {
          ++i;
        }
        tokens_.push_back({XToken::kIdent, start, std::string(text_.substr(start, i - start))});
        continue;
      }
      if (c == '\'' || c == '"') {
        ++i;
        std::string s;
        bool closed = false;
        while (i < text_.size()) {
          char d = text_[i];
          if (d == '\\' && i + 1 < text_.size()) {
            char e = text_[i + 1];
            switch (e) {
              case 'n':
                s.push_back('\n');
                break;
              case 't':
                s.push_back('\t');
                break;
              case 'r':
                s.push_back('\r');
                break;
              default:
                s.push_back(e);
            }
            i += 2;
            continue;
          }
          if (d == c) {
            closed = true;
            ++i;
            break;
          }
          s.push_back(d);
          ++i;
        }
        if (!closed) return Err(start, "unclosed string literal");
        tokens_.push_back({XToken::kStr, start, s});
        continue;
      }
      static const char* kOps[] = {"==", "!=", "<=", ">=", "&&", "||", "??", "**", "<", ">",
                                   "+",  "-",  "*",  "/",  "%",  "!",  "?",  ":",  "(", ")",
                                   "[",  "]",  ",",  ".",  "{",  "}",  "#",  "|"};
      bool matched = false;
      for (const char* op : kOps) {
        std::string_view o(op);
        if (text_.substr(i, o.size()) == o) {
          tokens_.push_back({XToken::kOp, start, std::string(o)});
          i += o.size();
          matched = true;
          break;
        }
      }
      if (!matched) return Err(start, std::string("unexpected character '") + c + "'");
    }
    if (tokens_.size() > kMaxTokens) {
      return Err(0, "expression too long (more than " + std::to_string(kMaxTokens) + " tokens)");
    }
    tokens_.push_back({XToken::kEnd, text_.size(), {}});
    return Status::Ok();
  }

  Result<XValue> Run() {
    auto v = Ternary(false, 0);
    if (!v.ok()) return v;
    if (Peek().kind != XToken::kEnd) return Unexpected(Peek());
    return v;
  }

 private:
  const XToken& Peek() const { return tokens_[next_]; }
  bool IsOp(std::string_view o) const { return Peek().kind == XToken::kOp && Peek().text == o; }
  bool IsWord(std::string_view w) const {
    return Peek().kind == XToken::kIdent && Peek().text == w;
  }

  Status Err(size_t pos, std::string message) const {
    return ErrorAt("expression", text_, pos, std::move(message));
  }
  Status Unsupported(size_t pos, std::string what) const {
    return Err(pos,
               "unsupported expression: " + what + " (Headway evaluates a subset of expr-lang)");
  }
  Status Unexpected(const XToken& t) const {
    if (t.kind == XToken::kEnd) return Err(t.pos, "unexpected end of expression");
    if (t.kind == XToken::kOp && (t.text == "{" || t.text == "#" || t.text == "|")) {
      return Unsupported(t.pos, "'" + t.text + "'");
    }
    return Err(t.pos, "unexpected '" + t.text + "'");
  }
  Status Mismatch(size_t pos, std::string_view op, const XValue& a, const XValue& b) const {
    return Err(pos, "invalid operation: " + std::string(op) + " (mismatched types " + TypeName(a) +
                        " and " + TypeName(b) + ")");
  }

  Result<XValue> Ternary(bool skip, int depth) {
    if (depth > kMaxNesting) return Err(Peek().pos, "expression nested too deeply");
    auto cond = Binary(0, skip, depth + 1);
    if (!cond.ok()) return cond;
    if (IsOp("??")) {
      ++next_;
      bool use_left = !skip && cond->type != XValue::kNil;
      auto alt = Ternary(skip || use_left, depth + 1);
      if (!alt.ok()) return alt;
      return use_left ? cond : alt;
    }
    if (!IsOp("?")) return cond;
    size_t qpos = Peek().pos;
    ++next_;
    if (!skip && cond->type != XValue::kBool) {
      return Err(qpos, std::string("non-bool expression (type ") + TypeName(*cond) +
                           ") used as condition");
    }
    bool take_first = !skip && cond->b;
    auto a = Ternary(skip || !take_first, depth + 1);
    if (!a.ok()) return a;
    if (!IsOp(":")) return Err(Peek().pos, "expected ':'");
    ++next_;
    auto b = Ternary(skip || take_first, depth + 1);
    if (!b.ok()) return b;
    if (skip) return XValue();
    return take_first ? a : b;
  }

  // Binary operator levels, lowest first (expr-lang's precedence table).
  static int Level(const XToken& t) {
    const std::string& o = t.text;
    if (t.kind == XToken::kIdent) {
      if (o == "or") return 0;
      if (o == "and") return 1;
      if (o == "in" || o == "contains" || o == "startsWith" || o == "endsWith" || o == "matches") {
        return 2;
      }
      return -1;
    }
    if (t.kind != XToken::kOp) return -1;
    if (o == "||") return 0;
    if (o == "&&") return 1;
    if (o == "==" || o == "!=" || o == "<" || o == ">" || o == "<=" || o == ">=") return 2;
    if (o == "+" || o == "-") return 3;
    if (o == "*" || o == "/" || o == "%") return 4;
    if (o == "**") return 5;
    return -1;
  }

  Result<XValue> Binary(int min_level, bool skip, int depth) {
    if (depth > kMaxNesting) return Err(Peek().pos, "expression nested too deeply");
    auto left = Unary(skip, depth + 1);
    if (!left.ok()) return left;
    XValue l = std::move(*left);
    while (true) {
      const XToken t = Peek();
      int level = Level(t);
      if (level < 0 || level < min_level) break;
      ++next_;
      std::string op = t.text;
      if (op == "or") op = "||";
      if (op == "and") op = "&&";
      bool short_circuit = false;
      if (!skip && (op == "&&" || op == "||")) {
        if (l.type != XValue::kBool) {
          return Err(t.pos, std::string("invalid operation: ") + op + " on " + TypeName(l));
        }
        short_circuit = (op == "&&") ? !l.b : l.b;
      }
      // ** is right-associative in expr-lang; the others are left-associative.
      int next_level = op == "**" ? level : level + 1;
      auto right = Binary(next_level, skip || short_circuit, depth + 1);
      if (!right.ok()) return right;
      if (skip) continue;
      if (short_circuit) continue;  // l keeps its value
      auto res = Apply(op, t.pos, l, *right);
      if (!res.ok()) return res;
      l = std::move(*res);
    }
    return l;
  }

  Result<XValue> Apply(const std::string& op, size_t pos, const XValue& l, const XValue& r) {
    if (op == "&&" || op == "||") {
      if (r.type != XValue::kBool) return Mismatch(pos, op, l, r);
      return XValue::Bool(r.b);
    }
    if (op == "==") return XValue::Bool(XEqual(l, r));
    if (op == "!=") return XValue::Bool(!XEqual(l, r));
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int cmp;
      if (l.numeric() && r.numeric()) {
        double a = l.AsDouble(), b = r.AsDouble();
        if (l.type == XValue::kInt && r.type == XValue::kInt) {
          cmp = l.i < r.i ? -1 : (l.i > r.i ? 1 : 0);
        } else {
          cmp = a < b ? -1 : (a > b ? 1 : 0);
        }
      } else if (l.type == XValue::kStr && r.type == XValue::kStr) {
        cmp = l.s.compare(r.s);
      } else {
        return Mismatch(pos, op, l, r);
      }
      bool res = op == "<" ? cmp < 0 : op == ">" ? cmp > 0 : op == "<=" ? cmp <= 0 : cmp >= 0;
      return XValue::Bool(res);
    }
    if (op == "in") {
      if (r.type == XValue::kMap && l.type == XValue::kStr) {
        return XValue::Bool(r.map.contains(l.s));
      }
      if (r.type != XValue::kList) return Mismatch(pos, op, l, r);
      for (const auto& e : r.list) {
        if (XEqual(l, e)) return XValue::Bool(true);
      }
      return XValue::Bool(false);
    }
    if (op == "contains" || op == "startsWith" || op == "endsWith" || op == "matches") {
      if (l.type != XValue::kStr || r.type != XValue::kStr) return Mismatch(pos, op, l, r);
      if (op == "contains") return XValue::Bool(l.s.find(r.s) != std::string::npos);
      if (op == "startsWith") return XValue::Bool(l.s.rfind(r.s, 0) == 0);
      if (op == "endsWith") {
        return XValue::Bool(l.s.size() >= r.s.size() &&
                            l.s.compare(l.s.size() - r.s.size(), r.s.size(), r.s) == 0);
      }
      try {
        return XValue::Bool(std::regex_search(l.s, std::regex(r.s, std::regex::ECMAScript)));
      } catch (const std::regex_error&) {
        return Err(pos, "invalid regular expression '" + r.s + "'");
      }
    }
    if (op == "+" && l.type == XValue::kStr && r.type == XValue::kStr) {
      return XValue::Str(l.s + r.s);
    }
    if (!l.numeric() || !r.numeric()) return Mismatch(pos, op, l, r);
    bool ints = l.type == XValue::kInt && r.type == XValue::kInt;
    if (op == "+")
      return ints ? XValue::Int(l.i + r.i) : XValue::Float(l.AsDouble() + r.AsDouble());
    if (op == "-")
      return ints ? XValue::Int(l.i - r.i) : XValue::Float(l.AsDouble() - r.AsDouble());
    if (op == "*")
      return ints ? XValue::Int(l.i * r.i) : XValue::Float(l.AsDouble() * r.AsDouble());
    if (op == "/") return XValue::Float(l.AsDouble() / r.AsDouble());
    if (op == "%") {
      if (!ints) return Mismatch(pos, op, l, r);
      if (r.i == 0) return Err(pos, "integer divide by zero");
      return XValue::Int(l.i % r.i);
    }
    return XValue::Float(std::pow(l.AsDouble(), r.AsDouble()));  // **
  }

  Result<XValue> Unary(bool skip, int depth) {
    if (depth > kMaxNesting) return Err(Peek().pos, "expression nested too deeply");
    const XToken t = Peek();
    bool neg = t.kind == XToken::kOp && t.text == "-";
    bool plus = t.kind == XToken::kOp && t.text == "+";
    bool inv =
        (t.kind == XToken::kOp && t.text == "!") || (t.kind == XToken::kIdent && t.text == "not");
    if (!neg && !plus && !inv) return Postfix(skip, depth + 1);
    ++next_;
    // expr-lang's unary precedences: `!`/`not` (50) take * / % ** inside
    // their operand, `-`/`+` (90) only **: -2 ** 2 is -(2 ** 2).
    auto v = Binary(inv ? 4 : 5, skip, depth + 1);
    if (!v.ok() || skip) return v;
    if (inv) {
      if (v->type != XValue::kBool) {
        return Err(t.pos,
                   std::string("invalid operation: ! (mismatched type ") + TypeName(*v) + ")");
      }
      return XValue::Bool(!v->b);
    }
    if (!v->numeric()) {
      return Err(t.pos, "invalid operation: " + t.text + " (mismatched type " + TypeName(*v) + ")");
    }
    if (plus) return v;
    return v->type == XValue::kInt ? XValue::Int(-v->i) : XValue::Float(-v->f);
  }

  Result<XValue> Postfix(bool skip, int depth) {
    const XToken t = Peek();
    switch (t.kind) {
      case XToken::kInt:
        ++next_;
        return XValue::Int(t.i);
      case XToken::kFloat:
        ++next_;
        return XValue::Float(t.f);
      case XToken::kStr:
        ++next_;
        return XValue::Str(t.text);
      case XToken::kIdent:
        return Identifier(skip, depth);
      case XToken::kOp:
        if (t.text == "(") {
          ++next_;
          auto v = Ternary(skip, depth + 1);
          if (!v.ok()) return v;
          if (!IsOp(")")) return Err(Peek().pos, "expected ')'");
          ++next_;
          return Members(std::move(*v), skip, depth);
        }
        if (t.text == "#" || (t.text == "." && !closure_.empty())) {
          if (closure_.empty()) return Err(t.pos, "'#' outside a predicate");
          if (t.text == "#") ++next_;
          return Members(skip ? XValue() : closure_.back(), skip, depth);
        }
        if (t.text == "[") {
          ++next_;
          XValue list;
          list.type = XValue::kList;
          if (IsOp("]")) {
            ++next_;
            return list;
          }
          while (true) {
            auto e = Ternary(skip, depth + 1);
            if (!e.ok()) return e;
            list.list.push_back(std::move(*e));
            if (IsOp(",")) {
              ++next_;
              continue;
            }
            if (IsOp("]")) {
              ++next_;
              break;
            }
            return Err(Peek().pos, "expected ',' or ']'");
          }
          return Members(std::move(list), skip, depth);
        }
        return Unexpected(t);
      case XToken::kEnd:
        return Unexpected(t);
    }
    return Unexpected(t);
  }

  Result<XValue> Identifier(bool skip, int depth) {
    const XToken t = Peek();
    ++next_;
    if (t.text == "true") return XValue::Bool(true);
    if (t.text == "false") return XValue::Bool(false);
    if (t.text == "nil") return XValue();
    if (IsOp("(")) {
      auto v = Call(t.text, t.pos, skip, depth);
      if (!v.ok()) return v;
      return Members(std::move(*v), skip, depth);
    }
    // A variable path: ident ('.' ident | '[' 'string' ']')*
    std::string path = t.text;
    while (true) {
      if (IsOp(".")) {
        ++next_;
        if (Peek().kind != XToken::kIdent) return Err(Peek().pos, "expected a name after '.'");
        path += "." + Peek().text;
        ++next_;
        if (IsOp("(")) {
          if (path.rfind("sprig.", 0) != 0) return Unsupported(Peek().pos, "method calls");
          auto v = Call(path, t.pos, skip, depth);
          if (!v.ok()) return v;
          return Members(std::move(*v), skip, depth);
        }
        continue;
      }
      if (IsOp("[")) {
        size_t pos = Peek().pos;
        ++next_;
        if (Peek().kind != XToken::kStr) {
          return Unsupported(pos, "indexing other than ['name']");
        }
        path += "." + Peek().text;
        ++next_;
        if (!IsOp("]")) return Err(Peek().pos, "expected ']'");
        ++next_;
        continue;
      }
      break;
    }
    auto it = vars_.find(path);
    if (it == vars_.end()) {
      return Status(StatusCode::kNotFound, "expression '" + std::string(text_) + "': variable '" +
                                               path + "' is not defined (at position " +
                                               std::to_string(t.pos) + ")");
    }
    if (skip) return XValue();
    return XValue::Str(it->second);
  }

  // `name(args...)`, the token after the name being '('.
  Result<XValue> Call(const std::string& name, size_t pos, bool skip, int depth) {
    static const std::set<std::string, std::less<>> kPredicates = {"filter", "map", "all",  "any",
                                                                   "none",   "one", "count"};
    if (kPredicates.count(name)) return Predicate(name, pos, skip, depth);
    if (!IsFunction(name)) return Unsupported(pos, "the function '" + name + "'");
    ++next_;  // (
    std::vector<XValue> args;
    if (!IsOp(")")) {
      while (true) {
        auto a = Ternary(skip, depth + 1);
        if (!a.ok()) return a;
        args.push_back(std::move(*a));
        if (IsOp(",")) {
          ++next_;
          continue;
        }
        break;
      }
    }
    if (!IsOp(")")) return Err(Peek().pos, "expected ')'");
    ++next_;
    if (skip) return XValue();
    auto result = CallFunction(name, args);
    if (!result.ok()) return Err(pos, result.status().message());
    return result;
  }

  // expr-lang's predicate builtins: filter(list, {# > 1}), map(list,
  // {#.name}), all, any, none, one, count. Inside the braces `#` is the
  // element, and `.name` a member of it.
  Result<XValue> Predicate(const std::string& name, size_t pos, bool skip, int depth) {
    ++next_;  // (
    auto list = Ternary(skip, depth + 1);
    if (!list.ok()) return list;
    if (!IsOp(",")) return Err(Peek().pos, "expected ',' after " + name + "()'s first argument");
    ++next_;
    if (!IsOp("{"))
      return Err(Peek().pos, "expected a predicate in { } as " + name + "()'s second argument");
    ++next_;
    if (!skip && list->type != XValue::kList) {
      return Err(pos, "cannot use " + std::string(TypeName(*list)) + " as " + name +
                          "()'s first argument");
    }
    const size_t body = next_;
    closure_.emplace_back();
    auto checked = Ternary(true, depth + 1);  // its syntax, once
    if (!checked.ok()) {
      closure_.pop_back();
      return checked;
    }
    const size_t end = next_;
    std::vector<XValue> kept;
    int64_t count = 0;
    if (!skip) {
      for (const XValue& e : list->list) {
        next_ = body;
        closure_.back() = e;
        auto v = Ternary(false, depth + 1);
        if (!v.ok()) {
          closure_.pop_back();
          return v;
        }
        if (name == "map") {
          kept.push_back(std::move(*v));
          continue;
        }
        if (v->type != XValue::kBool) {
          closure_.pop_back();
          return Err(pos, name + "(): the predicate gave " + TypeName(*v) + ", not bool");
        }
        if (v->b) {
          ++count;
          if (name == "filter") kept.push_back(e);
        }
      }
    }
    closure_.pop_back();
    next_ = end;
    if (!IsOp("}")) return Err(Peek().pos, "expected '}'");
    ++next_;
    if (!IsOp(")")) return Err(Peek().pos, "expected ')'");
    ++next_;
    if (skip) return XValue();
    const int64_t size = static_cast<int64_t>(list->list.size());
    if (name == "filter" || name == "map") return XValue::List(std::move(kept));
    if (name == "all") return XValue::Bool(count == size);
    if (name == "any") return XValue::Bool(count > 0);
    if (name == "none") return XValue::Bool(count == 0);
    if (name == "one") return XValue::Bool(count == 1);
    return XValue::Int(count);
  }

  // Member access after a value: `[index]`, `['key']`, `.key`.
  Result<XValue> Members(XValue v, bool skip, int depth) {
    while (true) {
      if (IsOp(".")) {
        ++next_;
        if (Peek().kind != XToken::kIdent) return Err(Peek().pos, "expected a name after '.'");
        const XToken name = Peek();
        ++next_;
        if (IsOp("(")) return Unsupported(Peek().pos, "method calls");
        if (skip) continue;
        auto m = Member(v, XValue::Str(name.text));
        if (!m.ok()) return Err(name.pos, m.status().message());
        v = std::move(*m);
        continue;
      }
      if (IsOp("[")) {
        const size_t pos = Peek().pos;
        ++next_;
        auto key = Ternary(skip, depth + 1);
        if (!key.ok()) return key;
        if (!IsOp("]")) return Err(Peek().pos, "expected ']'");
        ++next_;
        if (skip) continue;
        auto m = Member(v, *key);
        if (!m.ok()) return Err(pos, m.status().message());
        v = std::move(*m);
        continue;
      }
      return v;
    }
  }

  std::string_view text_;
  const ExprVars& vars_;
  std::vector<XValue> closure_;  // the elements of the predicates being evaluated
  std::vector<XToken> tokens_;
  size_t next_ = 0;
};

}  // namespace

Result<std::string> EvaluateExprTag(std::string_view body, const ExprVars& vars) {
  ExprEvaluator e(body, vars);
  HEADWAY_RETURN_IF_ERROR(e.Lex());
  auto v = e.Run();
  if (!v.ok()) return v.status();
  if (v->type == XValue::kNil) {
    return InvalidArgument("expression '" + std::string(body) + "' evaluated to nil");
  }
  return XGoString(*v);
}

}  // namespace headway::workflow
