// Cron schedules: fields, descriptors, the day-of-month/day-of-week rule, and
// fire times across daylight-saving changes in a real time zone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "workflow/cron.h"

namespace headway::workflow {
namespace {

using ::testing::HasSubstr;

Time At(const std::string& rfc3339) { return *ParseRfc3339(rfc3339); }
std::string Next(const std::string& spec, const std::string& after, const std::string& zone = "") {
  auto schedule = CronSchedule::Parse(spec);
  if (!schedule.ok()) return schedule.status().ToString();
  auto tz = LookupTimeZone(zone);
  if (!tz.ok()) return tz.status().ToString();
  auto next = schedule->NextAfter(At(after), *tz);
  return next ? headway::FormatRfc3339(*next) : "never";
}

TEST(CronSchedule, FieldsRangesStepsListsAndNames) {
  EXPECT_EQ(Next("*/15 * * * *", "2026-12-04T10:07:30Z"), "2026-12-04T10:15:00.000Z");
  EXPECT_EQ(Next("*/15 * * * *", "2026-12-04T10:15:00Z"), "2026-12-04T10:30:00.000Z")
      << "strictly after";
  EXPECT_EQ(Next("0 9-17/4 * * *", "2026-12-04T10:00:00Z"), "2026-12-04T13:00:00.000Z");
  EXPECT_EQ(Next("30 2 * * MON-fri", "2026-12-04T03:00:00Z"), "2026-12-07T02:30:00.000Z")
      << "2026-12-04 is a Friday: the next weekday is Monday";
  EXPECT_EQ(Next("0 0 1 jan,Jul *", "2026-12-04T00:00:00Z"), "2027-01-01T00:00:00.000Z");
  EXPECT_EQ(Next("5/20 * * * *", "2026-12-04T10:46:00Z"), "2026-12-04T11:05:00.000Z")
      << "a/n runs from a to the field's end";
  EXPECT_EQ(Next("0 12 * * 7", "2026-12-04T00:00:00Z"), "2026-12-06T12:00:00.000Z")
      << "7 is Sunday";
  EXPECT_EQ(Next("0 0 29 2 *", "2026-03-01T00:00:00Z"), "2028-02-29T00:00:00.000Z");
  EXPECT_EQ(Next("0 0 30 2 *", "2026-03-01T00:00:00Z"), "never");
}

TEST(CronSchedule, BothDayFieldsRestrictedMeansEither) {
  // The 13th, or any Friday.
  EXPECT_EQ(Next("0 0 13 * 5", "2026-12-05T00:00:00Z"), "2026-12-11T00:00:00.000Z");
  EXPECT_EQ(Next("0 0 13 * 5", "2026-12-11T00:00:00Z"), "2026-12-13T00:00:00.000Z");
  // One of them `*`: only the other counts.
  EXPECT_EQ(Next("0 0 13 * *", "2026-12-05T00:00:00Z"), "2026-12-13T00:00:00.000Z");
  EXPECT_EQ(Next("0 0 * * 5", "2026-12-05T00:00:00Z"), "2026-12-11T00:00:00.000Z");
  // A step is a restriction, not `*`.
  EXPECT_EQ(Next("0 0 */2 * 5", "2026-12-01T12:00:00Z"), "2026-12-03T00:00:00.000Z");
}

TEST(CronSchedule, Descriptors) {
  EXPECT_EQ(Next("@hourly", "2026-12-04T10:07:00Z"), "2026-12-04T11:00:00.000Z");
  EXPECT_EQ(Next("@daily", "2026-12-04T10:07:00Z"), "2026-12-05T00:00:00.000Z");
  EXPECT_EQ(Next("@weekly", "2026-12-04T10:07:00Z"), "2026-12-06T00:00:00.000Z");
  EXPECT_EQ(Next("@monthly", "2026-12-04T10:07:00Z"), "2027-01-01T00:00:00.000Z");
  EXPECT_EQ(Next("@yearly", "2026-12-04T10:07:00Z"), "2027-01-01T00:00:00.000Z");
  EXPECT_EQ(Next("@every 90s", "2026-12-04T10:07:00.400Z"), "2026-12-04T10:08:30.000Z");
}

TEST(CronSchedule, InATimeZone) {
  // 09:00 in Paris is 08:00 UTC in winter.
  EXPECT_EQ(Next("0 9 * * *", "2026-12-04T10:00:00Z", "Europe/Paris"), "2026-12-05T08:00:00.000Z");
  EXPECT_EQ(Next("0 9 * * *", "2026-12-04T10:00:00Z", "America/New_York"),
            "2026-12-04T14:00:00.000Z");
}

TEST(CronSchedule, ASkippedWallTimeDoesNotFireAndARepeatedOneFiresOnce) {
  // Europe/Paris went from 02:00 to 03:00 on 2026-03-29: 02:30 does not exist that day.
  EXPECT_EQ(Next("30 2 * * *", "2026-03-28T12:00:00Z", "Europe/Paris"), "2026-03-30T00:30:00.000Z");
  // And from 03:00 back to 02:00 on 2026-10-25: 02:30 happens twice; it fires at the first.
  EXPECT_EQ(Next("30 2 * * *", "2026-10-24T12:00:00Z", "Europe/Paris"), "2026-10-25T00:30:00.000Z");
  EXPECT_EQ(Next("30 2 * * *", "2026-10-25T00:30:00Z", "Europe/Paris"), "2026-10-26T01:30:00.000Z");
  // A schedule of every hour follows real time: through the skipped hour...
  EXPECT_EQ(Next("15 * * * *", "2026-03-29T00:20:00Z", "Europe/Paris"), "2026-03-29T01:15:00.000Z");
  // ...and through the repeated one, every 15 minutes, never going back.
  EXPECT_EQ(Next("*/15 * * * *", "2026-10-25T00:50:00Z", "Europe/Paris"),
            "2026-10-25T01:00:00.000Z");
}

TEST(CronSchedule, BadSchedulesSayWhatIsWrong) {
  auto error = [](const std::string& spec) {
    auto s = CronSchedule::Parse(spec);
    return s.ok() ? std::string("parsed") : s.status().message();
  };
  EXPECT_THAT(error("* * * *"), HasSubstr("5 fields"));
  EXPECT_THAT(error("60 * * * *"), HasSubstr("minute '60': out of range 0-59"));
  EXPECT_THAT(error("* * * FOO *"), HasSubstr("month 'FOO': not a number or a name"));
  EXPECT_THAT(error("*/0 * * * *"), HasSubstr("step"));
  EXPECT_THAT(error("5-1 * * * *"), HasSubstr("ends before it starts"));
  EXPECT_THAT(error("@fortnightly"), HasSubstr("unknown cron descriptor"));
  EXPECT_THAT(error("@every soon"), HasSubstr("duration"));
  EXPECT_THAT(error("CRON_TZ=Europe/Paris 0 9 * * *"), HasSubstr("spec.timezone"));
  EXPECT_THAT(LookupTimeZone("Mars/Olympus").status().message(), HasSubstr("unknown time zone"));
}

}  // namespace
}  // namespace headway::workflow

