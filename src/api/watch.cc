#include "api/watch.h"

#include <chrono>
#include <cmath>
#include <map>
#include <set>

#include "api/job_json.h"

namespace headway::api {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr auto kKeepAlive = std::chrono::seconds(15);
// More new points than this in one tick: send the series again, downsampled.
constexpr std::size_t kMaxAppend = 2000;

void AppendEvent(std::string& out, std::string_view type, const json& data) {
  out += "event: ";
  out += type;
  out += "\ndata: ";
  out += JsonText(data);
  out += "\n\n";
}

// Keeps a quiet stream alive through proxies and lets the server notice a
// client that went away.
class KeepAlive {
 public:
  void Sent() { last_ = SteadyClock::now(); }
  void MaybePing(std::string& out) {
    if (!out.empty()) {
      Sent();
    } else if (SteadyClock::now() - last_ >= kKeepAlive) {
      out += ": ping\n\n";
      Sent();
    }
  }

 private:
  SteadyClock::time_point last_ = SteadyClock::now();
};

class JobsStream final : public ResponseStream {
 public:
  JobsStream(JobService& service, std::string team) : service_(service), team_(std::move(team)) {}

  bool Next(std::string& out) override {
    if (!started_) {
      started_ = true;
      JobFilter all;
      all.team = team_;
      auto jobs = service_.List(all);
      json views = json::array();
      if (jobs.ok()) {
        for (const Job& job : *jobs) views.push_back(Remember(job));
      }
      AppendEvent(out, "snapshot", {{"jobs", std::move(views)}});
      keep_alive_.Sent();
      return true;
    }
    // Only jobs that can still change: the active ones, the ones submitted
    // since the last look, and those that were active then (they may have ended).
    std::map<std::string, Job> candidates;
    auto take = [&](const JobFilter& filter) {
      auto jobs = service_.List(filter);
      if (!jobs.ok()) return;
      for (Job& job : *jobs) candidates.emplace(job.name(), std::move(job));
    };
    JobFilter active;
    active.team = team_;
    active.active_only = true;
    take(active);
    JobFilter fresh;
    fresh.team = team_;
    fresh.submitted_after = max_seq_;
    take(fresh);
    for (const std::string& name : active_) {
      if (candidates.count(name)) continue;
      auto job = service_.Get(name);
      if (job.ok()) candidates.emplace(name, std::move(job.value()));
    }
    active_.clear();
    json changed = json::array();
    for (auto& [name, job] : candidates) {
      std::string before = last_[name];
      json view = Remember(job);
      if (last_[name] != before) changed.push_back(std::move(view));
    }
    if (!changed.empty()) AppendEvent(out, "update", {{"jobs", std::move(changed)}});
    keep_alive_.MaybePing(out);
    return true;
  }

  std::chrono::milliseconds interval() const override { return std::chrono::milliseconds(1000); }

 private:
  json Remember(const Job& job) {
    json view = JobView(service_, job);
    // The list has no use for the spec, the bulk of a view: 10k jobs stream in
    // a fraction of the bytes. The job's own stream carries it.
    view.erase("spec");
    last_[job.name()] = JsonText(view);
    if (!IsTerminal(job.state)) active_.insert(job.name());
    max_seq_ = std::max(max_seq_, job.submit_seq);
    return view;
  }

  JobService& service_;
  const std::string team_;
  bool started_ = false;
  std::int64_t max_seq_ = 0;
  std::set<std::string> active_;
  std::map<std::string, std::string> last_;  // name -> serialised view
  KeepAlive keep_alive_;
};

json FiniteOrNull(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

class JobStream final : public ResponseStream {
 public:
  JobStream(JobService& service, std::string name, std::size_t buckets)
      : service_(service), name_(std::move(name)), buckets_(buckets) {}

  bool Next(std::string& out) override {
    auto job = service_.Get(name_);
    if (!job.ok()) return false;  // deleted: end the stream
    json view = JobView(service_, *job);
    std::string serialised = JsonText(view);
    if (serialised != last_view_) {
      last_view_ = std::move(serialised);
      AppendEvent(out, "job", view);
    }
    SendSeries(out);
    auto events = service_.Events(name_, last_event_);
    if (events.ok() && !events->empty()) {
      json items = json::array();
      for (const JobEvent& e : *events) items.push_back(EventToJson(e));
      last_event_ = events->back().id;
      AppendEvent(out, "events", {{"events", std::move(items)}});
    }
    keep_alive_.MaybePing(out);
    return true;
  }

  std::chrono::milliseconds interval() const override { return std::chrono::milliseconds(500); }

 private:
  void SendSeries(std::string& out) {
    auto names = service_.MetricNames(name_);
    if (!names.ok()) return;
    bool reset = !started_;
    json metrics = json::object();
    for (const std::string& metric : *names) {
      auto known = last_step_.find(metric);
      if (known == last_step_.end() || reset) {
        Full(metric, metrics);
        continue;
      }
      auto fresh = service_.MetricSeriesAfter(name_, metric, known->second, kMaxAppend + 1);
      if (!fresh.ok() || fresh->empty()) continue;
      if (fresh->size() > kMaxAppend) {
        // Too many to append point by point: start the charts over.
        reset = true;
        break;
      }
      json steps = json::array(), values = json::array();
      for (const MetricPoint& p : *fresh) {
        steps.push_back(p.step);
        values.push_back(FiniteOrNull(p.value));
      }
      known->second = fresh->back().step;
      metrics[metric] = {{"steps", std::move(steps)}, {"values", std::move(values)}};
    }
    if (reset && started_) {
      metrics = json::object();
      for (const std::string& metric : *names) Full(metric, metrics);
    }
    started_ = true;
    if (reset || !metrics.empty()) {
      AppendEvent(out, "series", {{"reset", reset}, {"metrics", std::move(metrics)}});
    }
  }

  // One metric downsampled to at most buckets_ points: each bucket's last value
  // at its last step (the chart's points), so the stream can go on from there.
  void Full(const std::string& metric, json& metrics) {
    auto points = service_.MetricSeries(name_, metric);
    if (!points.ok() || points->empty()) return;
    json steps = json::array(), values = json::array();
    if (points->size() <= buckets_) {
      for (const MetricPoint& p : *points) {
        steps.push_back(p.step);
        values.push_back(FiniteOrNull(p.value));
      }
    } else {
      for (const MetricBucket& b : Downsample(*points, buckets_)) {
        steps.push_back(b.last_step);
        values.push_back(FiniteOrNull(b.last));
      }
    }
    last_step_[metric] = points->back().step;
    metrics[metric] = {{"steps", std::move(steps)}, {"values", std::move(values)}};
  }

  JobService& service_;
  const std::string name_;
  const std::size_t buckets_;
  bool started_ = false;
  std::string last_view_;
  std::int64_t last_event_ = 0;
  std::map<std::string, std::int64_t> last_step_;  // per metric: the last step sent
  KeepAlive keep_alive_;
};

}  // namespace

std::shared_ptr<ResponseStream> WatchJobs(JobService& service, std::string team) {
  return std::make_shared<JobsStream>(service, std::move(team));
}

Result<std::shared_ptr<ResponseStream>> WatchJob(JobService& service, const std::string& name,
                                                 std::size_t buckets) {
  auto job = service.Get(name);
  if (!job.ok()) return job.status();
  return std::shared_ptr<ResponseStream>(std::make_shared<JobStream>(service, name, buckets));
}

}  // namespace headway::api
