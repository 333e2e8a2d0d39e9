#include "cli/top.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <iostream>
#include <thread>

#include "cli/job_table.h"
#include "cli/output.h"
#include "core/job.h"
#include "core/terminal_text.h"

namespace headway::cli {

using nlohmann::json;

const std::vector<std::pair<std::string, bool>>& TopSortKeys() {
  static const std::vector<std::pair<std::string, bool>> kKeys = {
      {"progress", true}, {"eta", false}, {"name", false},
      {"gpus", true},     {"age", false}, {"state", false}};
  return kKeys;
}

std::string RenderTop(std::vector<json> jobs, const TopView& view, Time now) {
  auto width = static_cast<std::size_t>(std::max(view.columns, 1));
  std::string out;
  auto line = [&](const std::string& text) { out += TruncateToWidth(text, width) + "\n"; };
  if (!SortJobs(jobs, view.sort_key, view.descending).ok()) (void)SortJobs(jobs, "name");
  // What runs or waits comes first, in the chosen order; then the ended
  // jobs, the most recently ended first: a screen of finished jobs would
  // otherwise hide the ones being watched.
  auto ended = [](const json& job) {
    auto state = ParseJobState(job.value("state", ""));
    return state && IsTerminal(*state);
  };
  auto first_ended =
      std::stable_partition(jobs.begin(), jobs.end(), [&](const json& job) { return !ended(job); });
  std::stable_sort(first_ended, jobs.end(), [](const json& a, const json& b) {
    auto finished = [](const json& job) {
      return job.contains("finished_at") && job["finished_at"].is_string()
                 ? job["finished_at"].get<std::string>()
                 : std::string();
    };
    return finished(a) > finished(b);  // RFC 3339 in UTC: text order is time order
  });
  line("headway top   " + std::to_string(jobs.size()) + " jobs   sort: " + view.sort_key +
       (view.descending ? " (desc)" : " (asc)") + "   " + Safe(view.server) + "   " +
       FormatRfc3339(now).substr(0, 19) + "   q quit  s sort  r reverse");
  line(Safe(view.notice));
  if (jobs.empty()) {
    line("No jobs.");
    return out;
  }
  // Title, notice and header take 3 lines; one more says what did not fit.
  int room = std::max(view.rows - 3, 1);
  std::size_t shown = jobs.size();
  if (static_cast<int>(jobs.size()) > room) shown = static_cast<std::size_t>(std::max(room - 1, 0));
  std::vector<json> visible(jobs.begin(), jobs.begin() + static_cast<std::ptrdiff_t>(shown));
  // Widths from the rows shown only, so one long name far below does not push every column.
  std::string table = JobsTable(visible, view.wide, now);
  if (visible.empty()) table = FormatTable(JobHeader(view.wide), {});
  std::size_t start = 0;
  while (start < table.size()) {
    std::size_t end = table.find('\n', start);
    if (end == std::string::npos) end = table.size();
    out += TruncateToWidth(std::string_view(table).substr(start, end - start), width, true) + "\n";
    start = end + 1;
  }
  if (shown < jobs.size()) {
    line("... " + std::to_string(jobs.size() - shown) + " more (a taller terminal shows them)");
  }
  return out;
}

namespace {

std::atomic<bool> g_quit{false};
std::atomic<bool> g_resized{false};
termios g_saved_termios;
bool g_raw = false;

void OnQuitSignal(int) { g_quit = true; }
void OnResize(int) { g_resized = true; }

// Puts the terminal back: the normal screen, the cursor, cooked input.
void RestoreTerminal() {
  if (!g_raw) return;
  g_raw = false;
  static const char kLeave[] = "\033[?25h\033[?1049l";
  ssize_t ignored = ::write(STDOUT_FILENO, kLeave, sizeof kLeave - 1);
  (void)ignored;
  ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &g_saved_termios);
}

bool EnterTerminal() {
  if (::tcgetattr(STDIN_FILENO, &g_saved_termios) != 0) return false;
  termios raw = g_saved_termios;
  raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);  // keys one by one, unseen; ISIG kept
  raw.c_cc[VMIN] = 0;
  raw.c_cc[VTIME] = 0;
  if (::tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0) return false;
  g_raw = true;
  std::atexit(RestoreTerminal);
  struct sigaction quit {};
  quit.sa_handler = OnQuitSignal;
  ::sigemptyset(&quit.sa_mask);
  ::sigaction(SIGINT, &quit, nullptr);
  ::sigaction(SIGTERM, &quit, nullptr);
  ::sigaction(SIGHUP, &quit, nullptr);
  struct sigaction resize {};
  resize.sa_handler = OnResize;
  ::sigemptyset(&resize.sa_mask);
  ::sigaction(SIGWINCH, &resize, nullptr);
  static const char kEnter[] = "\033[?1049h\033[?25l\033[H\033[2J";
  ssize_t ignored = ::write(STDOUT_FILENO, kEnter, sizeof kEnter - 1);
  (void)ignored;
  return true;
}

