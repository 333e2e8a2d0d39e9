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

#include <optional>
#include <string>
#include <vector>

#include "core/health.h"
#include "core/status.h"
#include "core/time.h"

namespace headway::workflow {

enum class StepState {
  kPending,    // not started (waiting for the steps it depends on, or queued)
  kRunning,
  kFinished,   // succeeded, failed, errored or skipped: it takes no more time
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
