#include "core/job_spec_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/job_spec_json.h"

namespace headway {
namespace {

using ::testing::HasSubstr;

TEST(JobSpecParser, ReadsEveryField) {
  auto spec = ParseJobSpec(R"(
apiVersion: headway/v1
kind: Job
name: mnist
team: vision
queue: research
priority: 5
command: ["python3", "train.py"]
args: ["--epochs", "3"]
working_dir: /data
env: {SEED: "1", MODE: fast}
resources: {gpus_per_process: 2, processes_per_node: 4, nodes: 1}
restart_policy: {max_restarts: 3}
time_limit: 1h30m
termination_grace: 45s
labels: {project: demo}
policies: {on_stall: stop, on_diverge: stop, on_plateau: notify}
)");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "mnist");
  EXPECT_EQ(spec->team, "vision");
  EXPECT_EQ(spec->queue, "research");
  EXPECT_EQ(spec->priority, 5);
  EXPECT_EQ(spec->Argv(), (std::vector<std::string>{"python3", "train.py", "--epochs", "3"}));
  EXPECT_EQ(spec->working_dir, "/data");
  EXPECT_EQ(spec->env.at("MODE"), "fast");
  EXPECT_EQ(spec->resources.gpus(), 8);
  EXPECT_EQ(spec->resources.processes(), 4);
  EXPECT_EQ(spec->max_restarts, 3);
  EXPECT_EQ(spec->time_limit, std::chrono::minutes(90));
  EXPECT_EQ(spec->termination_grace, std::chrono::seconds(45));
  EXPECT_EQ(spec->labels.at("project"), "demo");
  EXPECT_EQ(spec->policies.on_stall, HealthAction::kStop);
  EXPECT_EQ(spec->policies.on_plateau, HealthAction::kNotify);
}

TEST(JobSpecParser, AnElasticJobIsAdmittedAtItsMinimum) {
  auto ranks = ParseJobSpec(
      "name: grows\ncommand: [torchrun, train.py]\nresources: {gpus_per_process: 2}\n"
      "elastic: {min_ranks: 1, max_ranks: 3}\n");
  ASSERT_TRUE(ranks.ok()) << ranks.status().ToString();
  ASSERT_TRUE(ranks->elastic.has_value());
  EXPECT_FALSE(ranks->elastic->ByNodes());
  EXPECT_EQ(ranks->elastic->MinUnits(), 1);
  EXPECT_EQ(ranks->elastic->MaxUnits(), 3);
  EXPECT_EQ(ranks->resources.processes_per_node, 1);
  EXPECT_EQ(ranks->resources.gpus(), 2);

  auto nodes = ParseJobSpec(
      "name: wide\ncommand: [torchrun, train.py]\nresources: {gpus_per_process: 4}\n"
      "elastic: {min_nodes: 2, max_nodes: 4}\n");
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  EXPECT_TRUE(nodes->elastic->ByNodes());
  EXPECT_EQ(nodes->resources.nodes, 2);

  auto fixed = ParseJobSpec("name: fixed\ncommand: [sh]\n");
  ASSERT_TRUE(fixed.ok());
  EXPECT_FALSE(fixed->elastic.has_value());
}

TEST(JobSpecParser, AnElasticRangeThatCannotBeMetIsRefusedByItsField) {
  auto error = [](const std::string& tail) {
    auto spec = ParseJobSpec("name: e\ncommand: [sh]\n" + tail);
    if (tail.find("resources") == std::string::npos) {
      spec = ParseJobSpec("name: e\ncommand: [sh]\nresources: {gpus_per_process: 1}\n" + tail);
    }
    return spec.ok() ? std::string("accepted") : spec.status().ToString();
  };
  EXPECT_THAT(error("elastic: {min_ranks: 3, max_ranks: 2}\n"),
              HasSubstr("elastic.min_ranks (line 4): must be at most max_ranks (2)"));
  EXPECT_THAT(error("elastic: {min_ranks: 1}\n"), HasSubstr("needs both min_ranks and max_ranks"));
  EXPECT_THAT(error("elastic: {min_ranks: 1, max_ranks: 2, min_nodes: 1, max_nodes: 2}\n"),
              HasSubstr("not both"));
  EXPECT_THAT(error("elastic: {min_ranks: 0, max_ranks: 2}\n"), HasSubstr("elastic.min_ranks"));
  EXPECT_THAT(error("elastic: {min_rank: 1, max_ranks: 2}\n"), HasSubstr("min_rank"));
  EXPECT_THAT(
      error("resources: {processes_per_node: 4, gpus_per_process: 1}\n"
            "elastic: {min_ranks: 1, max_ranks: 4}\n"),
      HasSubstr("resources.processes_per_node (line 3): is an elastic job's starting size"));
  EXPECT_THAT(
      error("resources: {nodes: 2, gpus_per_process: 1}\nelastic: {min_ranks: 1, max_ranks: 4}\n"),
      HasSubstr("resources.nodes (line 3): must be 1"));
  EXPECT_THAT(
      error("resources: {cpus: 2}\nelastic: {min_ranks: 1, max_ranks: 4}\n"),
      HasSubstr("resources.gpus_per_process (line 4): must be at least 1 for an elastic job"));
}

TEST(JobSpecParser, DefaultsAreSensible) {
  auto spec = ParseJobSpec("name: a\ncommand: [x]\n");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->team, "default");
  EXPECT_EQ(spec->resources.gpus(), 0);
  EXPECT_EQ(spec->resources.processes(), 1);
  EXPECT_EQ(spec->max_restarts, 0);
  EXPECT_FALSE(spec->time_limit.has_value());
  EXPECT_EQ(spec->termination_grace, std::chrono::seconds(30));
}

TEST(JobSpecParser, StringCommandRunsUnderTheShell) {
  auto spec = ParseJobSpec("name: a\ncommand: echo hi && sleep 1\n");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->Argv(), (std::vector<std::string>{"/bin/sh", "-c", "echo hi && sleep 1"}));
}

