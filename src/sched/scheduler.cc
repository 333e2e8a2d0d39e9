#include "sched/scheduler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string_view>
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
  std::partial_sort(
      fits.begin(), fits.begin() + job.nodes, fits.end(),
      [&](std::size_t a, std::size_t b) { return free[a] != free[b] ? free[a] < free[b] : a < b; });
  for (int n = 0; n < job.nodes; ++n)
    placement.push_back({fits[static_cast<std::size_t>(n)], job.gpus_per_node});
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
  bool MayFit(int nodes, int gpus_per_node) const {
    if (gpus_per_node == 0) return true;
    if (gpus_per_node >= static_cast<int>(at_least_.size())) return false;
    return at_least_[static_cast<std::size_t>(gpus_per_node)] >= nodes;
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
  std::uint32_t job = 0;       // index into the state's waiting jobs
  std::optional<Time> shadow;  // when it can start; nullopt: unknown
  FreeMap spare;               // GPUs per node a job running past `shadow` may take
};

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

// Queue names are short and few: FNV-1a beats std::hash's byte hashing,
// which was a tenth of a decision over 100k waiting jobs.
struct QueueNameHash {
  std::size_t operator()(std::string_view name) const noexcept {
    std::uint64_t h = 14695981039346656037ull;
    for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
    return static_cast<std::size_t>(h);
  }
};

int GpusOf(const RunningJob& job) {
  int n = 0;
  for (const NodeGpus& p : job.placement) n += p.gpus;
  return n;
}

}  // namespace

std::string_view OrderingName(Ordering ordering) {
  switch (ordering) {
    case Ordering::kFairShare:
      return "fair-share";
    case Ordering::kShortestWork:
      return "progress-aware";
    case Ordering::kBalanced:
      return "balanced";
  }
  return "fair-share";
}

std::optional<Ordering> ParseOrdering(std::string_view name) {
  for (Ordering o : {Ordering::kFairShare, Ordering::kShortestWork, Ordering::kBalanced}) {
    if (OrderingName(o) == name) return o;
  }
  return std::nullopt;
}

std::string Decision::Reason(const ClusterState& state, const Pending& p) const {
  const WaitingJob& job = state.waiting.at(p.job);
  const std::string need = Gpus(job.gpus());
  auto quota = state.queues.find(job.queue);
  const int nominal = quota == state.queues.end() ? 0 : quota->second.nominal_gpus;
  const int borrow = quota == state.queues.end() ? pool_gpus : quota->second.borrowing_limit;
  switch (p.why) {
    case Pending::Why::kBehindInQueue:
      return "waiting behind earlier jobs of queue " + job.queue;
    case Pending::Why::kOverQuota:
      return "waiting for " + need + "; team quota " + std::to_string(p.usage) + "/" +
             std::to_string(nominal) + " used (may borrow " + std::to_string(borrow) + ")";
    case Pending::Why::kWouldDelay: {
      // A reason is shown to the waiting job's team: it names another
      // team's job only by that job's queue.
      const WaitingJob& first = state.waiting.at(p.reserved);
      return "waiting: starting now would delay " +
             (first.queue == job.queue ? first.name : "the next job of queue " + first.queue) +
             " (backfill)";
    }
    case Pending::Why::kPreempting:
      return "preempting " + std::to_string(p.count) + " job(s) to start";
    case Pending::Why::kVictimsLeaving:
      return "waiting for " + std::to_string(p.count) + " preempted job(s) to checkpoint and leave";
    case Pending::Why::kNoRoom:
    case Pending::Why::kTooBig: {
      std::string reason =
          p.why == Pending::Why::kTooBig
              ? "needs " + need + " but the pool has only " + std::to_string(pool_gpus)
              : "waiting for " + need + " (" + std::to_string(p.count) + " of " +
                    std::to_string(pool_gpus) + " free)";
      if (p.over_nominal) {
        reason +=
            "; team quota " + std::to_string(p.usage) + "/" + std::to_string(nominal) + " used";
      }
      return reason;
    }
  }
  return "waiting";
}

Explanation Explain(const ClusterState& state, const Decision& decision) {
  Explanation e;
  for (std::size_t i = 0; i < decision.pending.size(); ++i) {
    const Pending& p = decision.pending[i];
    const std::string& name = state.waiting.at(p.job).name;
    e.reasons[name] = decision.Reason(state, p);
    e.positions[name] = static_cast<int>(i) + 1;
  }
  return e;
}

