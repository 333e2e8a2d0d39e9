#include "server/series_summaries.h"

#include <limits>

namespace headway {

void SeriesSummaries::Apply(const ProgressBatch& batch) {
  std::lock_guard lock(mu_);
  auto job = jobs_.find(batch.job);
  if (job == jobs_.end()) return;
  for (const ProgressReport& r : batch.reports) {
    for (const auto& [name, value] : r.metrics) {
      auto it = job->second.find(name);
      if (it == job->second.end()) continue;
      Entry& e = it->second;
      if (e.building) {
        if (!e.pending.empty() && r.step <= e.pending.back().step) e.spoiled = true;
        e.pending.push_back({r.step, value});
      } else if (!e.summary.Append({r.step, value})) {
        job->second.erase(it);
      }
    }
  }
  if (job->second.empty()) jobs_.erase(job);
}

void SeriesSummaries::Forget(const std::string& job) {
  std::lock_guard lock(mu_);
  jobs_.erase(job);
}

std::size_t SeriesSummaries::size() const {
  std::lock_guard lock(mu_);
  return Entries();
}

std::size_t SeriesSummaries::Entries() const {
  std::size_t n = 0;
  for (const auto& [job, series] : jobs_) n += series.size();
  return n;
}

Result<std::optional<MetricChart>> SeriesSummaries::Chart(const std::string& job,
                                                          const std::string& metric,
                                                          std::size_t buckets, const Scan& scan) {
  auto answer = [&](const SeriesSummary& summary) -> std::optional<MetricChart> {
    auto cells = summary.Chart(buckets);
    if (!cells) return std::nullopt;
    MetricChart chart;
    chart.count = summary.points();
    chart.buckets = std::move(*cells);
    return chart;
  };
  {
    std::lock_guard lock(mu_);
    auto& series = jobs_[job];
    auto [it, fresh] = series.try_emplace(metric);
    Entry& e = it->second;
    if (!fresh) {
      if (e.building) return std::optional<MetricChart>();
      e.used = ++reads_;
      return answer(e.summary);
    }
    e.building = true;
    e.used = ++reads_;
  }
  // The scan runs unlocked; reports committed meanwhile wait in `pending`.
  SeriesSummary built;
  bool ordered = true;
  Status scanned = scan([&](const MetricPoint& p) {
    if (!built.Append(p)) ordered = false;
  });
  std::lock_guard lock(mu_);
  auto job_it = jobs_.find(job);
  if (job_it == jobs_.end() || !job_it->second.contains(metric)) {
    // Forgotten meanwhile (the job was deleted): answer, keep nothing.
    if (!scanned.ok()) return scanned;
    return answer(built);
  }
  auto it = job_it->second.find(metric);
  Entry& e = it->second;
  // A report committed before the scan read its step is in both: every
  // pending point not past the scanned series was scanned.
  for (const MetricPoint& p : e.pending) {
    if (built.points() > 0 && p.step <= built.cells().back().last_step) continue;
    built.Append(p);
  }
  const bool keep = scanned.ok() && ordered && !e.spoiled;
  std::optional<MetricChart> chart = answer(built);
  if (keep) {
    e.summary = std::move(built);
    e.pending.clear();
    e.pending.shrink_to_fit();
    e.building = false;
    EvictOverCapacity();
  } else {
    job_it->second.erase(it);
    if (job_it->second.empty()) jobs_.erase(job_it);
  }
  if (!scanned.ok()) return scanned;
  return chart;
}

void SeriesSummaries::EvictOverCapacity() {
  for (std::size_t entries = Entries(); entries > max_series_; --entries) {
    std::uint64_t oldest = std::numeric_limits<std::uint64_t>::max();
    std::string oldest_job, oldest_metric;
    for (const auto& [job, series] : jobs_) {
      for (const auto& [metric, e] : series) {
        if (!e.building && e.used < oldest) {
          oldest = e.used;
          oldest_job = job;
          oldest_metric = metric;
        }
      }
    }
    if (oldest == std::numeric_limits<std::uint64_t>::max()) return;
    auto job = jobs_.find(oldest_job);
    job->second.erase(oldest_metric);
    if (job->second.empty()) jobs_.erase(job);
  }
}

}  // namespace headway
