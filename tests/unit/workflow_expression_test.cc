// depends, when and {{=...}} expressions, checked against Argo's documented
// behaviour (docs/enhanced-depends-logic.md, docs/walk-through/conditionals.md,
// docs/variables.md) and govaluate's grammar.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "workflow/expression.h"
#include "workflow/substitute.h"

namespace headway::workflow {
namespace {

// ---------------------------------------------------------------------------
// depends
// ---------------------------------------------------------------------------

TaskOutcome Done(NodePhase p) {
  TaskOutcome o;
  o.phase = p;
  return o;
}

TaskOutcome Group(NodePhase p, std::vector<NodePhase> children) {
  TaskOutcome o;
  o.phase = p;
  o.fanned_out = true;
  o.children = std::move(children);
  return o;
}

DependsDecision Decide(std::string_view expr, const std::map<std::string, TaskOutcome>& outcomes) {
  auto e = DependsExpr::Parse(expr);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (!e.ok()) return DependsDecision::kWait;
  return e->Evaluate(outcomes);
}

constexpr auto kRun = DependsDecision::kRun;
constexpr auto kOmit = DependsDecision::kOmit;
constexpr auto kWait = DependsDecision::kWait;

TEST(WorkflowDepends, PhaseNamesRoundTrip) {
  for (auto p : {NodePhase::kPending, NodePhase::kRunning, NodePhase::kSucceeded,
                 NodePhase::kFailed, NodePhase::kError, NodePhase::kSkipped, NodePhase::kOmitted}) {
    EXPECT_EQ(ParseNodePhase(NodePhaseName(p)), p);
  }
  EXPECT_EQ(ParseNodePhase("Errored"), std::nullopt);  // the depends result, not the phase
  EXPECT_EQ(NodePhaseName(NodePhase::kError), "Error");
}

TEST(WorkflowDepends, TasksAreTheDependencyEdgesSortedOnce) {
  auto e = DependsExpr::Parse("A && (B.Succeeded || C.Failed) && !D.Skipped || A.Errored");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->Tasks(), (std::vector<std::string>{"A", "B", "C", "D"}));
  EXPECT_TRUE(e->ItemTasks().empty());
  auto items = DependsExpr::Parse("task-1.AnySucceeded || task-2.AllFailed || task-3");
  ASSERT_TRUE(items.ok());
  EXPECT_EQ(items->ItemTasks(), (std::vector<std::string>{"task-1", "task-2"}));
}

TEST(WorkflowDepends, BareNameIsSucceededOrSkippedOrDaemoned) {
  EXPECT_EQ(Decide("A", {{"A", Done(NodePhase::kSucceeded)}}), kRun);
  EXPECT_EQ(Decide("A", {{"A", Done(NodePhase::kSkipped)}}), kRun);
  TaskOutcome daemon = Done(NodePhase::kFailed);
  daemon.daemoned = true;
  EXPECT_EQ(Decide("A", {{"A", daemon}}), kRun);
  EXPECT_EQ(Decide("A", {{"A", Done(NodePhase::kFailed)}}), kOmit);
  EXPECT_EQ(Decide("A", {{"A", Done(NodePhase::kError)}}), kOmit);
  EXPECT_EQ(Decide("A", {{"A", Done(NodePhase::kOmitted)}}), kOmit);
}

TEST(WorkflowDepends, BareNameHonoursTheDependencysContinueOn) {
  TaskOutcome failed = Done(NodePhase::kFailed);
  failed.continue_on_failed = true;
  EXPECT_EQ(Decide("A", {{"A", failed}}), kRun);
  TaskOutcome errored = Done(NodePhase::kError);
  errored.continue_on_failed = true;  // continueOn failed does not cover errors
  EXPECT_EQ(Decide("A", {{"A", errored}}), kOmit);
  errored.continue_on_error = true;
  EXPECT_EQ(Decide("A", {{"A", errored}}), kRun);
  // An explicit result is exactly that result.
  EXPECT_EQ(Decide("A.Succeeded", {{"A", failed}}), kOmit);
}

TEST(WorkflowDepends, EveryResult) {
  struct Case {
    const char* result;
    NodePhase phase;
  } cases[] = {{"Succeeded", NodePhase::kSucceeded},
               {"Failed", NodePhase::kFailed},
               {"Errored", NodePhase::kError},
               {"Skipped", NodePhase::kSkipped},
               {"Omitted", NodePhase::kOmitted}};
  for (const auto& c : cases) {
    for (const auto& other : cases) {
      std::string expr = std::string("A.") + c.result;
      EXPECT_EQ(Decide(expr, {{"A", Done(other.phase)}}), c.phase == other.phase ? kRun : kOmit)
          << expr << " vs " << other.result;
    }
  }
  TaskOutcome daemon = Done(NodePhase::kSucceeded);
  daemon.daemoned = true;
  EXPECT_EQ(Decide("A.Daemoned", {{"A", daemon}}), kRun);
  EXPECT_EQ(Decide("A.Daemoned && A.Succeeded", {{"A", daemon}}), kRun);
  EXPECT_EQ(Decide("A.Daemoned", {{"A", Done(NodePhase::kSucceeded)}}), kOmit);
}

TEST(WorkflowDepends, AnySucceededAndAllFailedLookAtTheChildren) {
  auto mixed = Group(NodePhase::kFailed, {NodePhase::kFailed, NodePhase::kSucceeded});
  auto all_failed = Group(NodePhase::kFailed, {NodePhase::kFailed, NodePhase::kFailed});
  auto errored = Group(NodePhase::kFailed, {NodePhase::kFailed, NodePhase::kError});
  auto empty = Group(NodePhase::kSucceeded, {});
  EXPECT_EQ(Decide("A.AnySucceeded", {{"A", mixed}}), kRun);
  EXPECT_EQ(Decide("A.AllFailed", {{"A", mixed}}), kOmit);
  EXPECT_EQ(Decide("A.AllFailed", {{"A", all_failed}}), kRun);
  EXPECT_EQ(Decide("A.AnySucceeded", {{"A", all_failed}}), kOmit);
  EXPECT_EQ(Decide("A.AllFailed", {{"A", errored}}), kOmit);  // Error is not Failed
  EXPECT_EQ(Decide("A.AllFailed", {{"A", empty}}), kOmit);    // no children: false, as Argo
  EXPECT_EQ(Decide("A.AnySucceeded", {{"A", empty}}), kOmit);
  // On a task that did not fan out both are false.
  EXPECT_EQ(Decide("A.AnySucceeded", {{"A", Done(NodePhase::kSucceeded)}}), kOmit);
}

TEST(WorkflowDepends, OperatorsAndPrecedence) {
  std::map<std::string, TaskOutcome> o = {{"A", Done(NodePhase::kSucceeded)},
                                          {"B", Done(NodePhase::kFailed)},
                                          {"C", Done(NodePhase::kSucceeded)}};
  EXPECT_EQ(Decide("A && B", o), kOmit);
  EXPECT_EQ(Decide("A || B", o), kRun);
  EXPECT_EQ(Decide("!B", o), kRun);
  EXPECT_EQ(Decide("!A", o), kOmit);
  EXPECT_EQ(Decide("!!A", o), kRun);
  // && binds tighter than ||: B && A || C == (B && A) || C
  EXPECT_EQ(Decide("B && A || C", o), kRun);
  EXPECT_EQ(Decide("B && (A || C)", o), kOmit);
  // ! binds tighter than &&
  EXPECT_EQ(Decide("!B && A", o), kRun);
  EXPECT_EQ(Decide("!(B || A)", o), kOmit);
  EXPECT_EQ(Decide("  A&&C  ", o), kRun);
}

TEST(WorkflowDepends, WaitsUntilEveryReferencedTaskFinished) {
  std::map<std::string, TaskOutcome> o = {{"A", Done(NodePhase::kSucceeded)},
                                          {"B", Done(NodePhase::kRunning)}};
  // Even when the answer is already known: Argo evaluates only when all are fulfilled.
  EXPECT_EQ(Decide("A || B", o), kWait);
  EXPECT_EQ(Decide("A && C", o), kWait);  // C has no node yet
  o["B"] = Done(NodePhase::kPending);
  EXPECT_EQ(Decide("B.Failed", o), kWait);
  o["B"] = Done(NodePhase::kFailed);
  EXPECT_EQ(Decide("A || B", o), kRun);
}

// docs/enhanced-depends-logic.md, verbatim.
TEST(WorkflowDepends, ArgoDocExamples) {
  std::map<std::string, TaskOutcome> o = {{"task", Done(NodePhase::kFailed)},
                                          {"task-2", Done(NodePhase::kFailed)},
                                          {"task-3", Done(NodePhase::kSucceeded)}};
  EXPECT_EQ(Decide("task || task-2.Failed", o), kRun);
  EXPECT_EQ(Decide("(task.Succeeded || task.Skipped || task.Daemoned) || task-2.Failed", o), kRun);
  EXPECT_EQ(Decide("(task-2.Succeeded || task-2.Skipped) && !task-3.Failed", o), kOmit);
  o["task-2"] = Done(NodePhase::kSkipped);
  EXPECT_EQ(Decide("(task-2.Succeeded || task-2.Skipped) && !task-3.Failed", o), kRun);
  std::map<std::string, TaskOutcome> items = {
      {"task-1", Group(NodePhase::kFailed, {NodePhase::kFailed, NodePhase::kSucceeded})},
      {"task-2", Group(NodePhase::kSucceeded, {NodePhase::kSucceeded})}};
  EXPECT_EQ(Decide("task-1.AnySucceeded || task-2.AllFailed", items), kRun);

  // dependencies: ["A", "B", "C"] is depends: "A && B && C"
  auto deps = DependsExpr::FromDependencies({"A", "B", "C"});
  ASSERT_TRUE(deps.ok());
  EXPECT_EQ(deps->text(), "A && B && C");
  EXPECT_EQ(deps->Tasks(), (std::vector<std::string>{"A", "B", "C"}));
  std::map<std::string, TaskOutcome> abc = {{"A", Done(NodePhase::kSucceeded)},
                                            {"B", Done(NodePhase::kSkipped)},
                                            {"C", Done(NodePhase::kSucceeded)}};
  EXPECT_EQ(deps->Evaluate(abc), kRun);
  abc["C"] = Done(NodePhase::kFailed);
  EXPECT_EQ(deps->Evaluate(abc), kOmit);
  abc["C"].continue_on_failed = true;
  EXPECT_EQ(deps->Evaluate(abc), kRun);
}

// examples/dag-enhanced-depends.yaml: P passes, F fails.
TEST(WorkflowDepends, ArgoEnhancedDependsExample) {
  std::map<std::string, TaskOutcome> o = {{"P", Done(NodePhase::kSucceeded)},
                                          {"F", Done(NodePhase::kFailed)}};
  EXPECT_EQ(Decide("P && (F.Succeeded || F.Failed)", o), kRun);  // should-execute-1
  EXPECT_EQ(Decide("P || F", o), kRun);                          // should-execute-2
  EXPECT_EQ(Decide("P && F", o), kOmit);                         // should-not-execute
  o["should-execute-2"] = Done(NodePhase::kSucceeded);
  o["should-not-execute"] = Done(NodePhase::kOmitted);
  EXPECT_EQ(Decide("should-execute-2.Succeeded || should-not-execute", o), kRun);
}

TEST(WorkflowDepends, ErrorsNameThePosition) {
  struct Case {
    const char* text;
    const char* want;
  } cases[] = {
      {"", "empty expression at position 0"},
      {"   ", "empty expression at position 3"},
      {"A &&", "expected a task after operator at position 4"},
      {"A & B", "expected '&&' at position 2"},
      {"A | B", "expected '||' at position 2"},
      {"(A || B", "expected ')' at position 7"},
      {"A || B)", "unbalanced ')' at position 6"},
      {"A B", "expected '&&' or '||' at position 2"},
      {"C.Completed", "task result 'Completed' for task 'C' is invalid"},
      {"A && C.Completed", "at position 7"},
      {"A.", "expected a task result after 'A.' at position 2"},
      {"A.succeeded", "task result 'succeeded' for task 'A' is invalid"},
      {"A == B", "unexpected character '=' at position 2"},
      {"&& A", "expected a task, '!' or '(' at position 0"},
      {"()", "expected a task, '!' or '(' at position 1"},
  };
  for (const auto& c : cases) {
    auto e = DependsExpr::Parse(c.text);
    ASSERT_FALSE(e.ok()) << c.text;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find(c.want), std::string::npos)
        << c.text << " -> " << e.status().message();
  }
  auto bad = DependsExpr::FromDependencies({"A", "b c"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("dependencies[1]: 'b c' is not a task name"),
            std::string::npos);
  EXPECT_FALSE(DependsExpr::FromDependencies({}).ok());
}

TEST(WorkflowDepends, DeepNestingIsAnErrorNotACrash) {
  std::string deep(300, '(');
  deep += "A";
  deep += std::string(300, ')');
  auto e = DependsExpr::Parse(deep);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("nested too deeply"), std::string::npos);
  std::string nots(5000, '!');
  EXPECT_FALSE(DependsExpr::Parse(nots + "A").ok());
  std::string chain = "A";
  for (int i = 0; i < 3000; ++i) chain += " && A";
  auto long_chain = DependsExpr::Parse(chain);
  ASSERT_FALSE(long_chain.ok());
  EXPECT_NE(long_chain.status().message().find("expression too long"), std::string::npos);
  std::string ok_chain = "A";
  for (int i = 0; i < 1000; ++i) ok_chain += " && A";
  EXPECT_EQ(Decide(ok_chain, {{"A", Done(NodePhase::kSucceeded)}}), kRun);
}

