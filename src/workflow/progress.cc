#include "workflow/progress.h"

#include <algorithm>
#include <map>
#include <set>

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
      if (waiting[i] > 0)
        return InvalidArgument("step '" + steps[i].id + "' is in a dependency cycle");
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
      case Health::kDiverging:
        return 5;
      case Health::kStalled:
        return 4;
      case Health::kOverfitting:
        return 3;
      case Health::kPlateaued:
        return 2;
      case Health::kProgressing:
        return 1;
      case Health::kUnknown:
        return 0;
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

namespace headway::workflow {
namespace {

class Planner {
 public:
  Planner(const WorkflowSpec& spec, const WorkflowState& state, Time now, const StepKnowledge& know)
      : spec_(spec), state_(state), now_(now), know_(know) {}

  // Adds the steps of `tmpl` run as node `name` after `after`; returns the
  // ids whose end ends it.
  std::vector<std::string> Plan(const Template* tmpl, const std::string& name,
                                const std::vector<std::string>& after, int depth = 0) {
    if (tmpl == nullptr || depth > 32) return after;
    const Node* node = state_.FindByName(name);
    if (node != nullptr &&
        (node->phase == NodePhase::kSkipped || node->phase == NodePhase::kOmitted)) {
      return after;
    }
    switch (tmpl->kind) {
      case TemplateKind::kContainer:
      case TemplateKind::kScript:
      case TemplateKind::kSuspend:
        return {Leaf(tmpl, name, node, after)};
      case TemplateKind::kSteps: {
        std::vector<std::string> current = after;
        for (std::size_t g = 0; g < tmpl->steps->size(); ++g) {
          const std::string group = name + "[" + std::to_string(g) + "]";
          std::vector<std::string> ends;
          for (const Task& step : (*tmpl->steps)[g]) {
            for (const std::string& end : Call(step, group + "." + step.name, current, depth)) {
              ends.push_back(end);
            }
          }
          if (!ends.empty()) current = std::move(ends);
        }
        return current;
      }
      case TemplateKind::kDag: {
        std::map<std::string, std::vector<std::string>> ends;
        std::set<std::string> depended;
        std::vector<const Task*> pending;
        for (const Task& t : tmpl->dag->tasks) pending.push_back(&t);
        // Tasks in an order where dependencies come first (bounded passes).
        for (std::size_t pass = 0; !pending.empty() && pass <= tmpl->dag->tasks.size(); ++pass) {
          std::vector<const Task*> later;
          for (const Task* t : pending) {
            std::vector<std::string> deps = t->dependencies;
            if (!t->depends.empty()) {
              auto expr = DependsExpr::Parse(t->depends);
              if (expr.ok()) deps = expr->Tasks();
            }
            std::vector<std::string> waits;
            bool ready = true;
            for (const std::string& d : deps) {
              depended.insert(d);
              auto it = ends.find(d);
              if (it == ends.end()) {
                ready = false;
                break;
              }
              waits.insert(waits.end(), it->second.begin(), it->second.end());
            }
            if (!ready) {
              later.push_back(t);
              continue;
            }
            if (deps.empty()) waits = after;
            ends[t->name] = Call(*t, name + "." + t->name, waits, depth);
          }
          pending = std::move(later);
        }
        std::vector<std::string> out;
        for (const auto& [task, task_ends] : ends) {
          if (!depended.count(task)) out.insert(out.end(), task_ends.begin(), task_ends.end());
        }
        return out.empty() ? after : out;
      }
    }
    return after;
  }

  std::vector<StepTiming> steps;

 private:
  const Template* TemplateOf(const Task& task) {
    if (task.template_ref) {
      return know_.resolve_ref ? know_.resolve_ref(*task.template_ref) : nullptr;
    }
    return spec_.FindTemplate(task.template_name);
  }

  // A step or task: one call, or each of its loop's children once expanded.
  std::vector<std::string> Call(const Task& task, const std::string& name,
                                const std::vector<std::string>& after, int depth) {
    const Template* tmpl = TemplateOf(task);
    if (!task.HasLoop()) return Plan(tmpl, name, after, depth + 1);
    std::vector<std::string> ends;
    const std::string prefix = name + "(";
    for (auto it = state_.nodes.begin(); it != state_.nodes.end(); ++it) {
      const Node& n = it->second;
      if (n.name.size() <= prefix.size() || n.name.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string rest = n.name.substr(prefix.size());
      // The loop's own children, "(INDEX:ITEM)": not their retry attempts'
      // "(N)" after it, nor nodes inside them.
      if (rest.back() == ')' && rest.find(':') != std::string::npos &&
          rest.find('(') == std::string::npos && rest.find(").") == std::string::npos) {
        auto more = Plan(tmpl, n.name, after, depth + 1);
        ends.insert(ends.end(), more.begin(), more.end());
      }
    }
    if (ends.empty()) return Plan(tmpl, name, after, depth + 1);  // not expanded yet
    return ends;
  }

  std::string Leaf(const Template* tmpl, const std::string& name, const Node* node,
                   const std::vector<std::string>& after) {
    StepTiming step;
    step.id = name;
    step.after = after;
    if (know_.typical && tmpl->kind != TemplateKind::kSuspend)
      step.expected = know_.typical(tmpl->name);
    if (node != nullptr) {
      // A retry's running attempt stands for it.
      const Node* attempt = node;
      if (node->type == NodeType::kRetry && !node->children.empty()) {
        auto it = state_.nodes.find(node->children.back());
        if (it != state_.nodes.end()) attempt = &it->second;
      }
      if (node->Fulfilled()) {
        step.state = StepState::kFinished;
        if (node->started_at && node->finished_at)
          step.expected = *node->finished_at - *node->started_at;
      } else if (attempt->phase == NodePhase::kRunning) {
        step.state = StepState::kRunning;
        if (attempt->started_at) step.elapsed = now_ - *attempt->started_at;
        if (know_.live_eta && attempt->type == NodeType::kPod) step.eta = know_.live_eta(*attempt);
      }
    }
    steps.push_back(std::move(step));
    return name;
  }

  const WorkflowSpec& spec_;
  const WorkflowState& state_;
  const Time now_;
  const StepKnowledge& know_;
};

}  // namespace

std::vector<StepTiming> PlanTimings(const WorkflowSpec& spec, const WorkflowState& state, Time now,
                                    const StepKnowledge& know) {
  Planner planner(spec, state, now, know);
  planner.Plan(spec.FindTemplate(spec.entrypoint), state.name, {});
  // A name seen twice (a template planned from two places) is kept once.
  std::vector<StepTiming> unique;
  std::set<std::string> seen;
  for (StepTiming& s : planner.steps) {
    if (seen.insert(s.id).second) unique.push_back(std::move(s));
  }
  return unique;
}

}  // namespace headway::workflow
