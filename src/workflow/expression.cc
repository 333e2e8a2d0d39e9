// Workflow expressions: JSON and Go number formatting, node phase names and
// `depends` (Argo's task dependency logic). `when` conditions are in
// expression_when.cc, `{{=...}}` tags in expression_tags.cc and
// expression_functions.cc.
#include "workflow/expression.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "workflow/expression_internal.h"

namespace headway::workflow {

namespace {

using expr_internal::ErrorAt;
using expr_internal::IsAsciiAlpha;
using expr_internal::IsAsciiDigit;
using expr_internal::IsSpace;
using expr_internal::kMaxTokens;

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

}  // namespace headway::workflow
