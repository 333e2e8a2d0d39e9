// Workflows as the store keeps them: the submitted manifest and the status
// the workflow controller computes, both Argo-shaped JSON text (parsed by
// src/workflow/), beside the few fields queries need as columns (team,
// phase, times, labels). Nodes are kept one row each, so that a 10,000-node
// workflow is not rewritten whole when one node changes, and a node is found
// from the job that runs it. WorkflowTemplates and CronWorkflows are kept
// as manifests by kind and name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/time.h"

namespace headway {

struct WorkflowRecord {
  std::string name;      // unique among workflows
  std::int64_t seq = 0;  // given by the store at creation; orders and pages listings
  std::string team;
  std::string uid;
  std::string created_by;                     // "user/NAME", "cron/NAME", ...
  std::string phase;                          // Argo's: Pending, Running, Succeeded, Failed, Error
  std::map<std::string, std::string> labels;  // metadata.labels, for label selectors
  std::string manifest;                       // JSON: the Workflow as submitted (metadata, spec)
  std::string status;                         // JSON: Argo's WorkflowStatus without its nodes
  Time created_at{};
  std::optional<Time> started_at;
  std::optional<Time> finished_at;
  // Bumped by every save; a save from a stale read is refused (Conflict),
  // so two writers cannot lose each other's changes.
  std::int64_t revision = 0;
};

struct WorkflowNodeRecord {
  std::string workflow;
  std::string id;     // Argo's node id, unique within the workflow
  std::string phase;  // Argo's NodePhase
  std::string job;    // the Headway job running it; "" when none (DAG, skipped, suspend...)
  std::string body;   // JSON: Argo's NodeStatus
};

struct WorkflowFilter {
  std::string team;                  // empty: any
  std::optional<std::string> phase;  // only this phase
  bool finished_only = false;        // only finished ones (the archive)
  bool active_only = false;          // only unfinished ones
  // Each label must be present with this value (a label selector's equalities).
  std::map<std::string, std::string> labels;
  std::string uid;                     // only the workflow with this metadata.uid
  std::string name_prefix;             // only names starting with this
  std::optional<Time> created_after;   // exclusive
  std::optional<Time> created_before;  // exclusive
  // Newest first; after a page, pass its last seq as `before_seq` for the next.
  std::int64_t before_seq = 0;  // 0: from the newest
  std::size_t limit = 0;        // 0: all
};

// A WorkflowTemplate or CronWorkflow (kind), as JSON, with its team.
struct WorkflowManifestRecord {
  std::string kind;
  std::string name;
  std::string team;
  std::string body;
  Time created_at{};
  Time updated_at{};
  std::int64_t revision = 0;
};

}  // namespace headway
