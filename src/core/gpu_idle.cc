#include "core/gpu_idle.h"

#include <algorithm>

namespace headway {

GpuIdleVerdict DecideGpuIdle(const HealthPolicies& policies, const std::vector<int>& gpu_ids,
                             const std::map<int, double>& utilization, GpuIdleWatch& watch,
                             Time now) {
  GpuIdleVerdict verdict;
  if (!policies.on_gpu_idle) return verdict;
  bool read = false;
  for (int id : gpu_ids) {
    auto it = utilization.find(id);
    if (it == utilization.end()) continue;
    verdict.highest_percent = read ? std::max(verdict.highest_percent, it->second) : it->second;
    read = true;
  }
  if (!read) return verdict;
  if (verdict.highest_percent >= policies.gpu_idle_below_percent) {
    watch.busy_at = now;
    watch.acted = false;
    return verdict;
  }
  verdict.idle_for = now - watch.busy_at;
  if (watch.acted || verdict.idle_for < policies.gpu_idle_after) return verdict;
  watch.acted = true;
  verdict.action = *policies.on_gpu_idle == HealthAction::kStop ? GpuIdleVerdict::Action::kStop
                                                                : GpuIdleVerdict::Action::kNotify;
  return verdict;
}

}  // namespace headway