// ---------------------------------------------------------------------------
// when
// ---------------------------------------------------------------------------

bool When(std::string_view expr) {
  auto r = EvaluateWhen(expr);
  EXPECT_TRUE(r.ok()) << expr << ": " << r.status().ToString();
  return r.ok() && *r;
}

std::string WhenError(std::string_view expr) {
  auto r = EvaluateWhen(expr);
  EXPECT_FALSE(r.ok()) << expr << " evaluated to " << (r.ok() && *r);
  return r.ok() ? "" : r.status().message();
}

TEST(WorkflowWhen, EmptyIsTrue) { EXPECT_TRUE(When("")); }

// docs/walk-through/conditionals.md after substitution.
TEST(WorkflowWhen, ArgoConditionalsDoc) {
  EXPECT_TRUE(When("heads == heads"));
  EXPECT_FALSE(When("tails == heads"));
  EXPECT_TRUE(When("tails == tails"));
  const char* complex =
      "( heads ==  heads &&\n  tails == tails\n) ||\n( heads == tails &&\n  tails == tails )";
  EXPECT_TRUE(When(complex));
  EXPECT_TRUE(When("heads =~ hea"));
  EXPECT_FALSE(When("tails =~ hea"));
  EXPECT_TRUE(When("tails =~ tai"));
  // examples/conditionals.yaml: "{{workflow.parameters.should-print}} == true"
  EXPECT_TRUE(When("true == true"));
  EXPECT_FALSE(When("false == true"));
  // '{{item}} =~ "^a"' style: a quoted regular expression.
  EXPECT_TRUE(When("apple =~ \"^a\""));
  EXPECT_FALSE(When("banana =~ \"^a\""));
  EXPECT_TRUE(When("banana !~ '^a'"));
}

