#include "api/watch.h"

#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

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
  JobsStream(WatchCache& cache, JobService& service, std::string team, bool compact)
      : cache_(cache), service_(service), team_(std::move(team)), compact_(compact) {}

  bool Next(std::string& out) override {
    if (!started_) {
      started_ = true;
      Snapshot(out);
      keep_alive_.Sent();
      return true;
    }
    std::vector<std::shared_ptr<const WatchCache::Entry>> changed;
    seen_ = cache_.ChangesSince(seen_, team_, changed);
    std::string views;
    json deleted = json::array();
    for (const auto& entry : changed) {
      auto sent = in_snapshot_.find(entry->name);
      if (sent != in_snapshot_.end() && sent->second == entry->version) continue;
      if (entry->deleted) {
        deleted.push_back(entry->name);
        continue;
      }
      if (!views.empty()) views += ',';
      views += compact_ ? entry->row : entry->view;
    }
    // Every version the snapshot used is behind `seen_` now.
    in_snapshot_.clear();
    if (!views.empty()) AppendRaw(out, "update", Opening() + views + "]}");
    if (!deleted.empty()) AppendEvent(out, "deleted", {{"names", deleted}});
    keep_alive_.MaybePing(out);
    return true;
  }

  std::chrono::milliseconds interval() const override { return std::chrono::milliseconds(1000); }

 private:
  // Every job, ended ones too: those the cache holds from it (every active
  // job, and those that ended lately), the rest from the store. Until the
  // cache has had the active jobs once (a server that just started), all of
  // them from the store, with the cache's view where it has one, so later
  // updates go on from there.
  void Snapshot(std::string& out) {
    out += "event: snapshot\ndata: ";
    out += Opening();
    bool first = true;
    auto add = [&](std::string_view text) {
      if (!first) out += ',';
      first = false;
      out += text;
    };
    std::vector<std::shared_ptr<const WatchCache::Entry>> held;
    std::optional<std::uint64_t> version = cache_.Everything(team_, held);
    seen_ = version ? *version : cache_.version();
    for (const auto& entry : held) {
      add(compact_ ? entry->row : entry->view);
      in_snapshot_[entry->name] = entry->version;
    }
    JobFilter rest;
    rest.team = team_;
    rest.ended_only = version.has_value();
    auto jobs = service_.List(rest);
    // Written straight into the response, each job freed once written: the
    // snapshot of 10k jobs is megabytes, and copies of it add up per stream.
    if (jobs.ok()) {
      for (Job& job : *jobs) {
        if (in_snapshot_.count(job.name())) continue;  // sent from the cache above
        if (auto entry = cache_.Find(job.name())) {
          add(compact_ ? entry->row : entry->view);
          in_snapshot_[job.name()] = entry->version;
        } else {
          json view = JobView(service_, job, /*with_spec=*/false);
          add(JsonText(compact_ ? JobRow(view) : view));
        }
        job = Job{};
      }
    }
    out += "]}\n\n";
  }

  // A snapshot's or update's data up to its first job.
  const std::string& Opening() const {
    static const std::string rows = "{\"columns\":" + JsonText(JobRowColumns()) + ",\"rows\":[";
    static const std::string views = "{\"jobs\":[";
    return compact_ ? rows : views;
  }

  static void AppendRaw(std::string& out, std::string_view type, const std::string& data) {
    out += "event: ";
    out += type;
    out += "\ndata: ";
    out += data;
    out += "\n\n";
  }

  WatchCache& cache_;
  JobService& service_;
  const std::string team_;
  const bool compact_;
  bool started_ = false;
  std::uint64_t seen_ = 0;                            // the cache version sent so far
  std::map<std::string, std::uint64_t> in_snapshot_;  // cache versions the snapshot sent
  KeepAlive keep_alive_;
};

json FiniteOrNull(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

class JobStream final : public ResponseStream {
 public:
  JobStream(WatchCache& cache, JobService& service, std::string name, std::size_t buckets)
      : cache_(cache), service_(service), name_(std::move(name)), buckets_(buckets) {}

  bool Next(std::string& out) override {
    // The store only when the job's view changed, or now and then for events
    // that change no view.
    auto entry = cache_.Find(name_);
    std::uint64_t version = entry ? entry->version : 0;
    auto now = SteadyClock::now();
    if (started_ && version == seen_version_ && now - last_look_ < kLookAnyway) {
      keep_alive_.MaybePing(out);
      return true;
    }
    seen_version_ = version;
    last_look_ = now;
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
    auto chart = service_.MetricChartOf(name_, metric, buckets_);
    if (!chart.ok() || chart->count == 0) return;
    json steps = json::array(), values = json::array();
    for (const MetricPoint& p : chart->points) {
      steps.push_back(p.step);
      values.push_back(FiniteOrNull(p.value));
    }
    for (const MetricBucket& b : chart->buckets) {
      steps.push_back(b.last_step);
      values.push_back(FiniteOrNull(b.last));
    }
    last_step_[metric] =
        chart->buckets.empty() ? chart->points.back().step : chart->buckets.back().last_step;
    metrics[metric] = {{"steps", std::move(steps)}, {"values", std::move(values)}};
  }

  static constexpr auto kLookAnyway = std::chrono::seconds(5);

  WatchCache& cache_;
  JobService& service_;
  const std::string name_;
  const std::size_t buckets_;
  std::uint64_t seen_version_ = 0;
  SteadyClock::time_point last_look_{};
  bool started_ = false;
  std::string last_view_;
  std::int64_t last_event_ = 0;
  std::map<std::string, std::int64_t> last_step_;  // per metric: the last step sent
  KeepAlive keep_alive_;
};

}  // namespace

std::shared_ptr<ResponseStream> WatchJobs(WatchCache& cache, JobService& service, std::string team,
                                          bool compact) {
  return std::make_shared<JobsStream>(cache, service, std::move(team), compact);
}

Result<std::shared_ptr<ResponseStream>> WatchJob(WatchCache& cache, JobService& service,
                                                 const std::string& name, std::size_t buckets) {
  auto job = service.Get(name);
  if (!job.ok()) return job.status();
  return std::shared_ptr<ResponseStream>(
      std::make_shared<JobStream>(cache, service, name, buckets));
}

}  // namespace headway::api
