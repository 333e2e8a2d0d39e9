#include "server/progress_tracker.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <span>

namespace headway {
namespace {

// A report whose own time is this far off the server's is told about.
constexpr double kClockSkewS = 60;

template <typename Point, typename Key>
void InsertSorted(std::vector<Point>& v, const Point& p, Key key, std::size_t cap) {
  auto it = std::lower_bound(v.begin(), v.end(), key(p),
                             [&](const Point& a, std::int64_t k) { return key(a) < k; });
  if (it != v.end() && key(*it) == key(p)) {
    *it = p;  // a repeated step replaces the earlier report
  } else if (it == v.begin() && v.size() >= cap) {
    return;  // older than everything we keep
  } else {
    // Past `cap` the oldest points go in batches of cap/8: one shift of the
    // tail per cap/8 reports, not one per report (a full 4096-step tail
    // moved 230 KB on every report), and the capacity stays cap + cap/8
    // instead of doubling to 2 * cap.
    std::size_t slack = std::max<std::size_t>(1, cap / 8);
    if (v.size() == cap) {
      auto offset = it - v.begin();
      v.reserve(cap + slack);
      it = v.begin() + offset;
    }
    v.insert(it, p);
    if (v.size() > cap + slack - 1) {
      v.erase(v.begin(), v.begin() + static_cast<long>(v.size() - cap));
    }
  }
}

}  // namespace

ProgressTracker::ProgressTracker(Store& store, progress::HealthOptions health_options,
                                 double plateau_window, progress::ConfirmationOptions confirmation)
    : store_(store),
      health_options_(health_options),
      plateau_window_(plateau_window),
      confirmation_(confirmation) {}

void ProgressTracker::AddStep(State& s, const StepPoint& p) {
  bool newest = s.steps.empty() || p.step >= s.steps.back().step;
  InsertSorted(
      s.steps, p, [](const StepPoint& x) { return x.step; }, kStepTail);
  if (newest) {
    if (p.total_steps) s.total_steps = p.total_steps;
    if (p.epoch) s.epoch = p.epoch;
    if (p.total_epochs) s.total_epochs = p.total_epochs;
  }
}

void ProgressTracker::AddMetric(State& s, const std::string& name, const MetricPoint& p) {
  auto it = s.latest.find(name);
  if (it == s.latest.end() || p.step >= it->second.step) s.latest[name] = p;
  progress::MetricSample sample{p.step, p.value};
  auto by_step = [](const progress::MetricSample& x) { return x.step; };
  if (name == "loss") {
    InsertSorted(s.loss, sample, by_step, kLossTail);
    s.loss_history.Add(p.step, p.value);
  } else if (name == "eval_loss") {
    InsertSorted(s.eval_loss, sample, by_step, kLossTail);
  } else if (name == "grad_norm") {
    InsertSorted(s.grad_norm, sample, by_step, kLossTail);
  }
  if (!s.objective_metric.empty() && name == s.objective_metric) {
    InsertSorted(s.objective, sample, by_step, kLossTail);
  }
}

const std::vector<progress::MetricSample>& ProgressTracker::DefaultObjective(const State& s) {
  return s.eval_loss.empty() ? s.loss : s.eval_loss;
}

void ProgressTracker::FollowObjective(const Job& job, State& s) {
  const std::string& name = job.spec.policies.objective;
  if (name.empty() || name == s.objective_metric) return;
  s.objective_metric = name;
  s.objective.clear();
  if (auto tail = store_.RecentMetric(job.name(), name, kLossTail); tail.ok()) {
    for (const MetricPoint& p : *tail) s.objective.push_back({p.step, p.value});
  }
}

ProgressTracker::State& ProgressTracker::Load(const std::string& job) {
  auto it = jobs_.find(job);
  if (it != jobs_.end()) return it->second;
  State& s = jobs_[job];
  // Rebuild from the durable series (after a restart, or for an old job).
  if (auto steps = store_.RecentSteps(job, kStepTail); steps.ok()) {
    for (const StepPoint& p : *steps) AddStep(s, p);
    // When it arrived is not stored: its own time (Classify keeps it from
    // lying ahead of the server's clock).
    if (!steps->empty()) s.last_report_at = steps->back().time;
  }
  if (auto names = store_.MetricNames(job); names.ok()) {
    for (const std::string& name : *names) {
      // The whole loss series once, for where the run started and the best it held.
      if (name == "loss") {
        (void)store_.ScanMetric(job, name,
                                [&](const MetricPoint& p) { s.loss_history.Add(p.step, p.value); });
      }
      const bool tail = name == "loss" || name == "eval_loss" || name == "grad_norm";
      // (The loss's history already holds these steps: adding them again is a no-op.)
      if (auto points = store_.RecentMetric(job, name, tail ? kLossTail : 1); points.ok()) {
        for (const MetricPoint& p : *points) AddMetric(s, name, p);
      }
    }
  }
  return s;
}

namespace {

// Drops the values of series that would take a job holding `known` series
// past `max_series`, keeping the first new ones that fit.
std::set<std::string> DropSeries(const std::map<std::string, MetricPoint>& known_series,
                                 std::vector<ProgressReport>& reports, std::size_t max_series) {
  std::set<std::string> admitted, dropped;
  for (ProgressReport& r : reports) {
    for (auto it = r.metrics.begin(); it != r.metrics.end();) {
      const std::string& name = it->first;
      bool known = known_series.count(name) || admitted.count(name);
      if (!known && known_series.size() + admitted.size() < max_series) {
        admitted.insert(name);
        known = true;
      }
      if (known) {
        ++it;
      } else {
        dropped.insert(name);
        it = r.metrics.erase(it);
      }
    }
  }
  return dropped;
}

}  // namespace

std::vector<std::uint64_t> ProgressTracker::Costs(const std::string& job, const State& s,
                                                  const std::vector<ProgressReport>& reports) {
  std::vector<std::uint64_t> costs(reports.size());
  // Older than the tail. The tail holds every stored step from its first
  // on (it is loaded with the newest stored steps, fed every stored report,
  // and trimmed from its oldest end), so a step after its first that is not
  // in it was never stored: reports that overtake one another on several
  // connections need no lookup, which would file the store's report log.
  std::vector<std::int64_t> unsure;
  auto in_tail = [&](std::int64_t step) {
    auto it = std::lower_bound(s.steps.begin(), s.steps.end(), step,
                               [](const StepPoint& p, std::int64_t k) { return p.step < k; });
    return it != s.steps.end() && it->step == step;
  };
  for (std::size_t i = 0; i < reports.size(); ++i) {
    const ProgressReport& r = reports[i];
    if (in_tail(r.step)) continue;  // stored: reporting it again replaces it
    costs[i] = 1 + r.metrics.size();
    if (!s.steps.empty() && r.step < s.steps.front().step) unsure.push_back(r.step);
  }
  // Old steps (a log rescanned after a restart, a late backfill) are looked up.
  if (!unsure.empty()) {
    auto stored = store_.StoredSteps(job, unsure);
    if (stored.ok() && !stored->empty()) {
      for (std::size_t i = 0; i < reports.size(); ++i) {
        if (stored->count(reports[i].step)) costs[i] = 0;
      }
    }
  }
  return costs;
}

std::uint64_t& ProgressTracker::Points(const std::string& job, State& s) {
  if (!s.points) {
    auto n = store_.CountProgressPoints(job);
    // Unreadable: count from here on rather than refuse every report.
    s.points = n.ok() ? *n : 0;
  }
  return *s.points;
}

Status ProgressTracker::Admit(const std::string& job, const std::vector<ProgressReport>& reports,
                              const IngestLimits& limits) {
  std::lock_guard lock(mu_);
  State& s = Load(job);
  std::set<std::string> fresh;
  for (const ProgressReport& r : reports) {
    for (const auto& [name, value] : r.metrics) {
      if (!s.latest.count(name)) fresh.insert(name);
    }
  }
  if (s.latest.size() + fresh.size() > limits.max_series) {
    ++s.refused_series_requests;
    return Status(InvalidArgument("job '" + job + "' would have " +
                                  std::to_string(s.latest.size() + fresh.size()) +
                                  " metric series; the limit is " +
                                  std::to_string(limits.max_series))
                      .WithField("metrics"));
  }
  std::uint64_t& points = Points(job, s);
  std::uint64_t adding = 0;
  for (std::uint64_t cost : Costs(job, s, reports)) adding += cost;
  if (points + adding > limits.max_points) {
    s.refused_points += adding;
    return Status(StatusCode::kPayloadTooLarge,
                  "job '" + job + "' would store " + std::to_string(points + adding) +
                      " progress points; the limit is " + std::to_string(limits.max_points) +
                      " per job (--max-points-per-job); nothing of this request was stored");
  }
  points += adding;
  return Status::Ok();
}

void ProgressTracker::DropOverLimits(const std::string& job, std::vector<ProgressReport>& reports,
                                     const IngestLimits& limits) {
  std::lock_guard lock(mu_);
  State& s = Load(job);
  for (const std::string& name : DropSeries(s.latest, reports, limits.max_series)) {
    if (s.dropped_series.size() < 1000) s.dropped_series.insert(name);
  }
  if (reports.empty()) return;
  std::uint64_t& points = Points(job, s);
  const std::vector<std::uint64_t> costs = Costs(job, s, reports);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    ProgressReport& r = reports[i];
    std::uint64_t cost = costs[i];
    if (points + cost > limits.max_points) {
      ++s.dropped_reports;
      s.dropped_points += cost;
      continue;
    }
    points += cost;
    if (&reports[kept] != &r) reports[kept] = std::move(r);
    ++kept;
  }
  reports.resize(kept);
}

