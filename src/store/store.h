// The Store keeps every job, its events and its log index durably. It is the
// source of truth: the server holds no job state that is not written here
// first, so a restart loses nothing that was acknowledged.
//
// Thread safety: all methods may be called from any thread concurrently.
// Errors: NotFound for an unknown job, Conflict for a duplicate name,
// Unavailable when the database cannot be read or written.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/job.h"
#include "core/status.h"

namespace headway {

class Store {
 public:
  virtual ~Store() = default;

  // Inserts a new job and its first event atomically; assigns job.submit_seq.
  virtual Status CreateJob(Job& job, const JobEvent& submitted) = 0;
  // Replaces the job's row and appends events, in one transaction.
  virtual Status SaveJob(const Job& job, const std::vector<JobEvent>& events) = 0;
  virtual Result<Job> GetJob(std::string_view name) = 0;
  // Ordered by submission.
  virtual Result<std::vector<Job>> ListJobs(const JobFilter& filter) = 0;
  // Events of one job with id > after_id, oldest first.
  virtual Result<std::vector<JobEvent>> ListEvents(std::string_view job,
                                                   std::int64_t after_id = 0) = 0;

  virtual Status AddLogFile(const LogFile& log) = 0;
  // Ordered by attempt, then rank.
  virtual Result<std::vector<LogFile>> ListLogFiles(std::string_view job) = 0;
};

// Opens (creating if needed) a SQLite database in WAL mode at `path` and
// brings its schema up to date. Fails with Unavailable if the file cannot be
// opened, or with Internal if it was written by a newer Headway.
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path);

}  // namespace headway
