#include "workflow/progress.h"

#include <algorithm>
#include <map>

namespace headway::workflow {
namespace {

// What is left of one step, on its own; nullopt when nothing says.
std::optional<Duration> RemainingOf(const StepTiming& step) {
  switch (step.state) {
    case StepState::kFinished:
      return Duration(0);
    case StepState::kRunning:
      if (step.eta) return std::max(*step.eta, Duration(0));
      // Past its typical duration: it may end any moment, and nothing says when.
      if (step.expected) return std::max(*step.expected - step.elapsed, Duration(0));
      return std::nullopt;
    case StepState::kPending:
      return step.expected;
  }
  return std::nullopt;
}

// Step indexes in an order where each comes after those it waits for.
Result<std::vector<std::size_t>> TopologicalOrder(const std::vector<StepTiming>& steps,
                                                  const std::map<std::string, std::size_t>& index) {
  std::vector<int> waiting(steps.size(), 0);
  std::vector<std::vector<std::size_t>> unblocks(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    for (const std::string& dep : steps[i].after) {
      auto it = index.find(dep);
      if (it == index.end()) {
        return InvalidArgument("step '" + steps[i].id + "' waits for unknown step '" + dep + "'");
      }
      ++waiting[i];
      unblocks[it->second].push_back(i);
    }
  }
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (waiting[i] == 0) order.push_back(i);
  }
  for (std::size_t next = 0; next < order.size(); ++next) {
    for (std::size_t j : unblocks[order[next]]) {
      if (--waiting[j] == 0) order.push_back(j);
    }
  }
  if (order.size() != steps.size()) {
    for (std::size_t i = 0; i < steps.size(); ++i) {
      if (waiting[i] > 0) return InvalidArgument("step '" + steps[i].id + "' is in a dependency cycle");
    }
  }
  return order;
}

}  // namespace

Result<WorkflowEta> EstimateWorkflow(const std::vector<StepTiming>& steps) {
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (!index.emplace(steps[i].id, i).second) {
      return InvalidArgument("step '" + steps[i].id + "' appears twice");
    }
  }
  auto order = TopologicalOrder(steps, index);
  if (!order.ok()) return order.status();

  WorkflowEta out;
  out.steps_total = static_cast<int>(steps.size());
  // The time from now at which each step ends, and the step whose end it
  // waited for (the critical path runs back through these).
  std::vector<Duration> ends(steps.size(), Duration(0));
  std::vector<std::optional<std::size_t>> waited_for(steps.size());
  Duration done{0}, to_do{0};
  for (std::size_t i : *order) {
    const StepTiming& step = steps[i];
    Duration start{0};
    for (const std::string& dep : step.after) {
      const std::size_t d = index.at(dep);
      if (!waited_for[i] || ends[d] > start) {
        start = ends[d];
        waited_for[i] = d;
      }
    }
    std::optional<Duration> remaining = RemainingOf(step);
    if (!remaining) {
      out.lower_bound = true;
      out.unestimated.push_back(step.id);
    }
    // A running step has started: what it waited for is over.
    const Duration begins = step.state == StepState::kPending ? start : Duration(0);
    ends[i] = begins + remaining.value_or(Duration(0));
    if (step.state == StepState::kFinished) {
      ++out.steps_finished;
      done += step.expected.value_or(Duration(0));
    } else {
      if (step.state == StepState::kRunning) done += step.elapsed;
      to_do += remaining.value_or(Duration(0));
    }
  }

  // The unfinished step that ends last, and the chain it waited on.
  std::optional<std::size_t> last;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].state == StepState::kFinished) continue;
    if (!last || ends[i] > ends[*last]) last = i;
  }
  if (last) {
    out.remaining = ends[*last];
    for (std::optional<std::size_t> at = last; at && steps[*at].state != StepState::kFinished;
         at = steps[*at].state == StepState::kPending ? waited_for[*at] : std::nullopt) {
      out.critical_path.push_back(steps[*at].id);
    }
    std::reverse(out.critical_path.begin(), out.critical_path.end());
  }
  if (done + to_do > Duration(0)) {
    out.fraction_done = std::chrono::duration<double>(done).count() /
                        std::chrono::duration<double>(done + to_do).count();
  } else if (out.steps_total > 0) {
    out.fraction_done = static_cast<double>(out.steps_finished) / out.steps_total;
  }
  if (out.steps_total > 0 && out.steps_finished == out.steps_total) out.fraction_done = 1;
  return out;
}

Health WorkflowHealth(const std::vector<Health>& running_steps) {
  auto severity = [](Health h) {
    switch (h) {
      case Health::kDiverging: return 4;
      case Health::kStalled: return 3;
      case Health::kPlateaued: return 2;
      case Health::kProgressing: return 1;
      case Health::kUnknown: return 0;
    }
    return 0;
  };
  Health worst = Health::kUnknown;
  for (Health h : running_steps) {
    if (severity(h) > severity(worst)) worst = h;
  }
  return worst;
}

}  // namespace headway::workflow
