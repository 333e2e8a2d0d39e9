#include "sim_settings.h"

#include <cstdio>
#include <cstdlib>

namespace headway::sim {
namespace {

bool ParseSeconds(const std::string& value, double& out) {
  char* end = nullptr;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(v >= 0)) return false;
  out = v;
  return true;
}

}  // namespace

int ParseArgs(int argc, char** argv, Settings& set, DrawOptions& draw, std::string& quota_spec,
              std::vector<std::string>& args) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      args.push_back(arg);
      continue;
    }
    std::string value = i + 1 < argc ? argv[++i] : "";
    double v = 0;
    bool ok = ParseSeconds(value, v);
    if (arg == "--starvation-bound" && value == "off") {
      set.headway.starvation_bound.reset();
    } else if (arg == "--starvation-bound" && ok) {
      set.headway.starvation_bound = Duration(static_cast<std::int64_t>(v * 1000));
    } else if (arg == "--aware-starvation-bound" && value == "off") {
      set.aware_starvation_bound.reset();
    } else if (arg == "--aware-starvation-bound" && ok) {
      set.aware_starvation_bound = Duration(static_cast<std::int64_t>(v * 1000));
    } else if (arg == "--eta-error" && ok) {
      draw.eta_sigma = v;
    } else if (arg == "--limit-spread" && ok) {
      draw.limit_sigma = v;
    } else if (arg == "--early-end-rate" && ok && v <= 1) {
      draw.early_end_rate = v;
    } else if (arg == "--quotas" && !value.empty()) {
      quota_spec = value;
    } else if (arg == "--restart-cost" && ok) {
      set.restart_cost = v;
      set.headway.restart_cost = Duration(static_cast<std::int64_t>(v * 1000));
    } else if (arg == "--borrow" && ok && v >= 1) {
      set.borrow = v;
    } else if (arg == "--tick" && ok && v > 0) {
      set.tick = v;
    } else if (arg == "--starvation-slowdown" && ok) {
      set.headway.starvation_slowdown = v;
    } else if (arg == "--balanced-slowdown" && ok && v > 0) {
      set.balanced_slowdown = v;
    } else if (arg == "--checkpoint-cost" && ok) {
      set.checkpoints.cost = v;
    } else if (arg == "--checkpoint-interval" && ok && v > 0) {
      set.checkpoints.fixed_interval = v;
    } else if (arg == "--gpu-failure-rate" && ok) {
      set.gpu_failure_rate = v;
    } else if (arg == "--las-threshold" && ok && v > 0) {
      set.las_threshold = v;
    } else if (arg == "--elastic-share" && ok && v <= 1) {
      set.elastic.share = v;
    } else if (arg == "--elastic-max" && ok && v >= 1) {
      set.elastic.max_factor = v;
    } else if (arg == "--elastic-min" && ok && v <= 1) {
      set.elastic.min_fraction = v;
    } else if (arg == "--elastic-seed" && ok) {
      set.elastic.seed = static_cast<unsigned>(v);
    } else if (arg == "--elastic-start" && (value == "min" || value == "nominal")) {
      set.elastic.start_at_min = value == "min";
    } else if (arg == "--resize-cost" && ok) {
      set.resize_cost = v;
    } else if (arg == "--preempt-ratio" && ok && v > 0) {
      set.headway.preempt_ratio = v;
    } else {
      std::fprintf(stderr, "%s: bad or missing value \"%s\"\n", arg.c_str(), value.c_str());
      return 2;
    }
  }
  if (args.empty()) {
    std::fprintf(
        stderr,
        "usage: simulator TRACE.csv [nodes[,nodes...]] [gpus_per_node] [--quotas equal|demand|"
        "TEAM=FRACTION,...]\n"
        "                 [--starvation-bound S|off] [--aware-starvation-bound S|off]\n"
        "                 [--balanced-slowdown X] [--eta-error SIGMA] [--limit-spread SIGMA]\n"
        "                 [--early-end-rate P] [--restart-cost S] [--borrow X] [--tick S]\n"
        "                 [--preempt-ratio X] [--las-threshold GPU_SECONDS]\n"
        "                 [--checkpoint-cost S] [--checkpoint-interval S] [--gpu-failure-rate R]\n"
        "                 [--elastic-share P] [--elastic-max X] [--elastic-min F] [--resize-cost "
        "S]\n"
        "                 [--elastic-start nominal|min] [--elastic-seed N]\n"
        "       simulator --generate N SEED\n");
    return 2;
  }
  return 0;
}

}  // namespace headway::sim