TEST(WorkflowWhen, ComparisonOperators) {
  EXPECT_TRUE(When("1 == 1"));
  EXPECT_TRUE(When("1 == 1.0"));
  EXPECT_TRUE(When("1 != 2"));
  EXPECT_TRUE(When("2 > 1"));
  EXPECT_FALSE(When("1 > 1"));
  EXPECT_TRUE(When("1 >= 1"));
  EXPECT_TRUE(When("1 < 2"));
  EXPECT_TRUE(When("2 <= 2"));
  EXPECT_FALSE(When("3 <= 2"));
  EXPECT_TRUE(When("10 > 9"));       // numbers compare as numbers
  EXPECT_FALSE(When("'10' > '9'"));  // strings compare byte-wise
  EXPECT_TRUE(When("abc < abd"));
  EXPECT_TRUE(When("'a' == \"a\""));
  // == compares type and value: a number is not a string.
  EXPECT_FALSE(When("1 == '1'"));
  EXPECT_TRUE(When("1 != '1'"));
  EXPECT_TRUE(When("true != false"));
  EXPECT_FALSE(When("true == 'true'"));
}

TEST(WorkflowWhen, LogicalOperatorsShortCircuit) {
  EXPECT_TRUE(When("true && true"));
  EXPECT_FALSE(When("true && false"));
  EXPECT_TRUE(When("false || true"));
  EXPECT_FALSE(When("false || false"));
  EXPECT_TRUE(When("!false"));
  EXPECT_FALSE(When("!true"));
  EXPECT_TRUE(When("!(!true)"));
  // govaluate reads a run of symbols as one operator: "!!" is not "! !".
  EXPECT_NE(WhenError("!!true").find("invalid token '!!'"), std::string::npos);
  // The right side is not evaluated (nor type-checked) once the answer is known.
  EXPECT_FALSE(When("false && (1 > 'a')"));
  EXPECT_TRUE(When("true || (1 > 'a')"));
}