TEST(JobSpecParser, AcceptsJson) {
  auto spec = ParseJobSpec(
      R"({"name": "j", "command": ["x"], "resources": {"nodes": 1}, "time_limit": 90})");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->time_limit, std::chrono::seconds(90));
}

TEST(JobSpecParser, CanonicalJsonRoundTrips) {
  auto spec = ParseJobSpec(R"(
name: round
command: "echo hi"
env: {A: "1"}
resources: {gpus_per_process: 1, processes_per_node: 2}
time_limit: 2h
termination_grace: 1500ms
policies: {on_diverge: stop, on_stall: reclaim}
)");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->policies.on_stall, HealthAction::kReclaim);
  auto again = ParseJobSpec(JobSpecToJson(*spec).dump());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(JobSpecToJson(*again), JobSpecToJson(*spec));
  EXPECT_EQ(again->termination_grace, std::chrono::milliseconds(1500));
  EXPECT_EQ(again->policies.on_stall, HealthAction::kReclaim);
}

// The stores read specs back with JobSpecFromStoredJson (fast) and fall
// back to the parser: both must read every field of the stored form alike.
TEST(JobSpecParser, TheStoredFormReadsBackTheSameByTheFastReaderAsByTheParser) {
  const std::vector<std::string> documents = {
      "name: a\ncommand: [x]\n",
      R"(
name: everything
team: vision
queue: research
priority: -3
command: "echo hi"
args: ["--x", "1"]
working_dir: /data
env: {A: "1", B: "two"}
resources: {gpus_per_process: 2, processes_per_node: 4, nodes: 2, memory: 3Gi, cpus: 1.5}
restart_policy: {max_restarts: 2}
time_limit: 1h30m
termination_grace: 1500ms
checkpoint_warning: 5m
ttl_after_finished: 1d
labels: {project: demo, odd: "\x7f tab\t"}
policies: {on_stall: reclaim, on_diverge: stop, on_plateau: notify, on_gpu_idle: stop,
           gpu_idle_after: 10m, gpu_idle_below_percent: 2.5, on_overfit: stop,
           objective: eval_accuracy, objective_goal: maximize}
progress_endpoint: {port: 9000, path: /progress, interval: 5s}
private_tmp: true
persistent_home: true
)",
      "name: grows\ncommand: [torchrun, train.py]\nresources: {gpus_per_process: 1}\n"
      "elastic: {min_ranks: 1, max_ranks: 3}\n",
      "name: wide\ncommand: [torchrun, train.py]\nresources: {gpus_per_process: 1}\n"
      "elastic: {min_nodes: 2, max_nodes: 4}\n"};
  for (const std::string& document : documents) {
    auto parsed = ParseJobSpec(document);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    const nlohmann::json stored = nlohmann::json::parse(JobSpecToJson(*parsed).dump(-1, ' ', true));
    auto fast = JobSpecFromStoredJson(stored);
    ASSERT_TRUE(fast.has_value()) << stored.dump();
    auto slow = ParseJobSpec(stored.dump(-1, ' ', true));
    ASSERT_TRUE(slow.ok());
    EXPECT_EQ(JobSpecToJson(*fast), JobSpecToJson(*slow));
    EXPECT_EQ(JobSpecToJson(*fast), JobSpecToJson(*parsed));
  }
  // Anything else is left to the parser.
  for (const char* other :
       {R"({"name": "a", "command": "echo"})", R"([1, 2])", R"({"name": "a", "surprise": 1})"}) {
    EXPECT_FALSE(JobSpecFromStoredJson(nlohmann::json::parse(other)).has_value()) << other;
  }
  nlohmann::json missing = JobSpecToJson(*ParseJobSpec("name: a\ncommand: [x]\n"));
  missing.erase("labels");
  EXPECT_FALSE(JobSpecFromStoredJson(missing).has_value());
}

