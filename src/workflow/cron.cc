#include "workflow/cron.h"

#include <date/date.h>
#include <date/tz.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>
#include <vector>

#include "core/ascii.h"

namespace headway::workflow {
namespace {

struct Field {
  const char* name;
  int min;
  int max;
  std::vector<std::string_view> names;  // names[i] stands for min + i
};

const Field kMinute{"minute", 0, 59, {}};
const Field kHour{"hour", 0, 23, {}};
const Field kDay{"day of month", 1, 31, {}};
const Field kMonth{
    "month",
    1,
    12,
    {"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}};
// 7 is Sunday too, as in most crons.
const Field kWeekday{"day of week", 0, 7, {"sun", "mon", "tue", "wed", "thu", "fri", "sat"}};

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == sep) {
      out.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

Status FieldError(const Field& field, std::string_view text, const std::string& why) {
  return InvalidArgument("cron " + std::string(field.name) + " '" + std::string(text) +
                         "': " + why);
}

Result<int> Value(const Field& field, std::string_view text) {
  const std::string lower = AsciiLower(text);
  for (std::size_t i = 0; i < field.names.size(); ++i) {
    if (lower == field.names[i]) return field.min + static_cast<int>(i);
  }
  int value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    return FieldError(field, text,
                      "not a number" + std::string(field.names.empty() ? "" : " or a name"));
  }
  if (value < field.min || value > field.max) {
    return FieldError(
        field, text, "out of range " + std::to_string(field.min) + "-" + std::to_string(field.max));
  }
  return value;
}

// Sets the bits of `text` (a comma list) in `bits`; `star` says whether the
// whole field was `*` or `?` (what cron's day rule looks at).
template <std::size_t N>
Status ParseField(const Field& field, std::string_view text, std::bitset<N>& bits, bool& star) {
  star = text == "*" || text == "?" || text == "*/1";
  for (std::string_view part : Split(text, ',')) {
    std::vector<std::string_view> range_step = Split(part, '/');
    if (range_step.size() > 2) return FieldError(field, part, "more than one '/'");
    int step = 1;
    if (range_step.size() == 2) {
      auto [end, error] =
          std::from_chars(range_step[1].data(), range_step[1].data() + range_step[1].size(), step);
      if (range_step[1].empty() || error != std::errc() ||
          end != range_step[1].data() + range_step[1].size() || step < 1) {
        return FieldError(field, part, "the step must be a whole number from 1");
      }
    }
    int low = field.min, high = field.max;
    std::string_view range = range_step[0];
    if (range != "*" && range != "?") {
      std::vector<std::string_view> bounds = Split(range, '-');
      if (bounds.size() > 2) return FieldError(field, part, "more than one '-'");
      auto first = Value(field, bounds[0]);
      if (!first.ok()) return first.status();
      low = *first;
      if (bounds.size() == 2) {
        auto last = Value(field, bounds[1]);
        if (!last.ok()) return last.status();
        high = *last;
        if (high < low) return FieldError(field, part, "the range ends before it starts");
      } else if (range_step.size() == 1) {
        high = low;  // a single value; "a/n" runs from a to the field's end
      }
    }
    for (int v = low; v <= high; v += step)
      bits.set(static_cast<std::size_t>(v == 7 && N == 7 ? 0 : v));
  }
  return Status::Ok();
}

// DayMatches' arguments for a local day.
struct DayParts {
  unsigned month, day, weekday;
};
DayParts PartsOf(const date::local_days& day) {
  const date::year_month_day ymd{day};
  return {static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
          date::weekday{day}.c_encoding()};
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<CronSchedule> CronSchedule::Parse(std::string_view spec) {
  spec = Trim(spec);
  CronSchedule out;
  out.spec_ = std::string(spec);
  if (spec.rfind("@every ", 0) == 0) {
    auto every = ParseDuration(Trim(spec.substr(7)));
    if (!every || *every < std::chrono::seconds(1)) {
      return InvalidArgument(
          "cron '@every' needs a duration of a second or more, e.g. 90s or 1h30m");
    }
    out.every_ = *every;
    return out;
  }
  std::string_view fields_text = spec;
  if (spec == "@yearly" || spec == "@annually")
    fields_text = "0 0 1 1 *";
  else if (spec == "@monthly")
    fields_text = "0 0 1 * *";
  else if (spec == "@weekly")
    fields_text = "0 0 * * 0";
  else if (spec == "@daily" || spec == "@midnight")
    fields_text = "0 0 * * *";
  else if (spec == "@hourly")
    fields_text = "0 * * * *";
  else if (!spec.empty() && spec.front() == '@') {
    return InvalidArgument("unknown cron descriptor '" + std::string(spec) +
                           "' (known: @yearly, @annually, @monthly, @weekly, @daily, @midnight, "
                           "@hourly, @every DURATION)");
  }
  if (spec.rfind("CRON_TZ=", 0) == 0 || spec.rfind("TZ=", 0) == 0) {
    return InvalidArgument("a time zone in the schedule is not taken: set spec.timezone");
  }
  std::vector<std::string_view> fields;
  for (std::string_view f : Split(fields_text, ' ')) {
    if (!f.empty()) fields.push_back(f);
  }
  if (fields.size() != 5) {
    return InvalidArgument(
        "a cron schedule has 5 fields (minute hour day-of-month month "
        "day-of-week), '" +
        std::string(spec) + "' has " + std::to_string(fields.size()));
  }
  bool star = false;
  HEADWAY_RETURN_IF_ERROR(ParseField(kMinute, fields[0], out.minutes_, star));
  HEADWAY_RETURN_IF_ERROR(ParseField(kHour, fields[1], out.hours_, star));
  HEADWAY_RETURN_IF_ERROR(ParseField(kDay, fields[2], out.days_, out.any_day_));
  HEADWAY_RETURN_IF_ERROR(ParseField(kMonth, fields[3], out.months_, star));
  HEADWAY_RETURN_IF_ERROR(ParseField(kWeekday, fields[4], out.weekdays_, out.any_weekday_));
  return out;
}

bool CronSchedule::DayMatches(unsigned month, unsigned day, unsigned weekday) const {
  if (!months_[month]) return false;
  const bool dom = days_[day];
  const bool dow = weekdays_[weekday];
  if (any_day_ && any_weekday_) return true;
  if (any_day_) return dow;
  if (any_weekday_) return dom;
  return dom || dow;
}

// A schedule that fires every hour follows real time: through the hour
// clocks skip and the hour they repeat alike, every matching minute of the
// wall clock as it reads then (as Vixie cron runs its "frequent" jobs).
std::optional<Time> CronSchedule::NextInRealTime(Time after, const date::time_zone* zone) const {
  using namespace std::chrono;
  sys_time<minutes> t = floor<minutes>(after) + minutes(1);
  const sys_time<minutes> limit = t + hours(24 * 366 * 8);
  while (t < limit) {
    const date::local_time<minutes> local =
        zone ? floor<minutes>(zone->to_local(t)) : date::local_time<minutes>(t.time_since_epoch());
    const date::local_days day = floor<date::days>(local);
    if (const DayParts p = PartsOf(day); !DayMatches(p.month, p.day, p.weekday)) {
      // On to the next local midnight (or the moment clocks skip to, past it).
      const date::local_days next_day = day + date::days(1);
      const sys_time<minutes> midnight =
          zone ? floor<minutes>(zone->to_sys(next_day, date::choose::earliest))
               : sys_time<minutes>(next_day.time_since_epoch());
      t = std::max(midnight, t + minutes(1));
      continue;
    }
    const int minute = static_cast<int>((local - floor<hours>(local)).count());
    if (minutes_[static_cast<std::size_t>(minute)])
      return Time(duration_cast<Duration>(t.time_since_epoch()));
    int ahead = 1;
    while (!minutes_[static_cast<std::size_t>((minute + ahead) % 60)]) ++ahead;
    t += minutes(ahead);
  }
  return std::nullopt;
}

std::optional<Time> CronSchedule::NextAfter(Time after, const date::time_zone* zone) const {
  using namespace std::chrono;
  if (every_) {
    return floor<seconds>(after) + duration_cast<seconds>(*every_);
  }
  if (hours_.all() && zone) return NextInRealTime(after, zone);
  const sys_seconds after_s = floor<seconds>(after);
  const date::local_seconds local =
      zone ? zone->to_local(after_s) : date::local_seconds(after_s.time_since_epoch());
  date::local_time<minutes> t = floor<minutes>(local) + minutes(1);
  const date::local_time<minutes> limit = t + hours(24 * 366 * 8);
  while (t < limit) {
    const date::local_days day = floor<date::days>(t);
    const date::year_month_day ymd{day};
    if (!months_[static_cast<unsigned>(ymd.month())]) {
      date::year_month next = ymd.year() / ymd.month();
      next += date::months(1);
      t = date::local_days{next / 1};
      continue;
    }
    if (const DayParts p = PartsOf(day); !DayMatches(p.month, p.day, p.weekday)) {
      t = day + date::days(1);
      continue;
    }
    const hours h = floor<hours>(t - day);
    if (!hours_[static_cast<std::size_t>(h.count())]) {
      t = day + h + hours(1);
      continue;
    }
    const minutes m = t - day - h;
    if (!minutes_[static_cast<std::size_t>(m.count())]) {
      t += minutes(1);
      continue;
    }
    if (!zone) return Time(duration_cast<Duration>(t.time_since_epoch()));
    const date::local_info info = zone->get_info(t);
    if (info.result != date::local_info::nonexistent) {
      // Unique, or the first of an ambiguous pair.
      const sys_seconds fire{duration_cast<seconds>(t.time_since_epoch()) - info.first.offset};
      if (fire > after_s) return Time(duration_cast<Duration>(fire.time_since_epoch()));
    }
    t += minutes(1);
  }
  return std::nullopt;
}

Result<const date::time_zone*> LookupTimeZone(std::string_view name) {
  if (name.empty() || name == "UTC" || name == "Etc/UTC")
    return static_cast<const date::time_zone*>(nullptr);
  try {
    return date::locate_zone(name);
  } catch (const std::exception&) {
    return InvalidArgument("unknown time zone '" + std::string(name) +
                           "' (an IANA name such as "
                           "Europe/Paris)");
  }
}

CronDecision DecideCron(const std::vector<CronSchedule>& schedules, const date::time_zone* zone,
                        bool suspended, ConcurrencyPolicy policy,
                        std::optional<std::int64_t> starting_deadline_seconds, Time created_at,
                        std::optional<Time> last_scheduled, Time now, int active,
                        Time watching_since) {
  CronDecision out;
  const Time from = last_scheduled.value_or(created_at);
  // The latest fire time in (from, now], and the first after now.
  std::optional<Time> due;
  for (const CronSchedule& schedule : schedules) {
    std::optional<Time> t = schedule.NextAfter(from, zone);
    // Many missed fire times (a server down for days): walk them, bounded.
    for (int i = 0; t && *t <= now && i < 100000; ++i) {
      if (!due || *t > *due) due = t;
      t = schedule.NextAfter(*t, zone);
    }
    if (t && *t > now && (!out.next || *t < *out.next)) out.next = t;
  }
  if (!due) return out;
  out.scheduled = due;
  if (suspended) {
    out.skipped = "suspended";
    return out;
  }
  if (*due <= watching_since) {
    // Missed while the controller was down.
    if (!last_scheduled || !starting_deadline_seconds) {
      out.skipped = "missed while the controller was down (no startingDeadlineSeconds)";
      return out;
    }
    if (now - *due >= std::chrono::seconds(*starting_deadline_seconds)) {
      out.skipped = "missed its starting deadline";
      return out;
    }
  }
  if (active > 0 && policy == ConcurrencyPolicy::kForbid) {
    out.skipped = "a workflow it started is still running (concurrencyPolicy: Forbid)";
    return out;
  }
  out.stop_active = active > 0 && policy == ConcurrencyPolicy::kReplace;
  out.run = due;
  return out;
}

nlohmann::json CronStatus(const nlohmann::json& previous, const std::vector<CronRun>& runs) {
  nlohmann::json status = previous.is_object() ? previous : nlohmann::json::object();
  std::set<std::string> was_active;
  if (status.contains("active") && status["active"].is_array()) {
    for (const nlohmann::json& ref : status["active"]) {
      if (ref.is_object() && ref.contains("name") && ref["name"].is_string()) {
        was_active.insert(ref["name"].get<std::string>());
      }
    }
  }
  auto count = [&](const char* key) -> std::int64_t {
    return status.contains(key) && status[key].is_number_integer() ? status[key].get<std::int64_t>()
                                                                   : 0;
  };
  std::int64_t succeeded = count("succeeded"), failed = count("failed");
  nlohmann::json active = nlohmann::json::array();
  for (const CronRun& run : runs) {
    if (!run.finished) {
      active.push_back(
          {{"kind", "Workflow"}, {"name", run.name}, {"apiVersion", std::string(kApiVersion)}});
    } else if (was_active.count(run.name)) {
      ++(run.succeeded ? succeeded : failed);
    }
  }
  status["active"] = std::move(active);
  status["succeeded"] = succeeded;
  status["failed"] = failed;
  status["phase"] = "Active";
  if (!status.contains("conditions")) status["conditions"] = nlohmann::json::array();
  return status;
}

}  // namespace headway::workflow