TEST(WorkflowWhen, ArithmeticAndConcatenation) {
  EXPECT_TRUE(When("1 + 2 == 3"));
  EXPECT_TRUE(When("5 - 7 == -2"));
  EXPECT_TRUE(When("2 * 3 == 6"));
  EXPECT_TRUE(When("7 / 2 == 3.5"));
  EXPECT_TRUE(When("7 % 4 == 3"));
  EXPECT_TRUE(When("2 ** 10 == 1024"));
  EXPECT_TRUE(When("-2 ** 2 == 4"));  // prefix binds tighter, as govaluate
  EXPECT_TRUE(When("a + b == ab"));
  EXPECT_TRUE(When("'v' + 1 == v1"));  // a string on either side concatenates
  EXPECT_TRUE(When("1.5 + 'x' == '1.5x'"));
  EXPECT_TRUE(When("0x1F == 31"));
  EXPECT_TRUE(When(".5 == 0.5"));
}

TEST(WorkflowWhen, PrecedenceAndAssociativity) {
  EXPECT_TRUE(When("1 + 2 * 3 == 7"));
  EXPECT_TRUE(When("(1 + 2) * 3 == 9"));
  EXPECT_TRUE(When("10 - 4 - 3 == 3"));         // left to right
  EXPECT_TRUE(When("16 / 4 / 2 == 2"));         // left to right
  EXPECT_TRUE(When("2 ** 3 ** 2 == 64"));       // govaluate is left-associative here too
  EXPECT_TRUE(When("true || false && false"));  // && before ||
  EXPECT_FALSE(When("(true || false) && false"));
  EXPECT_TRUE(When("1 < 2 == true"));  // comparators chain left to right
  EXPECT_TRUE(When("!false == true"));
}

