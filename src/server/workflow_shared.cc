#include "server/workflow_shared.h"

#include <fcntl.h>

#include <random>
#include <type_traits>
#include <variant>

#include "workflow/engine.h"
#include "workflow/substitute.h"

namespace headway::workflow_shared {

namespace wf = workflow;

int OpenDirNoFollow(int dirfd, const char* name) {
  return ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

std::string ArgoTime(Time t) { return wf::FormatRfc3339(ToUnixMillis(t) / 1000); }

std::string RandomNameSuffix() {
  static thread_local std::mt19937 rng(std::random_device{}());
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  for (int i = 0; i < 5; ++i) out += kChars[rng() % 36];
  return out;
}

// A workflow whose written-out loops alone make more nodes than a workflow
// may have is refused before it is stored: 1000 x 1000 steps would otherwise
// queue a million jobs, and stall every team's workflows while expanding.
Status CheckPlannedNodes(const wf::WorkflowSpec& spec) {
  const std::size_t planned = wf::PlannedNodes(spec);
  if (planned <= wf::kMaxWorkflowNodes) return Status::Ok();
  return InvalidArgument("its loops would make more than " + std::to_string(wf::kMaxWorkflowNodes) +
                         " nodes, the most a workflow may have (nested loops multiply); "
                         "split it into several workflows")
      .WithField("spec.templates");
}

const wf::WorkflowSpec& SpecOf(const wf::Manifest& manifest) {
  return std::visit(
      [](const auto& resource) -> const wf::WorkflowSpec& {
        if constexpr (std::is_same_v<std::decay_t<decltype(resource)>, wf::CronWorkflow>) {
          return resource.spec.workflow_spec;
        } else {
          return resource.spec;
        }
      },
      manifest.resource);
}

// What a manifest's jobs will ask of the pool: its team, and the highest
// priority any of them asks for (a CronWorkflow's workflowMetadata included).
api::PoolRequest PoolRequestOf(const wf::Manifest& manifest) {
  return std::visit(
      [](const auto& resource) {
        using T = std::decay_t<decltype(resource)>;
        api::PoolRequest pool{
            wf::HeadwayValue(resource.metadata, nullptr, wf::kTeamKey).value_or(JobSpec().team)};
        if constexpr (std::is_same_v<T, wf::CronWorkflow>) {
          const auto& extra = resource.spec.workflow_metadata;
          pool.priority = wf::HighestPriority(resource.metadata, resource.spec.workflow_spec,
                                              extra ? &*extra : nullptr);
        } else {
          pool.priority = wf::HighestPriority(resource.metadata, resource.spec);
        }
        return pool;
      },
      manifest.resource);
}

}  // namespace headway::workflow_shared
