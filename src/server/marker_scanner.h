// The zero-code fallback of the progress protocol: lines of the form
// `HEADWAY {"step": ...}` in a job's output are reports. The scanner keeps a
// read offset per log file and returns the reports found since the last
// scan. Rescanning from the start after a restart is harmless: reports are
// idempotent on (job, step).
//
// Thread safety: not thread-safe; one control loop owns it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/progress_report.h"

namespace headway {

class MarkerScanner {
 public:
  // Reports in the complete lines appended to `files` since the last call.
  // Malformed marker lines are counted in `malformed` and skipped.
  std::vector<ProgressReport> Scan(const std::vector<LogFile>& files, int& malformed);
  void Forget(const std::vector<LogFile>& files);

 private:
  struct Cursor {
    long offset = 0;
    std::string partial;
  };
  std::map<std::string, Cursor> cursors_;  // by path
};

}  // namespace headway
