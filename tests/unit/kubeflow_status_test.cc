// The Kubeflow Trainer status update parser: what Kubeflow's own status
// server (and the TrainJob CRD's schema behind it) accepts and refuses, and
// what Headway stores of an accepted update.
#include "api/kubeflow_status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace headway::api {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr const char* kTime = R"("lastUpdatedTime": "2026-12-02T10:00:00Z")";

std::string TrainerStatus(const std::string& fields) {
  return std::string(R"({"trainerStatus": {)") + fields + (fields.empty() ? "" : ", ") + kTime +
         "}}";
}

std::string Metrics(const std::string& list) {
  return TrainerStatus(R"("metrics": [)" + list + "]");
}

KubeflowParse Parse(const std::string& body, const KubeflowJobContext& known = {}) {
  return ParseKubeflowStatus(body, "job", known);
}

struct Refused {
  std::string name, body;
  int code;
  std::string message;  // a part of it
};

TEST(KubeflowStatus, RefusesWhatKubeflowRefusesWithAKubernetesStatus) {
  const std::string long64 = std::string(64, 'x');
  std::string many;
  for (int i = 0; i < 257; ++i) {
    many +=
        (i ? "," : "") + std::string(R"({"name": "m)") + std::to_string(i) + R"(", "value": "1"})";
  }
  const Refused cases[] = {
      {"not json", "invalid payload", 422, "Invalid payload"},
      {"empty body", "", 422, "Invalid payload"},
      {"two values", "{}{}", 422, "Invalid payload"},
      {"trailing bracket", "{}]", 422, "Invalid payload"},
      {"a list", "[]", 422, "Invalid payload"},
      {"trainerStatus a string", R"({"trainerStatus": "x"})", 422, "Invalid payload"},
      {"fractional percent", TrainerStatus(R"("progressPercentage": 42.5)"), 422,
       "must be an integer"},
      {"99.5 percent", TrainerStatus(R"("progressPercentage": 99.5)"), 422, "must be an integer"},
      {"42.0 percent", TrainerStatus(R"("progressPercentage": 42.0)"), 422, "must be an integer"},
      {"percent as a string", TrainerStatus(R"("progressPercentage": "42")"), 422,
       "must be an integer"},
      {"percent over 100", TrainerStatus(R"("progressPercentage": 101)"), 422, "from 0 to 100"},
      {"negative percent", TrainerStatus(R"("progressPercentage": -1)"), 422, "from 0 to 100"},
      {"percent past int32", TrainerStatus(R"("progressPercentage": 4294967296)"), 422, "int32"},
      {"negative ETA", TrainerStatus(R"("estimatedRemainingSeconds": -5)"), 422,
       "greater than or equal to 0"},
      {"fractional ETA", TrainerStatus(R"("estimatedRemainingSeconds": 1.5)"), 422,
       "must be an integer"},
      {"ETA past int32", TrainerStatus(R"("estimatedRemainingSeconds": 3000000000)"), 422, "int32"},
      {"257 metrics", Metrics(many), 422, "must have at most 256 items"},
      {"name over 64", Metrics(R"({"name": ")" + long64 + R"(y", "value": "1"})"), 422,
       "metrics[0].name: Too long"},
      {"value over 64", Metrics(R"({"name": "loss", "value": ")" + long64 + R"(1"})"), 422,
       "metrics[0].value: Too long"},
      {"empty name", Metrics(R"({"name": "", "value": "1"})"), 422, "metrics[0].name: Required"},
      {"missing value", Metrics(R"({"name": "loss"})"), 422, "metrics[0].value: Required"},
      {"null metric", Metrics("null"), 422, "metrics[0].name: Required"},
      {"numeric value", Metrics(R"({"name": "loss", "value": 0.5})"), 422, "must be a string"},
      {"metrics an object", TrainerStatus(R"("metrics": {"loss": "1"})"), 422, "must be a list"},
      {"no lastUpdatedTime", R"({"trainerStatus": {"progressPercentage": 42}})", 422,
       "lastUpdatedTime is required when trainerStatus is present"},
      {"empty trainerStatus", R"({"trainerStatus": {}})", 422, "lastUpdatedTime is required"},
      {"bad time", R"({"trainerStatus": {"lastUpdatedTime": "yesterday"}})", 422, "RFC 3339"},
      {"time as a number", R"({"trainerStatus": {"lastUpdatedTime": 17}})", 422, "RFC 3339"},
      {"over 64 KiB", Metrics(std::string(70000, ' ') + R"({"name": "a", "value": "1"})"), 413,
       "Payload too large"},
  };
  for (const Refused& c : cases) {
    KubeflowParse p = Parse(c.body);
    ASSERT_FALSE(p.ok()) << c.name;
    EXPECT_EQ(p.error->code, c.code) << c.name;
    EXPECT_EQ(p.error->reason, c.code == 413 ? "RequestEntityTooLarge" : "Invalid") << c.name;
    EXPECT_THAT(p.error->message, HasSubstr(c.message)) << c.name;
    json j = p.error->ToJson();
    EXPECT_EQ(j["kind"], "Status") << c.name;
    EXPECT_EQ(j["apiVersion"], "v1") << c.name;
    EXPECT_EQ(j["status"], "Failure") << c.name;
    EXPECT_EQ(j["code"], c.code) << c.name;
    EXPECT_FALSE(p.update.report) << c.name;
  }
}

TEST(KubeflowStatus, EveryViolationIsNamedAtOnce) {
  KubeflowParse p =
      Parse(R"({"trainerStatus": {"progressPercentage": 101, "estimatedRemainingSeconds": -1}})");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.error->message, HasSubstr(R"(TrainJob.trainer.kubeflow.org "job" is invalid: [)"));
  EXPECT_THAT(p.error->message, HasSubstr("progressPercentage"));
  EXPECT_THAT(p.error->message, HasSubstr("estimatedRemainingSeconds"));
  EXPECT_THAT(p.error->message, HasSubstr("lastUpdatedTime"));
}

