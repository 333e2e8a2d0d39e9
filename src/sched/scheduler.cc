#include "sched/scheduler.h"

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>

namespace headway::sched {
namespace {

using FreeMap = std::vector<int>;  // free GPUs per node index

// Best fit: the fullest nodes that still have room, so big holes survive.
std::optional<std::vector<std::pair<std::size_t, int>>> Place(const WaitingJob& job,
                                                             const FreeMap& free) {
  std::vector<std::pair<std::size_t, int>> placement;
  if (job.gpus_per_node == 0) return placement;
  std::vector<std::size_t> fits;
  for (std::size_t i = 0; i < free.size(); ++i) {
    if (free[i] >= job.gpus_per_node) fits.push_back(i);
  }
  if (static_cast<int>(fits.size()) < job.nodes) return std::nullopt;
  std::partial_sort(fits.begin(), fits.begin() + job.nodes, fits.end(),
                    [&](std::size_t a, std::size_t b) {
                      return free[a] != free[b] ? free[a] < free[b] : a < b;
                    });
  for (int n = 0; n < job.nodes; ++n) placement.push_back({fits[static_cast<std::size_t>(n)], job.gpus_per_node});
  return placement;
}

struct Reservation {
  std::string job;
  std::string queue;
  std::optional<Time> shadow;  // when it can start; nullopt: unknown
  FreeMap spare;               // GPUs per node a job running past `shadow` may take
};

bool QueuedBefore(const WaitingJob& a, const WaitingJob& b) {
  return a.queued_at != b.queued_at ? a.queued_at < b.queued_at : a.submit_seq < b.submit_seq;
}

std::string Gpus(int n) { return std::to_string(n) + (n == 1 ? " GPU" : " GPUs"); }

}  // namespace

Decision Schedule(const ClusterState& state, const SchedulerOptions& options) {
  Decision decision;
  std::map<std::string, std::size_t> node_index;
  FreeMap free;
  int total = 0;
  for (std::size_t i = 0; i < state.nodes.size(); ++i) {
    node_index[state.nodes[i].name] = i;
    free.push_back(state.nodes[i].gpus);
    total += state.nodes[i].gpus;
  }
  std::map<std::string, int> usage;
  for (const RunningJob& r : state.running) {
    for (const NodeGpus& p : r.placement) {
      auto it = node_index.find(p.node);
      if (it != node_index.end()) free[it->second] -= p.gpus;
      usage[r.queue] += p.gpus;
    }
  }
  auto quota = [&](const std::string& q) {
    auto it = state.queues.find(q);
    return it == state.queues.end() ? QueueQuota{0, total, 1.0} : it->second;
  };
  auto free_total = [&] {
    int n = 0;
    for (int f : free) n += std::max(0, f);
    return n;
  };

  // Per-queue order: priority, then FIFO.
  std::map<std::string, std::vector<const WaitingJob*>> queues;
  for (const WaitingJob& w : state.waiting) queues[w.queue].push_back(&w);
  for (auto& [name, jobs] : queues) {
    std::sort(jobs.begin(), jobs.end(), [](const WaitingJob* a, const WaitingJob* b) {
      return a->priority != b->priority ? a->priority > b->priority : QueuedBefore(*a, *b);
    });
  }
  // A job that has waited past the bound goes ahead of fair share, oldest
  // first, so the first of them that cannot start holds the reservation.
  auto starving = [&](const WaitingJob& w) {
    return options.starvation_bound && state.now - w.queued_at >= *options.starvation_bound;
  };
  std::map<std::string, std::size_t> next;
  std::set<std::string> blocked_queues;
  std::optional<Reservation> reservation;
  std::set<std::string> preempted;
  std::vector<std::string> considered;  // in the order the loop took them

  for (;;) {
    // The next job: highest head priority, then heads that have waited past
    // the starvation bound (oldest first), then the lowest weighted share,
    // then FIFO.
    const WaitingJob* job = nullptr;
    for (auto& [name, jobs] : queues) {
      std::size_t i = next[name];
      if (i >= jobs.size()) continue;
      const WaitingJob* head = jobs[i];
      if (job == nullptr) {
        job = head;
        continue;
      }
      double share = usage[name] / std::max(1e-9, quota(name).weight);
      double best = usage[job->queue] / std::max(1e-9, quota(job->queue).weight);
      bool head_starving = starving(*head), job_starving = starving(*job);
      if (head->priority != job->priority ? head->priority > job->priority
          : head_starving != job_starving ? head_starving
          : head_starving                 ? QueuedBefore(*head, *job)
          : share != best                 ? share < best
                                          : QueuedBefore(*head, *job)) {
        job = head;
      }
    }
    if (job == nullptr) break;
    ++next[job->queue];
    considered.push_back(job->name);
    const QueueQuota q = quota(job->queue);
    const int need = job->gpus();

    if (blocked_queues.count(job->queue)) {
      decision.pending_reasons[job->name] = "waiting behind earlier jobs of queue " + job->queue;
      continue;
    }
    bool has_quota = state.queues.count(job->queue) > 0;
    if (has_quota && usage[job->queue] + need > q.nominal_gpus + q.borrowing_limit) {
      decision.pending_reasons[job->name] =
          "waiting for " + Gpus(need) + "; team quota " + std::to_string(usage[job->queue]) + "/" +
          std::to_string(q.nominal_gpus) + " used (may borrow " + std::to_string(q.borrowing_limit) + ")";
      blocked_queues.insert(job->queue);  // FIFO within a queue
      continue;
    }

    auto placement = Place(*job, free);
    if (placement) {
      bool allowed = true;
      bool backfilled = false;
      if (reservation) {
        // Only if it cannot delay the reserved job.
        std::optional<Time> end;
        if (job->time_limit) end = state.now + *job->time_limit;
        bool ends_first = reservation->shadow && end && *end <= *reservation->shadow;
        if (!options.backfill) {
          allowed = false;  // strict order: nothing passes the job first in line
        } else if (!ends_first) {
          for (const auto& [node, gpus] : *placement) allowed = allowed && gpus <= reservation->spare[node];
        }
        backfilled = true;
      }
      if (allowed) {
        Start start{job->name, {}, backfilled};
        for (const auto& [node, gpus] : *placement) {
          free[node] -= gpus;
          if (reservation && !(reservation->shadow && job->time_limit &&
                               state.now + *job->time_limit <= *reservation->shadow)) {
            reservation->spare[node] -= gpus;
          }
          start.placement.push_back({state.nodes[node].name, gpus});
        }
        usage[job->queue] += need;
        decision.starts.push_back(std::move(start));
        continue;
      }
      // A reason is shown to the waiting job's team: it names another
      // team's job only by that job's queue.
      decision.pending_reasons[job->name] =
          "waiting: starting now would delay " +
          (reservation->queue == job->queue ? reservation->job
                                            : "the next job of queue " + reservation->queue) +
          " (backfill)";
      continue;
    }

    if (reservation) {
      decision.pending_reasons[job->name] =
          "waiting for " + Gpus(need) + " (" + std::to_string(free_total()) + " of " +
          std::to_string(total) + " free)";
      continue;
    }

    // The first job that cannot start: preempt for it, or reserve for it.
    bool within_nominal = usage[job->queue] + need <= q.nominal_gpus;
    if (options.preemption) {
      std::vector<const RunningJob*> victims;
      FreeMap after = free;
      std::vector<const RunningJob*> leaving;
      for (const RunningJob& r : state.running) {
        if (r.leaving && !preempted.count(r.name)) {
          // On its way out already: its GPUs are this job's without a new victim.
          for (const NodeGpus& p : r.placement) after[node_index[p.node]] += p.gpus;
          leaving.push_back(&r);
        }
      }
      for (const RunningJob& r : state.running) {
        if (preempted.count(r.name) || r.leaving) continue;
        bool borrowed = usage[r.queue] > quota(r.queue).nominal_gpus;
        bool eligible = r.reclaimable || r.priority < job->priority ||
                        (within_nominal && borrowed && r.queue != job->queue);
        if (eligible) victims.push_back(&r);
      }
      auto cost = [&](const RunningJob* r) {
        int tier = r->reclaimable ? 0 : usage[r->queue] > quota(r->queue).nominal_gpus ? 1 : 2;
        return std::make_tuple(tier, r->priority, -ToUnixMillis(r->started_at));
      };
      std::sort(victims.begin(), victims.end(),
                [&](const RunningJob* a, const RunningJob* b) { return cost(a) < cost(b); });
      std::vector<const RunningJob*> chosen;
      std::optional<std::vector<std::pair<std::size_t, int>>> fit;
      if (!leaving.empty()) fit = Place(*job, after);
      for (const RunningJob* v : victims) {
        if (fit) break;
        chosen.push_back(v);
        for (const NodeGpus& p : v->placement) after[node_index[p.node]] += p.gpus;
        fit = Place(*job, after);
      }
      if (fit) {
        for (const RunningJob* l : leaving) {
          preempted.insert(l->name);
          for (const NodeGpus& p : l->placement) usage[l->queue] -= p.gpus;
        }
        // Drop victims that turned out unnecessary (latest first), keeping the fit.
        for (std::size_t i = chosen.size(); i-- > 0;) {
          FreeMap without = after;
          for (const NodeGpus& p : chosen[i]->placement) without[node_index[p.node]] -= p.gpus;
          if (auto still = Place(*job, without)) {
            after = without;
            fit = still;
            chosen.erase(chosen.begin() + static_cast<long>(i));
          }
        }
        for (const RunningJob* v : chosen) {
          std::string why = v->reclaimable ? "reclaimed: it is stalled"
                            : v->priority < job->priority
                                ? "preempted by higher-priority " + job->name
                                : "reclaimed by queue " + job->queue + " (within its quota)";
          decision.preemptions.push_back({v->name, why, job->name});
          preempted.insert(v->name);
          for (const NodeGpus& p : v->placement) usage[v->queue] -= p.gpus;
        }
        // The freed GPUs are the job's once the victims have checkpointed and
        // left; nobody else may take what it needs meanwhile.
        Reservation r{job->name, job->queue, state.now, free};
        for (const auto& [node, gpus] : *fit) {
          int released = after[node] - free[node];  // by the victims on this node
          int from_free = std::max(0, gpus - released);
          r.spare[node] = std::max(0, free[node] - from_free);
        }
        reservation = r;
        decision.expected_starts[job->name] = state.now;
        decision.pending_reasons[job->name] =
            chosen.empty() ? "waiting for " + std::to_string(leaving.size()) +
                                 " preempted job(s) to checkpoint and leave"
                           : "preempting " + std::to_string(chosen.size() + leaving.size()) +
                                 " job(s) to start";
        continue;
      }
    }

    // EASY backfill reservation at the earliest time enough GPUs free up.
    Reservation r{job->name, job->queue, std::nullopt, FreeMap(free.size(), 0)};
    std::vector<const RunningJob*> ending;
    for (const RunningJob& run : state.running) {
      if (run.expected_end && !preempted.count(run.name)) ending.push_back(&run);
    }
    std::sort(ending.begin(), ending.end(),
              [](const RunningJob* a, const RunningJob* b) { return *a->expected_end < *b->expected_end; });
    FreeMap sim = free;
    for (const RunningJob* run : ending) {
      for (const NodeGpus& p : run->placement) sim[node_index[p.node]] += p.gpus;
      if (auto fit = Place(*job, sim)) {
        r.shadow = std::max(*run->expected_end, state.now);
        r.spare = sim;
        for (const auto& [node, gpus] : *fit) r.spare[node] -= gpus;
        for (std::size_t i = 0; i < r.spare.size(); ++i) r.spare[i] = std::min(r.spare[i], free[i]);
        break;
      }
    }
    reservation = r;
    if (r.shadow) decision.expected_starts[job->name] = *r.shadow;
    std::string reason = "waiting for " + Gpus(need) + " (" + std::to_string(free_total()) +
                         " of " + std::to_string(total) + " free)";
    if (need > total) reason = "needs " + Gpus(need) + " but the pool has only " + std::to_string(total);
    if (has_quota && usage[job->queue] + need > q.nominal_gpus) {
      reason += "; team quota " + std::to_string(usage[job->queue]) + "/" +
                std::to_string(q.nominal_gpus) + " used";
    }
    decision.pending_reasons[job->name] = reason;
  }
  int position = 0;
  for (const std::string& name : considered) {
    if (decision.pending_reasons.count(name)) decision.queue_positions[name] = ++position;
  }
  return decision;
}

}  // namespace headway::sched
