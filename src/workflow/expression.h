// The three small expression languages of an Argo Workflows manifest, so that
// Headway runs Argo manifests unchanged:
//
//  * `depends` on a DAG task ("enhanced depends logic", Argo v2.9+):
//    `A && (B.Succeeded || C.Failed) && !D.Skipped`;
//  * `when` on a step or task, evaluated after variable substitution with the
//    grammar of github.com/Knetic/govaluate, which Argo uses for it;
//  * `{{=...}}` expression tags (expr-lang, Argo v3.1+): a documented subset,
//    with the functions Argo documents (jsonpath, sprig.*, ...).
//
// Everything here is pure (no I/O, no clocks, no globals), thread-safe and
// returns a Status naming the position (0-based byte offset) of what is wrong.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace headway::workflow {

// ---------------------------------------------------------------------------
// depends
// ---------------------------------------------------------------------------

// The phase of a finished (or not yet finished) task node, as Argo names it.
enum class NodePhase { kPending, kRunning, kSucceeded, kFailed, kError, kSkipped, kOmitted };

// Argo's phase names ("Pending", "Running", "Succeeded", "Failed", "Error",
// "Skipped", "Omitted"), as stored in node status; nullopt for others.
std::optional<NodePhase> ParseNodePhase(std::string_view name);
std::string_view NodePhaseName(NodePhase phase);

// What a `depends` expression can ask of one task. Mirrors Argo's TaskResults
// (workflow/controller/dag.go evaluateDependsLogic).
struct TaskOutcome {
  NodePhase phase = NodePhase::kPending;
  // A daemon task that has started counts as Daemoned whatever its phase.
  bool daemoned = false;
  // For a fanned-out task (withItems/withParam/withSequence: a TaskGroup node)
  // the phases of its children; AnySucceeded / AllFailed look at these only.
  // AllFailed is false for a group with no children, as in Argo.
  bool fanned_out = false;
  std::vector<NodePhase> children;
  // The task's own `continueOn` (of the task depended upon): a bare `A` and
  // `dependencies: [A]` also accept A.Errored / A.Failed when these are set
  // (Argo workflow/common/ancestry.go expandDependency).
  bool continue_on_error = false;
  bool continue_on_failed = false;
};

// Whether a task may start, given the outcome of what it depends on.
enum class DependsDecision {
  kWait,  // some referenced task has no node yet or has not finished
  kRun,   // all finished and the expression is true
  kOmit,  // all finished and the expression is false: Argo marks the task Omitted
};

// A parsed `depends` expression. Operands are `TASK` or `TASK.RESULT` where
// RESULT is one of Succeeded, Failed, Errored, Skipped, Omitted, Daemoned,
// AnySucceeded, AllFailed; operators are `!`, `&&`, `||` (that precedence,
// left to right) and parentheses. A bare `TASK` means
// (TASK.Succeeded || TASK.Skipped || TASK.Daemoned), plus `|| TASK.Errored`
// and `|| TASK.Failed` when that task has continueOn error / failed.
// Task names are what Argo accepts: a letter or digit, then letters, digits,
// '-' or '_'. Copyable and immutable after Parse.
class DependsExpr {
 public:
  // InvalidArgument naming the offset for: an empty expression, an unknown
  // result ("task result 'Completed' for task 'C' is invalid"), a dangling
  // operator, unbalanced parentheses, an unexpected character.
  static Result<DependsExpr> Parse(std::string_view text);

  // `dependencies: [A, B]`: the same as `depends: "A && B"` (Argo ancestry.go
  // getTaskDependsLogic). InvalidArgument when a name is not a task name.
  static Result<DependsExpr> FromDependencies(const std::vector<std::string>& names);

  // The tasks referenced, sorted, each once: the dependency edges.
  std::vector<std::string> Tasks() const;
  // The tasks referenced through .AnySucceeded or .AllFailed: Argo waits for
  // all of such a task's children (DependencyTypeItems).
  std::vector<std::string> ItemTasks() const;

  // Decides against the outcomes of the referenced tasks. A task missing from
  // `outcomes`, or whose phase is Pending/Running, makes the answer kWait
  // (Argo only evaluates once every dependency is fulfilled).
  DependsDecision Evaluate(const std::map<std::string, TaskOutcome>& outcomes) const;

  const std::string& text() const { return text_; }

  // The parsed form (an implementation detail, public only so the class
  // stays copyable without indirection).
  enum class ResultKind {
    kBare,
    kSucceeded,
    kFailed,
    kErrored,
    kSkipped,
    kOmitted,
    kDaemoned,
    kAnySucceeded,
    kAllFailed
  };
  struct Node {
    enum Kind { kOperand, kNot, kAnd, kOr } kind = kOperand;
    std::string task;
    ResultKind result = ResultKind::kBare;
    int left = -1;
    int right = -1;
  };

 private:
  std::string text_;
  std::vector<Node> nodes_;  // nodes_[root_] is the root
  int root_ = -1;
};

// ---------------------------------------------------------------------------
// when
// ---------------------------------------------------------------------------