TEST(WorkflowWhen, InWithAList) {
  EXPECT_TRUE(When("b in (a, b, c)"));
  EXPECT_FALSE(When("d in (a, b, c)"));
  EXPECT_TRUE(When("2 in (1, 2, 3)"));
  EXPECT_FALSE(When("'2' in (1, 2, 3)"));
  EXPECT_TRUE(When("b IN (a, b)"));
  EXPECT_NE(WhenError("a in (a)").find("not a array"), std::string::npos);
}

TEST(WorkflowWhen, BareWordsBecomeStrings) {
  EXPECT_TRUE(When("Succeeded == Succeeded"));
  EXPECT_TRUE(When("foo_bar2 == 'foo_bar2'"));
  EXPECT_TRUE(When("héllo == 'héllo'"));
  // A hyphenated word is a subtraction of two strings: quote such values.
  EXPECT_NE(WhenError("my-value == my-value").find("it is not a number"), std::string::npos);
  EXPECT_TRUE(When("'my-value' == 'my-value'"));
  EXPECT_NE(WhenError("a.b == a.b").find("dotted word 'a.b'"), std::string::npos);
}

TEST(WorkflowWhen, StringLiterals) {
  EXPECT_TRUE(When("'it\\'s' == \"it\\'s\""));  // backslash escapes
  EXPECT_TRUE(When("'' == \"\""));
  EXPECT_TRUE(When("'a b' == 'a b'"));
  // A string ends at the first quote of either kind, as govaluate reads it.
  EXPECT_FALSE(EvaluateWhen("'say \"hi\"' == x").ok());
}

TEST(WorkflowWhen, TypeErrors) {
  EXPECT_NE(WhenError("1 > 'a'").find("cannot be used with the operator '>'"), std::string::npos);
  EXPECT_NE(WhenError("true + 1").find("it is not a number"), std::string::npos);
  EXPECT_NE(WhenError("'a' - 1").find("it is not a number"), std::string::npos);
  EXPECT_NE(WhenError("1 && true").find("it is not a boolean"), std::string::npos);
  EXPECT_NE(WhenError("true && 1").find("it is not a boolean"), std::string::npos);
  EXPECT_NE(WhenError("!1").find("it is not a boolean"), std::string::npos);
  EXPECT_NE(WhenError("-a").find("it is not a number"), std::string::npos);
  EXPECT_NE(WhenError("1 =~ 1").find("it is not a string"), std::string::npos);
  EXPECT_NE(WhenError("a =~ '('").find("invalid regular expression"), std::string::npos);
}

TEST(WorkflowWhen, NonBooleanResultIsAnError) {
  EXPECT_NE(WhenError("heads").find("expected a boolean result, got 'heads'"), std::string::npos);
  EXPECT_NE(WhenError("1 + 1").find("got '2'"), std::string::npos);
  EXPECT_NE(WhenError("(1, 2)").find("got '[1 2]'"), std::string::npos);
}

TEST(WorkflowWhen, MalformedExpressionsNameThePosition) {
  struct Case {
    const char* text;
    const char* want;
  } cases[] = {
      {"   ", "empty expression"},
      {"a ==", "unexpected end of expression at position 4"},
      {"== a", "unexpected '==' at position 0"},
      {"(a == a", "unbalanced parenthesis at position 7"},
      {"a == a)", "unexpected ')' at position 6"},
      {"a b", "unexpected 'b' at position 2"},
      {"'abc", "unclosed string literal at position 0"},
      {"a === a",
       "invalid token '===' (hint: try wrapping the affected text in quotes) at position 2"},
      {"a==-1", "invalid token '==-'"},
      {"1.2.3 == 1", "unable to parse numeric value '1.2.3' at position 0"},
      {"a & b", "unsupported operator '&' at position 2"},
      {"true ? a : b", "unsupported operator '?'"},
      {"[a b] == c", "unsupported: [escaped] parameter names"},
      {"a == , b", "unexpected ','"},
  };
  for (const auto& c : cases) {
    auto r = EvaluateWhen(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.want), std::string::npos)
        << c.text << " -> " << r.status().message();
  }
}

TEST(WorkflowWhen, DeepNestingIsAnErrorNotACrash) {
  std::string deep(300, '(');
  deep += "true";
  deep += std::string(300, ')');
  EXPECT_NE(EvaluateWhen(deep).status().message().find("nested too deeply"), std::string::npos);
  std::string deep_expr(300, '(');
  deep_expr += "1" + std::string(300, ')');
  EXPECT_NE(EvaluateExprTag(deep_expr, {}).status().message().find("nested too deeply"),
            std::string::npos);
  EXPECT_FALSE(EvaluateWhen(std::string(10000, '!') + "true").ok());
  std::string ors = "a == a";
  for (int i = 0; i < 500; ++i) ors += " || a == x" + std::to_string(i);
  EXPECT_TRUE(When(ors));  // long but flat: fine
  std::string chain = "true";
  for (int i = 0; i < 3000; ++i) chain += " && true";
  EXPECT_NE(EvaluateWhen(chain).status().message().find("expression too long"), std::string::npos);
  std::string expr_chain = "1";
  for (int i = 0; i < 3000; ++i) expr_chain += " + 1";
  EXPECT_FALSE(EvaluateExprTag(expr_chain, {}).ok());
}

