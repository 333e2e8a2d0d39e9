#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "workflow/manifest.h"
#include "workflow/workflow.h"

namespace headway::workflow {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Manifest MustParse(const std::string& text) {
  auto parsed = ParseManifest(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  if (!parsed.ok()) return {};
  return std::move(*parsed);
}

Workflow MustParseWorkflow(const std::string& text) {
  Manifest m = MustParse(text);
  EXPECT_TRUE(std::holds_alternative<Workflow>(m.resource));
  if (!std::holds_alternative<Workflow>(m.resource)) return {};
  return std::get<Workflow>(m.resource);
}

Status ErrorOf(const std::string& text) {
  auto parsed = ParseManifest(text);
  EXPECT_FALSE(parsed.ok()) << "expected an error for:\n" << text;
  return parsed.ok() ? Status::Ok() : parsed.status();
}

// A Workflow with `templates` as its spec's templates (indented 2 spaces);
// the first template line is line 7.
std::string WorkflowWith(const std::string& templates, const std::string& entrypoint = "main") {
  return "apiVersion: argoproj.io/v1alpha1\n"
         "kind: Workflow\n"
         "metadata: {name: wf}\n"
         "spec:\n"
         "  entrypoint: " +
         entrypoint +
         "\n"
         "  templates:\n" +
         templates;
}

constexpr const char* kEcho = R"(  - name: echo
    inputs:
      parameters:
      - name: message
    container: {image: alpine, command: [echo, "{{inputs.parameters.message}}"]}
)";

std::vector<std::filesystem::path> ExampleFiles() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(HEADWAY_WORKFLOW_MANIFESTS)) {
    auto ext = entry.path().extension();
    if (ext == ".yaml" || ext == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// ---- real manifests ------------------------------------------------------------

TEST(WorkflowManifest, EveryExampleParsesAndValidates) {
  auto files = ExampleFiles();
  ASSERT_GE(files.size(), 20u);
  for (const auto& file : files) {
    SCOPED_TRACE(file.filename().string());
    auto parsed = ParseManifest(ReadFile(file));
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    bool expect_warnings = file.filename().string().find("expect-warnings") != std::string::npos;
    EXPECT_EQ(!parsed->warnings.empty(), expect_warnings)
        << (parsed->warnings.empty()
                ? ""
                : parsed->warnings.front().field + ": " + parsed->warnings.front().message);
  }
}

nlohmann::json ResourceJson(const Manifest& m) {
  return std::visit([](const auto& r) { return ToJson(r); }, m.resource);
}

TEST(WorkflowManifest, EveryExampleRoundTripsThroughJson) {
  for (const auto& file : ExampleFiles()) {
    SCOPED_TRACE(file.filename().string());
    Manifest first = MustParse(ReadFile(file));
    std::string json = ResourceJson(first).dump(2);
    auto second = ParseManifest(json);
    ASSERT_TRUE(second.ok()) << second.status().ToString() << "\n" << json;
    EXPECT_TRUE(first.resource == second->resource) << json;
    EXPECT_EQ(ResourceJson(*second), ResourceJson(first));
    EXPECT_EQ(second->warnings.size(), first.warnings.size());
  }
}

std::string Example(const std::string& name) {
  return ReadFile(std::filesystem::path(HEADWAY_WORKFLOW_MANIFESTS) / name);
}

TEST(WorkflowManifest, DagDiamondHasItsTasksAndDepends) {
  Workflow wf = MustParseWorkflow(Example("dag-diamond.yaml"));
  EXPECT_EQ(wf.metadata.generate_name, "dag-diamond-");
  EXPECT_EQ(wf.spec.entrypoint, "diamond");
  const Template* diamond = wf.spec.FindTemplate("diamond");
  ASSERT_NE(diamond, nullptr);
  EXPECT_EQ(diamond->kind, TemplateKind::kDag);
  ASSERT_EQ(diamond->dag->tasks.size(), 4u);
  EXPECT_EQ(diamond->dag->tasks[3].depends, "B && C");
  EXPECT_EQ(diamond->dag->tasks[3].arguments.FindParameter("message")->value, "D");
  const Template* echo = wf.spec.FindTemplate("echo");
  EXPECT_EQ(echo->container->command,
            (std::vector<std::string>{"echo", "{{inputs.parameters.message}}"}));
}

TEST(WorkflowManifest, StepsAreGroupsRunInOrder) {
  Workflow wf = MustParseWorkflow(Example("dag-diamond-steps.yaml"));
  const Template* diamond = wf.spec.FindTemplate("diamond");
  ASSERT_TRUE(diamond->steps);
  ASSERT_EQ(diamond->steps->size(), 3u);
  EXPECT_EQ((*diamond->steps)[1].size(), 2u);
  EXPECT_EQ((*diamond->steps)[1][1].name, "C");
}

TEST(WorkflowManifest, LoopItemsKeepTheirJsonTypes) {
  Workflow wf = MustParseWorkflow(Example("loops-maps.yaml"));
  const auto& groups = *wf.spec.FindTemplate("loop-map-example")->steps;
  const auto& maps = *groups[0][0].with_items;
  ASSERT_EQ(maps.size(), 4u);
  EXPECT_EQ(maps[3], (nlohmann::json{{"image", "ubuntu"}, {"tag", "17.10"}}));
  EXPECT_EQ(*groups[1][0].with_items, (std::vector<nlohmann::json>{1, 2.5, true, "four"}));
  const Sequence& seq = *groups[2][0].with_sequence;
  EXPECT_EQ(seq.count, (IntOrString{"5", true}));
  EXPECT_EQ(seq.start, (IntOrString{"100", false}));
  EXPECT_EQ(seq.format, "2020-05-%02X");
}

TEST(WorkflowManifest, RetryBackoffKeepsIntOrString) {
  Workflow wf = MustParseWorkflow(Example("retry-backoff.yaml"));
  const RetryStrategy& r = *wf.spec.templates[0].retry_strategy;
  EXPECT_EQ(r.limit, (IntOrString{"10", true}));
  EXPECT_EQ(r.retry_policy, RetryPolicy::kAlways);
  EXPECT_EQ(r.backoff->duration, "1");
  EXPECT_EQ(r.backoff->factor, (IntOrString{"2", true}));
  EXPECT_EQ(r.backoff->max_duration, "1m");
  nlohmann::json j = ToJson(wf.spec.templates[0]);
  EXPECT_EQ(j["retryStrategy"]["limit"], 10);
  EXPECT_EQ(j["retryStrategy"]["backoff"]["duration"], "1");
}

TEST(WorkflowManifest, CronWorkflowFields) {
  Manifest m = MustParse(Example("cron-workflow.yaml"));
  ASSERT_TRUE(std::holds_alternative<CronWorkflow>(m.resource));
  const CronWorkflow& cron = std::get<CronWorkflow>(m.resource);
  EXPECT_EQ(cron.metadata.name, "hello-world");
  EXPECT_EQ(cron.spec.schedules, (std::vector<std::string>{"* * * * *"}));
  EXPECT_EQ(cron.spec.timezone, "America/Los_Angeles");
  EXPECT_EQ(cron.spec.concurrency_policy, ConcurrencyPolicy::kReplace);
  EXPECT_EQ(cron.spec.starting_deadline_seconds, 0);
  EXPECT_EQ(cron.spec.successful_jobs_history_limit, 4);
  EXPECT_FALSE(cron.spec.suspend);
  EXPECT_EQ(cron.spec.workflow_spec.entrypoint, "hello-world-with-time");
}

TEST(WorkflowManifest, SingleScheduleIsWrittenBackAsSchedule) {
  Manifest m = MustParse(R"(apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata: {name: nightly}
spec:
  schedule: "0 2 * * *"
  workflowSpec:
    entrypoint: main
    templates: [{name: main, container: {image: busybox}}]
)");
  nlohmann::json j = ToJson(std::get<CronWorkflow>(m.resource));
  EXPECT_EQ(j["spec"]["schedule"], "0 2 * * *");
  EXPECT_FALSE(j["spec"].contains("schedules"));
  EXPECT_FALSE(j["spec"].contains("concurrencyPolicy"));
}

TEST(WorkflowManifest, WorkflowTemplatesAndReferences) {
  Manifest m = MustParse(Example("workflow-template.yaml"));
  ASSERT_TRUE(std::holds_alternative<WorkflowTemplate>(m.resource));
  EXPECT_TRUE(std::get<WorkflowTemplate>(m.resource).spec.entrypoint.empty());

  Workflow ref = MustParseWorkflow(Example("workflow-template-ref.yaml"));
  const Task& a = ref.spec.templates[0].dag->tasks[0];
  ASSERT_TRUE(a.template_ref);
  EXPECT_EQ(a.template_ref->name, "workflow-template-print-message");
  EXPECT_EQ(a.template_ref->template_name, "print-message");

  Workflow submit = MustParseWorkflow(Example("workflow-template-submit.yaml"));
  EXPECT_EQ(submit.spec.workflow_template_ref->name, "workflow-template-submittable");
  EXPECT_TRUE(submit.spec.templates.empty());
}

TEST(WorkflowManifest, MemoizeSuspendAndOutputs) {
  Workflow memo = MustParseWorkflow(Example("memoize-simple.yaml"));
  const Template& t = memo.spec.templates[0];
  EXPECT_EQ(t.memoize->key, "{{inputs.parameters.message}}");
  EXPECT_EQ(t.memoize->max_age, "10s");
  EXPECT_EQ(t.memoize->config_map_name, "my-config");
  EXPECT_EQ(t.outputs.parameters[0].value_from->path, "/tmp/hello_world.txt");

  Workflow suspend = MustParseWorkflow(Example("suspend-template.yaml"));
  EXPECT_EQ(suspend.spec.FindTemplate("approve")->kind, TemplateKind::kSuspend);
  EXPECT_EQ(suspend.spec.FindTemplate("delay")->suspend->duration, "20");

  Workflow out = MustParseWorkflow(Example("output-parameter.yaml"));
  EXPECT_EQ(
      out.spec.FindTemplate("hello-world-to-file")->outputs.parameters[0].value_from->default_value,
      "Foobar");
  Workflow cond = MustParseWorkflow(Example("dag-conditional-parameters.yaml"));
  EXPECT_THAT(cond.spec.templates[0].outputs.parameters[0].value_from->expression,
              HasSubstr("tasks.flipcoin"));
  EXPECT_EQ(cond.spec.templates[1].kind, TemplateKind::kScript);
  EXPECT_THAT(cond.spec.templates[1].container->source, HasSubstr("import random"));
}

TEST(WorkflowManifest, GpuTrainingMapsOntoJobsAndWarnsAboutPodFields) {
  Manifest m = MustParse(Example("gpu-training-expect-warnings.yaml"));
  const Workflow& wf = std::get<Workflow>(m.resource);
  EXPECT_EQ(wf.metadata.namespace_, "ml");
  // Numbers and booleans given as parameter values are kept as Argo keeps them: strings.
  EXPECT_EQ(wf.spec.arguments.FindParameter("epochs")->value, "3");
  EXPECT_EQ(wf.spec.arguments.FindParameter("lr")->value, "0.0003");
  EXPECT_EQ(wf.spec.arguments.FindParameter("fp16")->value, "true");
  EXPECT_EQ(wf.spec.retry_strategy->limit, (IntOrString{"2", false}));
  EXPECT_EQ(wf.spec.ttl_strategy->seconds_after_completion, 3600);

  const Template* train = wf.spec.FindTemplate("train");
  auto resources = NodeResourcesOf(*train);
  ASSERT_TRUE(resources.ok()) << resources.status().ToString();
  EXPECT_EQ(resources->gpus, 4);
  EXPECT_EQ(resources->cpus, 16);
  EXPECT_EQ(resources->memory_bytes, 64LL << 30);
  EXPECT_EQ(NodeResourcesOf(*wf.spec.FindTemplate("evaluate"))->gpus, 1);
  EXPECT_EQ(NodeResourcesOf(*wf.spec.FindTemplate("prepare"))->gpus, 0);

  EXPECT_EQ(HeadwayValue(wf.metadata, &train->metadata, kTeamKey), "vision");
  EXPECT_EQ(HeadwayValue(wf.metadata, &train->metadata, kPriorityKey), "20");
  EXPECT_EQ(HeadwayValue(wf.metadata, nullptr, kPriorityKey), "10");
  EXPECT_EQ(HeadwayValue(wf.metadata, nullptr, kQueueKey), std::nullopt);

  std::map<std::string, int> warned;
  for (const auto& w : m.warnings) warned[w.field] = w.line;
  EXPECT_EQ(warned["spec.volumes"], 24);
  EXPECT_EQ(warned["spec.podGC"], 18);
  EXPECT_EQ(warned["spec.serviceAccountName"], 14);
  EXPECT_TRUE(warned.count("spec.imagePullSecrets"));
  EXPECT_TRUE(warned.count("spec.nodeSelector"));
  EXPECT_TRUE(warned.count("spec.templates[1].container.volumeMounts"));
  EXPECT_TRUE(warned.count("spec.templates[2].container.imagePullPolicy"));
  EXPECT_TRUE(warned.count("spec.templates[2].container.resources.requests.ephemeral-storage"));
  // The ignored fields are kept and written back.
  nlohmann::json j = ToJson(wf);
  EXPECT_EQ(j["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"], "datasets");
  EXPECT_EQ(j["spec"]["podGC"]["strategy"], "OnPodSuccess");
  EXPECT_EQ(j["spec"]["templates"][2]["container"]["resources"]["limits"]["nvidia.com/gpu"], "4");
}

TEST(WorkflowManifest, ToJsonUsesArgoNamesAndOmitsEmptyFields) {
  Workflow wf = MustParseWorkflow(Example("hello-world.json"));
  nlohmann::json j = ToJson(wf);
  EXPECT_EQ(j["apiVersion"], "argoproj.io/v1alpha1");
  EXPECT_EQ(j["kind"], "Workflow");
  EXPECT_EQ(j["metadata"], (nlohmann::json{{"generateName", "hello-world-json-"}}));
  EXPECT_EQ(j["spec"]["arguments"]["parameters"][0],
            (nlohmann::json{{"name", "count"}, {"value", "3"}}));
  const nlohmann::json& t = j["spec"]["templates"][0];
  EXPECT_EQ(t["inputs"]["parameters"][0], (nlohmann::json{{"name", "count"}}));
  EXPECT_EQ(t["retryStrategy"], (nlohmann::json{{"limit", 2}}));
  EXPECT_EQ(t["container"], (nlohmann::json{{"image", "busybox"},
                                            {"command", {"echo"}},
                                            {"args", {"{{inputs.parameters.count}}"}}}));
  EXPECT_FALSE(t.contains("outputs"));
  EXPECT_FALSE(j["spec"].contains("onExit"));
}

// ---- errors: field path and line -----------------------------------------------------

TEST(WorkflowManifestErrors, EntrypointMustNameATemplate) {
  Status s = ErrorOf(WorkflowWith("  - name: main\n    container: {image: alpine}\n", "mian"));
  EXPECT_EQ(s.field(), "spec.entrypoint");
  EXPECT_EQ(s.line(), 5);
  EXPECT_THAT(s.message(), HasSubstr("no template named 'mian'"));
}

TEST(WorkflowManifestErrors, TaskTemplateMustExist) {
  Status s = ErrorOf(WorkflowWith(std::string(R"(  - name: main
    dag:
      tasks:
      - name: a
        template: echo
        arguments: {parameters: [{name: message, value: hi}]}
      - name: b
        template: build
)") + kEcho));
  EXPECT_EQ(s.field(), "spec.templates[0].dag.tasks[1].template");
  EXPECT_EQ(s.line(), 14);
  EXPECT_THAT(s.message(), HasSubstr("no template named 'build'"));
}

TEST(WorkflowManifestErrors, OnExitMustNameATemplate) {
  Status s = ErrorOf(R"(apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: wf-}
spec:
  entrypoint: main
  onExit: cleanup
  templates: [{name: main, container: {image: alpine}}]
)");
  EXPECT_EQ(s.field(), "spec.onExit");
  EXPECT_EQ(s.line(), 6);
}

TEST(WorkflowManifestErrors, UnknownSpecFieldSuggestsTheClosestName) {
  Status s = ErrorOf(WorkflowWith(std::string(R"(  - name: main
    dag:
      tasks:
      - name: a
        template: echo
        arguments: {parameters: [{name: message, value: hi}]}
      - name: b
        dependecies: [a]
        template: echo
)") + kEcho));
  EXPECT_EQ(s.field(), "spec.templates[0].dag.tasks[1].dependecies");
  EXPECT_EQ(s.line(), 14);
  EXPECT_THAT(s.message(), HasSubstr("unknown field (did you mean 'dependencies'?)"));

  Status top = ErrorOf(R"(apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: wf}
spec:
  entrypoint: main
  templatse: []
)");
  EXPECT_EQ(top.field(), "spec.templatse");
  EXPECT_EQ(top.line(), 6);
  EXPECT_THAT(top.message(), HasSubstr("did you mean 'templates'"));

  Status far =
      ErrorOf(WorkflowWith("  - name: main\n    container: {image: alpine, gpuCount: 2}\n"));
  EXPECT_EQ(far.field(), "spec.templates[0].container.gpuCount");
  EXPECT_EQ(far.message(), "unknown field");
}

TEST(WorkflowManifestErrors, UnknownMetadataFieldsAreIgnored) {
  Workflow wf = MustParseWorkflow(R"(apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: wf
  uid: 1234
  creationTimestamp: "2024-01-01T00:00:00Z"
  finalizers: [x]
spec:
  entrypoint: main
  templates: [{name: main, container: {image: alpine}}]
status: {phase: Succeeded}
)");
  EXPECT_EQ(wf.metadata.name, "wf");
}

TEST(WorkflowManifestErrors, DependencyCycleIsNamed) {
  Status s = ErrorOf(WorkflowWith(R"(  - name: main
    dag:
      tasks:
      - {name: a, template: work, dependencies: [c]}
      - {name: b, template: work, dependencies: [a]}
      - {name: c, template: work, dependencies: [b]}
      - {name: d, template: work}
  - name: work
    container: {image: alpine}
)"));
  EXPECT_EQ(s.field(), "spec.templates[0].dag.tasks[0].dependencies");
  EXPECT_EQ(s.line(), 10);
  EXPECT_THAT(s.message(), HasSubstr("dependency cycle: a -> c -> b -> a"));

  Status self = ErrorOf(WorkflowWith(R"(  - name: main
    dag:
      tasks:
      - {name: a, template: work}
      - {name: b, template: work, dependencies: [a, b]}
  - name: work
    container: {image: alpine}
)"));
  EXPECT_THAT(self.message(), HasSubstr("dependency cycle: b -> b"));
}

TEST(WorkflowManifestErrors, DagRules) {
  auto dag = [](const std::string& tasks) {
    return WorkflowWith("  - name: main\n    dag:\n      tasks:\n" + tasks +
                        "  - name: work\n    container: {image: alpine}\n");
  };
  Status missing = ErrorOf(dag("      - {name: a, template: work, dependencies: [z]}\n"));
  EXPECT_EQ(missing.field(), "spec.templates[0].dag.tasks[0].dependencies[0]");
  EXPECT_THAT(missing.message(), HasSubstr("no task named 'z'"));

  Status twice =
      ErrorOf(dag("      - {name: a, template: work}\n      - {name: a, template: work}\n"));
  EXPECT_EQ(twice.field(), "spec.templates[0].dag.tasks[1].name");
  EXPECT_EQ(twice.line(), 11);
  EXPECT_THAT(twice.message(), HasSubstr("not unique"));

  Status both =
      ErrorOf(dag("      - {name: a, template: work}\n"
                  "      - {name: b, template: work, dependencies: [a]}\n"
                  "      - {name: c, template: work, depends: a}\n"));
  EXPECT_EQ(both.field(), "spec.templates[0].dag");
  EXPECT_THAT(both.message(), HasSubstr("both 'depends' and 'dependencies'"));

  Status digit = ErrorOf(
      dag("      - {name: 1a, template: work}\n      - {name: b, template: work, depends: 1a}\n"));
  EXPECT_THAT(digit.message(), HasSubstr("cannot begin with a digit"));

  Status empty_when = ErrorOf(dag("      - {name: a, template: work, when: \"\"}\n"));
  EXPECT_EQ(empty_when.field(), "spec.templates[0].dag.tasks[0].when");
  EXPECT_THAT(empty_when.message(), HasSubstr("non-empty"));

  Status neither = ErrorOf(dag("      - {name: a}\n"));
  EXPECT_EQ(neither.field(), "spec.templates[0].dag.tasks[0]");
  EXPECT_THAT(neither.message(), HasSubstr("exactly one of template and templateRef"));

  Status loops =
      ErrorOf(dag("      - {name: a, template: work, withItems: [1], withParam: \"{{x}}\"}\n"));
  EXPECT_THAT(loops.message(), HasSubstr("more than one of withItems, withParam, withSequence"));

  Status seq =
      ErrorOf(dag("      - {name: a, template: work, withSequence: {count: 2, end: 5}}\n"));
  EXPECT_EQ(seq.field(), "spec.templates[0].dag.tasks[0].withSequence");

  Status target =
      ErrorOf(WorkflowWith("  - name: main\n    dag:\n      target: a x\n      tasks:\n"
                           "      - {name: a, template: work}\n"
                           "  - name: work\n    container: {image: alpine}\n"));
  EXPECT_EQ(target.field(), "spec.templates[0].dag.target");
  EXPECT_THAT(target.message(), HasSubstr("no task named 'x'"));

  Status steps_depends = ErrorOf(
      WorkflowWith("  - name: main\n    steps:\n    - - {name: a, template: work, depends: b}\n"
                   "  - name: work\n    container: {image: alpine}\n"));
  EXPECT_EQ(steps_depends.field(), "spec.templates[0].steps[0][0].depends");
  EXPECT_THAT(steps_depends.message(), HasSubstr("use a dag template"));
}

TEST(WorkflowManifestErrors, TemplateIsOfExactlyOneKind) {
  Status two =
      ErrorOf(WorkflowWith("  - name: main\n    container: {image: alpine}\n    suspend: {}\n"));
  EXPECT_EQ(two.field(), "spec.templates[0]");
  EXPECT_EQ(two.line(), 7);
  EXPECT_THAT(two.message(), HasSubstr("more than one template type (container, suspend)"));

  Status none = ErrorOf(WorkflowWith("  - name: main\n    inputs: {}\n"));
  EXPECT_THAT(none.message(), HasSubstr("no template type"));
}

TEST(WorkflowManifestErrors, UnsupportedTemplateTypesAreNamed) {
  for (const std::string kind : {"resource", "http", "plugin", "containerSet", "data"}) {
    SCOPED_TRACE(kind);
    Status s = ErrorOf(WorkflowWith("  - name: main\n    " + kind + ": {x: 1}\n"));
    EXPECT_EQ(s.field(), "spec.templates[0]." + kind);
    EXPECT_EQ(s.line(), 8);
    EXPECT_THAT(s.message(), HasSubstr("not supported by Headway"));
  }
  Status secret = ErrorOf(WorkflowWith(R"(  - name: main
    container:
      image: alpine
      env:
      - name: TOKEN
        valueFrom: {secretKeyRef: {name: s, key: k}}
)"));
  EXPECT_EQ(secret.field(), "spec.templates[0].container.env[0].valueFrom");
  EXPECT_EQ(secret.line(), 12);
  Status daemon =
      ErrorOf(WorkflowWith("  - name: main\n    daemon: true\n    container: {image: alpine}\n"));
  EXPECT_EQ(daemon.field(), "spec.templates[0].daemon");
  MustParse(WorkflowWith("  - name: main\n    daemon: false\n    container: {image: alpine}\n"));
}

TEST(WorkflowManifestErrors, WrongTypes) {
  Status parallelism = ErrorOf(R"(apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: wf}
spec:
  entrypoint: main
  parallelism: two
  templates: [{name: main, container: {image: alpine}}]
)");
  EXPECT_EQ(parallelism.field(), "spec.parallelism");
  EXPECT_EQ(parallelism.line(), 6);
  EXPECT_THAT(parallelism.message(), HasSubstr("must be an integer"));

  Status templates = ErrorOf(R"(apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: wf}
spec:
  entrypoint: main
  templates: {name: main}
)");
  EXPECT_EQ(templates.field(), "spec.templates");
  EXPECT_THAT(templates.message(), HasSubstr("must be a list"));

  Status args =
      ErrorOf(WorkflowWith("  - name: main\n    container: {image: alpine, args: {a: b}}\n"));
  EXPECT_EQ(args.field(), "spec.templates[0].container.args");

  Status value =
      ErrorOf(WorkflowWith("  - name: main\n    inputs: {parameters: [{name: p, value: [1]}]}\n"
                           "    container: {image: alpine}\n"));
  EXPECT_EQ(value.field(), "spec.templates[0].inputs.parameters[0].value");
  EXPECT_THAT(value.message(), HasSubstr("must be a string, number or boolean"));

  Status policy =
      ErrorOf(WorkflowWith("  - name: main\n    retryStrategy: {retryPolicy: Sometimes}\n"
                           "    container: {image: alpine}\n"));
  EXPECT_EQ(policy.field(), "spec.templates[0].retryStrategy.retryPolicy");
  EXPECT_THAT(policy.message(), HasSubstr("Always, OnFailure, OnError or OnTransientError"));

  Status twice =
      ErrorOf(WorkflowWith("  - name: main\n    container: {image: alpine}\n    name: again\n"));
  EXPECT_EQ(twice.field(), "spec.templates[0].name");
  EXPECT_THAT(twice.message(), HasSubstr("given twice"));
}

TEST(WorkflowManifestErrors, IntOrStringAcceptsBothAndKeepsWhichItWas) {
  auto limit = [](const std::string& value) {
    return WorkflowWith("  - name: main\n    retryStrategy: {limit: " + value +
                        "}\n    container: {image: alpine}\n");
  };
  EXPECT_EQ(MustParseWorkflow(limit("3")).spec.templates[0].retry_strategy->limit,
            (IntOrString{"3", true}));
  EXPECT_EQ(MustParseWorkflow(limit("\"3\"")).spec.templates[0].retry_strategy->limit,
            (IntOrString{"3", false}));
  Workflow templated = MustParseWorkflow(limit("\"{{workflow.parameters.n}}\""));
  EXPECT_EQ(templated.spec.templates[0].retry_strategy->limit->text, "{{workflow.parameters.n}}");
  EXPECT_EQ(ToJson(templated.spec.templates[0])["retryStrategy"]["limit"],
            "{{workflow.parameters.n}}");
  EXPECT_EQ(ToJson(MustParseWorkflow(limit("\"3\"")).spec.templates[0])["retryStrategy"]["limit"],
            "3");

  Status bad = ErrorOf(limit("1.5"));
  EXPECT_EQ(bad.field(), "spec.templates[0].retryStrategy.limit");
  EXPECT_THAT(bad.message(), HasSubstr("integer or a quoted string"));
  Status negative = ErrorOf(limit("-1"));
  EXPECT_THAT(negative.message(), HasSubstr(">= 0"));

  Workflow deadline = MustParseWorkflow(WorkflowWith(
      "  - name: main\n    activeDeadlineSeconds: \"{{inputs.parameters.t}}\"\n"
      "    inputs: {parameters: [{name: t, default: '60'}]}\n    container: {image: alpine}\n"));
  EXPECT_EQ(deadline.spec.templates[0].active_deadline_seconds->text, "{{inputs.parameters.t}}");
}

TEST(WorkflowManifestErrors, InputsMustBeSupplied) {
  Status entry = ErrorOf(WorkflowWith(kEcho, "echo"));
  EXPECT_EQ(entry.field(), "spec.arguments");
  EXPECT_THAT(entry.message(), HasSubstr("input parameter 'message' of template 'echo'"));
  EXPECT_THAT(entry.message(), HasSubstr("spec.arguments does not supply it"));

  Status task = ErrorOf(WorkflowWith(std::string(R"(  - name: main
    steps:
    - - name: hello
        template: echo
)") + kEcho));
  EXPECT_EQ(task.field(), "spec.templates[0].steps[0][0].arguments");
  EXPECT_EQ(task.line(), 9);
  EXPECT_THAT(task.message(), HasSubstr("'hello' does not supply it"));

  Status artifact = ErrorOf(WorkflowWith(R"(  - name: main
    dag:
      tasks:
      - {name: a, template: read}
  - name: read
    inputs:
      artifacts:
      - {name: data, path: /data}
      - {name: extra, path: /extra, optional: true}
      - {name: fixed, path: /fixed, raw: {data: hello}}
    container: {image: alpine}
)"));
  EXPECT_EQ(artifact.field(), "spec.templates[0].dag.tasks[0].arguments");
  EXPECT_THAT(artifact.message(),
              HasSubstr("input artifact 'data' of template 'read' is not supplied"));

  // A default, or spec.arguments, supplies it; so does a WorkflowTemplate's submitter.
  MustParse(
      WorkflowWith("  - name: main\n    inputs: {parameters: [{name: p, default: x}]}\n"
                   "    container: {image: alpine}\n"));
  MustParse(R"(apiVersion: argoproj.io/v1alpha1
kind: WorkflowTemplate
metadata: {name: needs-args}
spec:
  entrypoint: main
  templates:
  - name: main
    inputs: {parameters: [{name: p}]}
    container: {image: alpine}
)");
}

TEST(WorkflowManifestErrors, NamesFollowArgosRules) {
  auto named = [](const std::string& name) {
    return "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: " + name +
           "}\nspec:\n  entrypoint: main\n  templates: [{name: main, container: {image: "
           "alpine}}]\n";
  };
  Status upper = ErrorOf(named("Hello_World"));
  EXPECT_EQ(upper.field(), "metadata.name");
  EXPECT_EQ(upper.line(), 3);
  MustParse(named(std::string(63, 'a')));
  Status too_long = ErrorOf(named(std::string(64, 'a')));
  EXPECT_THAT(too_long.message(), HasSubstr("at most 63"));
  MustParse(named("train.v2-run"));

  Status nameless = ErrorOf(
      "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {labels: {a: b}}\n"
      "spec:\n  entrypoint: main\n  templates: [{name: main, container: {image: alpine}}]\n");
  EXPECT_EQ(nameless.field(), "metadata");
  EXPECT_THAT(nameless.message(), HasSubstr("name or a generateName"));

  Status cron =
      ErrorOf("apiVersion: argoproj.io/v1alpha1\nkind: CronWorkflow\nmetadata: {name: " +
              std::string(53, 'c') +
              "}\nspec:\n  schedule: '@hourly'\n  workflowSpec: {entrypoint: m, templates: "
              "[{name: m, container: {image: a}}]}\n");
  EXPECT_THAT(cron.message(), HasSubstr("at most 52"));

  Status tmpl = ErrorOf(
      WorkflowWith("  - name: my_template\n    container: {image: alpine}\n", "my_template"));
  EXPECT_EQ(tmpl.field(), "spec.templates[0].name");
  EXPECT_EQ(tmpl.line(), 7);
  EXPECT_THAT(tmpl.message(), HasSubstr("template name 'my_template' is invalid"));

  Status param =
      ErrorOf(WorkflowWith("  - name: main\n    inputs: {parameters: [{name: a.b, value: x}]}\n"
                           "    container: {image: alpine}\n"));
  EXPECT_EQ(param.field(), "spec.templates[0].inputs.parameters[0].name");
  EXPECT_THAT(param.message(), HasSubstr("parameter name 'a.b' is invalid"));

  Status dup =
      ErrorOf(WorkflowWith("  - name: main\n    container: {image: alpine}\n"
                           "  - name: main\n    container: {image: busybox}\n"));
  EXPECT_EQ(dup.field(), "spec.templates[1].name");
  EXPECT_EQ(dup.line(), 9);

  EXPECT_TRUE(IsValidTemplateName("Build-2"));
  EXPECT_FALSE(IsValidTemplateName("-build"));
  EXPECT_TRUE(IsValidParameterName("my_param-1"));
  EXPECT_FALSE(IsValidParameterName("my param"));
}

TEST(WorkflowManifestErrors, ApiVersionAndKind) {
  Status version =
      ErrorOf("apiVersion: argoproj.io/v1\nkind: Workflow\nmetadata: {name: a}\nspec: {}\n");
  EXPECT_EQ(version.field(), "apiVersion");
  EXPECT_EQ(version.line(), 1);
  Status kind = ErrorOf(
      "apiVersion: argoproj.io/v1alpha1\nkind: ClusterWorkflowTemplate\nmetadata: {name: a}\nspec: "
      "{}\n");
  EXPECT_EQ(kind.field(), "kind");
  EXPECT_EQ(kind.line(), 2);
  EXPECT_THAT(kind.message(), HasSubstr("Workflow, WorkflowTemplate or CronWorkflow"));
  Status no_spec =
      ErrorOf("apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: a}\n");
  EXPECT_EQ(no_spec.field(), "spec");
}

TEST(WorkflowManifestErrors, CronWorkflowRules) {
  auto cron = [](const std::string& fields) {
    return "apiVersion: argoproj.io/v1alpha1\nkind: CronWorkflow\nmetadata: {name: c}\nspec:\n" +
           fields +
           "  workflowSpec: {entrypoint: m, templates: [{name: m, container: {image: a}}]}\n";
  };
  EXPECT_THAT(ErrorOf(cron("")).message(), HasSubstr("needs schedule or schedules"));
  Status bad = ErrorOf(cron("  schedules: ['* * *']\n"));
  EXPECT_EQ(bad.field(), "spec.schedules[0]");
  EXPECT_EQ(bad.line(), 5);
  Status policy = ErrorOf(cron("  schedule: '@daily'\n  concurrencyPolicy: Sometimes\n"));
  EXPECT_EQ(policy.field(), "spec.concurrencyPolicy");
  Status entry = ErrorOf(
      "apiVersion: argoproj.io/v1alpha1\nkind: CronWorkflow\nmetadata: {name: c}\nspec:\n"
      "  schedule: '@daily'\n  workflowSpec:\n    entrypoint: x\n"
      "    templates: [{name: m, container: {image: a}}]\n");
  EXPECT_EQ(entry.field(), "spec.workflowSpec.entrypoint");
  EXPECT_EQ(entry.line(), 7);
  MustParse(cron("  schedule: 'CRON_TZ=Europe/Paris 30 6 * * 1-5'\n"));
}

TEST(WorkflowManifestErrors, ResourceQuantities) {
  Status gpus = ErrorOf(WorkflowWith(R"(  - name: main
    container:
      image: alpine
      resources:
        limits: {nvidia.com/gpu: two}
)"));
  EXPECT_EQ(gpus.field(), "spec.templates[0].container.resources.limits.nvidia.com/gpu");
  EXPECT_EQ(gpus.line(), 11);
  EXPECT_THAT(gpus.message(), HasSubstr("whole number of GPUs"));

  Status memory =
      ErrorOf(WorkflowWith("  - name: main\n    script:\n      image: a\n      source: x\n"
                           "      resources: {requests: {memory: lots}}\n"));
  EXPECT_EQ(memory.field(), "spec.templates[0].script.resources.requests.memory");

  Status annotation =
      ErrorOf(WorkflowWith("  - name: main\n    metadata: {annotations: {headway.dev/gpus: many}}\n"
                           "    container: {image: alpine}\n"));
  EXPECT_EQ(annotation.field(), "spec.templates[0].metadata.annotations.headway.dev/gpus");
  EXPECT_EQ(annotation.line(), 8);

  Workflow by_annotation = MustParseWorkflow(
      WorkflowWith("  - name: main\n    metadata: {annotations: {headway.dev/gpus: '2'}}\n"
                   "    container: {image: alpine, resources: {requests: {cpu: 500m}}}\n"));
  auto r = NodeResourcesOf(by_annotation.spec.templates[0]);
  EXPECT_EQ(r->gpus, 2);
  EXPECT_DOUBLE_EQ(r->cpus, 0.5);
}

TEST(WorkflowManifestErrors, ArgumentsNeedValues) {
  Status missing = ErrorOf(R"(apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: wf}
spec:
  entrypoint: main
  arguments:
    parameters:
    - name: size
  templates: [{name: main, container: {image: alpine}}]
)");
  EXPECT_EQ(missing.field(), "spec.arguments.parameters[0]");
  EXPECT_EQ(missing.line(), 8);
  EXPECT_THAT(missing.message(), HasSubstr("'size' needs a value"));

  Status outside_enum = ErrorOf(R"(apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: wf}
spec:
  entrypoint: main
  arguments:
    parameters:
    - {name: size, value: huge, enum: [small, large]}
  templates: [{name: main, container: {image: alpine}}]
)");
  EXPECT_EQ(outside_enum.field(), "spec.arguments.parameters[0].value");
  EXPECT_THAT(outside_enum.message(), HasSubstr("not one of the parameter's enum"));

  Status artifact = ErrorOf(WorkflowWith(R"(  - name: main
    steps:
    - - name: a
        template: read
        arguments: {artifacts: [{name: data}]}
  - name: read
    inputs: {artifacts: [{name: data, path: /data}]}
    container: {image: alpine}
)"));
  EXPECT_EQ(artifact.field(), "spec.templates[0].steps[0][0].arguments.artifacts[0]");
  EXPECT_EQ(artifact.line(), 11);
  EXPECT_THAT(artifact.message(), HasSubstr("needs from, fromExpression, s3, raw or http"));

  Status with_templates = ErrorOf(R"(apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: wf-}
spec:
  workflowTemplateRef: {name: base}
  templates: [{name: main, container: {image: alpine}}]
)");
  EXPECT_EQ(with_templates.field(), "spec.templates");
  EXPECT_THAT(with_templates.message(), HasSubstr("must be empty when workflowTemplateRef"));
}

TEST(WorkflowManifestErrors, FieldsOnlySomeTemplateKindsTake) {
  auto error_of = [](const std::string& templates) { return ErrorOf(WorkflowWith(templates)); };
  Status timeout = error_of("  - name: main\n    timeout: '30'\n    container: {image: alpine}\n");
  EXPECT_EQ(timeout.field(), "spec.templates[0].timeout");
  EXPECT_THAT(timeout.message(), HasSubstr("duration with a unit"));

  Status parent_deadline = error_of(
      "  - name: main\n    activeDeadlineSeconds: 10\n    steps: [[{name: a, template: w}]]\n"
      "  - name: w\n    container: {image: alpine}\n");
  EXPECT_EQ(parent_deadline.field(), "spec.templates[0].activeDeadlineSeconds");
  EXPECT_EQ(parent_deadline.line(), 8);

  Status leaf_parallelism =
      error_of("  - name: main\n    parallelism: 2\n    container: {image: alpine}\n");
  EXPECT_EQ(leaf_parallelism.field(), "spec.templates[0].parallelism");

  Status no_path = error_of(
      "  - name: main\n    outputs: {artifacts: [{name: model}]}\n    container: {image: "
      "alpine}\n");
  EXPECT_EQ(no_path.field(), "spec.templates[0].outputs.artifacts[0]");
  EXPECT_THAT(no_path.message(), HasSubstr("needs a path in a container template"));

  Status input_from = error_of(
      "  - name: main\n    inputs: {artifacts: [{name: m, path: /m, from: '{{x}}'}]}\n"
      "    container: {image: alpine}\n");
  EXPECT_EQ(input_from.field(), "spec.templates[0].inputs.artifacts[0].from");

  Status no_source = error_of(
      "  - name: main\n    outputs: {parameters: [{name: p, valueFrom: {default: x}}]}\n"
      "    container: {image: alpine}\n");
  EXPECT_EQ(no_source.field(), "spec.templates[0].outputs.parameters[0].valueFrom");
  EXPECT_THAT(no_source.message(), HasSubstr("needs one of path"));

  Status dag_output = error_of(
      "  - name: main\n    outputs: {parameters: [{name: p, valueFrom: {path: /p}}]}\n"
      "    dag: {tasks: [{name: a, template: w}]}\n  - name: w\n    container: {image: alpine}\n");
  EXPECT_THAT(dag_output.message(), HasSubstr("needs a parameter or expression"));

  Status continue_on = error_of(
      "  - name: main\n    dag:\n      tasks:\n      - {name: a, template: w}\n"
      "      - {name: b, template: w, depends: a, continueOn: {failed: true}}\n"
      "  - name: w\n    container: {image: alpine}\n");
  EXPECT_EQ(continue_on.field(), "spec.templates[0].dag.tasks[1].continueOn");
}

TEST(WorkflowManifestErrors, HeadwayKeysAreChecked) {
  Status priority = ErrorOf(R"(apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: wf
  annotations:
    headway.dev/priority: high
spec:
  entrypoint: main
  templates: [{name: main, container: {image: alpine}}]
)");
  EXPECT_EQ(priority.field(), "metadata.annotations.headway.dev/priority");
  EXPECT_EQ(priority.line(), 6);
  EXPECT_THAT(priority.message(), HasSubstr("integer priority"));

  Status team =
      ErrorOf(WorkflowWith("  - name: main\n    metadata: {labels: {headway.dev/team: ''}}\n"
                           "    container: {image: alpine}\n"));
  EXPECT_EQ(team.field(), "spec.templates[0].metadata.labels.headway.dev/team");
  EXPECT_EQ(team.line(), 8);
}

TEST(WorkflowManifestErrors, MultipleDocuments) {
  std::string two =
      Example("workflow-template.yaml") + "---\n" + Example("workflow-template-ref.yaml");
  Status single = ErrorOf(two);
  EXPECT_THAT(single.message(), HasSubstr("holds 2 documents"));
  auto both = ParseManifests(two);
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  ASSERT_EQ(both->size(), 2u);
  EXPECT_TRUE(std::holds_alternative<WorkflowTemplate>((*both)[0].resource));
  EXPECT_TRUE(std::holds_alternative<Workflow>((*both)[1].resource));

  auto broken = ParseManifests(Example("hello-world.yaml") + "---\n" +
                               WorkflowWith("  - name: main\n    container: {image: a}\n", "x"));
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().field(), "documents[1].spec.entrypoint");
  // Lines count from the start of the text: the second document's line 5.
  EXPECT_EQ(broken.status().line(), 21 + 1 + 5);
}

// Every document of a stream is held to what the first is: a NUL from the
// "\0" escape is refused where it is written.
TEST(WorkflowManifestErrors, ANulInALaterDocumentIsRefusedAtItsLine) {
  std::string first = Example("hello-world.yaml");
  auto nul = ParseManifests(first + "---\n" +
                            WorkflowWith("  - name: main\n    container: {image: \"a\\0b\"}\n"));
  ASSERT_FALSE(nul.ok());
  EXPECT_THAT(nul.status().message(), HasSubstr("NUL"));
  const auto first_lines = static_cast<int>(std::count(first.begin(), first.end(), '\n'));
  EXPECT_EQ(nul.status().line(), first_lines + 1 + 8);
}

TEST(WorkflowManifestErrors, MalformedYamlHasALine) {
  Status s = ErrorOf("apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nspec: [a, b\n");
  EXPECT_THAT(s.message(), HasSubstr("not valid YAML or JSON"));
  EXPECT_TRUE(s.line().has_value());
  EXPECT_THAT(ErrorOf("").message(), HasSubstr("empty"));
  EXPECT_THAT(ErrorOf("[1, 2]").message(), HasSubstr("must be a map"));
}

TEST(WorkflowManifestLimits, RefusesOversizedManifests) {
  std::string big = WorkflowWith("  - name: main\n    container: {image: alpine}\n") + "# " +
                    std::string(kMaxManifestBytes, 'x') + "\n";
  auto parsed = ParseManifest(big);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kPayloadTooLarge);
}

TEST(WorkflowManifestLimits, RefusesTooManyTemplatesAndTasks) {
  std::string tasks;
  for (std::size_t i = 0; i < kMaxTemplatesAndTasks; ++i) {
    tasks += "      - {name: t" + std::to_string(i) + ", template: work}\n";
  }
  Status s = ErrorOf(WorkflowWith("  - name: main\n    dag:\n      tasks:\n" + tasks +
                                  "  - name: work\n    container: {image: alpine}\n"));
  EXPECT_THAT(s.message(), HasSubstr("more than 20000 templates, tasks and steps"));
  EXPECT_EQ(s.field(), "spec.templates[0].dag.tasks[19999]");
}

// yaml-cpp 0.7's LoadAll never returns on this stream (found by fuzzing).
TEST(WorkflowManifestLimits, AStreamWhoseDocumentsNeverEndIsRefused) {
  const std::string text =
      "{\"generateName\": \"hello-world-json-\"},\n  \"spec\"\": \"count\", \"value\": \"3\"}"
      "argoproj   {\"parameters\": [{kinde\": \"count\"}]},tty     "
      "\"retryStrategy\"et.io/v1alpha1\n"
      "kind: Wor\nkind: Workflow\n---adata:\n  generse";
  auto parsed = ParseManifests(text);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("documents"));
}

TEST(WorkflowManifestLimits, RefusesAliasBombs) {
  std::string bomb =
      "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: wf}\nspec:\n"
      "  entrypoint: main\n  templates:\n  - name: main\n    dag:\n      tasks:\n"
      "      - name: a\n        template: work\n        withItems:\n";
  std::string level = "[x, x, x, x, x, x, x, x, x, x]";
  bomb += "        - &l0 " + level + "\n";
  for (int i = 1; i < 8; ++i) {
    std::string prev = "*l" + std::to_string(i - 1);
    bomb += "        - &l" + std::to_string(i) + " [" + prev;
    for (int k = 1; k < 10; ++k) bomb += ", " + prev;
    bomb += "]\n";
  }
  bomb += "  - name: work\n    container: {image: alpine}\n";
  Status s = ErrorOf(bomb);
  EXPECT_THAT(s.message(), HasSubstr("too large once YAML aliases are expanded"));
}

}  // namespace
}  // namespace headway::workflow
