#include "sched/elastic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <tuple>
#include <unordered_map>

namespace headway::sched {
namespace {

// Assumed until the job has run at two sizes: throughput grows as
// size^kAssumedExponent (0.8: a fair guess for data-parallel training that
// keeps its per-rank batch, between the near-linear image models and the
// communication-bound language models of published scaling studies).
double ScalingExponent(const ElasticJob& job, int up_to, const ElasticOptions& options) {
  // The two largest measured sizes at most `up_to`: the slope of log
  // throughput over log size between them.
  std::vector<std::pair<int, double>> measured;
  for (const auto& [size, value] : job.throughput) {
    if (size <= up_to && size > 0 && value > 0) measured.emplace_back(size, value);
  }
  if (measured.size() < 2) return options.assumed_efficiency;
  const auto& [a, ta] = measured[measured.size() - 2];
  const auto& [b, tb] = measured.back();
  return std::log(tb / ta) / std::log(static_cast<double>(b) / a);
}

std::string Ratio(double r) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2fx", r);
  return text;
}

// The placement of `job` at `size` units, dropping units from the end: the
// first unit holds rank 0 (and the rendezvous), so it stays.
std::vector<NodeGpus> PlacementAt(const ElasticJob& job, const std::vector<NodeGpus>& placement,
                                  int size) {
  std::vector<NodeGpus> out;
  int keep = std::max(size, 0) * job.gpus_per_unit;
  for (const NodeGpus& p : placement) {
    if (keep <= 0) break;
    const int take = std::min(keep, p.gpus);
    out.push_back({p.node, take});
    keep -= take;
  }
  return out;
}

// The GPUs per node that `from` holds and `to` does not.
std::map<std::string, int> Dropped(const std::vector<NodeGpus>& from,
                                   const std::vector<NodeGpus>& to) {
  std::map<std::string, int> out;
  for (const NodeGpus& p : from) out[p.node] += p.gpus;
  for (const NodeGpus& p : to) out[p.node] -= p.gpus;
  std::erase_if(out, [](const auto& kv) { return kv.second <= 0; });
  return out;
}

struct Tracked {
  const ElasticJob* job = nullptr;
  const RunningJob* running = nullptr;
  int size = 0;  // after this decision's resizes
  std::vector<NodeGpus> placement;
  std::string for_job;
  std::string reason;
};

class Planner {
 public:
  Planner(const ClusterState& state, const std::vector<ElasticJob>& elastic,
          const SchedulerOptions& options, const ElasticOptions& elastic_options)
      : state_(state), options_(options), eo_(elastic_options) {
    for (const RunningJob& r : state.running) running_[r.name] = &r;
    for (const ElasticJob& e : elastic) {
      auto it = running_.find(e.name);
      if (it == running_.end() || e.gpus_per_unit <= 0) continue;
      tracked_.push_back({&e, it->second, e.size, it->second->placement, {}, {}});
    }
  }

  ElasticPlan Plan() {
    ElasticPlan plan;
    plan.decision = Schedule(AtMinimum(), options_);
    FreeGpus();
    TakeForStarts(plan.decision);
    ShrinkPoorScaling();
    if (!AnyWaitsForRoom(plan.decision)) Grow();
    for (const Tracked& t : tracked_) {
      if (t.size == t.job->size) continue;
      plan.resizes.push_back({t.job->name, t.job->size, t.size, t.placement, t.reason, t.for_job});
    }
    return plan;
  }

 private:
  Duration RestartCost(const ElasticJob& j) const {
    return j.restart_cost.value_or(eo_.default_restart_cost);
  }
  bool MayResizeByChoice(const ElasticJob& j) const {
    const Duration interval = std::max(
        eo_.min_interval, std::chrono::duration_cast<Duration>(RestartCost(j) * eo_.amortise));
    return state_.now - j.last_change >= interval;
  }