TEST(KubeflowStatus, EmptyUpdatesAreAcceptedAndStoreNothing) {
  for (const char* body : {"{}", "null", R"({"trainerStatus": null})", R"({"other": 1})",
                           R"({"trainerStatus": {"lastUpdatedTime": "2026-12-02T10:00:00Z"}})"}) {
    KubeflowParse p = Parse(body);
    ASSERT_TRUE(p.ok()) << body << ": " << p.error->message;
    EXPECT_FALSE(p.update.report) << body;
  }
  EXPECT_EQ(Parse("{}").update.echo, json::object());
}

TEST(KubeflowStatus, AcceptsWhatKubeflowAccepts) {
  // Spaces and colons in names, 64-character names and values, unknown fields,
  // values that are not numbers, Python's isoformat() time, field names in any case.
  std::string body = R"J({"TrainerStatus": {"progressPercentage": 42, "somethingNew": {"a": 1},
      "metrics": [{"name": "eval_f1 (macro)", "value": "0.5"}, {"name": "a:b", "value": "1e-05"},
                  {"name": "flag", "value": "True"}, {"name": "n/a", "value": "N/A"},
                  {"name": "t", "value": "tensor(0.1234)"},
                  {"name": ")J" +
                     std::string(64, 'n') + R"J(", "value": ")J" + std::string(63, '1') + R"J(2"}],
      "lastUpdatedTime": "2026-12-02T10:00:00.123456+00:00"}, "unknownTop": true})J";
  KubeflowParse p = Parse(body);
  ASSERT_TRUE(p.ok()) << p.error->message;
  ASSERT_TRUE(p.update.report);
  const ProgressReport& r = *p.update.report;
  EXPECT_EQ(r.metrics.at("eval_f1 (macro)"), 0.5);
  EXPECT_EQ(r.metrics.at("a:b"), 1e-05);
  EXPECT_EQ(r.metrics.at("t"), 0.1234);
  EXPECT_EQ(r.metrics.count("flag"), 0u);
  EXPECT_EQ(r.metrics.count("n/a"), 0u);
  EXPECT_THAT(p.update.skipped_metrics, ::testing::ElementsAre("flag", "n/a"));
  ASSERT_TRUE(r.time);
  EXPECT_EQ(FormatRfc3339(*r.time), "2026-12-02T10:00:00.123Z");
  // The echo is the update as Kubeflow's server writes it back.
  EXPECT_EQ(p.update.echo["trainerStatus"]["progressPercentage"], 42);
  EXPECT_EQ(p.update.echo["trainerStatus"]["lastUpdatedTime"], "2026-12-02T10:00:00Z");
  EXPECT_EQ(p.update.echo["trainerStatus"]["metrics"].size(), 6u);
  EXPECT_FALSE(p.update.echo["trainerStatus"].contains("somethingNew"));
}

