// Cron schedules as CronWorkflows write them (Argo uses robfig/cron's
// standard parser): five fields, minute hour day-of-month month day-of-week,
// each `*`, a value, a range `a-b`, a step `*/n`, `a-b/n` or `a/n` (a to the
// field's end), or a comma list of these; month and weekday names (JAN,
// mon); `?` as `*`; and the descriptors @yearly (@annually), @monthly,
// @weekly, @daily (@midnight), @hourly and `@every DURATION` (e.g. 90s, 1h30m).
// As in cron, when both day fields are restricted a day matching either
// fires; when one is `*`, only the other counts.
//
// Times are computed on the wall clock of a time zone (CronWorkflow's
// spec.timezone; UTC when empty), with Vixie cron's rule for the days clocks
// change: a schedule at given hours does not fire at a wall time that does
// not exist (the hour skipped when clocks go forward) and fires once at one
// that exists twice (when they go back); a schedule of every hour follows
// real time through both, firing at each matching minute as the clock reads.
//
// Pure: the zone is a parameter (its rules are read once, at lookup).
#pragma once

#include <bitset>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "workflow/workflow.h"

namespace date {
class time_zone;
}  // namespace date

namespace headway::workflow {

class CronSchedule {
 public:
  // InvalidArgument naming the field and the text at fault.
  static Result<CronSchedule> Parse(std::string_view spec);

  // The first fire time strictly after `after`; nullopt when there is none
  // within eight years (e.g. "0 0 30 2 *"). `zone` null: UTC.
  std::optional<Time> NextAfter(Time after, const date::time_zone* zone) const;

  const std::string& spec() const { return spec_; }

 private:
  // month 1..12, day 1..31, weekday 0 (Sunday)..6.
  bool DayMatches(unsigned month, unsigned day, unsigned weekday) const;
  std::optional<Time> NextInRealTime(Time after, const date::time_zone* zone) const;

  std::string spec_;
  std::optional<Duration> every_;  // @every
  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_;     // 1..31
  std::bitset<13> months_;   // 1..12
  std::bitset<7> weekdays_;  // 0 (Sunday) .. 6
  bool any_day_ = true;      // day-of-month was `*`
  bool any_weekday_ = true;  // day-of-week was `*`
};

// The zone of an IANA name ("Europe/Paris"); "" or "UTC": UTC (null).
// InvalidArgument for an unknown name.
Result<const date::time_zone*> LookupTimeZone(std::string_view name);

// What a CronWorkflow does now (Argo's cron controller). Fire times since
// the last one it scheduled (or since it was created) come in two kinds:
//  - on time: after `watching_since` (when this controller started running
//    its schedule). The latest of them runs, whatever
//    startingDeadlineSeconds says (Argo's scheduler starts it on time);
//  - missed while the controller was down: at or before `watching_since`.
//    As Argo's runOutstandingWorkflows: only a CronWorkflow that ran before
//    (`last_scheduled`) with a startingDeadlineSeconds runs the latest of
//    them, and only while now is within that many seconds of it.
// concurrencyPolicy decides what happens when workflows it started are
// still running: Allow starts another, Forbid skips this run, Replace stops
// them and starts the new one.
struct CronDecision {
  std::optional<Time> run;        // start a workflow for this fire time
  bool stop_active = false;       // Replace: stop the running ones first
  std::optional<Time> scheduled;  // the new last scheduled time (a run or a skip)
  std::string skipped;            // why a due fire time did not run ("" when none)
  std::optional<Time> next;       // the next fire time after now: look again then
};

// `schedules` parsed from the spec; `active` is how many of the workflows
// it started have not ended. A suspended CronWorkflow never runs.
CronDecision DecideCron(const std::vector<CronSchedule>& schedules, const date::time_zone* zone,
                        bool suspended, ConcurrencyPolicy policy,
                        std::optional<std::int64_t> starting_deadline_seconds, Time created_at,
                        std::optional<Time> last_scheduled, Time now, int active,
                        Time watching_since);

// A workflow a CronWorkflow started, as its status counts it.
struct CronRun {
  std::string name;
  bool finished = false;
  bool succeeded = false;
};

// Argo's CronWorkflowStatus besides lastScheduledTime: `active` (references
// to the runs not ended), `succeeded` and `failed` (a run counts once, when
// it is seen ended after being active: Failed and Error count as failed),
// `phase` (Active: Stopped comes from stopStrategy, which is not run) and
// `conditions`; other fields of `previous` are kept.
nlohmann::json CronStatus(const nlohmann::json& previous, const std::vector<CronRun>& runs);

}  // namespace headway::workflow
