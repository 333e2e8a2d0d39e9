// {{...}} substitution as Argo's util/template does it, and the scope
// builders for the variables of docs/variables.md.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "workflow/substitute.h"

namespace headway::workflow {
namespace {

std::string Sub(std::string_view text, const Scope& scope, Unresolved mode = Unresolved::kError) {
  auto r = Substitute(text, scope, mode);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().ToString();
  return r.ok() ? *r : "<error>";
}

TEST(WorkflowSubstitute, SimpleTags) {
  Scope s = {
      {"inputs.parameters.message", "hello world"}, {"workflow.name", "wf-abc"}, {"item", "apple"}};
  EXPECT_EQ(Sub("{{inputs.parameters.message}}", s), "hello world");
  EXPECT_EQ(Sub("echo {{item}} from {{workflow.name}}!", s), "echo apple from wf-abc!");
  EXPECT_EQ(Sub("no tags here", s), "no tags here");
  EXPECT_EQ(Sub("", s), "");
  EXPECT_EQ(Sub("{{item}}{{item}}", s), "appleapple");
  // A lone closing brace pair or single braces are text.
  EXPECT_EQ(Sub("a }} b { c }", s), "a }} b { c }");
  EXPECT_EQ(Sub("{{item}}}", s), "apple}");
}

TEST(WorkflowSubstitute, WhiteSpaceInsideBracesIsTrimmed) {
  Scope s = {{"inputs.parameters.message", "hi"}};
  EXPECT_EQ(Sub("{{ inputs.parameters.message }}", s), "hi");
  EXPECT_EQ(Sub("{{\tinputs.parameters.message\n}}", s), "hi");
  EXPECT_EQ(Sub("{{inputs.parameters.message   }}", s), "hi");
}

TEST(WorkflowSubstitute, ValuesAreInsertedVerbatim) {
  Scope s = {{"x", "a \"quoted\"\nline\\"}, {"y", "{{x}}"}};
  EXPECT_EQ(Sub("[{{x}}]", s), "[a \"quoted\"\nline\\]");
  // A value is not substituted again.
  EXPECT_EQ(Sub("{{y}}", s), "{{x}}");
}

TEST(WorkflowSubstitute, UnknownVariableStrictIsAnErrorNamingIt) {
  Scope s = {{"a", "1"}};
  auto r = Substitute("x {{a}} {{inputs.parameters.missing}}", s, Unresolved::kError);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "failed to resolve {{inputs.parameters.missing}} at position 8");
}

TEST(WorkflowSubstitute, UnknownVariableLenientIsKeptForALaterPhase) {
  Scope globals = {{"workflow.name", "wf"}};
  std::string once =
      Sub("{{workflow.name}}-{{ item }}-{{tasks.A.outputs.result}}", globals, Unresolved::kKeep);
  EXPECT_EQ(once, "wf-{{ item }}-{{tasks.A.outputs.result}}");
  Scope later = {{"item", "3"}, {"tasks.A.outputs.result", "ok"}};
  EXPECT_EQ(Sub(once, later), "wf-3-ok");
}

TEST(WorkflowSubstitute, UnclosedTagIsAnErrorInBothModes) {
  for (auto mode : {Unresolved::kError, Unresolved::kKeep}) {
    auto r = Substitute("echo {{item", {{"item", "x"}}, mode);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("unclosed '{{' at position 5"), std::string::npos);
  }
}

TEST(WorkflowSubstitute, NestedTagRuleOfArgo) {
  // fasttemplate reads "{{a{{b}}" as the tag "a{{b"; Argo then resolves b.
  Scope s = {{"b", "B"}};
  EXPECT_EQ(Sub("{{a{{b}}", s), "{{aB");
  EXPECT_EQ(Sub("{{a{{c}}", s, Unresolved::kKeep), "{{a{{c}}");
}