Decision Schedule(const ClusterState& state, const SchedulerOptions& options) {
  Decision decision;
  decision.pending.reserve(state.waiting.size());
  std::unordered_map<std::string, std::size_t> node_index;
  node_index.reserve(state.nodes.size());
  FreeMap free;
  int total = 0;
  for (std::size_t i = 0; i < state.nodes.size(); ++i) {
    node_index[state.nodes[i].name] = i;
    free.push_back(state.nodes[i].gpus);
    total += state.nodes[i].gpus;
  }
  decision.pool_gpus = total;
  // A job that has waited past the bound goes ahead of fair share, oldest
  // first, so the first of them that cannot start holds the reservation.
  const bool by_work = options.ordering != Ordering::kFairShare;
  const bool balanced = options.ordering == Ordering::kBalanced;
  // kBalanced: the pool's load, GPUs running and asked for over the pool's
  // (at least 1), scales the slowdown a job may wait.
  double load = 1;
  if (balanced && total > 0) {
    double asked = 0;
    for (const RunningJob& r : state.running) asked += GpusOf(r);
    for (const WaitingJob& w : state.waiting) asked += w.gpus();
    load = std::max(1.0, asked / total);
  }
  const double balanced_bound = options.balanced_slowdown * load;
  // kShortestWork ages by slowdown as well: a job starves once it has waited
  // the bound and as long as it is expected to run, so a long job is not
  // rescued ahead of short ones merely for being old.
  // `work`: the job's ExpectedWork (kShortestWork only).
  auto starving = [&](const WaitingJob& w, double work) {
    Duration waited = state.now - w.queued_at;
    if (balanced && std::isfinite(work)) {
      double run =
          std::max(work / std::max(1, w.gpus()), Seconds(options.min_run_before_preemption));
      return Seconds(state.now - w.submitted_at.value_or(w.queued_at)) >= balanced_bound * run;
    }
    if (!options.starvation_bound) return false;
    if (waited < *options.starvation_bound) return false;
    if (!by_work) return true;
    double run = work / std::max(1, w.gpus());
    return Seconds(waited) >= options.starvation_slowdown * run;
  };
  // Each waiting job's ordering facts, computed once and sorted by value
  // (10k jobs: no pointer chasing in the sort).
  struct Key {
    double work;  // kShortestWork: expected GPU-seconds; 0 otherwise
    std::int64_t queued_at;
    std::int64_t seq;
    std::int32_t priority;
    std::uint32_t index : 31;  // into state.waiting
    std::uint32_t starving : 1;
  };
  auto fifo_before = [](const Key& a, const Key& b) {
    return a.queued_at != b.queued_at ? a.queued_at < b.queued_at : a.seq < b.seq;
  };
  // Each waiting job's shape and time limit, apart from the (much larger)
  // jobs themselves: most jobs of a long queue are refused on their shape
  // alone.
  struct Shape {
    int nodes = 1, gpus_per_node = 0;
  };
  std::vector<Shape> shape_of(state.waiting.size());
  std::vector<std::optional<Duration>> limit_of(state.waiting.size());
  // Queues by number, in name order (where heads tie in every respect, the
  // first queue by name goes first): the loop below looks at every queue's
  // head per job. One pass over the waiting jobs (100k of them are 13 MB)
  // takes what the decision needs of each: its queue, shape, limit and key.
  std::unordered_map<std::string_view, std::size_t, QueueNameHash> queue_index;
  std::vector<std::size_t> running_queue(state.running.size());
  std::vector<std::string> queue_names;
  std::vector<std::vector<Key>> queues;
  {
    // Numbered by first appearance, then renumbered in name order.
    std::vector<std::string_view> seen;
    auto number = [&](std::string_view name) {
      auto [it, added] = queue_index.try_emplace(name, seen.size());
      if (added) seen.push_back(name);
      return it->second;
    };
    for (std::size_t i = 0; i < state.running.size(); ++i)
      running_queue[i] = number(state.running[i].queue);
    queues.resize(seen.size());
    for (std::size_t i = 0; i < state.waiting.size(); ++i) {
      const WaitingJob& w = state.waiting[i];
      const std::size_t q = number(w.queue);
      if (q == queues.size()) queues.emplace_back();
      shape_of[i] = {w.nodes, w.gpus_per_node};
      limit_of[i] = w.time_limit;
      const double work = by_work ? ExpectedWork(w) : 0;
      queues[q].push_back(Key{work, ToUnixMillis(w.queued_at), w.submit_seq, w.priority,
                              static_cast<std::uint32_t>(i), starving(w, work) ? 1u : 0u});
    }
    std::vector<std::size_t> by_name(seen.size());
    for (std::size_t k = 0; k < seen.size(); ++k) by_name[k] = k;
    std::sort(by_name.begin(), by_name.end(),
              [&](std::size_t a, std::size_t b) { return seen[a] < seen[b]; });
    std::vector<std::size_t> rank(seen.size());
    std::vector<std::vector<Key>> in_name_order(seen.size());
    for (std::size_t q = 0; q < by_name.size(); ++q) {
      rank[by_name[q]] = q;
      queue_names.emplace_back(seen[by_name[q]]);
      in_name_order[q] = std::move(queues[by_name[q]]);
    }
    queues.swap(in_name_order);
    for (auto& [name, q] : queue_index) q = rank[q];
    for (std::size_t& q : running_queue) q = rank[q];
  }
  const std::size_t queue_count = queue_names.size();
  std::vector<int> usage(queue_count, 0);
  for (std::size_t i = 0; i < state.running.size(); ++i) {
    const RunningJob& r = state.running[i];
    std::size_t q = running_queue[i];
    for (const NodeGpus& p : r.placement) {
      auto it = node_index.find(p.node);
      if (it != node_index.end()) free[it->second] -= p.gpus;
      usage[q] += p.gpus;
    }
  }

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
  auto place =
      [&](const WaitingJob& job) -> std::optional<std::vector<std::pair<std::size_t, int>>> {
    const Shape shape = shape_of[static_cast<std::size_t>(&job - state.waiting.data())];
    if (!free_index.MayFit(shape.nodes, shape.gpus_per_node)) return std::nullopt;
    auto [it, added] = placed.try_emplace({shape.nodes, shape.gpus_per_node});
    if (added || it->second.first != free_index.version()) {
      it->second = {free_index.version(), Place(job, free)};
    }
    return it->second.second;
  };

  // Priority, then (kShortestWork) jobs past the starvation bound, oldest
  // first, then the least expected work; then FIFO.
  auto before = [&](const Key& a, const Key& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    if (by_work) {
      if (a.starving != b.starving) return a.starving == 1;
      if (!a.starving && a.work != b.work) return a.work < b.work;
    }
    return fifo_before(a, b);
  };
  std::vector<Key> scratch;
  for (auto& jobs : queues) {
    // Jobs come in submission order, which is FIFO order but for requeued
    // ones; and a pool uses few priorities. So a split by priority that
    // keeps that order usually leaves nothing to sort (a full sort of 10k
    // jobs was a third of a decision).
    // One pass counts each priority's jobs, a second places them: at 100k
    // waiting jobs, a pass per priority was a fifth of a decision.
    constexpr std::size_t kMaxSplit = 8;
    std::array<int, kMaxSplit> priorities{};
    std::array<std::size_t, kMaxSplit> counts{};
    std::size_t distinct = 0;
    std::size_t last = 0;  // jobs of one priority tend to come in runs
    auto slot_of = [&](int priority) -> std::size_t {
      if (distinct > 0 && priorities[last] == priority) return last;
      for (std::size_t i = 0; i < distinct; ++i) {
        if (priorities[i] == priority) return last = i;
      }
      return kMaxSplit;  // not seen
    };
    bool too_many = false;
    for (const Key& k : jobs) {
      std::size_t slot = slot_of(k.priority);
      if (slot == kMaxSplit) {
        if (distinct == kMaxSplit) {
          too_many = true;  // many priorities: the sort below orders them
          break;
        }
        priorities[distinct] = k.priority;
        slot = last = distinct++;
      }
      ++counts[slot];
    }
    if (!too_many && distinct > 1) {
      // Where each priority's jobs go: higher priorities first.
      std::array<std::size_t, kMaxSplit> order{};
      for (std::size_t i = 0; i < distinct; ++i) order[i] = i;
      std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(distinct),
                [&](std::size_t a, std::size_t b) { return priorities[a] > priorities[b]; });
      std::array<std::size_t, kMaxSplit> at{};
      std::size_t offset = 0;
      for (std::size_t i = 0; i < distinct; ++i) {
        at[order[i]] = offset;
        offset += counts[order[i]];
      }
      scratch.resize(jobs.size());
      for (const Key& k : jobs) scratch[at[slot_of(k.priority)]++] = k;
      jobs.swap(scratch);
    }
    if (!std::is_sorted(jobs.begin(), jobs.end(), before))
      std::sort(jobs.begin(), jobs.end(), before);
  }
  std::vector<std::size_t> next(queue_count, 0);
  // Each queue's weighted share, recomputed only after usage changed (the
  // loop below compares every queue's head for each of 10k jobs).
  std::vector<double> share(queue_count, 0);
  bool shares_stale = true;
  std::vector<bool> blocked_queues(queue_count, false);
  std::optional<Reservation> reservation;
  std::set<std::string> preempted;
  // kBalanced: shapes (nodes, GPUs per node, within nominal quota) that
  // found no victims in this decision.
  std::set<std::tuple<int, int, bool>> no_victims_for;
  // Every job the loop takes either starts or is left waiting, with a reason
  // and its place among those left (1: next in line).
  const WaitingJob* job = nullptr;
  auto index_of = [&](const WaitingJob* w) {
    return static_cast<std::uint32_t>(w - state.waiting.data());
  };
  auto pend = [&](Pending p) {
    p.job = index_of(job);
    decision.pending.push_back(p);
  };

  // Remaining GPU-seconds of a running job, where its end is known.
  auto remaining_of = [&](const RunningJob& r) {
    return r.expected_end ? std::max(0.0, Seconds(*r.expected_end - state.now)) * GpusOf(r) : 0.0;
  };
  // Each preemption doubles the run a job is granted before the next.
  auto granted_run = [&](const RunningJob& r) {
    return state.now - r.started_at >=
           options.min_run_before_preemption * (1LL << std::min(r.preemptions, 20));
  };

  for (;;) {
    // The next job: highest head priority, then heads that have waited past
    // the starvation bound (oldest first), then the lowest weighted share,
    // then FIFO.
    // kShortestWork: after priority and starvation, heads within their
    // queue's nominal quota, then the least expected work, then FIFO.
    if (shares_stale && !by_work) {
      for (std::size_t q = 0; q < queue_count; ++q)
        share[q] = usage[q] / std::max(1e-9, quotas[q].weight);
      shares_stale = false;
    }
    const Key* best_key = nullptr;
    std::size_t job_queue = 0;
    bool job_borrows = false;
    double best = 0;
    for (std::size_t q = 0; q < queue_count; ++q) {
      std::size_t i = next[q];
      if (i >= queues[q].size()) continue;
      const Key& head = queues[q][i];
      bool head_borrows = false;
      double key = 0;
      if (by_work) {
        head_borrows = has_quotas[q] &&
                       usage[q] + shape_of[head.index].nodes * shape_of[head.index].gpus_per_node >
                           quotas[q].nominal_gpus;
        key = head.work;
      } else {
        key = share[q];
      }
      if (best_key == nullptr ||
          (head.priority != best_key->priority   ? head.priority > best_key->priority
           : head.starving != best_key->starving ? head.starving
           : head.starving                       ? fifo_before(head, *best_key)
           : head_borrows != job_borrows         ? !head_borrows
           : key != best                         ? key < best
                                                 : fifo_before(head, *best_key))) {
        best_key = &head;
        job_queue = q;
        job_borrows = head_borrows;
        best = key;
      }
    }
    if (best_key == nullptr) break;
    job = &state.waiting[best_key->index];
    ++next[job_queue];
    const QueueQuota q = quotas[job_queue];
    const Shape shape = shape_of[best_key->index];
    const std::optional<Duration>& limit = limit_of[best_key->index];
    const int need = shape.nodes * shape.gpus_per_node;

    if (blocked_queues[job_queue]) {
      pend({.why = Pending::Why::kBehindInQueue});
      continue;
    }
    bool has_quota = has_quotas[job_queue];
    if (has_quota && usage[job_queue] + need > q.nominal_gpus + q.borrowing_limit) {
      if (balanced && options.preemption) {
        // kBalanced: its own team's much longer checkpointable work makes
        // room within the team's quota, as it would for any other job of
        // the team; the GPUs it takes are the victims' and the free ones no
        // reservation needs.
        std::vector<const RunningJob*> chosen, leaving;
        FreeMap after = reservation ? reservation->spare : free;
        int team_usage = usage[job_queue];
        auto release = [&](const RunningJob& r) {
          for (const NodeGpus& p : r.placement) after[node_index[p.node]] += p.gpus;
          team_usage -= GpusOf(r);
        };
        for (const RunningJob& r : state.running) {
          if (r.leaving && !preempted.count(r.name) && r.queue == job->queue) {
            release(r);
            leaving.push_back(&r);
          }
        }
        const double job_work = ExpectedWork(*job);
        std::vector<const RunningJob*> victims;
        for (const RunningJob& r : state.running) {
          if (r.queue != job->queue || r.leaving || preempted.count(r.name)) continue;
          if (!r.checkpointable || !r.expected_end || !std::isfinite(job_work)) continue;
          if (r.priority > job->priority || !granted_run(r)) continue;
          double restart = Seconds(options.restart_cost) * GpusOf(r);
          if (remaining_of(r) > options.preempt_ratio * (job_work + restart)) victims.push_back(&r);
        }
        std::sort(victims.begin(), victims.end(), [&](const RunningJob* a, const RunningJob* b) {
          return remaining_of(*a) > remaining_of(*b);
        });
        auto fits = [&] {
          return team_usage + need <= q.nominal_gpus + q.borrowing_limit ? Place(*job, after)
                                                                         : std::nullopt;
        };
        auto fit = leaving.empty() ? std::nullopt : fits();
        for (const RunningJob* v : victims) {
          if (fit) break;
          chosen.push_back(v);
          release(*v);
          fit = fits();
        }
        if (fit) {
          for (const RunningJob* l : leaving) {
            preempted.insert(l->name);
            usage_of(l->queue) -= GpusOf(*l);
          }
          for (const RunningJob* v : chosen) {
            decision.preemptions.push_back(
                {v->name,
                 "preempted for shorter work (" + job->name +
                     ", within its team's quota); it resumes from its checkpoint",
                 job->name});
            preempted.insert(v->name);
            usage_of(v->queue) -= GpusOf(*v);
          }
          shares_stale = true;
          // What it takes of the free GPUs, nobody else may take meanwhile.
          FreeMap& spare_of = reservation ? reservation->spare : free;
          if (!reservation) {
            Reservation r{index_of(job), state.now, free};
            reservation = r;
          }
          for (const auto& [node, gpus] : *fit) {
            int released = after[node] - spare_of[node];
            int from_free = std::max(0, gpus - released);
            reservation->spare[node] = std::max(0, reservation->spare[node] - from_free);
          }
          if (reservation->job == index_of(job)) decision.expected_starts[job->name] = state.now;
          pend({.why = chosen.empty() ? Pending::Why::kVictimsLeaving : Pending::Why::kPreempting,
                .count = static_cast<std::int32_t>(chosen.size() + leaving.size())});
          continue;
        }
      }
      pend({.why = Pending::Why::kOverQuota, .usage = usage[job_queue]});
      // FIFO within a queue. kBalanced: its team's smaller work may pass it
      // until it starves; then it holds them (once its own team's work could
      // not make room for it above).
      if (!balanced || best_key->starving) blocked_queues[job_queue] = true;
      continue;
    }

    auto placement = place(*job);
    if (placement) {
      bool allowed = true;
      bool backfilled = false;
      if (reservation) {
        // Only if it cannot delay the reserved job.
        std::optional<Time> end;
        if (limit) end = state.now + *limit;
        bool ends_first = reservation->shadow && end && *end <= *reservation->shadow;
        if (!options.backfill) {
          allowed = false;  // strict order: nothing passes the job first in line
        } else if (!ends_first) {
          for (const auto& [node, gpus] : *placement)
            allowed = allowed && gpus <= reservation->spare[node];
        }
        backfilled = true;
      }
      if (allowed) {
        Start start{job->name, {}, backfilled};
        for (const auto& [node, gpus] : *placement) {
          take(node, gpus);
          if (reservation &&
              !(reservation->shadow && limit && state.now + *limit <= *reservation->shadow)) {
            reservation->spare[node] -= gpus;
          }
          start.placement.push_back({state.nodes[node].name, gpus});
        }
        usage[job_queue] += need;
        shares_stale = true;
        decision.starts.push_back(std::move(start));
        continue;
      }
      pend({.why = Pending::Why::kWouldDelay, .reserved = reservation->job});
      continue;
    }

    if (reservation) {
      pend({.why = Pending::Why::kNoRoom, .count = free_total()});
      continue;
    }

    // The first job that cannot start: preempt for it, or reserve for it.
    // kBalanced: any job that cannot start may preempt (once per shape that
    // found no victims), but only a starving one holds the reservation, so
    // a big job does not hold back every shorter one before its bound.
    bool within_nominal = usage[job_queue] + need <= q.nominal_gpus;
    const auto shape_key = std::make_tuple(shape.nodes, shape.gpus_per_node, within_nominal);
    if (options.preemption &&
        !(balanced && !best_key->starving && no_victims_for.count(shape_key))) {
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
      const double job_work =
          by_work ? ExpectedWork(*job) : std::numeric_limits<double>::infinity();
      // kShortestWork: each preemption doubles the run a job is granted
      // before the next, so a long job that waited its turn, or one that
      // borrows, is not sent back each time short ones come.
      auto had_granted_run = [&](const RunningJob& r) {
        return state.now - r.started_at >=
               options.min_run_before_preemption * (1LL << std::min(r.preemptions, 20));
      };
      auto longer_work = [&](const RunningJob& r) {
        if (!by_work || !r.checkpointable || !r.expected_end || !std::isfinite(job_work))
          return false;
        if (r.priority > job->priority || !had_granted_run(r)) return false;
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
        bool reclaim =
            within_nominal && borrowed && r.queue != job->queue && (!by_work || had_granted_run(r));
        bool eligible = r.reclaimable || r.priority < job->priority || reclaim || longer_work(r);
        if (eligible) victims.push_back(&r);
      }
      // Cheapest first: stalled, borrowed, lower priority; then (for longer
      // work) the most remaining work; then the most recently started.
      auto cost = [&](const RunningJob* r) {
        int tier = r->reclaimable                                      ? 0
                   : usage_of(r->queue) > quota(r->queue).nominal_gpus ? 1
                   : r->priority < job->priority                       ? 2
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
          shares_stale = true;
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
          // The victim's team sees this: another team's job is named only
          // by its queue.
          const std::string beneficiary =
              v->queue == job->queue ? job->name : "a job of queue " + job->queue;
          std::string why = v->reclaimable ? "reclaimed: it is stalled"
                            : v->priority < job->priority
                                ? "preempted by higher-priority " + beneficiary
                            : within_nominal && v_borrowed && v->queue != job->queue
                                ? "reclaimed by queue " + job->queue + " (within its quota)"
                                : "preempted for shorter work (" + beneficiary +
                                      "); it resumes from its checkpoint";
          decision.preemptions.push_back({v->name, why, job->name});
          preempted.insert(v->name);
          for (const NodeGpus& p : v->placement) usage_of(v->queue) -= p.gpus;
          shares_stale = true;
        }
        // The freed GPUs are the job's once the victims have checkpointed and
        // left; nobody else may take what it needs meanwhile.
        Reservation r{index_of(job), state.now, free};
        for (const auto& [node, gpus] : *fit) {
          int released = after[node] - free[node];  // by the victims on this node
          int from_free = std::max(0, gpus - released);
          r.spare[node] = std::max(0, free[node] - from_free);
        }
        reservation = r;
        decision.expected_starts[job->name] = state.now;
        if (chosen.empty()) {
          pend({.why = Pending::Why::kVictimsLeaving,
                .count = static_cast<std::int32_t>(leaving.size())});
        } else {
          pend({.why = Pending::Why::kPreempting,
                .count = static_cast<std::int32_t>(chosen.size() + leaving.size())});
        }
        continue;
      }
    }

    if (balanced && !best_key->starving) {
      no_victims_for.insert(shape_key);
      pend({.why = need > total ? Pending::Why::kTooBig : Pending::Why::kNoRoom,
            .over_nominal = has_quota && usage[job_queue] + need > q.nominal_gpus,
            .count = free_total(),
            .usage = usage[job_queue]});
      continue;
    }
    // EASY backfill reservation at the earliest time enough GPUs free up.
    Reservation r{index_of(job), std::nullopt, FreeMap(free.size(), 0)};
    std::vector<const RunningJob*> ending;
    for (const RunningJob& run : state.running) {
      if (run.expected_end && !preempted.count(run.name)) ending.push_back(&run);
    }
    std::sort(ending.begin(), ending.end(), [](const RunningJob* a, const RunningJob* b) {
      return *a->expected_end < *b->expected_end;
    });
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
    pend({.why = need > total ? Pending::Why::kTooBig : Pending::Why::kNoRoom,
          .over_nominal = has_quota && usage[job_queue] + need > q.nominal_gpus,
          .count = free_total(),
          .usage = usage[job_queue]});
  }
  return decision;
}

}  // namespace headway::sched
