// The webhook body and what it says about the job, from stored events.
#include <gtest/gtest.h>

#include "server/webhook_notifier.h"

namespace headway {
namespace {

JobEvent Event(std::int64_t id, const std::string& type, const std::string& message) {
  return {id, "train", FromUnixMillis(1000), type, message};
}

TEST(WebhookBody, StateAfterFollowsTheStateChangesUpToTheEvent) {
  std::vector<JobEvent> history = {
      Event(1, "Submitted", "job submitted"), Event(4, "StateChanged", "Queued -> Starting"),
      Event(6, "StateChanged", "Starting -> Running"),
      Event(9, "HealthChanged", "Unknown -> Stalled: no step for 60 s"),
      Event(12, "StateChanged", "Running -> Failed: exit code 1")};
  EXPECT_EQ(StateAfter(history, 1), "Queued");
  EXPECT_EQ(StateAfter(history, 4), "Starting");
  EXPECT_EQ(StateAfter(history, 9), "Running");
  EXPECT_EQ(StateAfter(history, 12), "Failed");
  EXPECT_EQ(StateAfter({}, 5), "Queued");
}

TEST(WebhookBody, CarriesTheEventIdAndTheJobsOutcomeOnlyForItsCurrentState) {
  Job job;
  job.spec.name = "train";
  job.spec.team = "vision";
  job.state = JobState::kFailed;
  job.reason = "Error";
  job.exit_code = 1;
  auto failed =
      WebhookBody(job, Event(12, "StateChanged", "Running -> Failed: exit code 1"), "Failed");
  EXPECT_EQ(failed["id"], 12);
  EXPECT_EQ(failed["type"], "StateChanged");
  EXPECT_EQ(failed["job"], "train");
  EXPECT_EQ(failed["team"], "vision");
  EXPECT_EQ(failed["state"], "Failed");
  EXPECT_EQ(failed["reason"], "Error");
  EXPECT_EQ(failed["exit_code"], 1);
  EXPECT_EQ(failed["time"], FormatRfc3339(FromUnixMillis(1000)));
  EXPECT_EQ(failed["text"], "headway: job train (team vision): Running -> Failed: exit code 1");
  // Delivered late: an earlier change does not borrow the job's later outcome.
  auto running = WebhookBody(job, Event(6, "StateChanged", "Starting -> Running"), "Running");
  EXPECT_EQ(running["state"], "Running");
  EXPECT_EQ(running["reason"], "");
  EXPECT_TRUE(running["exit_code"].is_null());
}

TEST(WebhookBody, LogsNameAUrlWithoutItsPath) {
  EXPECT_EQ(RedactedUrl("https://hooks.slack.com/services/T0/B0/secret"),
            "https://hooks.slack.com/...");
  EXPECT_EQ(RedactedUrl("http://127.0.0.1:9000"), "http://127.0.0.1:9000");
}

}  // namespace
}  // namespace headway