TEST(WorkflowSubstitute, ExpressionTags) {
  Scope s = {{"inputs.parameters.n", "4"}, {"inputs.parameters.my-param", "v"}};
  EXPECT_EQ(Sub("{{=asInt(inputs.parameters.n) * 2}}", s), "8");
  EXPECT_EQ(Sub("x={{= inputs.parameters['my-param'] }}", s), "x=v");
  EXPECT_EQ(Sub("{{=inputs.parameters.n == '4' ? 'four' : 'other'}}", s), "four");
  // A failing expression: kept in lenient mode, an error in strict mode.
  EXPECT_EQ(Sub("{{=tasks.A.outputs.result}}", s, Unresolved::kKeep),
            "{{=tasks.A.outputs.result}}");
  auto strict = Substitute("{{=tasks.A.outputs.result}}", s, Unresolved::kError);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("variable 'tasks.A.outputs.result' is not defined"),
            std::string::npos);
  auto unsupported = Substitute("{{=sprig.env(inputs.parameters.n)}}", s, Unresolved::kError);
  ASSERT_FALSE(unsupported.ok());
  EXPECT_NE(unsupported.status().message().find("unsupported expression"), std::string::npos);
  // `{{ =x}}` is a simple tag named "=x", not an expression (the '=' must follow the braces).
  EXPECT_EQ(Sub("{{ =x}}", {{"=x", "lit"}}), "lit");
}

TEST(WorkflowSubstitute, WholeJsonTree) {
  auto doc = nlohmann::json::parse(R"({
    "name": "{{item}}",
    "container": {"image": "alpine:{{inputs.parameters.tag}}",
                  "args": ["echo", "{{ inputs.parameters.msg }}", 3, true, null]},
    "env": {"{{item}}_KEY": "v"},
    "when": "{{tasks.A.outputs.result}} == ok"
  })");
  Scope s = {{"item", "apple"}, {"inputs.parameters.tag", "3.19"}, {"inputs.parameters.msg", "hi"}};
  auto lenient = SubstituteJson(doc, s, Unresolved::kKeep);
  ASSERT_TRUE(lenient.ok()) << lenient.status().ToString();
  EXPECT_EQ((*lenient)["name"], "apple");
  EXPECT_EQ((*lenient)["container"]["image"], "alpine:3.19");
  EXPECT_EQ((*lenient)["container"]["args"],
            nlohmann::json::parse(R"(["echo", "hi", 3, true, null])"));
  EXPECT_EQ((*lenient)["env"], nlohmann::json::parse(R"({"apple_KEY": "v"})"));
  EXPECT_EQ((*lenient)["when"], "{{tasks.A.outputs.result}} == ok");

  auto strict = SubstituteJson(doc, s, Unresolved::kError);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().field(), "when");
  EXPECT_NE(strict.status().message().find("{{tasks.A.outputs.result}}"), std::string::npos);

  auto deep = nlohmann::json::parse(R"({"a": [{"b": ["{{nope}}"]}]})");
  auto bad = SubstituteJson(deep, s, Unresolved::kError);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "a[0].b[0]");
}

// docs/walk-through/conditionals.md and examples/conditionals.yaml, end to end.
TEST(WorkflowSubstitute, ShouldExecuteArgoConditionals) {
  Scope s = {{"steps.flip-coin.outputs.result", "heads"},
             {"steps.flip-again.outputs.result", "tails"},
             {"workflow.parameters.should-print", "true"},
             {"inputs.parameters.may-contain-quotes", "it's \"quoted\""}};
  auto yes = [&](const char* when) {
    auto r = ShouldExecute(when, s);
    EXPECT_TRUE(r.ok()) << when << ": " << r.status().ToString();
    return r.ok() && *r;
  };
  EXPECT_TRUE(yes(""));
  EXPECT_TRUE(yes("{{steps.flip-coin.outputs.result}} == heads"));
  EXPECT_FALSE(yes("{{steps.flip-coin.outputs.result}} == tails"));
  EXPECT_TRUE(
      yes("( {{steps.flip-coin.outputs.result}} == heads &&\n"
          "  {{steps.flip-again.outputs.result}} == tails\n"
          ") ||\n"
          "( {{steps.flip-coin.outputs.result}} == tails &&\n"
          "  {{steps.flip-again.outputs.result}} == tails )"));
  EXPECT_FALSE(yes("{{steps.flip-again.outputs.result}} =~ hea"));
  EXPECT_TRUE(yes("{{steps.flip-again.outputs.result}} =~ tai"));
  EXPECT_TRUE(yes("{{workflow.parameters.should-print}} == true"));
  EXPECT_TRUE(yes("{{= workflow.parameters['should-print'] == 'true'}}"));
  // The documented work-around for values with quotes: an expression tag.
  EXPECT_FALSE(yes("{{=inputs.parameters['may-contain-quotes'] == 'example'}}"));
  // ... which the plain form cannot handle.
  EXPECT_FALSE(ShouldExecute("{{inputs.parameters.may-contain-quotes}} == example", s).ok());
  auto missing = ShouldExecute("{{steps.nope.outputs.result}} == heads", s);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("failed to resolve {{steps.nope.outputs.result}}"),
            std::string::npos);
}

