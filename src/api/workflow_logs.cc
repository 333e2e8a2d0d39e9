#include "api/workflow_logs.h"

#include <algorithm>
#include <tuple>

#include "api/query_params.h"
#include "core/time.h"

namespace headway::api {

using nlohmann::json;

namespace {

// grpc-gateway reads a bool as true/false (or 1/0); absent is false.
Result<bool> WorkflowLogSwitch(const std::map<std::string, std::string>& query,
                               const std::string& key) {
  auto it = query.find(key);
  if (it == query.end() || it->second.empty()) return false;
  if (it->second == "true" || it->second == "1") return true;
  if (it->second == "false" || it->second == "0") return false;
  return InvalidArgument(key + " must be true or false, got '" + it->second + "'").WithField(key);
}

// A whole number of at most 18 digits, or nullopt when absent.
Result<std::optional<std::uint64_t>> WorkflowLogCount(
    const std::map<std::string, std::string>& query, const std::string& key) {
  auto it = query.find(key);
  if (it == query.end() || it->second.empty()) return std::optional<std::uint64_t>();
  auto n = ParseCount(key, it->second);
  if (!n.ok()) return n.status();
  return std::optional<std::uint64_t>(*n);
}

// The step nodes of a workflow's JSON that ran a job, in the order they
// started (then finished; one not finished last), by node id last.
std::vector<std::pair<std::string, std::string>> StepJobsInOrder(const json& wf) {
  std::vector<std::tuple<std::string, std::string, std::string, std::string>> found;
  if (!wf.is_object() || !wf.contains("status") || !wf["status"].is_object()) return {};
  const json& nodes = wf["status"].value("nodes", json::object());
  if (!nodes.is_object()) return {};
  for (const auto& [id, n] : nodes.items()) {
    if (!n.is_object() || n.value("type", "") != "Pod") continue;
    if (!n.contains("headway") || !n["headway"].is_object()) continue;
    const std::string job = n["headway"].value("job", "");
    if (job.empty()) continue;
    // RFC 3339 with milliseconds, all in UTC: ordered as text.
    found.emplace_back(n.value("startedAt", "~"), n.value("finishedAt", "~"), id, job);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [started, finished, id, job] : found) out.emplace_back(id, job);
  return out;
}

}  // namespace

Result<WorkflowLogRequest> ParseWorkflowLogQuery(const std::map<std::string, std::string>& query) {
  WorkflowLogRequest r;
  auto get = [&](const std::string& key) {
    auto it = query.find(key);
    return it == query.end() ? std::string() : it->second;
  };
  r.pod_name = get("podName");
  r.container = get("logOptions.container");
  auto follow = WorkflowLogSwitch(query, "logOptions.follow");
  if (!follow.ok()) return follow.status();
  r.follow = *follow;
  auto timestamps = WorkflowLogSwitch(query, "logOptions.timestamps");
  if (!timestamps.ok()) return timestamps.status();
  r.start.timestamps = *timestamps;
  auto tail = WorkflowLogCount(query, "logOptions.tailLines");
  if (!tail.ok()) return tail.status();
  r.start.tail_lines = *tail;
  auto since = WorkflowLogCount(query, "logOptions.sinceSeconds");
  if (!since.ok()) return since.status();
  auto since_time = WorkflowLogCount(query, "logOptions.sinceTime.seconds");
  if (!since_time.ok()) return since_time.status();
  if (*since && *since_time) {
    return InvalidArgument("give logOptions.sinceSeconds or logOptions.sinceTime, not both");
  }
  if (*since) {
    if (**since == 0) {
      return InvalidArgument("logOptions.sinceSeconds must be at least 1")
          .WithField("logOptions.sinceSeconds");
    }
    r.start.since = SystemClock().Now() -
                    std::chrono::seconds(std::min<std::uint64_t>(**since, std::uint64_t{1} << 40));
  }
  if (*since_time) {
    r.start.since = FromUnixMillis(
        static_cast<std::int64_t>(std::min<std::uint64_t>(**since_time, std::uint64_t{1} << 40)) *
        1000);
  }
  auto limit = WorkflowLogCount(query, "logOptions.limitBytes");
  if (!limit.ok()) return limit.status();
  if (*limit && **limit == 0) {
    return InvalidArgument("logOptions.limitBytes must be at least 1")
        .WithField("logOptions.limitBytes");
  }
  r.limit_bytes = *limit;
  const std::string grep = get("grep");
  if (!grep.empty()) {
    if (grep.size() > 1024) {
      return InvalidArgument("grep must be at most 1024 characters").WithField("grep");
    }
    // Linear in the line, however long: the polynomial (Thompson) matcher,
    // asked for a match from the start of "anything, then the pattern".
    auto flags = std::regex::ECMAScript;
#ifdef __GLIBCXX__
    flags |= std::regex_constants::__polynomial;
#endif
    try {
      std::regex alone(grep, flags);  // the pattern must stand on its own
      r.grep = std::make_shared<const std::regex>("[\\s\\S]*(?:" + grep + ")", flags);
    } catch (const std::regex_error& e) {
      return InvalidArgument("grep is not a regular expression this server reads: '" + grep +
                             "' (" + e.what() + ")")
          .WithField("grep");
    }
  }
  const std::string selector = get("selector");
  std::size_t start = 0;
  while (start < selector.size()) {
    std::size_t end = selector.find(',', start);
    if (end == std::string::npos) end = selector.size();
    std::string term = selector.substr(start, end - start);
    start = end + 1;
    if (term.empty()) continue;
    std::size_t eq = term.find('=');
    if (eq == std::string::npos || eq == 0 || term.find_first_of("() ") != std::string::npos) {
      return InvalidArgument("selector: only key=value and key!=value terms are supported, not '" +
                             term + "'")
          .WithField("selector");
    }
    if (term[eq - 1] == '!') {
      r.labels_not_equal.emplace_back(term.substr(0, eq - 1), term.substr(eq + 1));
    } else {
      r.labels_equal.emplace_back(
          term.substr(0, eq),
          term.substr(eq + 1 < term.size() && term[eq + 1] == '=' ? eq + 2 : eq + 1));
    }
  }
  return r;
}

WorkflowLogStream::WorkflowLogStream(std::function<Result<json>()> workflow, json first,
                                     JobService* jobs, WatchCache* cache,
                                     WorkflowLogRequest request)
    : workflow_(std::move(workflow)),
      jobs_(jobs),
      cache_(cache),
      request_(std::move(request)),
      looked_at_(std::chrono::steady_clock::now()) {
  workflow_done_ = !request_.follow || Finished(first);
  TakeSteps(first);
}

bool WorkflowLogStream::Finished(const json& wf) {
  if (!wf.is_object() || !wf.contains("status") || !wf["status"].is_object()) return false;
  const std::string phase = wf["status"].value("phase", "");
  return phase == "Succeeded" || phase == "Failed" || phase == "Error";
}

void WorkflowLogStream::TakeSteps(const json& wf) {
  // A step's one container is "main" (Argo's init and wait containers have
  // no counterpart here).
  if (!request_.container.empty() && request_.container != "main") return;
  for (auto& [id, job] : StepJobsInOrder(wf)) {
    if (known_.count(id)) continue;
    if (!request_.pod_name.empty() && request_.pod_name != job && request_.pod_name != id) continue;
    auto stream = Open(job);
    // A step's job is created just after its node is saved: while the
    // workflow runs, look for it again on the next look.
    if (!stream.ok() && request_.follow && !workflow_done_) continue;
    known_[id] = true;
    Step step;
    step.node_id = id;
    step.job = job;
    step.stream = stream.ok() ? *stream : nullptr;
    steps_.push_back(std::move(step));
  }
}

Result<std::shared_ptr<LogFollowStream>> WorkflowLogStream::Open(const std::string& job_name) {
  auto job = jobs_->Get(job_name);
  if (!job.ok()) return job.status();  // not created yet, or removed since (retention)
  for (const auto& [key, value] : request_.labels_equal) {
    auto it = job->spec.labels.find(key);
    if (it == job->spec.labels.end() || it->second != value)
      return std::shared_ptr<LogFollowStream>();
  }
  for (const auto& [key, value] : request_.labels_not_equal) {
    auto it = job->spec.labels.find(key);
    if (it != job->spec.labels.end() && it->second == value)
      return std::shared_ptr<LogFollowStream>();
  }
  auto files = jobs_->LogFiles(job_name);
  if (!files.ok()) return files.status();
  const int attempt = files->empty() ? job->attempt() : files->back().attempt;
  std::vector<LogFile> selected;
  for (const LogFile& f : *files) {
    if (f.attempt == attempt) selected.push_back(f);
  }
  const bool prefix = job->spec.resources.processes() > 1;
  std::function<FollowView()> view;
  if (!request_.follow) {
    // What is there now.
    view = [attempt, selected]() {
      FollowView v;
      v.finished = true;
      v.attempt = attempt;
      v.files = selected;
      return v;
    };
  } else {
    // The store is read only when the job's cached view changed or 2 s
    // have passed (as a followed job log reads it).
    struct Seen {
      std::uint64_t version = 0;
      std::chrono::steady_clock::time_point read_at;
      std::optional<FollowView> view;
    };
    view = [jobs = jobs_, cache = cache_, job_name, seen = std::make_shared<Seen>()]() {
      auto entry = cache != nullptr ? cache->Find(job_name) : nullptr;
      const auto now = std::chrono::steady_clock::now();
      if (seen->view && entry && entry->version == seen->version &&
          now - seen->read_at < std::chrono::seconds(2)) {
        return *seen->view;
      }
      FollowView v;
      auto j = jobs->Get(job_name);
      auto all = jobs->LogFiles(job_name);
      if (!j.ok() || !all.ok()) {
        v.finished = true;  // deleted or unreadable: this step's log ends
        return v;
      }
      v.finished = IsTerminal(j->state);
      v.attempt = all->empty() ? j->attempt() : all->back().attempt;
      for (const LogFile& f : *all) {
        if (f.attempt == v.attempt) v.files.push_back(f);
      }
      seen->version = entry ? entry->version : 0;
      seen->read_at = now;
      seen->view = v;
      return v;
    };
  }
  return std::make_shared<LogFollowStream>(view, attempt, std::move(selected), prefix,
                                           /*pin_attempt=*/!request_.follow, request_.start,
                                           request_.limit_bytes);
}

void WorkflowLogStream::Emit(Step& step, std::string& text, bool final, std::string& out) {
  step.pending += text;
  text.clear();
  auto send = [&](std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (request_.grep && !std::regex_search(line.begin(), line.end(), *request_.grep,
                                            std::regex_constants::match_continuous)) {
      return;
    }
    json entry = {{"result", {{"content", std::string(line)}, {"podName", step.job}}}};
    out += entry.dump(-1, ' ', false, json::error_handler_t::replace);
    out += '\n';
  };
  std::size_t from = 0;
  for (std::size_t nl; (nl = step.pending.find('\n', from)) != std::string::npos; from = nl + 1) {
    send(std::string_view(step.pending).substr(from, nl - from));
  }
  step.pending.erase(0, from);
  if (final && !step.pending.empty()) {
    send(step.pending);
    step.pending.clear();
  }
}

std::chrono::milliseconds WorkflowLogStream::interval() const {
  return busy_ ? std::chrono::milliseconds(0) : std::chrono::milliseconds(200);
}

bool WorkflowLogStream::Next(std::string& out) {
  constexpr std::size_t kTurn = 1 << 20;  // bounds one turn's answer
  const std::size_t before = out.size();
  // Look at the workflow before reading its steps: a step taken up in a
  // look that found the workflow finished is then read to its end.
  if (!workflow_done_) {
    const auto now = std::chrono::steady_clock::now();
    if (now - looked_at_ >= std::chrono::seconds(1)) {
      looked_at_ = now;
      auto wf = workflow_();
      if (!wf.ok()) {
        workflow_done_ = true;  // deleted: no more steps
      } else {
        workflow_done_ = Finished(*wf);
        TakeSteps(*wf);
      }
    }
  }
  bool all_done = true;
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    Step& step = steps_[i];
    if (step.done) continue;
    if (out.size() - before >= kTurn) {
      all_done = false;
      break;
    }
    std::string text;
    bool more = step.stream != nullptr && step.stream->Next(text);
    Emit(step, text, !more, out);
    step.done = !more;
    if (!step.done) {
      all_done = false;
      // Without follow the steps go one after another: the next one only
      // once this one is read to its end.
      if (!request_.follow) break;
    }
  }
  // Without follow every read is of what is there: read on at once.
  busy_ = !request_.follow || out.size() != before;
  return !(all_done && workflow_done_);
}

}  // namespace headway::api
