#include "sim_elastic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <queue>
#include <random>

namespace headway::sim {
namespace {

// Horovod's measured scaling efficiencies at 128 GPUs (arXiv:1802.05799).
struct Model {
  const char* name;
  double efficiency_at_128;
};
constexpr Model kModels[] = {
    {"Inception V3", 0.90},
    {"ResNet-101", 0.90},
    {"VGG-16", 0.68},
};

double ExponentFor(double efficiency_at_128) {
  return 1 + std::log(efficiency_at_128) / std::log(128.0);
}

}  // namespace

double ElasticSpec::Rate(int units) const {
  return std::pow(static_cast<double>(units) / trace_units, exponent);
}

double ElasticSpec::Speedup(int units) const {
  return std::pow(static_cast<double>(units) / min_units, exponent);
}

int ElasticSpec::UnitsOf(const Placement& p) const {
  int gpus = 0;
  for (const auto& [node, g] : p) gpus += g;
  return gpus / gpus_per_unit;
}

std::vector<ElasticSpec> DrawElastic(const std::vector<TraceJob>& trace, int per_node,
                                     int pool_nodes, const ElasticDraw& draw) {
  // Its own stream, so that what sim_trace.cc draws stays as it was.
  std::mt19937 rng(draw.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<ElasticSpec> out(trace.size());
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const TraceJob& j = trace[i];
    const bool pick = unit(rng) < draw.share;
    const Model& m = kModels[rng() % std::size(kModels)];
    ElasticSpec& e = out[i];
    e.model = m.name;
    e.exponent = ExponentFor(m.efficiency_at_128);
    const Shape s = ShapeOf(j, per_node);
    if (s.nodes > 1) {
      e.units_are_nodes = true;
      e.gpus_per_unit = per_node;
      e.trace_units = s.nodes;
      e.max_units = std::min(pool_nodes, static_cast<int>(std::ceil(draw.max_factor * s.nodes)));
    } else {
      e.gpus_per_unit = 1;
      e.trace_units = s.each;
      e.max_units = std::min(per_node, static_cast<int>(std::ceil(draw.max_factor * s.each)));
    }
    e.max_units = std::max(e.max_units, 1);
    e.min_units =
        std::clamp(static_cast<int>(std::ceil(draw.min_fraction * e.trace_units)), 1, e.max_units);
    e.start_units = draw.start_at_min ? e.min_units : std::min(e.trace_units, e.max_units);
    // Hung jobs are not elastic: what they hold after their work is no work.
    e.elastic = pick && j.gpus >= 2 && !j.stalled && e.max_units > e.min_units;
  }
  return out;
}

void PrintElasticHeader(const std::vector<ElasticSpec>& elastic, const ElasticDraw& draw,
                        double resize_cost) {
  std::map<std::string, int> models;
  int n = 0, multi_node = 0;
  for (const ElasticSpec& e : elastic) {
    if (!e.elastic) continue;
    ++n;
    multi_node += e.units_are_nodes ? 1 : 0;
    ++models[e.model];
  }
  std::printf(
      "elastic: %d jobs (%.0f%% of multi-GPU jobs drawn, %d of whole nodes), starting at %s, "
      "min %s, max %.1fx its trace size; resize cost %.0f s;",
      n, 100 * draw.share, multi_node, draw.start_at_min ? "its minimum" : "its trace size",
      draw.min_fraction > 0 ? "a fraction of it" : "1 unit", draw.max_factor, resize_cost);
  for (const auto& [model, count] : models) std::printf(" %s %d", model.c_str(), count);
  std::printf(" (Horovod's scaling)\n\n");
}

Placement PrefixUnits(const ElasticSpec& spec, const Placement& p, int units) {
  Placement out;
  int keep = std::max(units, 0) * spec.gpus_per_unit;
  for (const auto& [node, g] : p) {
    if (keep <= 0) break;
    const int take = std::min(keep, g);
    out.push_back({node, take});
    keep -= take;
  }
  return out;
}

bool SamePlacement(Placement a, Placement b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

PolluxPlan PolluxAllocate(std::vector<int> free, int per_node,
                          const std::vector<PolluxRunning>& running,
                          const std::vector<PolluxWaiting>& waiting) {
  struct Candidate {
    std::size_t id;
    const ElasticSpec* spec;
    Placement before;  // empty: admitted now
    Placement placement;
    int units;
  };
  std::vector<Candidate> cands;
  // Every elastic job that may resize, at its minimum.
  for (const PolluxRunning& r : running) {
    if (r.spec == nullptr || !r.spec->elastic || !r.may_resize) continue;
    Placement at_min = PrefixUnits(*r.spec, r.placement, r.spec->min_units);
    for (const auto& [n, g] : r.placement) free[static_cast<std::size_t>(n)] += g;
    for (const auto& [n, g] : at_min) free[static_cast<std::size_t>(n)] -= g;
    cands.push_back({r.id, r.spec, r.placement, at_min, r.spec->min_units});
  }
  PolluxPlan plan;
  // Waiting jobs in order, any that fits.
  for (const PolluxWaiting& w : waiting) {
    const bool elastic = w.spec != nullptr && w.spec->elastic;
    const Shape shape = elastic ? w.spec->ShapeAt(w.spec->min_units) : w.shape;
    auto p = Place(shape, free);
    if (!p) continue;
    if (elastic && !w.spec->units_are_nodes) {
      // The node with the most room, so that it can grow there.
      const auto most = std::max_element(free.begin(), free.end());
      p = Placement{{static_cast<int>(most - free.begin()), shape.each}};
    }
    for (const auto& [n, g] : *p) free[static_cast<std::size_t>(n)] -= g;
    if (elastic) {
      cands.push_back({w.id, w.spec, {}, *p, w.spec->min_units});
    } else {
      plan.starts.push_back({w.id, *p});
    }
  }
  // Where one more unit of `c` goes: its own node (GPU units); a whole free
  // node, one it held before first, else the lowest-numbered (node units).
  auto room = [&](const Candidate& c) -> int {
    const ElasticSpec& e = *c.spec;
    if (!e.units_are_nodes) {
      const int node = c.placement.front().first;
      return free[static_cast<std::size_t>(node)] >= e.gpus_per_unit ? node : -1;
    }
    auto holds = [](const Placement& p, int n) {
      return std::any_of(p.begin(), p.end(), [n](const auto& x) { return x.first == n; });
    };
    int best = -1;
    for (int n = 0; n < static_cast<int>(free.size()); ++n) {
      if (free[static_cast<std::size_t>(n)] < per_node || holds(c.placement, n)) continue;
      if (holds(c.before, n)) return n;
      if (best < 0) best = n;
    }
    return best;
  };
  auto gain = [](const Candidate& c) {
    const ElasticSpec& e = *c.spec;
    return (e.Speedup(c.units + 1) - e.Speedup(c.units)) / e.gpus_per_unit;
  };
  std::priority_queue<std::pair<double, std::size_t>> heap;  // gain per GPU, candidate
  for (std::size_t k = 0; k < cands.size(); ++k) {
    if (cands[k].units < cands[k].spec->max_units) heap.push({gain(cands[k]), k});
  }
  // Room only shrinks as units are handed out: a candidate with none now
  // has none later in this decision.
  while (!heap.empty()) {
    const std::size_t k = heap.top().second;
    heap.pop();
    Candidate& c = cands[k];
    const int node = room(c);
    if (node < 0) continue;
    const int g = c.spec->gpus_per_unit;
    free[static_cast<std::size_t>(node)] -= g;
    auto same = std::find_if(c.placement.begin(), c.placement.end(),
                             [node](const auto& x) { return x.first == node; });
    if (same != c.placement.end()) {
      same->second += g;
    } else {
      c.placement.push_back({node, g});
    }
    c.units += 1;
    if (c.units < c.spec->max_units) heap.push({gain(c), k});
  }
  for (const Candidate& c : cands) {
    if (c.before.empty()) {
      plan.starts.push_back({c.id, c.placement});
    } else if (!SamePlacement(c.before, c.placement)) {
      plan.resizes.push_back({c.id, c.placement});
    }
  }
  return plan;
}

}  // namespace headway::sim