TEST(JobSpecParser, TheObjectiveAndItsDirectionAreNamedOrLeftToTheirDefaults) {
  auto spec = ParseJobSpec(R"(
name: a
command: [x]
policies: {objective: eval_bleu, objective_goal: maximize, on_overfit: stop}
)");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->policies.objective, "eval_bleu");
  EXPECT_EQ(spec->policies.objective_goal, MetricGoal::kMaximize);
  EXPECT_EQ(spec->policies.on_overfit, HealthAction::kStop);
  auto plain = ParseJobSpec("name: a\ncommand: [x]\n");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->policies.objective, "");
  EXPECT_EQ(plain->policies.objective_goal, MetricGoal::kAuto);
  EXPECT_EQ(plain->policies.on_overfit, HealthAction::kNotify);
  for (const char* bad : {"policies: {objective_goal: up}", "policies: {objective: \"a b\"}",
                          "policies: {on_overfit: kill}"}) {
    auto refused = ParseJobSpec(std::string("name: a\ncommand: [x]\n") + bad + "\n");
    EXPECT_FALSE(refused.ok()) << bad;
  }
}

TEST(JobSpecParser, TheGpuIdlePolicyIsOffUnlessAskedForAndSurvivesARoundTrip) {
  auto plain = ParseJobSpec("name: a\ncommand: [x]\n");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->policies.on_gpu_idle);
  EXPECT_FALSE(JobSpecToJson(*plain)["policies"].contains("on_gpu_idle"));

  auto spec = ParseJobSpec(
      "name: a\ncommand: [x]\n"
      "policies: {on_gpu_idle: stop, gpu_idle_after: 20m, gpu_idle_below_percent: 2.5}\n");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->policies.on_gpu_idle, HealthAction::kStop);
  EXPECT_EQ(spec->policies.gpu_idle_after, std::chrono::minutes(20));
  EXPECT_EQ(spec->policies.gpu_idle_below_percent, 2.5);
  auto again = ParseJobSpec(JobSpecToJson(*spec).dump());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->policies.on_gpu_idle, HealthAction::kStop);
  EXPECT_EQ(again->policies.gpu_idle_after, std::chrono::minutes(20));
  EXPECT_EQ(again->policies.gpu_idle_below_percent, 2.5);
}

struct BadSpec {
  const char* document;
  const char* field;
  int line;
  const char* message;
};

