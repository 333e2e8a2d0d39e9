// `when` conditions: govaluate's expressions, as Argo evaluates a step's or
// task's `when` after substituting its variables (expression.h's
// EvaluateWhen).
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "workflow/expression.h"
#include "workflow/expression_internal.h"

namespace headway::workflow {

namespace {

using expr_internal::ErrorAt;
using expr_internal::IsAsciiAlpha;
using expr_internal::IsAsciiDigit;
using expr_internal::IsSpace;
using expr_internal::kMaxNesting;
using expr_internal::kMaxTokens;

// govaluate uses unicode.IsLetter; any byte of a multi-byte UTF-8 sequence is
// taken as part of a letter here.
bool IsLetter(char c) { return IsAsciiAlpha(c) || static_cast<unsigned char>(c) >= 0x80; }

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

}  // namespace headway::workflow