TEST(KubeflowStatus, MetricValuesReadAsNumbersTheWayPythonWritesThem) {
  EXPECT_EQ(ParseMetricValue("0.41"), 0.41);
  EXPECT_EQ(ParseMetricValue("100"), 100.0);
  EXPECT_EQ(ParseMetricValue("-3e-4"), -3e-4);
  EXPECT_TRUE(std::isnan(*ParseMetricValue("nan")));
  EXPECT_EQ(ParseMetricValue("inf"), INFINITY);
  EXPECT_EQ(ParseMetricValue("-inf"), -INFINITY);
  EXPECT_EQ(ParseMetricValue("tensor(0.1234)"), 0.1234);
  EXPECT_EQ(ParseMetricValue("tensor(2.5, device='cuda:0')"), 2.5);
  EXPECT_EQ(ParseMetricValue("np.float32(0.5)"), 0.5);
  for (const char* text : {"N/A", "True", "", "tensor(x)", "(1)", "1 2", "0x", "tensor(1"}) {
    EXPECT_FALSE(ParseMetricValue(text)) << text;
  }
}

TEST(KubeflowStatus, TheClientsStepMetricsAreTheStepNotSeries) {
  // What HF's KubeflowCallback sends from on_step_end.
  KubeflowParse p =
      Parse(Metrics(R"({"name": "loss", "value": "0.9"}, {"name": "epoch", "value": "0.5"},
      {"name": "current_step", "value": "46"}, {"name": "total_steps", "value": "100"},
      {"name": "current_epoch", "value": "0.46"})"));
  ASSERT_TRUE(p.ok()) << p.error->message;
  const ProgressReport& r = *p.update.report;
  EXPECT_EQ(r.step, 46);
  EXPECT_EQ(r.total_steps, 100);
  EXPECT_EQ(r.epoch, 0.46);
  EXPECT_EQ(r.metrics, (std::map<std::string, double>{{"loss", 0.9}}));
}

TEST(KubeflowStatus, APercentIsPlacedOnTheKnownTotalRoundedDown) {
  KubeflowJobContext known;
  known.step = 4000;
  known.total_steps = 10000;
  KubeflowParse p = Parse(TrainerStatus(R"("progressPercentage": 46)"), known);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.update.report->step, 4600);
  EXPECT_EQ(p.update.report->total_steps, 10000);
  known.total_steps = 7;
  EXPECT_EQ(Parse(TrainerStatus(R"("progressPercentage": 99)"), known).update.report->step, 6)
      << "99% of 7 steps must not read as 100%";
  EXPECT_EQ(Parse(TrainerStatus(R"("progressPercentage": 100)"), known).update.report->step, 7);
  // The first update of HF's callback: 0% and the total as a metric.
  p = Parse(TrainerStatus(
      R"("progressPercentage": 0, "metrics": [{"name": "total_steps", "value": "300"}])"));
  EXPECT_EQ(p.update.report->step, 0);
  EXPECT_EQ(p.update.report->total_steps, 300);
  EXPECT_TRUE(p.update.report->metrics.empty());
  // Nothing known: the job's own percent, with no total invented for it.
  p = Parse(TrainerStatus(R"("progressPercentage": 42, "estimatedRemainingSeconds": 600)"));
  EXPECT_EQ(p.update.report->step, 0);
  EXPECT_FALSE(p.update.report->total_steps);
  EXPECT_EQ(p.update.report->percent, 42.0);
  EXPECT_EQ(p.update.report->remaining_seconds, 600.0);
}