class JobSpecParserRejects : public ::testing::TestWithParam<BadSpec> {};

TEST_P(JobSpecParserRejects, NamingTheFieldAndLine) {
  const BadSpec& c = GetParam();
  auto spec = ParseJobSpec(c.document);
  ASSERT_FALSE(spec.ok()) << c.document;
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.status().field(), c.field);
  if (c.line > 0) {
    EXPECT_EQ(spec.status().line(), c.line);
  }
  EXPECT_THAT(spec.status().message(), HasSubstr(c.message));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, JobSpecParserRejects,
    ::testing::Values(
        BadSpec{"name: a\ncommand: [x]\ncommnd: [y]\n", "commnd", 3, "unknown field"},
        BadSpec{"name: a\ncommand: [x]\nresources:\n  gpu: 1\n", "resources.gpu", 4,
                "unknown field"},
        BadSpec{"name: a\ncommand: [x]\nresources: {nodes: 0}\n", "resources.nodes", 3,
                "between 1 and"},
        BadSpec{"name: a\ncommand: [x]\nresources: {gpus_per_process: -1}\n",
                "resources.gpus_per_process", 3, "between 0 and"},
        BadSpec{"name: a\ncommand: [x]\nresources: {gpus_per_process: 1.5}\n",
                "resources.gpus_per_process", 3, "must be an integer"},
        BadSpec{"name: a\ncommand: [x]\npriority: \"3\"\n", "priority", 3, "got a string"},
        BadSpec{"name: a\ncommand: {x: 1}\n", "command", 2, "must be a list of strings"},
        BadSpec{"name: a\ncommand: [x, [y]]\n", "command[1]", 2, "must be a string"},
        BadSpec{"name: a\ncommand: []\n", "command", 2, "must name a program"},
        BadSpec{"name: a\n", "command", 0, "is required"},
        BadSpec{"command: [x]\n", "name", 0, "is required"},
        BadSpec{"name: UPPER\ncommand: [x]\n", "name", 1, "lowercase"},
        BadSpec{"name: a\ncommand: [x]\ntime_limit: soon\n", "time_limit", 3, "duration"},
        BadSpec{"name: a\ncommand: [x]\ntime_limit: 0\n", "time_limit", 3, "positive"},
        BadSpec{"name: a\ncommand: [x]\nenv: {HEADWAY_TOKEN: x}\n", "env.HEADWAY_TOKEN", 3,
                "reserved"},
        BadSpec{"name: a\ncommand: [x]\npolicies: {on_stall: panic}\n", "policies.on_stall", 3,
                "'notify', 'stop' or 'reclaim'"},
        BadSpec{"name: a\ncommand: [x]\npolicies: {on_gpu_idle: reclaim}\n", "policies.on_gpu_idle",
                3, "'notify' or 'stop'"},
        BadSpec{"name: a\ncommand: [x]\npolicies: {on_gpu_idle: stop, gpu_idle_after: 0s}\n",
                "policies.gpu_idle_after", 3, "at least 1s"},
        BadSpec{"name: a\ncommand: [x]\npolicies: {gpu_idle_below_percent: .nan}\n",
                "policies.gpu_idle_below_percent", 3, ""},
        BadSpec{"name: a\ncommand: [x]\npolicies: {gpu_idle_below_percent: 101}\n",
                "policies.gpu_idle_below_percent", 3, "at most 100"},
        BadSpec{"name: a\nname: b\ncommand: [x]\n", "name", 2, "given twice"},
        BadSpec{"name: a\ncommand: [x\n", "spec", 0, "not valid YAML"},
        BadSpec{"just a string\n", "spec", 0, "must be a map"},
        BadSpec{"", "spec", 0, "must be a map"}));

