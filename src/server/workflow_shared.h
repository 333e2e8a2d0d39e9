// What the workflow controller's two files (workflows; WorkflowTemplates
// and CronWorkflows) share. Internal to server/.
#pragma once

#include <string>

#include "api/request_context.h"
#include "core/status.h"
#include "core/time.h"
#include "workflow/manifest.h"

namespace headway::workflow_shared {

// Where a step's input artifacts are staged, under its job's home.
inline constexpr const char* kInputsDir = ".headway-inputs";
// The directory `dirfd/name`, opened without following a link; -1 if none.
int OpenDirNoFollow(int dirfd, const char* name);
// A time as Argo writes it: RFC 3339, whole seconds.
std::string ArgoTime(Time t);
// Five random [a-z0-9]: what generateName appends.
std::string RandomNameSuffix();
// A workflow whose written-out loops alone make more nodes than a workflow
// may have is refused before it is stored.
Status CheckPlannedNodes(const workflow::WorkflowSpec& spec);
// The workflow spec of a Workflow, WorkflowTemplate or CronWorkflow.
const workflow::WorkflowSpec& SpecOf(const workflow::Manifest& manifest);
// What a manifest's jobs will ask of the pool: its team, and the highest
// priority any of them asks for (a CronWorkflow's workflowMetadata included).
api::PoolRequest PoolRequestOf(const workflow::Manifest& manifest);

}  // namespace headway::workflow_shared