void TerminalSize(TopView& view) {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
    view.rows = ws.ws_row;
    view.columns = ws.ws_col;
  }
}

void Draw(const std::string& screen) {
  // Home, each line cleared to its end, then everything below cleared: no flicker.
  std::string out = "\033[H";
  std::size_t start = 0;
  while (start < screen.size()) {
    std::size_t end = screen.find('\n', start);
    if (end == std::string::npos) end = screen.size();
    out.append(screen, start, end - start);
    out += "\033[K";
    if (end + 1 < screen.size()) out += "\r\n";
    start = end + 1;
  }
  out += "\033[J";
  std::cout << out << std::flush;
}

// Applies a key; false when it quits.
bool HandleKey(char key, TopView& view) {
  const auto& keys = TopSortKeys();
  auto index = [&] {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (keys[i].first == view.sort_key) return i;
    }
    return std::size_t{0};
  };
  auto choose = [&](std::size_t i) {
    view.sort_key = keys[i].first;
    view.descending = keys[i].second;
  };
  switch (key) {
    case 'q':
    case 'Q':
    case 3:  // Ctrl-C when ISIG is off
      return false;
    case 's':
    case '>':
    case '\t':
      choose((index() + 1) % keys.size());
      break;
    case '<':
      choose((index() + keys.size() - 1) % keys.size());
      break;
    case 'r':
      view.descending = !view.descending;
      break;
    default:
      for (std::size_t i = 0; i < keys.size(); ++i) {
        if (keys[i].first[0] == key || (key == 't' && keys[i].first == "state")) choose(i);
      }
  }
  return true;
}

int PlainTop(const TopOptions& o, const std::function<Result<std::vector<json>>()>& fetch) {
  int iterations = o.iterations_set ? o.iterations : 1;
  for (int i = 0; iterations == 0 || i < iterations; ++i) {
    auto jobs = fetch();
    if (!jobs.ok()) {
      std::cerr << "error: " << Safe(jobs.status().message()) << "\n";
      return jobs.status().code() == StatusCode::kUnavailable ? 3 : 1;
    }
    TopView view = o.view;
    view.rows = 1 << 20;
    view.columns = 1 << 20;
    if (i > 0) std::cout << "\n";
    std::cout << RenderTop(*jobs, view, SystemClock().Now()) << std::flush;
    if (i + 1 == iterations) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(o.interval_s * 1000)));
  }
  return 0;
}

}  // namespace

int RunTop(const TopOptions& o, const std::function<Result<std::vector<json>>()>& fetch) {
  if (!::isatty(STDOUT_FILENO) || !::isatty(STDIN_FILENO) || !EnterTerminal()) {
    return PlainTop(o, fetch);
  }
  TopView view = o.view;
  std::vector<json> jobs;
  int result = 0;
  auto backoff = std::chrono::milliseconds(250);
  auto next_fetch = std::chrono::steady_clock::now();
  int fetched = 0;
  while (!g_quit) {
    bool redraw = false;
    if (std::chrono::steady_clock::now() >= next_fetch) {
      auto got = fetch();
      if (got.ok()) {
        jobs = std::move(*got);
        view.notice.clear();
        backoff = std::chrono::milliseconds(250);
        next_fetch = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int>(o.interval_s * 1000));
        ++fetched;
      } else if (got.status().code() == StatusCode::kUnavailable) {
        view.notice = "server unreachable (" + got.status().message() + "); reconnecting in " +
                      FormatSeconds(std::chrono::duration<double>(backoff).count());
        next_fetch = std::chrono::steady_clock::now() + backoff;
        backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
      } else {
        RestoreTerminal();
        std::cerr << "error: " << Safe(got.status().message()) << "\n";
        return 1;
      }
      redraw = true;
    }
    if (g_resized.exchange(false)) redraw = true;
    if (redraw) {
      TerminalSize(view);
      Draw(RenderTop(jobs, view, SystemClock().Now()));
    }
    if (o.iterations > 0 && fetched >= o.iterations) break;
    pollfd in{STDIN_FILENO, POLLIN, 0};
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
        next_fetch - std::chrono::steady_clock::now());
    int timeout = static_cast<int>(std::clamp<std::int64_t>(wait.count(), 0, 200));
    if (::poll(&in, 1, timeout) > 0 && (in.revents & POLLIN)) {
      char keys[16];
      ssize_t n = ::read(STDIN_FILENO, keys, sizeof keys);
      bool changed = false;
      for (ssize_t i = 0; i < n; ++i) {
        if (!HandleKey(keys[i], view)) g_quit = true;
        changed = true;
      }
      if (changed && !g_quit) {
        TerminalSize(view);
        Draw(RenderTop(jobs, view, SystemClock().Now()));
      }
    }
  }
  RestoreTerminal();
  return result;
}

}  // namespace headway::cli
