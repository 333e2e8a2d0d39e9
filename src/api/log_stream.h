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

 private:
  struct Source {
    LogFile file;
    long offset = 0;
    std::string partial;  // bytes after the last newline, held back while merging
  };
  std::vector<Source> sources_;
  bool prefix_ranks_;
};

// Streams a LogReader until `finished()` is true and the files are drained.
class LogFollowStream final : public ResponseStream {
 public:
  LogFollowStream(LogReader reader, std::function<bool()> finished)
      : reader_(std::move(reader)), finished_(std::move(finished)) {}
  bool Next(std::string& out) override;

 private:
  LogReader reader_;
  std::function<bool()> finished_;
};

}  // namespace headway::api