// ---------------------------------------------------------------------------
// {{= ...}}
// ---------------------------------------------------------------------------

std::string Expr(std::string_view body, const ExprVars& vars = {}) {
  auto r = EvaluateExprTag(body, vars);
  EXPECT_TRUE(r.ok()) << body << ": " << r.status().ToString();
  return r.ok() ? *r : "<error>";
}

TEST(WorkflowExprTag, LiteralsAndArithmetic) {
  EXPECT_EQ(Expr("1 + 2"), "3");
  EXPECT_EQ(Expr("7 / 2"), "3.5");  // / is always float division in expr-lang
  EXPECT_EQ(Expr("6 / 2"), "3");
  EXPECT_EQ(Expr("7 % 3"), "1");
  EXPECT_EQ(Expr("2 ** 3"), "8");
  EXPECT_EQ(Expr("-3 + 1"), "-2");
  EXPECT_EQ(Expr("-2 ** 2"), "-4");  // unary minus binds looser than ** in expr-lang
  EXPECT_EQ(Expr("-2 * 3"), "-6");
  EXPECT_EQ(Expr("2 ** 3 ** 2"), "512");  // ** is right-associative
  EXPECT_EQ(Expr("!true && false"), "false");
  EXPECT_EQ(Expr("not false == true"), "true");
  EXPECT_EQ(Expr("1.5 * 2"), "3");
  EXPECT_EQ(Expr("1e6 + 0"), "1e+06");  // Go's %v of a float64
  EXPECT_EQ(Expr("'a' + \"b\""), "ab");
  EXPECT_EQ(Expr("true"), "true");
  EXPECT_EQ(Expr("[1, 2]"), "[1 2]");
  EXPECT_EQ(Expr("1_000 * 2"), "2000");
}

TEST(WorkflowExprTag, VariablesByPathAndIndex) {
  ExprVars vars = {{"inputs.parameters.x", "5"},
                   {"inputs.parameters.my-param", "hello"},
                   {"steps.a-b.outputs.result", "heads"},
                   {"workflow.name", "wf-1"},
                   {"item", "apple"}};
  EXPECT_EQ(Expr("inputs.parameters.x", vars), "5");
  EXPECT_EQ(Expr("inputs.parameters['my-param']", vars), "hello");
  EXPECT_EQ(Expr("steps['a-b'].outputs.result == 'heads'", vars), "true");
  EXPECT_EQ(Expr("asInt(inputs.parameters.x) + 1", vars), "6");
  EXPECT_EQ(Expr("asFloat(inputs.parameters.x) / 2", vars), "2.5");
  EXPECT_EQ(Expr("workflow.name + '-' + item", vars), "wf-1-apple");
  EXPECT_EQ(Expr("string(1) + string(true)", vars), "1true");
  EXPECT_EQ(Expr("toJson([1, 'a'])", vars), "[1,\"a\"]");
  EXPECT_EQ(Expr("upper(item)", vars), "APPLE");
  // docs/walk-through/conditionals.md: the expression form of `when`.
  ExprVars q = {{"inputs.parameters.may-contain-quotes", "example"}};
  EXPECT_EQ(Expr("inputs.parameters['may-contain-quotes'] == 'example'", q), "true");
  ExprVars quotes = {{"inputs.parameters.may-contain-quotes", "say \"hi\""}};
  EXPECT_EQ(Expr("inputs.parameters['may-contain-quotes'] == 'example'", quotes), "false");
}

TEST(WorkflowExprTag, LogicTernaryAndMembership) {
  ExprVars vars = {{"inputs.parameters.n", "3"}};
  EXPECT_EQ(Expr("asInt(inputs.parameters.n) > 2 ? 'big' : 'small'", vars), "big");
  EXPECT_EQ(Expr("asInt(inputs.parameters.n) > 5 ? 'big' : 'small'", vars), "small");
  EXPECT_EQ(Expr("true and not false"), "true");
  EXPECT_EQ(Expr("false || true && false"), "false");
  EXPECT_EQ(Expr("2 in [1, 2]"), "true");
  EXPECT_EQ(Expr("'c' in ['a', 'b']"), "false");
  EXPECT_EQ(Expr("'hello' contains 'ell'"), "true");
  EXPECT_EQ(Expr("'hello' startsWith 'he' && 'hello' endsWith 'lo'"), "true");
  EXPECT_EQ(Expr("'hello' matches '^h.*o$'"), "true");
  EXPECT_EQ(Expr("nil ?? 'default'"), "default");
  EXPECT_EQ(Expr("1 == 1.0"), "true");
  // The untaken branch is not evaluated.
  EXPECT_EQ(Expr("true || asInt('x') > 1"), "true");
  EXPECT_EQ(Expr("false ? asInt('x') : 7"), "7");
}

