// The zero-code fallback of the progress protocol: lines of the form
// `HEADWAY {"step": ...}` in a job's output are reports. The scanner keeps a
// read offset per log file and returns the reports found since the last
// scan, following each file across rotations (api/log_cursor.h).
// Rescanning from the start after a restart is harmless: reports are
// idempotent on (job, step).
//
// It holds each file it follows open; one not scanned for a minute is
// closed (its job ended or restarted).
//
// Thread safety: not thread-safe; one control loop owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "api/log_cursor.h"
#include "core/job.h"
#include "core/progress_report.h"

namespace headway {

class MarkerScanner {
 public:
  // Reports in the complete lines appended to `files` since the last call
  // (DecodeMarkerReports: top-level numbers are metrics). Malformed marker
  // lines are counted in `malformed` and skipped; `why` (if given and still
  // empty) gets what was wrong with the first, and where. Files seen rotated
  // (PATH.1 exists) for the first time are added to `rotated`.
  // With `stdout_metrics`, rank 0's other lines are also read for those
  // metrics as `name=value` pairs (core/stdout_metrics.h); each line that
  // holds some is the next step (1, 2, ...), as it is the next observation.
  std::vector<ProgressReport> Scan(const std::vector<LogFile>& files, int& malformed,
                                   std::vector<LogFile>* rotated = nullptr,
                                   const std::set<std::string>* stdout_metrics = nullptr,
                                   std::string* why = nullptr);
  void Forget(const std::vector<LogFile>& files);

 private:
  struct Cursor {
    explicit Cursor(const std::string& path) : file(path) {}
    LogCursor file;
    std::string partial;
    bool rotated = false;                  // reported in `rotated` already
    std::int64_t stdout_observations = 0;  // lines read for stdout metrics so far
    std::chrono::steady_clock::time_point last_scan;
  };
  // Files not scanned for a minute (their job ended) are closed.
  void Sweep(std::chrono::steady_clock::time_point now);
  std::chrono::steady_clock::time_point last_sweep_;
  std::map<std::string, Cursor> cursors_;  // by path
};

}  // namespace headway
