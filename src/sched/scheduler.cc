#include "sched/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>
#include <unordered_map>

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

// How many nodes have at least k free GPUs, for every k: a gang that cannot fit
// is refused without a scan. Within one decision free GPUs only shrink (each
// start takes some), so a shape refused once stays refused; a shape that fits
// is placed again only after the free map changed.
class FreeIndex {
 public:
  explicit FreeIndex(const FreeMap& free) {
    int most = 0;
    for (int f : free) most = std::max(most, f);
    at_least_.assign(static_cast<std::size_t>(most) + 2, 0);
    for (int f : free) Add(f, +1);
  }
  void Change(int before, int after) {
    Add(before, -1);
    Add(after, +1);
    ++version_;
  }
  bool MayFit(const WaitingJob& job) const {
    if (job.gpus_per_node == 0) return true;
    if (job.gpus_per_node >= static_cast<int>(at_least_.size())) return false;
    return at_least_[static_cast<std::size_t>(job.gpus_per_node)] >= job.nodes;
  }
  std::uint64_t version() const { return version_; }

 private:
  void Add(int free, int delta) {
    for (int k = 1; k <= free && k < static_cast<int>(at_least_.size()); ++k) {
      at_least_[static_cast<std::size_t>(k)] += delta;
    }
  }
  std::vector<int> at_least_;  // [k]: nodes with >= k free GPUs (k >= 1)
  std::uint64_t version_ = 0;
};

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

double Seconds(Duration d) { return static_cast<double>(d.count()) / 1000.0; }

// GPU-seconds a waiting job is expected to take: its learned run time capped
// by its time limit (the limit alone where nothing was learned). Unknown
// work sorts after every known one.
double ExpectedWork(const WaitingJob& job) {
  std::optional<Duration> run = job.expected_run;
  if (job.time_limit && (!run || *job.time_limit < *run)) run = job.time_limit;
  if (!run) return std::numeric_limits<double>::infinity();
  return std::max(0.0, Seconds(*run)) * job.gpus();
}

int GpusOf(const RunningJob& job) {
  int n = 0;
  for (const NodeGpus& p : job.placement) n += p.gpus;
  return n;
}

}  // namespace