std::vector<std::string> ProgressTracker::TakeWarnings(const std::string& job,
                                                       const IngestLimits& limits) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return {};
  State& s = it->second;
  std::vector<std::string> out;
  if (!s.said_series && (!s.dropped_series.empty() || s.refused_series_requests > 0)) {
    s.said_series = true;
    std::string text = "metric series beyond the limit of " + std::to_string(limits.max_series) +
                       " per job are not stored:";
    if (!s.dropped_series.empty()) {
      text = "dropped HEADWAY output lines' values of " + std::to_string(s.dropped_series.size()) +
             " metric series beyond the limit of " + std::to_string(limits.max_series) +
             " per job (first: '" + *s.dropped_series.begin() + "')";
      if (s.refused_series_requests > 0) text += ";";
    }
    if (s.refused_series_requests > 0) {
      text += " refused " + std::to_string(s.refused_series_requests) +
              " progress request(s) (400) that would pass it";
    }
    out.push_back(std::move(text));
  }
  if (!s.said_points && (s.dropped_points > 0 || s.refused_points > 0)) {
    s.said_points = true;
    std::string text = "progress beyond the limit of " + std::to_string(limits.max_points) +
                       " points per job (--max-points-per-job) is not stored:";
    if (s.dropped_reports > 0) {
      text += " dropped " + std::to_string(s.dropped_reports) + " HEADWAY output line report(s) (" +
              std::to_string(s.dropped_points) + " points)";
      if (s.refused_points > 0) text += ";";
    }
    if (s.refused_points > 0) {
      text += " refused reports of " + std::to_string(s.refused_points) + " points (413)";
    }
    text += "; later reports over it are dropped without another event";
    out.push_back(std::move(text));
  }
  if (!s.said_clock_skew && s.clock_skew_s) {
    s.said_clock_skew = true;
    const double skew = *s.clock_skew_s;
    out.push_back("the job's report times are " + std::to_string(std::llround(std::abs(skew))) +
                  " s " + (skew > 0 ? "ahead of" : "behind") +
                  " the server's clock: they are used for rates only; staleness is measured "
                  "from when reports arrive");
  }
  return out;
}