TEST(WorkflowExprTag, FunctionsArgoDocuments) {
  const ExprVars vars = {
      {"inputs.parameters.json",
       R"({"a": {"b": [1, 2, 3]}, "name": "x", "items": [{"n": "p", "v": 2}, {"n": "q", "v": 5}]})"},
      {"inputs.parameters.s", "  Hello World  "},
      {"inputs.parameters.n", "7"},
  };
  auto eval = [&](const char* body) {
    auto r = EvaluateExprTag(body, vars);
    EXPECT_TRUE(r.ok()) << body << ": " << r.status().ToString();
    return r.ok() ? *r : std::string();
  };
  // jsonpath, as Argo's evilmonkeyinc/jsonpath: numbers are float64.
  EXPECT_EQ(eval("jsonpath(inputs.parameters.json, '$.name')"), "x");
  EXPECT_EQ(eval("jsonpath(inputs.parameters.json, '$.a.b[1]')"), "2");
  EXPECT_EQ(eval("jsonpath(inputs.parameters.json, '$.a.b')"), "[1 2 3]");
  EXPECT_EQ(eval("jsonpath(inputs.parameters.json, \"$['a']['b'][-1]\")"), "3");
  EXPECT_EQ(eval("jsonpath(inputs.parameters.json, '$.items[*].n')"), "[p q]");
  EXPECT_EQ(eval("jsonpath(inputs.parameters.json, '$..v')"), "[2 5]");
  EXPECT_EQ(eval("jsonpath(inputs.parameters.json, '$.a')"), "map[b:[1 2 3]]");
  EXPECT_EQ(eval("toJson(jsonpath(inputs.parameters.json, '$.a'))"), R"({"b":[1,2,3]})");
  EXPECT_EQ(eval("asInt(jsonpath(inputs.parameters.json, '$.a.b[2]')) + 1"), "4");
  EXPECT_EQ(eval("len(jsonpath(inputs.parameters.json, '$.items'))"), "2");
  // expr-lang builtins.
  EXPECT_EQ(eval("len(inputs.parameters.s)"), "15");
  EXPECT_EQ(eval("trim(inputs.parameters.s)"), "Hello World");
  EXPECT_EQ(eval("split('a,b,c', ',')"), "[a b c]");
  EXPECT_EQ(eval("join(['a', 'b'], '-')"), "a-b");
  EXPECT_EQ(eval("replace('a-b-c', '-', '+')"), "a+b+c");
  EXPECT_EQ(eval("fromJSON(inputs.parameters.json).name"), "x");
  EXPECT_EQ(eval("fromJSON(inputs.parameters.json)['a']['b'][0]"), "1");
  EXPECT_EQ(eval("'name' in fromJSON(inputs.parameters.json)"), "true");
  EXPECT_EQ(eval("max(1, 5, 3)"), "5");
  EXPECT_EQ(eval("string(int(inputs.parameters.n) * 2)"), "14");
  EXPECT_EQ(eval("float('2.5') * 2"), "5");
  EXPECT_EQ(eval("filter([1, 2, 3, 4], {# > 2})"), "[3 4]");
  EXPECT_EQ(eval("map([1, 2, 3], {# * 10})"), "[10 20 30]");
  EXPECT_EQ(eval("map(fromJSON(inputs.parameters.json).items, {.n})"), "[p q]");
  EXPECT_EQ(eval("all([1, 2], {# > 0}) && any([1, 2], {# > 1}) && none([1], {# > 1})"), "true");
  EXPECT_EQ(eval("count(jsonpath(inputs.parameters.json, '$.items'), {#.v > 3})"), "1");
  // sprig, with sprig's argument order.
  EXPECT_EQ(eval("sprig.upper('abc')"), "ABC");
  EXPECT_EQ(eval("sprig.trim(inputs.parameters.s)"), "Hello World");
  EXPECT_EQ(eval("sprig.replace('-', '_', 'a-b')"), "a_b");
  EXPECT_EQ(eval("sprig.default('none', '')"), "none");
  EXPECT_EQ(eval("sprig.default('none', 'given')"), "given");
  EXPECT_EQ(eval("sprig.int(inputs.parameters.n) + 1"), "8");
  EXPECT_EQ(eval("sprig.atoi('12')"), "12");
  EXPECT_EQ(eval("sprig.float64('1.5')"), "1.5");
  EXPECT_EQ(eval("sprig.toString(3)"), "3");
  EXPECT_EQ(eval("sprig.contains('ell', inputs.parameters.s)"), "true");
  EXPECT_EQ(eval("sprig.join(',', sprig.splitList('-', 'a-b'))"), "a,b");
  EXPECT_EQ(eval("sprig.b64enc('hi')"), "aGk=");
  EXPECT_EQ(eval("sprig.b64dec('aGk=')"), "hi");
  EXPECT_EQ(eval("sprig.add(1, 2, 3)"), "6");
  EXPECT_EQ(eval("sprig.ternary('y', 'n', 1 > 0)"), "y");
}