TEST(KubeflowStatus, APercentBesideAStepWithoutATotalIsKeptAndNeverAStep) {
  // The Kubeflow SDK's documented loop: progress_percent plus metrics {loss, step}.
  KubeflowParse p = Parse(TrainerStatus(
      R"("progressPercentage": 30, "metrics": [{"name": "loss", "value": "0.9"},
                                               {"name": "step", "value": "1500"}])"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.update.report->step, 1500);
  EXPECT_FALSE(p.update.report->total_steps);
  EXPECT_EQ(p.update.report->percent, 30.0);
  EXPECT_EQ(p.update.report->metrics.at("loss"), 0.9);
  // A later percent-only update belongs to the latest step, not to step 100.
  KubeflowJobContext known;
  known.step = 5000;
  p = Parse(TrainerStatus(R"("progressPercentage": 100)"), known);
  EXPECT_EQ(p.update.report->step, 5000);
  EXPECT_FALSE(p.update.report->total_steps);
  EXPECT_EQ(p.update.report->percent, 100.0);
}

TEST(KubeflowStatus, MetricsOnlyUpdatesAttachToTheLatestStep) {
  KubeflowJobContext known;
  known.step = 120;
  KubeflowParse p = Parse(Metrics(R"({"name": "eval_loss", "value": "0.3"})"), known);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.update.report->step, 120);
  EXPECT_FALSE(p.update.report->total_steps);
  EXPECT_EQ(p.update.report->metrics.at("eval_loss"), 0.3);
}

TEST(KubeflowStatus, ReSentValuesAreNotNewEvidence) {
  KubeflowJobContext known;
  known.step = 50;
  known.total_steps = 100;
  known.latest_metrics = {{"eval_loss", 0.3}, {"loss", 0.5}, {"grad", NAN}};
  KubeflowParse p =
      Parse(Metrics(R"({"name": "eval_loss", "value": "0.3"}, {"name": "loss", "value": "0.45"},
      {"name": "grad", "value": "nan"}, {"name": "current_step", "value": "55"})"),
            known);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.update.report->step, 55);
  EXPECT_EQ(p.update.report->metrics, (std::map<std::string, double>{{"loss", 0.45}}));
  // Nothing new at all: nothing to store.
  p = Parse(Metrics(R"({"name": "eval_loss", "value": "0.3"})"), known);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p.update.report);
}

TEST(KubeflowStatus, HeadwayErrorsBecomeKubernetesStatuses) {
  EXPECT_EQ(KubeStatusFor(Unauthenticated("no token")).code, 403);
  EXPECT_EQ(KubeStatusFor(PermissionDenied("no")).reason, "Forbidden");
  EXPECT_EQ(KubeStatusFor(InvalidArgument("bad")).code, 422);
  KubeStatus big = KubeStatusFor(
      ::headway::Status(StatusCode::kPayloadTooLarge, "past the limit of 100 points"));
  EXPECT_EQ(big.code, 413);
  EXPECT_EQ(big.reason, "RequestEntityTooLarge");
  EXPECT_EQ(KubeStatusFor(Internal("secret detail")).message, "Internal error");
}

}  // namespace
}  // namespace headway::api