  // The state Schedule() sees: each elastic job at its minimum, the GPUs
  // above it free, and GPUs of shrinks in progress on their way back.
  ClusterState AtMinimum() const {
    ClusterState s = state_;
    std::unordered_map<std::string, const Tracked*> by_name;
    for (const Tracked& t : tracked_) by_name[t.job->name] = &t;
    std::vector<RunningJob> extra;
    for (RunningJob& r : s.running) {
      auto it = by_name.find(r.name);
      if (it == by_name.end()) continue;
      const ElasticJob& j = *it->second->job;
      r.placement = PlacementAt(j, r.placement, std::min(j.size, j.min_size));
      if (!j.releasing.empty()) {
        RunningJob back;
        back.name = r.name + "/releasing";
        back.queue = r.queue;
        back.priority = r.priority;
        back.placement = j.releasing;
        back.started_at = r.started_at;
        back.leaving = true;
        extra.push_back(std::move(back));
      }
    }
    s.running.insert(s.running.end(), extra.begin(), extra.end());
    return s;
  }

  void FreeGpus() {
    for (const Node& n : state_.nodes) free_[n.name] += n.gpus;
    for (const RunningJob& r : state_.running) {
      for (const NodeGpus& p : r.placement) free_[p.node] -= p.gpus;
    }
    for (const Tracked& t : tracked_) {
      for (const NodeGpus& p : t.job->releasing) free_[p.node] -= p.gpus;
    }
    for (const RunningJob& r : state_.running) {
      for (const NodeGpus& p : r.placement) usage_[r.queue] += p.gpus;
    }
  }

  // Which elastic jobs give back first: those more GPUs would not help,
  // then those that meet their deadline anyway, then the least gain per GPU.
  std::tuple<int, int, double> GiveBackKey(const Tracked& t) const {
    const ElasticJob& j = *t.job;
    const bool meets_deadline =
        j.deadline.has_value() && j.eta.has_value() && state_.now + *j.eta <= *j.deadline;
    const double below = ExpectedThroughput(j, t.size - 1, eo_);
    const double at = ExpectedThroughput(j, t.size, eo_);
    const double gain = below > 0 ? at / below - 1 : 0;
    return {j.winding_down ? 0 : 1, meets_deadline ? 0 : 1, gain};
  }

  // Starts Schedule() placed on GPUs elastic jobs hold above their minimum:
  // those jobs shrink, and the start waits for the GPUs to come back.
  void TakeForStarts(Decision& decision) {
    std::vector<Start> kept;
    std::vector<Pending> waits;
    std::unordered_map<std::string, std::uint32_t> waiting_index;
    for (std::uint32_t i = 0; i < state_.waiting.size(); ++i) {
      waiting_index[state_.waiting[i].name] = i;
    }
    // Idle GPUs that no start of this decision uses. Schedule() places best
    // fit, so it may pick the GPUs above an elastic job's minimum over an
    // idle node; a start that fits these goes there instead, and nothing
    // shrinks for it.
    std::map<std::string, int> spare;
    for (const auto& [node, gpus] : free_) spare[node] = std::max(gpus, 0);
    for (const Start& start : decision.starts) {
      for (const NodeGpus& p : start.placement) spare[p.node] -= p.gpus;
    }
    for (Start& start : decision.starts) {
      if (NeedsShrink(start)) {
        const WaitingJob& w = state_.waiting[waiting_index[start.job]];
        if (auto idle = PlaceOn(spare, w.nodes, w.gpus_per_node)) start.placement = *idle;
      }
      std::set<const ElasticJob*> shrunk;
      for (const NodeGpus& p : start.placement) {
        int deficit = p.gpus - std::max(free_[p.node], 0);
        free_[p.node] -= p.gpus;
        if (deficit <= 0) continue;
        const int from_returning = std::min(deficit, returning_[p.node]);
        returning_[p.node] -= from_returning;
        deficit -= from_returning;
        while (deficit > 0) {
          Tracked* donor = nullptr;
          for (Tracked& t : tracked_) {
            if (t.size <= t.job->min_size) continue;
            const auto smaller = OneUnitLess(t, p.node);
            if (Dropped(t.placement, smaller).count(p.node) == 0) continue;
            if (donor == nullptr || GiveBackKey(t) < GiveBackKey(*donor)) donor = &t;
          }
          if (donor == nullptr) break;  // cannot happen: Schedule() saw these GPUs free
          const auto smaller = OneUnitLess(*donor, p.node);
          const int freed = Dropped(donor->placement, smaller)[p.node];
          donor->placement = smaller;
          donor->size -= 1;
          usage_[donor->running->queue] -= freed;
          deficit -= freed;
          if (deficit < 0) returning_[p.node] += -deficit;
          if (donor->for_job.empty()) donor->for_job = start.job;
          shrunk.insert(donor->job);
          donor->reason = "shrank to " + std::to_string(donor->size) + " " +
                          UnitName(*donor->job, donor->size) +
                          " to make room for a waiting job of team " + QueueOf(donor->for_job) +
                          " (shrinking before preempting)";
        }
      }
      if (shrunk.empty()) {
        for (const NodeGpus& p : start.placement) usage_[QueueOf(start.job)] += p.gpus;
        kept.push_back(std::move(start));
        continue;
      }
      Pending pending;
      pending.job = waiting_index[start.job];
      pending.why = Pending::Why::kVictimsLeaving;
      pending.count = static_cast<std::int32_t>(shrunk.size());
      // Its GPUs that are free already stay held for it.
      waits.push_back(pending);
      decision.expected_starts[start.job] = state_.now;
    }
    decision.starts = std::move(kept);
    // They were first in line: they go before every job left waiting.
    decision.pending.insert(decision.pending.begin(), waits.begin(), waits.end());
  }

