#include "cli/resource_commands.h"

#include <iostream>
#include <utility>

#include "cli/artifact_commands.h"
#include "cli/experiment_commands.h"
#include "cli/job_commands.h"
#include "cli/notebook_commands.h"
#include "cli/workflow_commands.h"

namespace headway::cli {
namespace {

struct ResourceName {
  const char* name;
  ResourceKind kind;
};

// Plural, singular and short name of each kind, as kubectl accepts them.
constexpr ResourceName kResourceNames[] = {
    {"jobs", ResourceKind::kJobs},
    {"job", ResourceKind::kJobs},
    {"experiments", ResourceKind::kExperiments},
    {"experiment", ResourceKind::kExperiments},
    {"exp", ResourceKind::kExperiments},
    {"workflows", ResourceKind::kWorkflows},
    {"workflow", ResourceKind::kWorkflows},
    {"wf", ResourceKind::kWorkflows},
    {"notebooks", ResourceKind::kNotebooks},
    {"notebook", ResourceKind::kNotebooks},
    {"nb", ResourceKind::kNotebooks},
    {"artifacts", ResourceKind::kArtifacts},
    {"artifact", ResourceKind::kArtifacts},
    {"art", ResourceKind::kArtifacts},
    {"queues", ResourceKind::kQueues},
    {"queue", ResourceKind::kQueues},
    {"nodes", ResourceKind::kNodes},
    {"node", ResourceKind::kNodes},
};

bool VerbApplies(const std::string& verb, ResourceKind kind) {
  if (kind == ResourceKind::kQueues || kind == ResourceKind::kNodes) return verb == "get";
  return true;
}

// `o` naming one of its names at a time, for commands that take one.
template <typename Command>
int ForEachName(const Options& o, Command command) {
  int result = kExitOk;
  for (const std::string& name : o.names) {
    Options one = o;
    one.name = name;
    if (int code = command(one); code != kExitOk) result = code;
  }
  return result;
}

int DeleteExperiments(const Options& o) {
  return ForEachName(o, [](const Options& one) { return ExpDelete(one); });
}

}  // namespace

std::optional<ResourceKind> ParseResourceKind(const std::string& name) {
  for (const ResourceName& r : kResourceNames) {
    if (name == r.name) return r.kind;
  }
  return std::nullopt;
}

std::vector<std::string> ResourceNames(const std::string& verb) {
  std::vector<std::string> names;
  for (const ResourceName& r : kResourceNames) {
    if (VerbApplies(verb, r.kind)) names.emplace_back(r.name);
  }
  return names;
}

int GetResource(const Options& o) {
  auto kind = ParseResourceKind(o.resource);
  if (!kind) return kExitUsage;  // the parser's check refuses it first
  if (*kind != ResourceKind::kJobs && (o.watch || !o.sort_by.empty())) {
    std::cerr << "error: --watch and --sort-by apply to jobs only\n";
    return kExitUsage;
  }
  switch (*kind) {
    case ResourceKind::kExperiments:
      return ExpGet(o);
    case ResourceKind::kNotebooks:
      return NotebookList(o);
    case ResourceKind::kArtifacts:
      return ArtifactsList(o);
    default:
      return Get(o);  // jobs, workflows, queues, nodes
  }
}

int DescribeResource(const Options& o) {
  auto kind = ParseResourceKind(o.resource);
  if (!kind) return kExitUsage;
  switch (*kind) {
    case ResourceKind::kJobs:
      return Describe(o);
    case ResourceKind::kExperiments:
      return ExpDescribe(o);
    case ResourceKind::kWorkflows:
      return WorkflowGet(o);
    case ResourceKind::kNotebooks: {
      // A notebook's whole record; its table row is `get notebook NAME`.
      Options detail = o;
      if (detail.output.empty()) detail.output = "yaml";
      return NotebookList(detail);
    }
    case ResourceKind::kArtifacts:
      return ArtifactsDescribe(o, /*lineage_only=*/false);
    default:
      std::cerr << "error: describe takes jobs, experiments, workflows, notebooks or artifacts\n";
      return kExitUsage;
  }
}

int DeleteResources(const Options& o) {
  auto kind = ParseResourceKind(o.resource);
  if (!kind) return kExitUsage;
  if (o.force && *kind != ResourceKind::kJobs) {
    std::cerr << "error: --force applies to jobs only (stop the "
              << (*kind == ResourceKind::kExperiments ? "experiment" : "resource")
              << " first, then delete it)\n";
    return kExitUsage;
  }
  switch (*kind) {
    case ResourceKind::kJobs:
      return DeleteJobs(o);
    case ResourceKind::kExperiments:
      return DeleteExperiments(o);
    case ResourceKind::kWorkflows:
      return ForEachName(o, [](const Options& one) { return WorkflowDelete(one); });
    case ResourceKind::kNotebooks:
      return ForEachName(o, [](const Options& one) { return NotebookAct(one, "delete"); });
    case ResourceKind::kArtifacts:
      return ForEachName(o, [](const Options& one) { return ArtifactsRemove(one); });
    default:
      std::cerr << "error: delete takes jobs, experiments, workflows, notebooks or artifacts\n";
      return kExitUsage;
  }
}

}  // namespace headway::cli
