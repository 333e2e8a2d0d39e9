// A workflow's logs as Argo Server streams them (WorkflowService.WorkflowLogs,
// GET /api/v1/workflows/{ns}/{name}/log): one JSON object a line,
// {"result":{"content":"<line>","podName":"<pod>"}}, for each line its
// steps' jobs wrote. A step's pod is its job: podName is the node's job
// name. Internal to api (api/argo_routes.h serves it).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "api/job_service.h"
#include "api/log_stream.h"
#include "api/watch_cache.h"
#include "core/status.h"

namespace headway::api {

// What a caller asks of a workflow's logs (the query's logOptions, podName,
// grep and selector).
struct WorkflowLogRequest {
  // A step's job name (its pod) or node id; empty: every step.
  std::string pod_name;
  // logOptions.container: a step's one container is "main"; any other
  // (Argo's "init" and "wait") has no lines here.
  std::string container;
  bool follow = false;
  LogStart start;  // tailLines, sinceSeconds / sinceTime, timestamps
  // logOptions.limitBytes: at most this many bytes of whole lines of each
  // step, as Kubernetes bounds each pod's (the cut is said in a last line).
  std::optional<std::uint64_t> limit_bytes;
  // grep: only lines this matches (anywhere in the line), as Argo's regexp.
  std::shared_ptr<const std::regex> grep;
  // selector: equality terms on a step job's labels ("k=v", "k!=v").
  std::vector<std::pair<std::string, std::string>> labels_equal;
  std::vector<std::pair<std::string, std::string>> labels_not_equal;
};

// The query of GET …/log (Argo's WorkflowLogRequest). InvalidArgument
// naming the parameter for one that is malformed.
Result<WorkflowLogRequest> ParseWorkflowLogQuery(const std::map<std::string, std::string>& query);

// The lines of a workflow's step jobs: steps in the order they started
// (then by when they finished), each job's latest attempt, all ranks
// (prefixed "[rank N] " when there are several). Without `follow` it sends
// what was written so far, one step after another, and ends. With it, each
// turn reads what every step wrote since the last, in step order, taking up
// steps as they start, and ends once the workflow has finished (or is
// deleted) and every step's log is drained.
class WorkflowLogStream final : public ResponseStream {
 public:
  // `workflow` answers the workflow's current Argo JSON (an error once it
  // is gone); `first` is its view when the request came.
  WorkflowLogStream(std::function<Result<nlohmann::json>()> workflow, nlohmann::json first,
                    JobService* jobs, WatchCache* cache, WorkflowLogRequest request);
  bool Next(std::string& out) override;
  std::chrono::milliseconds interval() const override;

 private:
  struct Step {
    std::string node_id;
    std::string job;
    std::shared_ptr<LogFollowStream> stream;  // null: not readable (deleted, or filtered out)
    std::string pending;                      // a partial last line
    bool done = false;
  };
  // Takes up the step nodes of `wf` not known yet, in start order.
  void TakeSteps(const nlohmann::json& wf);
  // The reader of a step job's log; null when the selector leaves it out;
  // an error when the job is not there.
  Result<std::shared_ptr<LogFollowStream>> Open(const std::string& job);
  // Moves the complete lines of `text` (all of it with `final`) out as entries.
  void Emit(Step& step, std::string& text, bool final, std::string& out);
  static bool Finished(const nlohmann::json& wf);

  std::function<Result<nlohmann::json>()> workflow_;
  JobService* jobs_;
  WatchCache* cache_;
  WorkflowLogRequest request_;
  std::vector<Step> steps_;
  std::map<std::string, bool> known_;  // node ids taken up
  bool workflow_done_ = false;         // finished or gone: no steps to come
  std::chrono::steady_clock::time_point looked_at_;
  bool busy_ = false;
};

}  // namespace headway::api
