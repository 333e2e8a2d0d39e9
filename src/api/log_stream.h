// Reading job logs for the API: one rank raw, or all ranks merged line by
// line with a "[rank N] " prefix. Internal to api.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "api/http_server.h"
#include "core/job.h"

namespace headway::api {

class LogReader {
 public:
  // `prefix_ranks`: prefix each line with its rank (for merged multi-rank output).
  LogReader(std::vector<LogFile> files, bool prefix_ranks);
  // Appends whatever was written since the last call. With `flush_partial`,
  // an unterminated last line is emitted too (the writer is done).
  void ReadNew(std::string& out, bool flush_partial);
  // Starts reading files of `files` not read yet (a rank whose log appeared late).
  void AddMissing(const std::vector<LogFile>& files);

 private:
  struct Source {
    LogFile file;
    long offset = 0;
    std::string partial;  // bytes after the last newline, held back while merging
  };
  std::vector<Source> sources_;
  bool prefix_ranks_;
};

// What a follower needs to know about a job on each poll.
struct FollowView {
  bool finished = false;  // the job reached a terminal state
  int attempt = 0;        // its latest attempt
  std::vector<LogFile> files;  // that attempt's log files, already filtered by rank
};

// Streams a job's logs until it has finished and the files are drained. When
// the job restarts, it moves on to the new attempt's files (unless pinned to
// one attempt) after a marker line.
class LogFollowStream final : public ResponseStream {
 public:
  LogFollowStream(std::function<FollowView()> view, int attempt, std::vector<LogFile> files,
                  bool prefix_ranks, bool pin_attempt);
  bool Next(std::string& out) override;

 private:
  std::function<FollowView()> view_;
  int attempt_;
  LogReader reader_;
  bool prefix_ranks_;
  bool pin_attempt_;
};

}  // namespace headway::api
