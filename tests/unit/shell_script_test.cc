// Trial parameters in shell scripts: values stay data in every quoting context.
#include "hpo/internal/shell_script.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "hpo/experiment_spec.h"

namespace headway::hpo {
namespace {

using internal::ShellScriptIndex;
using internal::ShellWord;
using internal::SubstituteInShellScript;

std::string Sub(const std::string& script, const std::map<std::string, std::string>& values) {
  return SubstituteInShellScript(script, [&](std::string_view name) -> std::optional<std::string> {
    auto it = values.find(std::string(name));
    if (it == values.end()) return std::nullopt;
    return it->second;
  });
}

TEST(ShellScript, FindsTheScriptOfAShellRunWithDashC) {
  using V = std::vector<std::string>;
  struct Case {
    V argv;
    std::optional<std::size_t> index;
  };
  const Case cases[] = {
      {{"/bin/sh", "-c", "echo hi"}, 2},
      {{"bash", "-lc", "echo hi", "arg0"}, 2},
      {{"/usr/bin/env", "A=1", "bash", "-euo", "pipefail", "-c", "x"}, 6},
      {{"sh", "-c", "--", "x"}, 3},
      {{"bash", "--norc", "-c", "x"}, 3},
      {{"busybox", "sh", "-c", "x"}, 3},
      {{"sh", "script.sh", "-c"}, std::nullopt},
      {{"python3", "-c", "print(1)"}, std::nullopt},
      {{"sh", "-c"}, std::nullopt},
      {{"/bin/echo", "-c", "x"}, std::nullopt},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ShellScriptIndex(c.argv), c.index) << ::testing::PrintToString(c.argv);
  }
}

TEST(ShellScript, PlainValuesStayAsTheyAreOthersAreSingleQuoted) {
  EXPECT_EQ(ShellWord("0.001"), "0.001");
  EXPECT_EQ(ShellWord("1e-05"), "1e-05");
  EXPECT_EQ(ShellWord("adam"), "adam");
  EXPECT_EQ(ShellWord("/data/set-1:v2"), "/data/set-1:v2");
  EXPECT_EQ(ShellWord(""), "''");
  EXPECT_EQ(ShellWord("x; touch /tmp/pwned"), "'x; touch /tmp/pwned'");
  EXPECT_EQ(ShellWord("$(id)"), "'$(id)'");
  EXPECT_EQ(ShellWord("it's"), "'it'\\''s'");
}

TEST(ShellScript, ValuesStayDataInEveryQuotingContext) {
  const std::map<std::string, std::string> v = {
      {"x", "x; touch /tmp/pwned"}, {"id", "$(id)"}, {"q", "a'b\"c`d\\e$f"}, {"lr", "0.1"}};
  struct Case {
    std::string script, want;
  };
  const Case cases[] = {
      {"train --opt ${params.x}", "train --opt 'x; touch /tmp/pwned'"},
      {"echo ${params.id}", "echo '$(id)'"},
      {"echo --lr=${params.lr}", "echo --lr=0.1"},
      {"echo '${params.x}'", "echo 'x; touch /tmp/pwned'"},
      {"echo '${params.q}'", "echo 'a'\\''b\"c`d\\e$f'"},
      {"echo \"${params.id}\"", "echo \"\\$(id)\""},
      {"echo \"v=${params.q}\"", "echo \"v=a'b\\\"c\\`d\\\\e\\$f\""},
      {"echo $(echo ${params.x})", "echo $(echo 'x; touch /tmp/pwned')"},
      {"echo \"$(echo ${params.x})\"", "echo \"$(echo 'x; touch /tmp/pwned')\""},
      {"echo \"$( (cd /; echo ${params.id}) )\"", "echo \"$( (cd /; echo '$(id)') )\""},
      {"echo `echo ${params.x}`", "echo `echo 'x; touch /tmp/pwned'`"},
      {"echo \\${params.x}", "echo 'x; touch /tmp/pwned'"},
      {"echo \"\\${params.id}\"", "echo \"\\$(id)\""},
      {"cat <<EOF\nlr: ${params.id}\nEOF\necho ${params.x}",
       "cat <<EOF\nlr: \\$(id)\nEOF\necho 'x; touch /tmp/pwned'"},
      {"cat <<'EOF'\nlr: ${params.id}\nEOF\n", "cat <<'EOF'\nlr: $(id)\nEOF\n"},
      {"cat <<-EOF\n\tv ${params.id}\n\tEOF\necho ${params.id}",
       "cat <<-EOF\n\tv \\$(id)\n\tEOF\necho '$(id)'"},
      {"train # don't\necho ${params.x}", "train # don't\necho 'x; touch /tmp/pwned'"},
      {"echo a#'${params.x}'", "echo a#'x; touch /tmp/pwned'"},
      {"echo ${params.unknown}", "echo ${params.unknown}"},
  };
  for (const Case& c : cases) EXPECT_EQ(Sub(c.script, v), c.want) << c.script;
}

const char* kShellExperiment = R"yaml(
name: inj
objective: {metric: loss, direction: minimize}
algorithm: {name: random, seed: 1}
parameters:
  - {name: opt, type: categorical, values: ["x; touch /tmp/pwned", "$(id)", adam]}
  - {name: lr, type: double, min: 0.001, max: 0.1}
trial_template:
  command: train.sh --opt ${params.opt} --lr ${params.lr}
  args: ["${params.opt}"]
  env: {OPT: "${params.opt}"}
)yaml";