Decision Schedule(const ClusterState& state, const SchedulerOptions& options) {
  Decision decision;
  decision.pending_reasons.reserve(state.waiting.size());
  decision.queue_positions.reserve(state.waiting.size());
  std::unordered_map<std::string, std::size_t> node_index;
  node_index.reserve(state.nodes.size());
  FreeMap free;
  int total = 0;
  for (std::size_t i = 0; i < state.nodes.size(); ++i) {
    node_index[state.nodes[i].name] = i;
    free.push_back(state.nodes[i].gpus);
    total += state.nodes[i].gpus;
  }
  // Queues by number, in name order (where heads tie in every respect, the
  // first queue by name goes first): the loop below looks at every queue's
  // head per job.
  std::vector<std::string> queue_names;
  {
    std::set<std::string> names;
    for (const RunningJob& r : state.running) names.insert(r.queue);
    for (const WaitingJob& w : state.waiting) names.insert(w.queue);
    queue_names.assign(names.begin(), names.end());
  }
  const std::size_t queue_count = queue_names.size();
  std::unordered_map<std::string, std::size_t> queue_index;
  for (std::size_t q = 0; q < queue_count; ++q) queue_index[queue_names[q]] = q;
  auto queue_of = [&](const std::string& name) { return queue_index.at(name); };
  std::vector<int> usage(queue_count, 0);
  for (const RunningJob& r : state.running) {
    std::size_t q = queue_of(r.queue);
    for (const NodeGpus& p : r.placement) {
      auto it = node_index.find(p.node);
      if (it != node_index.end()) free[it->second] -= p.gpus;
      usage[q] += p.gpus;
    }
  }
  // Per-queue order: priority, then FIFO.
  std::vector<std::vector<const WaitingJob*>> queues(queue_count);
  for (const WaitingJob& w : state.waiting) queues[queue_of(w.queue)].push_back(&w);
  std::vector<QueueQuota> quotas(queue_count);
  std::vector<bool> has_quotas(queue_count);
  for (std::size_t q = 0; q < queue_count; ++q) {
    auto it = state.queues.find(queue_names[q]);
    has_quotas[q] = it != state.queues.end();
    quotas[q] = has_quotas[q] ? it->second : QueueQuota{0, total, 1.0};
  }
  auto quota = [&](const std::string& name) { return quotas[queue_index.at(name)]; };
  auto usage_of = [&](const std::string& name) -> int& { return usage[queue_index.at(name)]; };
  int free_sum = 0;
  for (int f : free) free_sum += std::max(0, f);
  auto free_total = [&] { return free_sum; };
  FreeIndex free_index(free);
  auto take = [&](std::size_t node, int gpus) {
    int before = free[node];
    free[node] -= gpus;
    free_sum += std::max(0, free[node]) - std::max(0, before);
    free_index.Change(before, free[node]);
  };
  // Placements of one shape (nodes x GPUs per node) on the current free map.
  std::map<std::pair<int, int>,
           std::pair<std::uint64_t, std::optional<std::vector<std::pair<std::size_t, int>>>>>
      placed;
  auto place = [&](const WaitingJob& job) -> std::optional<std::vector<std::pair<std::size_t, int>>> {
    if (!free_index.MayFit(job)) return std::nullopt;
    auto [it, added] = placed.try_emplace({job.nodes, job.gpus_per_node});
    if (added || it->second.first != free_index.version()) {
      it->second = {free_index.version(), Place(job, free)};
    }
    return it->second.second;
  };

  // A job that has waited past the bound goes ahead of fair share, oldest
  // first, so the first of them that cannot start holds the reservation.
  auto starving = [&](const WaitingJob& w) {
    return options.starvation_bound && state.now - w.queued_at >= *options.starvation_bound;
  };
  const bool by_work = options.ordering == Ordering::kShortestWork;
  std::unordered_map<const WaitingJob*, double> work;
  if (by_work) {
    work.reserve(state.waiting.size());
    for (const WaitingJob& w : state.waiting) work.emplace(&w, ExpectedWork(w));
  }
  for (auto& jobs : queues) {
    if (by_work) {
      // Priority, then jobs past the starvation bound (oldest first), then
      // the least expected work, then FIFO.
      std::sort(jobs.begin(), jobs.end(), [&](const WaitingJob* a, const WaitingJob* b) {
        if (a->priority != b->priority) return a->priority > b->priority;
        bool sa = starving(*a), sb = starving(*b);
        if (sa != sb) return sa;
        if (!sa && work[a] != work[b]) return work[a] < work[b];
        return QueuedBefore(*a, *b);
      });
      continue;
    }
    std::sort(jobs.begin(), jobs.end(), [](const WaitingJob* a, const WaitingJob* b) {
      return a->priority != b->priority ? a->priority > b->priority : QueuedBefore(*a, *b);
    });
  }
  std::vector<std::size_t> next(queue_count, 0);
  std::vector<bool> blocked_queues(queue_count, false);
  std::optional<Reservation> reservation;
  std::set<std::string> preempted;
  // Every job the loop takes either starts or is left waiting, with a reason
  // and its place among those left (1: next in line).
  const WaitingJob* job = nullptr;
  int position = 0;
  auto pend = [&](std::string reason) {
    decision.pending_reasons.emplace(job->name, std::move(reason));
    decision.queue_positions.emplace(job->name, ++position);
  };

  for (;;) {
    // The next job: highest head priority, then heads that have waited past
    // the starvation bound (oldest first), then the lowest weighted share,
    // then FIFO.
    // kShortestWork: after priority and starvation, heads within their
    // queue's nominal quota, then the least expected work, then FIFO.
    job = nullptr;
    std::size_t job_queue = 0;
    bool job_starving = false;
    bool job_borrows = false;
    double best = 0;
    for (std::size_t q = 0; q < queue_count; ++q) {
      std::size_t i = next[q];
      if (i >= queues[q].size()) continue;
      const WaitingJob* head = queues[q][i];
      bool head_starving = starving(*head);
      bool head_borrows = false;
      double key = 0;
      if (by_work) {
        head_borrows = has_quotas[q] && usage[q] + head->gpus() > quotas[q].nominal_gpus;
        key = work[head];
      } else {
        key = usage[q] / std::max(1e-9, quotas[q].weight);
      }
      if (job == nullptr ||
          (head->priority != job->priority ? head->priority > job->priority
           : head_starving != job_starving ? head_starving
           : head_starving                 ? QueuedBefore(*head, *job)
           : head_borrows != job_borrows   ? !head_borrows
           : key != best                   ? key < best
                                           : QueuedBefore(*head, *job))) {
        job = head;
        job_queue = q;
        job_starving = head_starving;
        job_borrows = head_borrows;
        best = key;
      }
    }
    if (job == nullptr) break;
    ++next[job_queue];
    const QueueQuota q = quotas[job_queue];
    const int need = job->gpus();

    if (blocked_queues[job_queue]) {
      pend("waiting behind earlier jobs of queue " + job->queue);
      continue;
    }
    bool has_quota = has_quotas[job_queue];
    if (has_quota && usage[job_queue] + need > q.nominal_gpus + q.borrowing_limit) {
      pend("waiting for " + Gpus(need) + "; team quota " + std::to_string(usage[job_queue]) + "/" +
          std::to_string(q.nominal_gpus) + " used (may borrow " + std::to_string(q.borrowing_limit) + ")");
      blocked_queues[job_queue] = true;  // FIFO within a queue
      continue;
    }

    auto placement = place(*job);
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
          take(node, gpus);
          if (reservation && !(reservation->shadow && job->time_limit &&
                               state.now + *job->time_limit <= *reservation->shadow)) {
            reservation->spare[node] -= gpus;
          }
          start.placement.push_back({state.nodes[node].name, gpus});
        }
        usage[job_queue] += need;
        decision.starts.push_back(std::move(start));
        continue;
      }
      // A reason is shown to the waiting job's team: it names another
      // team's job only by that job's queue.
      pend("waiting: starting now would delay " +
          (reservation->queue == job->queue ? reservation->job
                                            : "the next job of queue " + reservation->queue) +
          " (backfill)");
      continue;
    }

    if (reservation) {
      pend("waiting for " + Gpus(need) + " (" + std::to_string(free_total()) + " of " +
          std::to_string(total) + " free)");
      continue;
    }

    // The first job that cannot start: preempt for it, or reserve for it.
    bool within_nominal = usage[job_queue] + need <= q.nominal_gpus;
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
      // Remaining GPU-seconds of a running job, where its end is known.
      auto remaining = [&](const RunningJob& r) {
        return r.expected_end ? std::max(0.0, Seconds(*r.expected_end - state.now)) * GpusOf(r)
                              : 0.0;
      };
      // kShortestWork: much longer work that can resume from a checkpoint
      // makes room, unless taking it would push its team below its nominal
      // quota for a job that borrows.
      const double job_work = by_work ? work[job] : std::numeric_limits<double>::infinity();
      auto longer_work = [&](const RunningJob& r) {
        if (!by_work || !r.checkpointable || !r.expected_end || !std::isfinite(job_work)) return false;
        if (r.priority > job->priority || state.now - r.started_at < options.min_run_before_preemption) {
          return false;
        }
        if (!within_nominal && r.queue != job->queue &&
            usage_of(r.queue) <= quota(r.queue).nominal_gpus) {
          return false;
        }
        double restart = Seconds(options.restart_cost) * GpusOf(r);
        return remaining(r) > options.preempt_ratio * (job_work + restart);
      };
      for (const RunningJob& r : state.running) {
        if (preempted.count(r.name) || r.leaving) continue;
        bool borrowed = usage_of(r.queue) > quota(r.queue).nominal_gpus;
        bool eligible = r.reclaimable || r.priority < job->priority ||
                        (within_nominal && borrowed && r.queue != job->queue) || longer_work(r);
        if (eligible) victims.push_back(&r);
      }
      // Cheapest first: stalled, borrowed, lower priority; then (for longer
      // work) the most remaining work; then the most recently started.
      auto cost = [&](const RunningJob* r) {
        int tier = r->reclaimable                                        ? 0
                   : usage_of(r->queue) > quota(r->queue).nominal_gpus ? 1
                   : r->priority < job->priority                        ? 2
                                                                         : 3;
        return std::make_tuple(tier, r->priority, by_work ? -remaining(*r) : 0.0,
                               -ToUnixMillis(r->started_at));
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
          for (const NodeGpus& p : l->placement) usage_of(l->queue) -= p.gpus;
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
          bool v_borrowed = usage_of(v->queue) > quota(v->queue).nominal_gpus;
          std::string why = v->reclaimable ? "reclaimed: it is stalled"
                            : v->priority < job->priority
                                ? "preempted by higher-priority " + job->name
                            : within_nominal && v_borrowed && v->queue != job->queue
                                ? "reclaimed by queue " + job->queue + " (within its quota)"
                                : "preempted for shorter work (" + job->name +
                                      "); it resumes from its checkpoint";
          decision.preemptions.push_back({v->name, why, job->name});
          preempted.insert(v->name);
          for (const NodeGpus& p : v->placement) usage_of(v->queue) -= p.gpus;
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
        pend(chosen.empty() ? "waiting for " + std::to_string(leaving.size()) +
                                 " preempted job(s) to checkpoint and leave"
                           : "preempting " + std::to_string(chosen.size() + leaving.size()) +
                                 " job(s) to start");
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
    if (has_quota && usage[job_queue] + need > q.nominal_gpus) {
      reason += "; team quota " + std::to_string(usage[job_queue]) + "/" +
                std::to_string(q.nominal_gpus) + " used";
    }
    pend(reason);
  }
  return decision;
}

}  // namespace headway::sched