void ProgressTracker::Apply(const ProgressBatch& batch) {
  charts_.Apply(batch);
  std::lock_guard lock(mu_);
  State& s = Load(batch.job);
  for (const ProgressReport& r : batch.reports) {
    AddStep(s, {r.step, r.time.value_or(batch.received), r.total_steps, r.epoch, r.total_epochs});
    ++s.reports;
    if (r.time) {
      // Backfilled history is old on purpose; a clock off is only told
      // apart by reports that claim to be from the future or are late
      // while being the newest step.
      const double skew = ToUnixSeconds(*r.time) - ToUnixSeconds(batch.received);
      const bool newest = r.step >= s.steps.back().step;
      if (std::abs(skew) > kClockSkewS && (skew > 0 || newest) &&
          (!s.clock_skew_s || std::abs(skew) > std::abs(*s.clock_skew_s))) {
        s.clock_skew_s = skew;
      }
    }
    for (const auto& [name, value] : r.metrics) AddMetric(s, name, {r.step, value});
    if (auto loss = r.metrics.find("loss"); loss != r.metrics.end()) {
      auto non_finite = [&](const char* name) {
        auto it = r.metrics.find(name);
        return it != r.metrics.end() && !std::isfinite(it->second);
      };
      if (progress::LossSaysNaN(loss->second, non_finite("grad_norm"), non_finite("eval_loss"))) {
        s.nan_at = r.step;
      }
    } else if (s.loss.empty() && r.metrics.count("eval_loss") &&
               !std::isfinite(r.metrics.at("eval_loss"))) {
      s.nan_at = r.step;  // no loss: the held-out loss stands in for it
    }
    if (r.percent) s.reported_percent = r.percent;
    if (r.remaining_seconds) {
      s.reported_eta = r.remaining_seconds;
      s.reported_eta_at = batch.received;
    }
  }
  s.last_report_at = batch.received;
}