TEST(WorkflowSubstitute, FindTags) {
  auto tags = FindTags("a {{ inputs.parameters.x }} b {{=asInt(item)}} {{item.name}}");
  ASSERT_TRUE(tags.ok());
  ASSERT_EQ(tags->size(), 3u);
  EXPECT_EQ((*tags)[0].name, "inputs.parameters.x");
  EXPECT_FALSE((*tags)[0].expression);
  EXPECT_EQ((*tags)[0].position, 2u);
  EXPECT_EQ((*tags)[1].name, "asInt(item)");
  EXPECT_TRUE((*tags)[1].expression);
  EXPECT_EQ((*tags)[2].name, "item.name");
  EXPECT_FALSE(FindTags("{{oops").ok());
}

TEST(WorkflowScope, WorkflowVariables) {
  WorkflowMeta m;
  m.name = "hello-abc12";
  m.namespace_ = "team-a";
  m.uid = "0d4f-11";
  m.service_account_name = "runner";
  m.main_entrypoint = "main";
  m.priority = 5;
  m.creation_unix_seconds = 1535002969;  // 2018-08-23T05:42:49Z
  m.parameters = {{"message", "hello world"}, {"n", "3"}};
  m.labels = {{"team", "a"}};
  m.annotations = {{"note", "x"}};
  Scope s;
  AddWorkflowVariables(m, &s);
  EXPECT_EQ(s["workflow.name"], "hello-abc12");
  EXPECT_EQ(s["workflow.namespace"], "team-a");
  EXPECT_EQ(s["workflow.uid"], "0d4f-11");
  EXPECT_EQ(s["workflow.serviceAccountName"], "runner");
  EXPECT_EQ(s["workflow.mainEntrypoint"], "main");
  EXPECT_EQ(s["workflow.priority"], "5");
  EXPECT_EQ(s["workflow.parameters.message"], "hello world");
  EXPECT_EQ(s["workflow.parameters.json"],
            R"([{"name":"message","value":"hello world"},{"name":"n","value":"3"}])");
  EXPECT_EQ(s["workflow.parameters"], s["workflow.parameters.json"]);
  EXPECT_EQ(s["workflow.labels.team"], "a");
  EXPECT_EQ(s["workflow.labels.json"], R"({"team":"a"})");
  EXPECT_EQ(s["workflow.annotations.note"], "x");
  EXPECT_EQ(s["workflow.creationTimestamp"], "2018-08-23T05:42:49Z");
  EXPECT_EQ(s["workflow.creationTimestamp.RFC3339"], "2018-08-23T05:42:49Z");
  EXPECT_EQ(s["workflow.creationTimestamp.Y"], "2018");
  EXPECT_EQ(s["workflow.creationTimestamp.m"], "08");
  EXPECT_EQ(s["workflow.creationTimestamp.d"], "23");
  EXPECT_EQ(s["workflow.creationTimestamp.H"], "05");
  EXPECT_EQ(s["workflow.creationTimestamp.M"], "42");
  EXPECT_EQ(s["workflow.creationTimestamp.S"], "49");
  EXPECT_EQ(s["workflow.creationTimestamp.b"], "Aug");
  EXPECT_EQ(s["workflow.creationTimestamp.A"], "Thursday");
  EXPECT_EQ(s["workflow.creationTimestamp.y"], "18");
  EXPECT_EQ(s["workflow.creationTimestamp.I"], "05");
  EXPECT_EQ(s["workflow.creationTimestamp.p"], "AM");
  EXPECT_EQ(s["workflow.creationTimestamp.L"], ".000");
  EXPECT_EQ(s["workflow.creationTimestamp.Z"], "UTC");
  EXPECT_EQ(s.count("workflow.creationTimestamp.j"), 0u);  // not one of Argo's
  EXPECT_EQ(s["workflow.creationTimestamp.s"], "1535002969");
  EXPECT_EQ(s["workflow.creationTimestamp.z"], "+0000");
  EXPECT_EQ(Sub("out/{{workflow.creationTimestamp.Y}}/{{workflow.creationTimestamp.m}}/"
                "{{workflow.name}}",
                s),
            "out/2018/08/hello-abc12");
}

