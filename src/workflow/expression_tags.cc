// `{{=...}}` expression tags: the subset of expr-lang that Argo evaluates
// (expression.h's EvaluateExprTag), parsed and evaluated in one pass. The
// functions they may call are in expression_functions.cc.
#include <charconv>
#include <cmath>
#include <functional>
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