namespace headway::workflow {
namespace {

Time At(const char* rfc3339) { return *ParseRfc3339(rfc3339); }

std::vector<CronSchedule> Every(const char* spec) { return {*CronSchedule::Parse(spec)}; }

// The controller has been running the schedules since before these tests' times.
const Time kLongAgo = FromUnixMillis(0);

TEST(CronDecision, NothingRunsBeforeTheFirstFireTime) {
  auto d =
      DecideCron(Every("*/5 * * * *"), nullptr, false, ConcurrencyPolicy::kAllow, std::nullopt,
                 At("2026-12-04T10:01:00Z"), std::nullopt, At("2026-12-04T10:04:59Z"), 0, kLongAgo);
  EXPECT_FALSE(d.run);
  EXPECT_EQ(d.next, At("2026-12-04T10:05:00Z"));
}

TEST(CronDecision, OnlyTheLatestMissedFireTimeRunsWithinItsStartingDeadline) {
  // Down from 10:02 to 10:31: 10:05 ... 10:30 were missed; 10:30 runs once.
  auto d = DecideCron(Every("*/5 * * * *"), nullptr, false, ConcurrencyPolicy::kAllow, 120,
                      At("2026-12-04T10:00:00Z"), At("2026-12-04T10:00:00Z"),
                      At("2026-12-04T10:31:00Z"), 0, /*watching_since=*/At("2026-12-04T10:31:00Z"));
  EXPECT_EQ(d.run, At("2026-12-04T10:30:00Z"));
  EXPECT_EQ(d.scheduled, At("2026-12-04T10:30:00Z"));
  EXPECT_EQ(d.next, At("2026-12-04T10:35:00Z"));
}

TEST(CronDecision, AFireTimeMissedWhileDownAndPastItsStartingDeadlineIsSkipped) {
  auto d = DecideCron(Every("*/5 * * * *"), nullptr, false, ConcurrencyPolicy::kAllow, 30,
                      At("2026-12-04T10:00:00Z"), At("2026-12-04T10:00:00Z"),
                      At("2026-12-04T10:06:00Z"), 0, /*watching_since=*/At("2026-12-04T10:06:00Z"));
  EXPECT_FALSE(d.run);
  EXPECT_EQ(d.scheduled, At("2026-12-04T10:05:00Z"));  // not tried again later
  EXPECT_EQ(d.skipped, "missed its starting deadline");
}

TEST(CronDecision, AFireTimeMissedWhileDownRunsOnlyWithAStartingDeadline) {
  // Argo runs missed fire times only for a CronWorkflow that ran before and
  // has a startingDeadlineSeconds.
  auto d = DecideCron(Every("*/5 * * * *"), nullptr, false, ConcurrencyPolicy::kAllow, std::nullopt,
                      At("2026-12-04T10:00:00Z"), At("2026-12-04T10:00:00Z"),
                      At("2026-12-04T10:06:00Z"), 0, /*watching_since=*/At("2026-12-04T10:06:00Z"));
  EXPECT_FALSE(d.run);
  EXPECT_THAT(d.skipped, ::testing::HasSubstr("controller was down"));
  auto never_ran = DecideCron(Every("*/5 * * * *"), nullptr, false, ConcurrencyPolicy::kAllow, 600,
                              At("2026-12-04T10:00:00Z"), std::nullopt, At("2026-12-04T10:06:00Z"),
                              0, /*watching_since=*/At("2026-12-04T10:06:00Z"));
  EXPECT_FALSE(never_ran.run);
}

TEST(CronDecision, AStartingDeadlineOfZeroStillRunsOnTime) {
  // The controller was up: the fire time is on time, however late this pass.
  for (const char* now : {"2026-12-04T10:05:00Z", "2026-12-04T10:05:02Z"}) {
    auto d = DecideCron(Every("*/5 * * * *"), nullptr, false, ConcurrencyPolicy::kAllow, 0,
                        At("2026-12-04T09:00:00Z"), At("2026-12-04T10:00:00Z"), At(now), 0,
                        /*watching_since=*/At("2026-12-04T09:00:00Z"));
    EXPECT_EQ(d.run, At("2026-12-04T10:05:00Z")) << now;
    EXPECT_EQ(d.skipped, "") << now;
  }
}

TEST(CronStatus, CountsEachEndedRunOnceAndHasThePhase) {
  nlohmann::json status = CronStatus(nlohmann::json::object(), {{"c-1", false, false}});
  EXPECT_EQ(status["active"].size(), 1u);
  EXPECT_EQ(status["active"][0]["name"], "c-1");
  EXPECT_EQ(status["succeeded"], 0);
  EXPECT_EQ(status["failed"], 0);
  EXPECT_EQ(status["phase"], "Active");
  EXPECT_TRUE(status["conditions"].is_array());
  status["lastScheduledTime"] = "2026-12-04T10:00:00Z";
  status = CronStatus(status, {{"c-1", true, true}, {"c-2", false, false}});
  EXPECT_EQ(status["succeeded"], 1);
  EXPECT_EQ(status["active"].size(), 1u);
  EXPECT_EQ(status["lastScheduledTime"], "2026-12-04T10:00:00Z");
  // c-1 is counted already; c-2 failed.
  status = CronStatus(status, {{"c-1", true, true}, {"c-2", true, false}});
  EXPECT_EQ(status["succeeded"], 1);
  EXPECT_EQ(status["failed"], 1);
  EXPECT_TRUE(status["active"].empty());
}

TEST(CronDecision, ConcurrencyPolicyDecidesWhileOneStillRuns) {
  auto decide = [](ConcurrencyPolicy policy) {
    return DecideCron(Every("* * * * *"), nullptr, false, policy, std::nullopt,
                      At("2026-12-04T10:00:00Z"), At("2026-12-04T10:00:00Z"),
                      At("2026-12-04T10:01:00Z"), /*active=*/1, kLongAgo);
  };
  EXPECT_TRUE(decide(ConcurrencyPolicy::kAllow).run);
  EXPECT_FALSE(decide(ConcurrencyPolicy::kAllow).stop_active);
  EXPECT_FALSE(decide(ConcurrencyPolicy::kForbid).run);
  EXPECT_THAT(decide(ConcurrencyPolicy::kForbid).skipped, ::testing::HasSubstr("Forbid"));
  EXPECT_TRUE(decide(ConcurrencyPolicy::kReplace).run);
  EXPECT_TRUE(decide(ConcurrencyPolicy::kReplace).stop_active);
}

TEST(CronDecision, ASuspendedCronWorkflowRunsNothing) {
  auto d =
      DecideCron(Every("* * * * *"), nullptr, true, ConcurrencyPolicy::kAllow, std::nullopt,
                 At("2026-12-04T10:00:00Z"), std::nullopt, At("2026-12-04T10:03:00Z"), 0, kLongAgo);
  EXPECT_FALSE(d.run);
  EXPECT_EQ(d.skipped, "suspended");
}

TEST(CronDecision, TheEarliestOfSeveralSchedulesComesNext) {
  std::vector<CronSchedule> both = {*CronSchedule::Parse("0 * * * *"),
                                    *CronSchedule::Parse("30 * * * *")};
  auto d =
      DecideCron(both, nullptr, false, ConcurrencyPolicy::kAllow, std::nullopt,
                 At("2026-12-04T10:10:00Z"), std::nullopt, At("2026-12-04T10:20:00Z"), 0, kLongAgo);
  EXPECT_FALSE(d.run);
  EXPECT_EQ(d.next, At("2026-12-04T10:30:00Z"));
}

}  // namespace
}  // namespace headway::workflow