TEST(TrialJobSpec, ShellCommandsGetQuotedValuesArgvAndEnvGetThemAsTheyAre) {
  auto spec = ParseExperimentSpec(kShellExperiment);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  JobSpec job = TrialJobSpec(*spec, 0, {{"opt", std::string("x; touch /tmp/pwned")}, {"lr", 0.01}});
  EXPECT_EQ(job.command, (std::vector<std::string>{
                             "/bin/sh", "-c", "train.sh --opt 'x; touch /tmp/pwned' --lr 0.01"}));
  // After the script, args are the shell's $0, $1...: data, not code.
  EXPECT_EQ(job.args, (std::vector<std::string>{"x; touch /tmp/pwned"}));
  EXPECT_EQ(job.env.at("OPT"), "x; touch /tmp/pwned");
  job = TrialJobSpec(*spec, 1, {{"opt", std::string("$(id)")}, {"lr", 0.01}});
  EXPECT_EQ(job.command[2], "train.sh --opt '$(id)' --lr 0.01");

  // An argv command is not a shell: values go in unchanged.
  std::string argv_form = kShellExperiment;
  argv_form.replace(argv_form.find("command: train.sh --opt ${params.opt} --lr ${params.lr}"),
                    std::string("command: train.sh --opt ${params.opt} --lr ${params.lr}").size(),
                    "command: [train.sh, --opt, \"${params.opt}\"]");
  spec = ParseExperimentSpec(argv_form);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  job = TrialJobSpec(*spec, 0, {{"opt", std::string("x; touch /tmp/pwned")}, {"lr", 0.01}});
  EXPECT_EQ(job.command, (std::vector<std::string>{"train.sh", "--opt", "x; touch /tmp/pwned"}));

  // A script given as argv to bash -c is a shell script too.
  std::string bash_form = argv_form;
  bash_form.replace(bash_form.find("command: [train.sh, --opt, \"${params.opt}\"]"),
                    std::string("command: [train.sh, --opt, \"${params.opt}\"]").size(),
                    "command: [bash, -c, \"train.sh --opt ${params.opt}\"]");
  spec = ParseExperimentSpec(bash_form);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  job = TrialJobSpec(*spec, 0, {{"opt", std::string("x; touch /tmp/pwned")}, {"lr", 0.01}});
  EXPECT_EQ(job.command[2], "train.sh --opt 'x; touch /tmp/pwned'");
}

TEST(TrialJobSpec, CategoricalValuesMustBePrintable) {
  for (const char* value : {"\"\\e[2J\"", "\"a\\nb\"", "\"\\x9b\"", "\"\\x7f\""}) {
    std::string doc = kShellExperiment;
    doc.replace(doc.find("adam"), 4, value);
    auto spec = ParseExperimentSpec(doc);
    ASSERT_FALSE(spec.ok()) << value;
    EXPECT_THAT(spec.status().ToString(), ::testing::HasSubstr("parameters[0].values[2]"));
    EXPECT_THAT(spec.status().message(), ::testing::HasSubstr("printable"));
  }
}

}  // namespace
}  // namespace headway::hpo