// Evaluates an already substituted `when` expression as Argo does
// (workflow/controller/steps.go shouldExecute): an empty expression is true;
// otherwise it is parsed by govaluate's grammar, every bare word becomes a
// string literal (so `heads == heads` and `{{item}} == apple` work unquoted),
// and the result must be a boolean.
//
// Grammar (govaluate v3, lowest precedence first, all left-associative):
//   ||   &&   == != < <= > >= =~ !~ in   + -   * / %   **   prefix - !
// A run of operator characters is read as one operator, so `!!x` and `a==-1`
// are invalid tokens, as in govaluate (write `!(!x)`, `a == -1`).
// Literals: numbers (`3`, `2.5`, `.5`, `0x1F`; all float64), strings in '...'
// or "..." (a string ends at the first quote of either kind; a backslash
// escapes the next character), true, false, bare words ([letter][letter,
// digit, _]*), `(a, b, c)` lists for `in`. A hyphenated bare word is a
// subtraction (`my-value` fails): quote such values.
// Types as govaluate: == and != compare type and value (so `1 == "1"` is
// false); < <= > >= need two numbers or two strings (strings compare
// byte-wise); + adds numbers or concatenates when either side is a string;
// - * / % ** need numbers; && || ! need booleans and short-circuit; =~ !~
// need a string and a regular expression (unanchored search, ECMAScript
// syntax here where Go uses RE2: the common subset is the same).
// Not supported (InvalidArgument saying so): bitwise operators, ternary
// `? :` and `??`, `[escaped]` variables, dotted words (govaluate treats `a.b`
// as a field access on a missing parameter and fails too). Quoted dates,
// which govaluate reads as times, compare as strings here (ISO dates order
// the same way).
Result<bool> EvaluateWhen(std::string_view expression);

// ---------------------------------------------------------------------------
// {{= ...}} expression tags
// ---------------------------------------------------------------------------

// Variables an expression tag can read: Argo's flat substitution map
// ("inputs.parameters.x" -> "5"). All values are strings, as in Argo.
using ExprVars = std::map<std::string, std::string, std::less<>>;

// Evaluates the body of an expression tag (`{{=BODY}}`) and renders the
// result as Argo does (Go's fmt "%v": integers without a decimal point, floats
// as FormatGoFloat, booleans true/false, lists as `[1 2 3]`; use toJson(x)
// for JSON). A nil result is an error, as in Argo.
//
// Supported subset of expr-lang: literals (integers, floats, 'str', "str",
// true, false, nil, [a, b]); variables by path (`inputs.parameters.x`,
// `inputs.parameters['my-param']`, `steps['a-b'].outputs.result`, `item`),
// which read the flat key joined with '.'; member access on values
// (`fromJSON(x).key`, `list[0]`, `list[-1]`, `map['k']`); unary `-` `!`
// `not`; `*` `/` `%`; `+` `-` (string + string concatenates); `==` `!=` `<`
// `<=` `>` `>=`; `in` (a list, or a map's keys); `&&` `and`; `||` `or`;
// `? :` (right-associative) and `??`; `contains` `startsWith` `endsWith`
// `matches`; the predicates filter, map, all, any, none, one, count
// (`filter(xs, {# > 1})`, `map(xs, {.name})`); and the functions of
// expression_functions.cc: Argo's asInt, asFloat, toJson, jsonpath(json,
// path) (`$`, `.key`, `['key']`, `[n]`, `[*]`, `.*`, `..key`); expr-lang's
// string, int, float, len, lower, upper, trim, trimPrefix, trimSuffix,
// split, join, replace, indexOf, abs, ceil, floor, round, max, min, sum,
// first, last, reverse, keys, values, toJSON, fromJSON; and sprig.* (with
// sprig's argument order): upper, lower, trim, trimAll, trimPrefix,
// trimSuffix, replace, contains, hasPrefix, hasSuffix, splitList, join,
// repeat, substr, trunc, nospace, title, quote, squote, default, empty,
// coalesce, ternary, toString, toJson, fromJson, int, int64, atoi, float64,
// add, sub, mul, div, mod, max, min, b64enc, b64dec, list, first, last.
// Errors: NotFound naming the variable when a path is not in `vars` (Argo
// leaves such a tag for a later phase); InvalidArgument "unsupported
// expression ..." naming anything outside the subset (another function,
// e.g. sprig.env, which Argo removes too; method calls; lambdas other than
// the predicates' braces); InvalidArgument for type errors ("'a' + 1").
Result<std::string> EvaluateExprTag(std::string_view body, const ExprVars& vars);

// How Argo renders a number it read from JSON (Go's encoding/json float64
// format): plain decimal for 1e-6 <= |v| < 1e21 in the shortest form that
// reads back ("3", "2.5", "0.000001"), otherwise exponent form ("1e+21",
// "1e-7").
std::string FormatJsonNumber(double value);

// Go's fmt "%v" for a float64 (strconv 'g' with the shortest digits):
// exponent form when the decimal exponent is < -4 or >= 6, so
// 100000 -> "100000", 1e6 -> "1e+06", 0.0001 -> "0.0001", 1e-5 -> "1e-05".
std::string FormatGoFloat(double value);

}  // namespace headway::workflow