  // `t` one unit smaller, giving back a unit on `node` where it can: for
  // node units, any node above its minimum (Schedule() may have placed a
  // start on any of them; the first holds rank 0); else its last rank group.
  static std::vector<NodeGpus> OneUnitLess(const Tracked& t, const std::string& node) {
    if (t.job->units_are_nodes) {
      const auto first = static_cast<std::size_t>(std::max(t.job->min_size, 1));
      for (std::size_t k = first; k < t.placement.size(); ++k) {
        if (t.placement[k].node != node) continue;
        std::vector<NodeGpus> out = t.placement;
        out.erase(out.begin() + static_cast<std::ptrdiff_t>(k));
        return out;
      }
    }
    return PlacementAt(*t.job, t.placement, t.size - 1);
  }

  bool NeedsShrink(const Start& start) const {
    for (const NodeGpus& p : start.placement) {
      auto free = free_.find(p.node);
      auto back = returning_.find(p.node);
      const int have = std::max(free == free_.end() ? 0 : free->second, 0) +
                       (back == returning_.end() ? 0 : back->second);
      if (p.gpus > have) return true;
    }
    return false;
  }

  // `nodes` nodes with `each` GPUs of `spare`, best fit (the fewest spare
  // first), taken from it; nullopt where they are not there.
  static std::optional<std::vector<NodeGpus>> PlaceOn(std::map<std::string, int>& spare, int nodes,
                                                      int each) {
    std::vector<std::pair<int, std::string>> fits;
    for (const auto& [node, gpus] : spare) {
      if (gpus >= each) fits.emplace_back(gpus, node);
    }
    if (each <= 0 || static_cast<int>(fits.size()) < nodes) return std::nullopt;
    std::sort(fits.begin(), fits.end());
    std::vector<NodeGpus> out;
    for (int k = 0; k < nodes; ++k) {
      spare[fits[static_cast<std::size_t>(k)].second] -= each;
      out.push_back({fits[static_cast<std::size_t>(k)].second, each});
    }
    return out;
  }

  std::string QueueOf(const std::string& waiting_job) const {
    for (const WaitingJob& w : state_.waiting) {
      if (w.name == waiting_job) return w.queue;
    }
    return "?";
  }

