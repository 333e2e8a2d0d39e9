// A workflow's progress and ETA from its critical path, and its health.
//
// Argo says how many nodes are done ("3/7"); a user waiting on a pipeline
// wants to know when it will end. The time left is the longest chain of
// steps still to run (the critical path): a running step counts with its own
// live ETA (from the progress its job reports), a step not started yet with
// the typical duration of past runs of the same template, each starting when
// the last step it waits for ends. Steps with no estimate at all count as
// zero; the result then says it is a lower bound and names them.
//
// Pure: no clock (elapsed times are inputs), no I/O. Thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/health.h"
#include "core/status.h"
#include "core/time.h"
#include "workflow/engine.h"

namespace headway::workflow {

enum class StepState {
  kPending,  // not started (waiting for the steps it depends on, or queued)
  kRunning,
  kFinished,  // succeeded, failed, errored or skipped: it takes no more time
};

struct StepTiming {
  std::string id;
  std::vector<std::string> after;  // ids of the steps it waits for
  StepState state = StepState::kPending;
  // Running: how long it has run, and its own ETA when its job reports one.
  Duration elapsed{0};
  std::optional<Duration> eta;
  // The typical duration of this step's template (past runs), when known;
  // for a finished step, how long it took.
  std::optional<Duration> expected;
};

struct WorkflowEta {
  Duration remaining{0};
  // True when some step still to run has no estimate: `remaining` is then a
  // lower bound, and `unestimated` names those steps.
  bool lower_bound = false;
  std::vector<std::string> unestimated;
  // The chain of unfinished steps that ends last, first to last.
  std::vector<std::string> critical_path;
  // Time done over time in all, with running steps' elapsed time as done and
  // their remaining time as to do; by step counts when no step has a time.
  double fraction_done = 0;
  int steps_finished = 0;
  int steps_total = 0;
};

// InvalidArgument for an unknown id in `after`, a duplicate id, or a cycle.
Result<WorkflowEta> EstimateWorkflow(const std::vector<StepTiming>& steps);

// The workflow's health from its running steps': the worst of them
// (Diverging, then Stalled, then Plateaued, then Progressing), so one
// stalled step makes the workflow stalled; Unknown with none to judge.
Health WorkflowHealth(const std::vector<Health>& running_steps);

}  // namespace headway::workflow

// ---------------------------------------------------------------------------
// The steps of a running workflow, for EstimateWorkflow

namespace headway::workflow {

// What the caller knows besides the workflow: a running step's live ETA
// (from the progress its job reports) and how long a template's steps
// usually take (past runs); each may say nothing.
struct StepKnowledge {
  std::function<std::optional<Duration>(const Node& pod)> live_eta;
  std::function<std::optional<Duration>(const std::string& template_name)> typical;
  std::function<const Template*(const TemplateRef& ref)> resolve_ref;
};

// The workflow's pod and suspend steps, those that exist and those still to
// come, with what each waits for: a DAG task waits for the tasks its
// `depends`/`dependencies` name, a step group for the group before it, a
// nested template for what its caller waited for. A loop not expanded yet
// counts as one step. Ids are node names.
std::vector<StepTiming> PlanTimings(const WorkflowSpec& spec, const WorkflowState& state, Time now,
                                    const StepKnowledge& know);

}  // namespace headway::workflow
