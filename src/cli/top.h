// `headway top`: a live, sorted jobs table that fits the terminal.
//
// On a terminal (stdin and stdout both ttys) it draws on the alternate
// screen, redraws in place every interval and reads single keys (raw tty):
//   q / Ctrl-C  quit          s / >  next sort column    <  previous
//   r           reverse       p e n g a t  sort by progress, eta, name, gpus, age, state
// The terminal is restored on every way out, SIGINT, SIGTERM and SIGHUP
// included. While the server is away it keeps the last table and says it is
// reconnecting, with backoff. Without a terminal it prints plain tables (one
// by default; --iterations N prints N).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace headway::cli {

struct TopView {
  int rows = 24;     // terminal lines
  int columns = 80;  // terminal columns
  std::string sort_key = "progress";
  bool descending = true;
  bool wide = false;
  std::string server;  // shown in the title
  std::string notice;  // a line under the title, e.g. "reconnecting"
};

// Sort keys `s` cycles through, in order, and whether each sorts descending by default.
const std::vector<std::pair<std::string, bool>>& TopSortKeys();

// One screen: a title line, a notice line, the table header and as many
// rows as fit (the last line says how many more there are), each line cut
// to `columns` display columns. Lines end with "\n"; no escape sequences.
std::string RenderTop(std::vector<nlohmann::json> jobs, const TopView& view, Time now);

struct TopOptions {
  double interval_s = 2;
  int iterations = 0;  // 0: until quit (1 without a terminal, unless set)
  bool iterations_set = false;
  TopView view;
};

// Runs top; `fetch` gets the jobs (an Unavailable status: the server is away,
// retried with backoff; another error ends top with exit 1).
int RunTop(const TopOptions& options,
           const std::function<Result<std::vector<nlohmann::json>>()>& fetch);

}  // namespace headway::cli