  void ShrinkPoorScaling() {
    for (Tracked& t : tracked_) {
      const ElasticJob& j = *t.job;
      if (t.size != j.size || t.size <= j.min_size || !MayResizeByChoice(j)) continue;
      auto at = j.throughput.find(t.size);
      auto below = j.throughput.find(t.size - 1);
      if (at == j.throughput.end() || below == j.throughput.end() || below->second <= 0) continue;
      const double ratio = at->second / below->second;
      if (ratio >= 1 + eo_.min_marginal_gain) continue;
      const auto smaller = PlacementAt(j, t.placement, t.size - 1);
      for (const auto& [node, gpus] : Dropped(t.placement, smaller)) {
        usage_[t.running->queue] -= gpus;
      }
      t.placement = smaller;
      t.size -= 1;
      t.reason = "shrank to " + std::to_string(t.size) + " " + UnitName(j, t.size) + ": " +
                 std::to_string(t.size + 1) + " gave only " + Ratio(ratio) + " the throughput of " +
                 std::to_string(t.size);
    }
  }

  static bool AnyWaitsForRoom(const Decision& decision) {
    for (const Pending& p : decision.pending) {
      switch (p.why) {
        case Pending::Why::kNoRoom:
        case Pending::Why::kWouldDelay:
        case Pending::Why::kPreempting:
        case Pending::Why::kVictimsLeaving:
          return true;
        default:
          break;
      }
    }
    return false;
  }

  int QueueLimit(const std::string& queue) const {
    auto it = state_.queues.find(queue);
    if (it == state_.queues.end()) return std::numeric_limits<int>::max();
    return it->second.nominal_gpus + it->second.borrowing_limit;
  }

  // Where one more unit of `t` would go: its own node for rank groups, the
  // fullest node that fits and it does not use yet for node units.
  std::optional<std::string> RoomFor(const Tracked& t) const {
    const int need = t.job->gpus_per_unit;
    if (!t.job->units_are_nodes) {
      if (t.placement.empty()) return std::nullopt;
      const std::string& node = t.placement.front().node;
      auto it = free_.find(node);
      if (it != free_.end() && it->second >= need) return node;
      return std::nullopt;
    }
    std::optional<std::string> best;
    int best_free = 0;
    for (const auto& entry : free_) {
      const std::string& node = entry.first;
      if (entry.second < need) continue;
      if (std::any_of(t.placement.begin(), t.placement.end(),
                      [&](const NodeGpus& p) { return p.node == node; })) {
        continue;
      }
      if (!best || entry.second < best_free) {
        best = node;
        best_free = entry.second;
      }
    }
    return best;
  }

  // The time one more unit saves `t` over its remaining run, per GPU; 0
  // where it is not worth a restart.
  double GrowthScore(const Tracked& t) const {
    const ElasticJob& j = *t.job;
    const double now = ExpectedThroughput(j, t.size, eo_);
    const double next = ExpectedThroughput(j, t.size + 1, eo_);
    if (now <= 0 || next <= 0) return 0;
    const double gain = next / now;
    if (gain < 1 + eo_.min_marginal_gain) return 0;
    // A job with no ETA yet is assumed to have an hour left.
    const double remaining = j.eta ? Seconds(*j.eta) : 3600.0;
    const double saved = remaining * (1 - 1 / gain);
    if (saved <= eo_.amortise * Seconds(RestartCost(j))) return 0;
    return saved / j.gpus_per_unit;
  }

