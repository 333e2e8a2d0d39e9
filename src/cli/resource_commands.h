// One grammar for every resource, kubectl-style: `headway get|describe|delete
// RESOURCE [NAME...]`, where RESOURCE is a kind's plural, singular or short
// name (jobs/job, experiments/experiment/exp, workflows/workflow/wf,
// notebooks/notebook/nb, artifacts/artifact/art; queues and nodes for get).
// Each verb hands the request to the kind's own command, so `get experiments`
// and `exp get` print the same.
// Internal to cli/: commands.cc registers them (see cli/commands.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/command_support.h"

namespace headway::cli {

enum class ResourceKind {
  kJobs,
  kExperiments,
  kWorkflows,
  kNotebooks,
  kArtifacts,
  kQueues,
  kNodes
};

// The kind a name given on the command line means; nullopt if none.
std::optional<ResourceKind> ParseResourceKind(const std::string& name);
// Every name `verb` accepts ("get", "describe" or "delete"), for the usage
// check and completion.
std::vector<std::string> ResourceNames(const std::string& verb);

int GetResource(const Options& o);
int DescribeResource(const Options& o);
// Deletes each of o.names (artifacts: NAME:VERSION).
int DeleteResources(const Options& o);

}  // namespace headway::cli
