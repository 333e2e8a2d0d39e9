// Elastic jobs in the control loop: what the sizing decision (sched/elastic.h)
// needs to know of each running elastic job, measured here from its reports,
// and the resizes it decides, stored before they are carried out.
#include <algorithm>
#include <set>

#include "server/job_controller.h"

namespace headway {

namespace {

// GPUs a shrunk rank group may still hold while its agent ends: they go to
// no other job before this long after the shrink (its grace, and the slack
// of a loaded machine).
constexpr Duration kElasticReleaseSlack = std::chrono::seconds(5);

// A size is measured once its reports span this long, or this many steps.
constexpr Duration kElasticMeasureSpan = std::chrono::seconds(5);
constexpr std::int64_t kElasticMeasureSteps = 20;

bool GrowsInRanks(const Job& job) {
  return job.spec.elastic && !job.spec.elastic->ByNodes() &&
         job.spec.resources.gpus_per_process > 0;
}

}  // namespace

std::vector<sched::ElasticJob> JobController::ElasticJobs(const std::vector<Job>& active,
                                                          const std::string& node,
                                                          std::vector<bool>& used, Work& work,
                                                          Time now) {
  std::vector<sched::ElasticJob> out;
  std::set<std::string> seen;
  for (const Job& job : active) {
    if (!GrowsInRanks(job) || job.state != JobState::kRunning || job.executor_handle.empty())
      continue;
    seen.insert(job.name());
    const int per_unit = job.spec.resources.gpus_per_process;
    const int units = static_cast<int>(job.gpu_ids.size()) / per_unit;
    ElasticMemo& memo = elastic_[job.name()];
    if (memo.handle != job.executor_handle) {
      memo = ElasticMemo{};
      memo.handle = job.executor_handle;
      memo.units = units;
      memo.last_change = job.started_at.value_or(now);
      // First seen above its launch size: this server restarted (or took
      // over) after storing a growth, maybe before handing it over. The
      // grant is handed over again; the supervisor ignores a size it has.
      if (units > job.spec.elastic->min_ranks) QueueResize(job, work);
    }
    // Measured from the first report at this size: the restart it cost,
    // then its steps per second.
    ProgressView view = tracker_.View(job, now);
    if (view.step && view.last_report_at && *view.last_report_at > memo.last_change) {
      if (!memo.anchor) {
        memo.anchor = {*view.step, *view.last_report_at};
        memo.restart_cost = *view.last_report_at - memo.last_change;
      } else if (*view.step > memo.anchor->first) {
        const Duration span = *view.last_report_at - memo.anchor->second;
        const std::int64_t steps = *view.step - memo.anchor->first;
        if (span >= kElasticMeasureSpan ||
            (steps >= kElasticMeasureSteps && span > Duration::zero())) {
          memo.throughput[units] =
              static_cast<double>(steps) / std::chrono::duration<double>(span).count();
        }
      }
    }
    if (!memo.releasing.empty() && now >= memo.released_at) memo.releasing.clear();
    for (int id : memo.releasing) {
      if (id >= 0 && id < options_.total_gpus) used[static_cast<std::size_t>(id)] = true;
    }
    sched::ElasticJob e;
    e.name = job.name();
    e.size = units;
    e.min_size = job.spec.elastic->min_ranks;
    e.max_size = job.spec.elastic->max_ranks;
    e.gpus_per_unit = per_unit;
    e.throughput = memo.throughput;
    e.last_change = memo.last_change;
    e.restart_cost = memo.restart_cost;
    if (view.eta_seconds) {
      e.eta = std::chrono::milliseconds(static_cast<std::int64_t>(*view.eta_seconds * 1000));
    }
    if (job.spec.time_limit && job.started_at) e.deadline = *job.started_at + *job.spec.time_limit;
    e.winding_down = job.health == Health::kPlateaued || job.health == Health::kOverfitting;
    if (!memo.releasing.empty()) {
      e.releasing = {{node, static_cast<int>(memo.releasing.size())}};
    }
    out.push_back(std::move(e));
  }
  std::erase_if(elastic_, [&](const auto& entry) { return seen.count(entry.first) == 0; });
  std::map<std::string, api::ElasticStatus, std::less<>> view;
  for (const auto& [name, memo] : elastic_) {
    api::ElasticStatus& status = view[name];
    status.throughput = memo.throughput;
    if (memo.restart_cost) {
      status.restart_seconds = std::chrono::duration<double>(*memo.restart_cost).count();
    }
  }
  std::lock_guard lock(elastic_view_mu_);
  elastic_view_ = std::move(view);
  return out;
}

void JobController::QueueResize(const Job& job, Work& work) {
  // The grant, one list of GPUs per rank group.
  const auto per_unit = static_cast<std::size_t>(std::max(1, job.spec.resources.gpus_per_process));
  std::vector<std::vector<int>> units;
  for (std::size_t i = 0; i + per_unit <= job.gpu_ids.size(); i += per_unit) {
    units.emplace_back(job.gpu_ids.begin() + static_cast<std::ptrdiff_t>(i),
                       job.gpu_ids.begin() + static_cast<std::ptrdiff_t>(i + per_unit));
  }
  work.resizes.push_back({job.name(), job.executor_handle, &ExecutorFor(job), std::move(units)});
}

api::ElasticStatus JobController::ElasticOf(std::string_view name) {
  std::lock_guard lock(elastic_view_mu_);
  auto it = elastic_view_.find(name);
  return it == elastic_view_.end() ? api::ElasticStatus{} : it->second;
}

void JobController::ApplyResizes(const std::vector<sched::Resize>& resizes,
                                 std::map<std::string, Job*>& by_name, std::vector<bool>& used,
                                 Work& work, Time now) {
  for (const sched::Resize& resize : resizes) {
    auto found = by_name.find(resize.job);
    if (found == by_name.end()) continue;
    Job& job = *found->second;
    const int per_unit = job.spec.resources.gpus_per_process;
    std::vector<int> ids = job.gpu_ids;
    std::vector<int> released;
    if (resize.to < resize.from) {
      // Rank groups end from the last: the first holds the rendezvous.
      const auto keep = static_cast<std::size_t>(resize.to * per_unit);
      released.assign(ids.begin() + static_cast<std::ptrdiff_t>(std::min(keep, ids.size())),
                      ids.end());
      ids.resize(std::min(keep, ids.size()));
    } else {
      const int want = (resize.to - resize.from) * per_unit;
      int added = 0;
      for (int id = 0; id < options_.total_gpus && added < want; ++id) {
        if (used[static_cast<std::size_t>(id)]) continue;
        used[static_cast<std::size_t>(id)] = true;
        ids.push_back(id);
        ++added;
      }
      if (added < want) continue;  // cannot happen: the decision counted them free
    }
    lifecycle::Step step = lifecycle::Resize(job, ids, resize.reason, now);
    if (step.empty()) continue;
    if (!Apply(job, std::move(step), work).ok()) continue;
    ElasticMemo& memo = elastic_[job.name()];
    memo.units = resize.to;
    memo.last_change = now;
    memo.anchor.reset();
    if (!released.empty()) {
      memo.releasing.insert(memo.releasing.end(), released.begin(), released.end());
      memo.released_at = now + job.spec.termination_grace + kElasticReleaseSlack;
    }
    for (int id : released) {
      if (id >= 0 && id < options_.total_gpus) used[static_cast<std::size_t>(id)] = true;
    }
  }
}

}  // namespace headway