  void Grow() {
    const int idle_before = IdleGpus();
    std::set<Tracked*> grown;
    for (;;) {
      Tracked* best = nullptr;
      double best_score = 0;
      for (Tracked& t : tracked_) {
        const ElasticJob& j = *t.job;
        if (t.size != j.size && grown.count(&t) == 0) continue;  // shrunk this round
        if (t.size >= j.max_size || j.winding_down || !MayResizeByChoice(j)) continue;
        if (j.throughput.count(j.size) == 0) continue;  // not measured at its size yet
        if (usage_[t.running->queue] + j.gpus_per_unit > QueueLimit(t.running->queue)) continue;
        if (!RoomFor(t)) continue;
        const double score = GrowthScore(t);
        if (score > best_score) {
          best = &t;
          best_score = score;
        }
      }
      if (best == nullptr) break;
      const std::string node = *RoomFor(*best);
      const int gpus = best->job->gpus_per_unit;
      free_[node] -= gpus;
      usage_[best->running->queue] += gpus;
      auto same = std::find_if(best->placement.begin(), best->placement.end(),
                               [&](const NodeGpus& p) { return p.node == node; });
      if (same != best->placement.end()) {
        same->gpus += gpus;
      } else {
        best->placement.push_back({node, gpus});
      }
      best->size += 1;
      grown.insert(best);
    }
    for (Tracked* t : grown) t->reason = GrowthReason(*t, idle_before);
  }

  int IdleGpus() const {
    int n = 0;
    for (const auto& [node, gpus] : free_) n += std::max(gpus, 0);
    return n;
  }

  std::string GrowthReason(const Tracked& t, int idle) const {
    const ElasticJob& j = *t.job;
    std::string why = "grew to " + std::to_string(t.size) + " " + UnitName(j, t.size) + ": " +
                      std::to_string(idle) + " GPU" + (idle == 1 ? "" : "s") +
                      " idle and no job waiting for them, ";
    // The evidence: the largest measured step, or the assumption it explores.
    std::vector<std::pair<int, double>> measured(j.throughput.begin(), j.throughput.end());
    if (measured.size() >= 2) {
      const auto& [a, ta] = measured[measured.size() - 2];
      const auto& [b, tb] = measured.back();
      why += Ratio(tb / ta) + " throughput measured at " + std::to_string(b) + " " +
             UnitName(j, b) + " vs " + std::to_string(a);
    } else {
      why += "scaling not measured yet (" +
             Ratio(ExpectedThroughput(j, t.size, eo_) / ExpectedThroughput(j, j.size, eo_)) +
             " assumed)";
    }
    return why;
  }

  static double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

  const ClusterState& state_;
  const SchedulerOptions& options_;
  const ElasticOptions& eo_;
  std::unordered_map<std::string, const RunningJob*> running_;
  std::vector<Tracked> tracked_;
  std::map<std::string, int> free_;       // GPUs free now, per node
  std::map<std::string, int> returning_;  // shrunk beyond what a start needed
  std::map<std::string, int> usage_;      // GPUs per queue after this decision
};

}  // namespace

double ExpectedThroughput(const ElasticJob& job, int size, const ElasticOptions& options) {
  if (size <= 0) return 0;
  if (auto it = job.throughput.find(size); it != job.throughput.end()) return it->second;
  // The nearest measured sizes below and above it.
  const std::pair<const int, double>* below = nullptr;
  const std::pair<const int, double>* above = nullptr;
  for (const auto& entry : job.throughput) {
    if (entry.first <= 0 || entry.second <= 0) continue;
    if (entry.first < size) {
      below = &entry;
    } else if (above == nullptr) {
      above = &entry;
    }
  }
  if (below != nullptr && above != nullptr) {  // between two measurements: log-log
    const double exponent = std::log(above->second / below->second) /
                            std::log(static_cast<double>(above->first) / below->first);
    return below->second * std::pow(static_cast<double>(size) / below->first, exponent);
  }
  const auto* base = below != nullptr ? below : above;
  if (base == nullptr) return 0;
  const double exponent = ScalingExponent(job, base->first, options);
  return base->second * std::pow(static_cast<double>(size) / base->first, exponent);
}

std::string UnitName(const ElasticJob& job, int count) {
  if (job.units_are_nodes) return count == 1 ? "node" : "nodes";
  return count == 1 ? "rank group" : "rank groups";
}

ElasticPlan PlanWithElastic(const ClusterState& state, const std::vector<ElasticJob>& elastic,
                            const SchedulerOptions& options,
                            const ElasticOptions& elastic_options) {
  return Planner(state, elastic, options, elastic_options).Plan();
}

}  // namespace headway::sched
