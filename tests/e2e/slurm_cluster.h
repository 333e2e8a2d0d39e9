// A real single-node Slurm cluster for tests: munged, slurmctld and slurmd
// from Debian's packages, on loopback ports of their own, with four logical
// GPUs backed by plain files (gres), select/cons_tres and sched/backfill.
#pragma once

#include <string>

namespace headway::testing {

class SlurmCluster {
 public:
  // Starts the daemons; on failure `error()` says why (not root, not installed...).
  SlurmCluster();
  ~SlurmCluster();

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& conf() const { return conf_; }
  // `scontrol show job ID -o`, for assertions.
  std::string ShowJob(const std::string& id) const;

 private:
  std::string Start();
  std::string dir_, conf_, error_;
};

}  // namespace headway::testing
