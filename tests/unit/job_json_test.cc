// A job as the API shows it: the health verdict with the evidence it rests on.
#include "api/job_json.h"

#include <gtest/gtest.h>

#include <limits>

namespace headway::api {
namespace {

TEST(JobJson, AVerdictShowsTheEvidenceItRestsOn) {
  Job job;
  job.spec.name = "run";
  job.state = JobState::kRunning;
  ProgressView progress;
  progress.health = Health::kOverfitting;
  progress.health_reason = "eval_loss held 0.7 ...; the best checkpoint is step 400";
  progress.health_evidence =
      HealthEvidence{"eval_loss", 0.7, 0.6, 400, std::numeric_limits<double>::quiet_NaN(), 0.03, 2};
  nlohmann::json view = JobToJson(job, "", progress, false, {});
  const nlohmann::json& e = view["health_evidence"];
  EXPECT_EQ(e["series"], "eval_loss");
  EXPECT_DOUBLE_EQ(e["level"].get<double>(), 0.7);
  EXPECT_DOUBLE_EQ(e["best"].get<double>(), 0.6);
  EXPECT_EQ(e["best_step"], 400);
  EXPECT_EQ(e["noise"], "NaN") << "a non-finite number is spelled as metrics are";
  EXPECT_DOUBLE_EQ(e["threshold"].get<double>(), 0.03);
  EXPECT_EQ(e["window_reports"], 2);
  // A verdict that rests on no series has none.
  progress.health_evidence.reset();
  EXPECT_TRUE(JobToJson(job, "", progress, false, {})["health_evidence"].is_null());
}

}  // namespace
}  // namespace headway::api
