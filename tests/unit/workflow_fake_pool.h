// A fake pool for the workflow engine's tests: jobs are entries in a map
// whose state the test moves, and time is a number the test advances.
#pragma once

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "workflow/engine.h"
#include "workflow/manifest.h"

namespace headway::workflow {

// A workflow, its state, and the jobs the engine asked for.
class FakePool {
 public:
  explicit FakePool(const std::string& yaml) {
    auto manifest = ParseManifest(yaml);
    EXPECT_TRUE(manifest.ok()) << manifest.status().ToString();
    if (!manifest.ok()) return;
    workflow_ = std::get<Workflow>(manifest->resource);
    state.name = workflow_.metadata.name;
    state.uid = "uid-1";
  }

  // One Operate; creates the jobs it asks for (Queued) and records the rest.
  Actions Step() {
    Environment env;
    env.now = now;
    env.team = "vision";
    env.max_new_pods = max_new_pods;
    env.max_nodes = max_nodes;
    env.stop_reason = stop_reason;
    if (max_nodes < kMaxWorkflowNodes) env.node_limit_reason = "what its team may still hold";
    env.metadata = workflow_.metadata;
    env.observe = [this](const std::string& job) -> std::optional<JobObservation> {
      auto it = jobs.find(job);
      if (it == jobs.end()) return std::nullopt;
      return it->second;
    };
    env.memo_lookup = [this](const std::string& cache,
                             const std::string& key) -> std::optional<MemoEntry> {
      auto it = memo.find(cache + "/" + key);
      if (it == memo.end()) return std::nullopt;
      return it->second;
    };
    env.resolve_ref = [this](const TemplateRef& ref) -> const Template* {
      auto it = workflow_templates.find(ref.name);
      return it == workflow_templates.end() ? nullptr
                                            : it->second.spec.FindTemplate(ref.template_name);
    };
    Actions actions = Operate(workflow_.spec, state, env);
    for (const JobToCreate& job : actions.create) {
      ++creations[job.spec.name];
      created[job.spec.name] = job;
      if (!lose_creations) jobs.emplace(job.spec.name, JobObservation{});
    }
    for (const std::string& job : actions.stop) {
      stops.push_back(job);
      auto it = jobs.find(job);
      if (it != jobs.end() && it->second.state != JobState::kSucceeded &&
          it->second.state != JobState::kFailed) {
        it->second.state = JobState::kStopped;
        it->second.finished_at = now;
      }
    }
    for (const MemoEntry& e : actions.memoize) memo[e.cache + "/" + e.key] = e;
    return actions;
  }

  // Steps until nothing changes.
  Actions Settle() {
    Actions last;
    for (int i = 0; i < 100; ++i) {
      last = Step();
      if (!last.changed && last.create.empty()) break;
    }
    return last;
  }

  std::size_t max_new_pods = std::numeric_limits<std::size_t>::max();
  std::size_t max_nodes = kMaxWorkflowNodes;
  std::string stop_reason;

  const Node& NodeNamed(const std::string& name) const {
    const Node* node = state.FindByName(name);
    EXPECT_NE(node, nullptr) << name;
    static Node none;
    return node != nullptr ? *node : none;
  }
  std::string JobOf(const std::string& node_name) const { return NodeNamed(node_name).job; }
  const WorkflowSpec& spec() const { return workflow_.spec; }
  const JobSpec& SpecOf(const std::string& node_name) { return created.at(JobOf(node_name)).spec; }

  // Ends a node's job.
  void Succeed(const std::string& node_name, std::map<std::string, std::string> params = {},
               std::optional<std::string> stdout_text = std::nullopt) {
    JobObservation& job = jobs.at(JobOf(node_name));
    job.state = JobState::kSucceeded;
    job.exit_code = 0;
    job.started_at = job.started_at.value_or(now);
    job.finished_at = now;
    job.parameters = std::move(params);
    job.stdout_text = std::move(stdout_text);
  }
  void Fail(const std::string& node_name, int code = 1) {
    JobObservation& job = jobs.at(JobOf(node_name));
    job.state = JobState::kFailed;
    job.exit_code = code;
    job.finished_at = now;
  }
  void Run(const std::string& node_name) {
    JobObservation& job = jobs.at(JobOf(node_name));
    job.state = JobState::kRunning;
    job.started_at = now;
  }
  // The node names whose jobs are not finished.
  std::vector<std::string> Active() const {
    std::vector<std::string> out;
    for (const auto& [id, node] : state.nodes) {
      if (node.type != NodeType::kPod || node.job.empty()) continue;
      auto it = jobs.find(node.job);
      if (it != jobs.end() &&
          (it->second.state == JobState::kQueued || it->second.state == JobState::kRunning)) {
        out.push_back(node.name);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // A WorkflowTemplate that templateRefs may name.
  void AddWorkflowTemplate(const std::string& yaml) {
    auto manifest = ParseManifest(yaml);
    ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
    auto wft = std::get<WorkflowTemplate>(manifest->resource);
    workflow_templates[wft.metadata.name] = std::move(wft);
  }

  WorkflowState state;
  std::map<std::string, WorkflowTemplate> workflow_templates;
  Time now = FromUnixMillis(1'700'000'000'000);
  std::map<std::string, JobObservation> jobs;
  std::map<std::string, JobToCreate> created;
  std::map<std::string, int> creations;
  std::vector<std::string> stops;
  std::map<std::string, MemoEntry> memo;
  bool lose_creations = false;  // a crash between saving the state and creating the jobs

 private:
  Workflow workflow_;
};

}  // namespace headway::workflow