std::vector<progress::StepSample> ProgressTracker::Samples(const Job& job, const State& s) {
  // Rates, ETA and stalls are of the current attempt: a job requeued after a
  // preemption or restart gets a fresh stall clock, and the gap while it
  // waited in the queue does not count as slow training.
  std::vector<progress::StepSample> samples;
  samples.reserve(s.steps.size());
  // (Only after a requeue: the first attempt keeps reports however they are
  // timestamped, e.g. backfilled history.)
  const double attempt_start_s =
      job.attempt() > 0 && job.started_at ? ToUnixSeconds(*job.started_at) : -1e300;
  // The newest kStepTail steps (the tail may hold a few more between trims).
  auto first =
      s.steps.size() > kStepTail ? s.steps.end() - static_cast<long>(kStepTail) : s.steps.begin();
  for (const StepPoint& p : std::span(first, s.steps.end())) {
    double t = ToUnixSeconds(p.time);
    if (t >= attempt_start_s) samples.push_back({p.step, t});
  }
  return samples;
}

progress::HealthVerdict ProgressTracker::Classify(const Job& job, State& s, double now_s,
                                                  bool ended) {
  std::vector<progress::StepSample> samples = Samples(job, s);
  progress::HealthInput in;
  in.now_s = now_s;
  in.started_at_s = job.started_at ? ToUnixSeconds(*job.started_at) : now_s;
  in.steps = samples;
  in.loss = s.loss;
  in.grad_norm = s.grad_norm;
  in.eval_loss = s.eval_loss;
  in.loss_history = &s.loss_history;
  FollowObjective(job, s);
  const std::string& named = job.spec.policies.objective;
  // (A string_view on every branch: a std::string branch would make the
  // others temporaries, gone by the time the name is read.)
  in.objective_name = !named.empty()        ? std::string_view(named)
                      : s.eval_loss.empty() ? std::string_view("loss")
                                            : std::string_view("eval_loss");
  in.objective = !named.empty() ? s.objective : DefaultObjective(s);
  switch (job.spec.policies.objective_goal) {
    case MetricGoal::kMinimize:
      in.objective_goal = progress::Goal::kMinimize;
      break;
    case MetricGoal::kMaximize:
      in.objective_goal = progress::Goal::kMaximize;
      break;
    case MetricGoal::kAuto:
      in.objective_goal = progress::GoalOfMetric(in.objective_name);
      break;
  }
  if (s.last_report_at) {
    // A stored time from a client clock ahead would hide a stall that began
    // before a restart: it counts from no later than now.
    if (ToUnixSeconds(*s.last_report_at) > now_s) {
      s.last_report_at = FromUnixMillis(static_cast<std::int64_t>(now_s * 1000));
    }
    in.last_report_age_s = now_s - ToUnixSeconds(*s.last_report_at);
  }
  progress::HealthOptions options = health_options_;
  if (plateau_window_ > 0 && s.total_steps) {
    options.plateau_window_steps = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(plateau_window_ * static_cast<double>(*s.total_steps)));
  }
  progress::ConfirmationOptions confirmation = confirmation_;
  if (ended) confirmation.enter_seconds = confirmation.leave_seconds = 0;
  progress::HealthVerdict raw = progress::ClassifyHealth(in, options);
  if (s.nan_at && !raw.immediate) {
    const std::string nan = "loss was NaN at step " + std::to_string(*s.nan_at);
    if (raw.health == Health::kDiverging) {
      // Finite losses that rose after the NaN: a rise alone would wait for
      // confirmation, the NaN before it needs none.
      raw.immediate = true;
      raw.reason = nan + ", then " + raw.reason;
    } else {
      s.confirmation.Update({Health::kDiverging, nan, /*immediate=*/true, std::nullopt}, s.reports,
                            now_s, confirmation);
    }
  }
  s.nan_at.reset();
  return s.confirmation.Update(raw, s.reports, now_s, confirmation);
}