TEST(WorkflowScope, InputsNodesAndExitHandler) {
  Scope s;
  AddInputVariables({{"x", "1"}, {"y", "two"}}, {{"data", "/tmp/data"}}, &s);
  EXPECT_EQ(s["inputs.parameters.x"], "1");
  EXPECT_EQ(s["inputs.parameters"], R"([{"name":"x","value":"1"},{"name":"y","value":"two"}])");
  EXPECT_EQ(s["inputs.artifacts.data.path"], "/tmp/data");

  NodeOutputs a;
  a.id = "wf-123";
  a.phase = "Succeeded";
  a.result = "heads";
  a.exit_code = "0";
  a.started_at = "2026-01-01T00:00:00Z";
  a.finished_at = "2026-01-01T00:01:00Z";
  a.parameters = {{"y", "42"}};
  a.artifact_paths = {{"model", "/tmp/model"}};
  AddNodeVariables("tasks.A", a, &s);
  EXPECT_EQ(s["tasks.A.id"], "wf-123");
  EXPECT_EQ(s["tasks.A.status"], "Succeeded");
  EXPECT_EQ(s["tasks.A.outputs.result"], "heads");
  EXPECT_EQ(s["tasks.A.exitCode"], "0");
  EXPECT_EQ(s["tasks.A.outputs.parameters.y"], "42");
  EXPECT_EQ(s["tasks.A.outputs.artifacts.model.path"], "/tmp/model");
  AddNodeVariables("steps.flip-coin", a, &s);
  EXPECT_EQ(Sub("{{steps.flip-coin.outputs.result}} == heads", s), "heads == heads");

  // Exit handlers and pods: plain names the controller sets.
  s["workflow.status"] = "Failed";
  s["pod.name"] = "wf-123-main-9";
  s["retries"] = "2";
  s["node.name"] = "wf.A(0:x)";
  EXPECT_EQ(Sub("{{workflow.status}} {{pod.name}} {{retries}} {{node.name}}", s),
            "Failed wf-123-main-9 2 wf.A(0:x)");
}

TEST(WorkflowScope, AggregatedOutputsOfAFannedOutTask) {
  auto child = [](std::string phase, std::optional<std::string> result,
                  std::vector<std::pair<std::string, std::string>> params) {
    NodeOutputs n;
    n.phase = std::move(phase);
    n.result = std::move(result);
    n.parameters = std::move(params);
    return n;
  };
  std::vector<NodeOutputs> children = {
      child("Succeeded", "1", {{"p", "a"}}),
      child("Failed", "ignored", {{"p", "zzz"}}),
      child("Succeeded", "{\"k\":2}", {{"p", "b"}}),
      child("Succeeded", "plain text", {{"p", "c"}}),
  };
  Scope s;
  AddAggregateVariables("tasks.A", children, &s);
  EXPECT_EQ(s["tasks.A.outputs.result"], R"([1,{"k":2},"plain text"])");
  EXPECT_EQ(s["tasks.A.outputs.parameters"], R"([{"p":"a"},{"p":"b"},{"p":"c"}])");
  EXPECT_EQ(s["tasks.A.outputs.parameters.p"], R"(["a","b","c"])");
  // When some values are JSON, Argo's list holds those, parsed.
  std::vector<NodeOutputs> numbers = {child("Succeeded", std::nullopt, {{"n", "1"}}),
                                      child("Succeeded", std::nullopt, {{"n", "2.5"}})};
  Scope t;
  AddAggregateVariables("steps.B", numbers, &t);
  EXPECT_EQ(t["steps.B.outputs.parameters.n"], "[1,2.5]");
  EXPECT_EQ(t["steps.B.outputs.result"], "[]");
}

}  // namespace
}  // namespace headway::workflow