TEST(JobSpecParser, RefusesBytesThatAreNotPrintableText) {
  // Found by fuzzing: yaml-cpp let these through into specs that could not be
  // written back as JSON.
  for (std::string doc : {std::string("name: a\ncommand: [x]\nenv: {K: \"\xff\"}\n"),
                          std::string("name: a\ncommand: [x]\nenv: {K\0Y: v}\n", 35),
                          std::string("name: a\ncommand: [\"x\xc2\x85\"]\n"),
                          std::string("name: a\ncommand: [\"\xed\xa0\x80\"]\n")}) {
    auto spec = ParseJobSpec(doc);
    ASSERT_FALSE(spec.ok()) << doc;
    EXPECT_EQ(spec.status().field(), "spec");
    EXPECT_NE(spec.status().message().find("UTF-8"), std::string::npos);
  }
  EXPECT_EQ(ParseJobSpec("name: a\ncommand: [x]\nenv: {K: \"x\xff\"}\n").status().line(), 3);
  // YAML's "\0" escape makes a NUL no argv, environment or database column
  // can hold (PostgreSQL's text refuses it): refused where it is written.
  for (const char* doc :
       {"name: a\ncommand: [x]\nlabels: {k: \"a\\0b\"}\n",
        "name: a\ncommand: [x]\nenv: {\"K\\0\": v}\n", "name: a\ncommand: [\"x\\0\"]\n"}) {
    auto spec = ParseJobSpec(doc);
    ASSERT_FALSE(spec.ok()) << doc;
    EXPECT_NE(spec.status().message().find("NUL"), std::string::npos) << spec.status().ToString();
  }
  auto unicode = ParseJobSpec("name: a\ncommand: [\"\xc3\xa9t\xc3\xa9\", \"\xf0\x9f\x9a\x80\"]\n");
  ASSERT_TRUE(unicode.ok()) << unicode.status().ToString();
  EXPECT_EQ(unicode->command[1], "\xf0\x9f\x9a\x80");
}

// A dozen lines of nested aliases (a "billion laughs") stand for 10^10
// values once expanded: the parser answers without expanding them. It used to
// walk the expanded tree looking for NULs, for hours.
TEST(JobSpecParser, NestedAliasesAreNotExpanded) {
  std::string bomb = "name: a\ncommand: [x]\nbomb:\n  - &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    std::string previous = "*l" + std::to_string(i - 1);
    bomb += "  - &l" + std::to_string(i) + " [" + previous;
    for (int k = 1; k < 10; ++k) bomb += ", " + previous;
    bomb += "]\n";
  }
  auto spec = ParseJobSpec(bomb);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().field(), "bomb");
}

TEST(JobSpecParser, AMapKeyThatIsNotAStringIsAFieldError) {
  // Found by fuzzing: yaml-cpp threw on the conversion instead of the parser
  // answering.
  auto spec = ParseJobSpec("name: a\ncommand: [x]\nlabels:\n  ? {k: v}\n  : x\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.status().field(), "labels");
  EXPECT_THAT(spec.status().message(), HasSubstr("keys must be strings"));
}

TEST(JobSpecParser, GenerateNameAndTtlAfterFinished) {
  auto spec = ParseJobSpec("generateName: sweep-\ncommand: [x]\nttl_after_finished: 1h\n");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "");
  EXPECT_EQ(spec->generate_name, "sweep-");
  EXPECT_EQ(spec->ttl_after_finished, std::chrono::hours(1));
  auto snake = ParseJobSpec("generate_name: a\ncommand: [x]\nttl_after_finished: 0\n");
  ASSERT_TRUE(snake.ok()) << snake.status().ToString();
  EXPECT_EQ(snake->ttl_after_finished, std::chrono::seconds(0));
  auto bad = ParseJobSpec("generateName: Sweep_\ncommand: [x]\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "generateName");
  auto nothing = ParseJobSpec("command: [x]\n");
  ASSERT_FALSE(nothing.ok());
  EXPECT_EQ(nothing.status().field(), "name");
  EXPECT_THAT(nothing.status().message(), ::testing::HasSubstr("generateName"));
  // Named by the caller (submit --name): no name needed in the document.
  EXPECT_TRUE(ParseJobSpec("command: [x]\n", /*name_required=*/false).ok());
  auto negative = ParseJobSpec("name: a\ncommand: [x]\nttl_after_finished: -5\n");
  EXPECT_FALSE(negative.ok());
}

}  // namespace
}  // namespace headway