progress::HealthVerdict ProgressTracker::FinalVerdict(const Job& job, Time now,
                                                      std::optional<std::int64_t>* last_step) {
  std::lock_guard lock(mu_);
  State& s = Load(job.name());
  if (last_step != nullptr && !s.steps.empty()) *last_step = s.steps.back().step;
  std::vector<progress::StepSample> samples = Samples(job, s);
  // As of the last report: the end of a run is not a stall.
  const std::optional<Time> arrived = s.last_report_at;
  double as_of = arrived ? ToUnixSeconds(*arrived) : ToUnixSeconds(now);
  return Classify(job, s, as_of, /*ended=*/true);
}

void ProgressTracker::Forget(const std::string& job) {
  charts_.Forget(job);
  std::lock_guard lock(mu_);
  jobs_.erase(job);
}

ProgressView ProgressTracker::View(const Job& job, Time now) {
  std::lock_guard lock(mu_);
  State& s = Load(job.name());
  ProgressView v;
  double now_s = ToUnixSeconds(now);
  std::vector<progress::StepSample> samples = Samples(job, s);
  // As in Samples: only a requeued attempt starts a fresh series.
  const double attempt_start_s =
      job.attempt() > 0 && job.started_at ? ToUnixSeconds(*job.started_at) : -1e300;

  if (!s.steps.empty()) {
    v.step = s.steps.back().step;
    v.total_steps = s.total_steps;
    v.epoch = s.epoch;
    v.total_epochs = s.total_epochs;
    v.last_report_at = s.last_report_at;
  }
  // From reports only: elapsed time over a time limit is not progress.
  v.percent = progress::PercentComplete(v.step, v.total_steps, v.epoch, v.total_epochs);
  if (!v.percent) v.percent = s.reported_percent;
  if (job.state == JobState::kSucceeded) v.percent = 100.0;
  for (const auto& [name, point] : s.latest) v.metrics[name] = point.value;
  if (auto it = s.latest.find("samples_per_second"); it != s.latest.end()) {
    v.samples_per_second = it->second.value;
  }
  bool running = job.state == JobState::kRunning;
  if (running && v.total_steps) {
    progress::EtaEstimate eta = progress::EstimateEta(samples, *v.total_steps, now_s);
    v.eta_seconds = eta.eta_seconds;
    if (eta.steps_per_second > 0) v.steps_per_second = eta.steps_per_second;
  }
  if (running && s.reported_eta && ToUnixSeconds(s.reported_eta_at) >= attempt_start_s) {
    v.eta_seconds = progress::ChooseEta(v.eta_seconds, samples.size(), s.reported_eta,
                                        ToUnixSeconds(s.reported_eta_at), now_s);
  }
  if (!v.steps_per_second && samples.size() >= 2) {
    double dt = samples.back().time_s - samples.front().time_s;
    if (dt > 0)
      v.steps_per_second = static_cast<double>(samples.back().step - samples.front().step) / dt;
  }
  if (running) {
    progress::HealthVerdict verdict = Classify(job, s, now_s);
    v.health = verdict.health;
    v.health_reason = verdict.reason;
    v.health_evidence = verdict.evidence;
    // A stalled job has no credible ETA: the last rate no longer holds.
    if (v.health == Health::kStalled) v.eta_seconds.reset();
  } else if (IsTerminal(job.state)) {
    // The verdict the run ended with (lifecycle::FinalHealth), and how long
    // ago its last report came, as of now (what was said of a live run,
    // "reported 0.0s ago", no longer holds).
    v.health = job.health;
    v.health_reason = job.health_reason;
    if (v.last_report_at && v.step) {
      const std::string ago =
          "last report (step " + std::to_string(*v.step) + ") " +
          FormatDuration(std::max(Duration(0),
                                  std::chrono::duration_cast<Duration>(now - *v.last_report_at))) +
          " ago";
      if (job.health == Health::kProgressing) {
        v.health_reason = "ended making headway; " + ago;
      } else {
        v.health_reason += (v.health_reason.empty() ? "" : "; ") + ago;
      }
    }
  } else if (!s.steps.empty()) {
    v.health = Health::kUnknown;
    v.health_reason = "not running";
  }
  if (IsTerminal(job.state) && s.steps.size() > 1) {
    // Tails only serve ETA and health, which a finished job no longer has.
    s.steps.erase(s.steps.begin(), s.steps.end() - 1);
    s.steps.shrink_to_fit();
    s.loss.clear();
    s.loss.shrink_to_fit();
    for (auto* tail : {&s.objective, &s.eval_loss, &s.grad_norm}) {
      tail->clear();
      tail->shrink_to_fit();
    }
  }
  return v;
}

}  // namespace headway
