// Reading job logs for the API: one rank raw, or all ranks merged line by
// line with a "[rank N] " prefix, each rank's log followed across the
// rotations of the local supervisor (api/log_cursor.h). Internal to api.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "api/http_server.h"
#include "api/log_cursor.h"
#include "core/job.h"
#include "core/time.h"

namespace headway::api {

// Where a reader starts in each rank's log: the oldest output kept (the
// rotated file first), or the newest `tail_lines` lines and/or
// `tail_bytes` bytes of it, on a line boundary. With `since`, lines written
// before it are left out; with `timestamps`, each line starts with when it
// was written (RFC 3339, as kubectl logs --timestamps). A line whose time
// is unknown (a log from before times were kept) is always sent, unstamped.
struct LogStart {
  std::optional<std::uint64_t> tail_lines;
  std::optional<std::uint64_t> tail_bytes;
  std::optional<Time> since;
  bool timestamps = false;
  bool needs_times() const { return since.has_value() || timestamps; }
};

class LogReader {
 public:
  // `prefix_ranks`: prefix each line with its rank (for merged multi-rank output).
  LogReader(std::vector<LogFile> files, bool prefix_ranks, LogStart start = {});
  // Appends whatever was written since the last call, at most 1 MiB per
  // rank. With `flush_partial`, an unterminated last line is emitted too
  // once its rank's file is read to the end (the writer is done).
  void ReadNew(std::string& out, bool flush_partial);
  // Starts reading files of `files` not read yet (a rank whose log appeared late).
  void AddMissing(const std::vector<LogFile>& files);

 private:
  struct Source {
    LogFile file;
    LogCursor cursor;
    std::string partial;           // bytes after the last newline, held back while merging
    std::vector<LogTimeAt> times;  // when the bytes of `partial` were written
    std::int64_t partial_ms = -1;  // when its first byte was (-1: unknown)
  };
  static Source Open(LogFile file, const LogStart& start);
  // Moves the complete lines of s.partial to `out`, prefixed and filtered as asked.
  void TakeLines(Source& s, std::string& out, bool flush_partial, bool at_end);
  std::vector<Source> sources_;
  bool prefix_ranks_;
  LogStart start_;  // for files that appear later
};

// What a follower needs to know about a job on each poll.
struct FollowView {
  bool finished = false;       // the job reached a terminal state
  int attempt = 0;             // its latest attempt
  std::vector<LogFile> files;  // that attempt's log files, already filtered by rank
};

// Streams a job's logs until it has finished and the files are drained. When
// the job restarts, it moves on to the new attempt's files (unless pinned to
// one attempt) after a marker line. A view that says `finished` from the
// start makes it a plain read of everything written so far.
//
// With `limit_bytes`, it sends only whole lines, at most that many bytes of
// them; if more remains, it ends with the line
// "headway: output cut at limit_bytes=N" (not counted in N).
class LogFollowStream final : public ResponseStream {
 public:
  LogFollowStream(std::function<FollowView()> view, int attempt, std::vector<LogFile> files,
                  bool prefix_ranks, bool pin_attempt, LogStart start = {},
                  std::optional<std::uint64_t> limit_bytes = std::nullopt);
  bool Next(std::string& out) override;
  // At once while there is output to send, else the usual poll interval.
  std::chrono::milliseconds interval() const override;

 private:
  bool Read(std::string& out);  // the stream so far, before the limit
  std::function<FollowView()> view_;
  int attempt_;
  LogReader reader_;
  LogStart next_attempt_start_;  // a new attempt's logs: all of them, filtered as asked
  bool prefix_ranks_;
  bool pin_attempt_;
  std::optional<std::uint64_t> limit_bytes_;
  std::uint64_t sent_ = 0;  // bytes sent under limit_bytes_
  std::string held_;        // a partial last line, held back under limit_bytes_
  bool busy_ = false;       // the last Next found output
};

}  // namespace headway::api
