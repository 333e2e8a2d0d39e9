// Scheduling decision time: 10k waiting jobs on 1k GPUs (125 nodes x 8),
// half of the pool busy, 8 teams with quotas, jobs listed in submission
// order as the server lists them; Headway's scheduler (quotas, fair share,
// gang, backfill, preemption) in both orders next to the plain FIFO. Also
// 1k and 100k waiting jobs.
#include <benchmark/benchmark.h>

#include <random>

#include "sched/fifo_scheduler.h"
#include "sched/scheduler.h"

namespace {

using namespace headway;
using namespace headway::sched;

ClusterState MakeState(int waiting, int nodes) {
  std::mt19937 rng(42);
  ClusterState s;
  s.now = FromUnixMillis(1'800'000'000'000LL);
  for (int n = 0; n < nodes; ++n) s.nodes.push_back({"n" + std::to_string(n), 8});
  for (int t = 0; t < 8; ++t)
    s.queues["team" + std::to_string(t)] = {nodes, nodes * 2, 1.0 + t % 3};
  // Half of the nodes busy with jobs ending over the next hours.
  for (int n = 0; n < nodes / 2; ++n) {
    RunningJob r;
    r.name = "run" + std::to_string(n);
    r.queue = "team" + std::to_string(n % 8);
    r.placement = {{"n" + std::to_string(n), 8}};
    r.started_at = s.now - std::chrono::minutes(n);
    r.expected_end = s.now + std::chrono::minutes(10 + static_cast<int>(rng() % 600));
    s.running.push_back(r);
  }
  const int sizes[] = {1, 1, 1, 2, 4, 8, 8, 16};
  for (int i = 0; i < waiting; ++i) {
    WaitingJob w;
    w.name = "job" + std::to_string(i);
    w.queue = "team" + std::to_string(rng() % 8);
    int gpus = sizes[rng() % 8];
    w.nodes = gpus > 8 ? gpus / 8 : 1;
    w.gpus_per_node = gpus > 8 ? 8 : gpus;
    w.priority = static_cast<int>(rng() % 3);
    w.submit_seq = i;
    w.time_limit = std::chrono::minutes(30 + static_cast<int>(rng() % 600));
    // What history predicts for two jobs in three (the progress-aware order).
    if (rng() % 3 != 0) w.expected_run = std::chrono::minutes(5 + static_cast<int>(rng() % 300));
    s.waiting.push_back(w);
  }
  return s;
}

void BM_HeadwayScheduler(benchmark::State& st) {
  ClusterState s = MakeState(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)) / 8);
  std::size_t started = 0;
  for (auto _ : st) {
    Decision d = Schedule(s);
    started = d.starts.size();
    benchmark::DoNotOptimize(d);
  }
  st.counters["started"] = static_cast<double>(started);
}

void BM_HeadwayProgressAware(benchmark::State& st) {
  ClusterState s = MakeState(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)) / 8);
  SchedulerOptions options;
  options.ordering = Ordering::kShortestWork;
  options.starvation_bound = SchedulerOptions::kShortestWorkStarvationBound;
  std::size_t started = 0;
  for (auto _ : st) {
    Decision d = Schedule(s, options);
    started = d.starts.size();
    benchmark::DoNotOptimize(d);
  }
  st.counters["started"] = static_cast<double>(started);
}

void BM_Fifo(benchmark::State& st) {
  ClusterState s = MakeState(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)) / 8);
  std::vector<PendingJob> pending;
  for (const auto& w : s.waiting) pending.push_back({w.name, w.gpus(), w.priority, w.submit_seq});
  std::vector<int> free;
  for (int g = static_cast<int>(st.range(1)) / 2; g < st.range(1); ++g) free.push_back(g);
  for (auto _ : st) {
    FifoDecision d = ScheduleFifo(pending, free, static_cast<int>(st.range(1)));
    benchmark::DoNotOptimize(d);
  }
}

BENCHMARK(BM_HeadwayScheduler)
    ->Args({1000, 1000})
    ->Args({10000, 1000})
    ->Args({100000, 1000})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_HeadwayProgressAware)
    ->Args({1000, 1000})
    ->Args({10000, 1000})
    ->Args({100000, 1000})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Fifo)
    ->Args({1000, 1000})
    ->Args({10000, 1000})
    ->Args({100000, 1000})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