TEST(WorkflowExprTag, Errors) {
  auto missing = EvaluateExprTag("inputs.parameters.nope == 1", {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("variable 'inputs.parameters.nope' is not defined"),
            std::string::npos);
  struct Case {
    const char* body;
    const char* want;
  } cases[] = {
      {"x.trim()", "unsupported expression: method calls"},
      {"sprig.env('HOME')", "unsupported expression: the function 'sprig.env'"},
      {"sprig.nosuch(x)", "unsupported expression: the function 'sprig.nosuch'"},
      {"nosuch(1)", "unsupported expression: the function 'nosuch'"},
      {"jsonpath('{a', '$.a')", "jsonpath(): '{a' is not JSON"},
      {"jsonpath('{}', '$.a')", "jsonpath '$.a': not found"},
      {"len(1)", "cannot use int '1' as argument of len()"},
      {"upper()", "upper() takes 1 argument, got 0"},
      {"filter([1, 2], {#})", "filter(): the predicate gave int, not bool"},
      {"'a' + 1", "invalid operation: + (mismatched types string and int)"},
      {"1 && true", "invalid operation: && on int"},
      {"asInt('x')", "asInt(): cannot parse 'x' as an integer"},
      {"nil", "evaluated to nil"},
      {"1 +", "unexpected end of expression at position 3"},
      {"(1", "expected ')' at position 2"},
      {"'abc", "unclosed string literal at position 0"},
      {"1 ? 2 : 3", "non-bool expression (type int) used as condition"},
      {"1 % 0", "integer divide by zero"},
      {"a @ b", "unexpected character '@' at position 2"},
  };
  for (const auto& c : cases) {
    auto r = EvaluateExprTag(c.body, {{"x", "1"}});
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos)
        << c.body << " -> " << r.status().message();
  }
}

// ---------------------------------------------------------------------------
// Number rendering
// ---------------------------------------------------------------------------

TEST(WorkflowNumbers, JsonNumbersAsGoPrintsThem) {
  EXPECT_EQ(FormatJsonNumber(0), "0");
  EXPECT_EQ(FormatJsonNumber(3), "3");
  EXPECT_EQ(FormatJsonNumber(-3), "-3");
  EXPECT_EQ(FormatJsonNumber(2.5), "2.5");
  EXPECT_EQ(FormatJsonNumber(0.1), "0.1");
  EXPECT_EQ(FormatJsonNumber(1e20), "100000000000000000000");
  EXPECT_EQ(FormatJsonNumber(1e21), "1e+21");
  EXPECT_EQ(FormatJsonNumber(0.000001), "0.000001");
  EXPECT_EQ(FormatJsonNumber(0.0000001), "1e-7");
  EXPECT_EQ(FormatJsonNumber(123456789.125), "123456789.125");
}

TEST(WorkflowNumbers, GoPercentV) {
  EXPECT_EQ(FormatGoFloat(3), "3");
  EXPECT_EQ(FormatGoFloat(100000), "100000");
  EXPECT_EQ(FormatGoFloat(1e6), "1e+06");
  EXPECT_EQ(FormatGoFloat(1234567), "1.234567e+06");
  EXPECT_EQ(FormatGoFloat(0.0001), "0.0001");
  EXPECT_EQ(FormatGoFloat(0.00001), "1e-05");
  EXPECT_EQ(FormatGoFloat(-2.5), "-2.5");
}

// Arbitrary input never crashes a parser: it parses or returns an error.
TEST(WorkflowExpressions, RandomInputIsHandled) {
  const std::string alphabet = "AB-_.()!&|=<>~+*/%?:,'\"\\ 019xe[]{}#$@\tin";
  std::mt19937 rng(20261204);
  std::uniform_int_distribution<size_t> len(0, 40);
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  ExprVars vars = {{"A", "1"}, {"B", "x"}};
  std::map<std::string, TaskOutcome> outcomes = {{"A", Done(NodePhase::kSucceeded)},
                                                 {"B", Done(NodePhase::kFailed)}};
  int parsed = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    for (size_t n = len(rng); n > 0; --n) s.push_back(alphabet[pick(rng)]);
    auto d = DependsExpr::Parse(s);
    if (d.ok()) {
      ++parsed;
      (void)d->Evaluate(outcomes);
    }
    (void)EvaluateWhen(s);
    (void)EvaluateExprTag(s, vars);
    (void)Substitute("{{" + s + "}}", vars, Unresolved::kKeep);
  }
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace headway::workflow
