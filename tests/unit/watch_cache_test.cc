// The watch cache against a fake JobService: what it renders, when a
// reader sees a change, and what it does with jobs that left the active list.
#include "api/watch_cache.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

namespace headway::api {
namespace {

// Holds jobs in memory; counts the calls the cache makes.
class FakeJobs final : public JobService {
 public:
  void Put(const Job& job) {
    std::lock_guard lock(mu_);
    jobs_[job.name()] = job;
  }
  int progress_calls() {
    std::lock_guard lock(mu_);
    return progress_calls_;
  }

  Result<Job> Submit(JobSpec, std::string) override { return Unavailable("not here"); }
  Result<Job> Get(std::string_view name) override {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(std::string(name));
    if (it == jobs_.end()) return NotFound("no job");
    return it->second;
  }
  Result<std::vector<Job>> List(const JobFilter& filter) override {
    std::lock_guard lock(mu_);
    std::vector<Job> out;
    for (const auto& [name, job] : jobs_) {
      if (filter.active_only && IsTerminal(job.state)) continue;
      if (filter.ended_only && !IsTerminal(job.state)) continue;
      out.push_back(job);
    }
    return out;
  }
  Result<Job> Stop(std::string_view, std::string) override { return Unavailable("not here"); }
  Result<Job> ForceStop(std::string_view, std::string) override { return Unavailable("not here"); }
  Result<std::vector<JobEvent>> Events(std::string_view, std::int64_t) override {
    return std::vector<JobEvent>{};
  }
  Result<std::vector<LogFile>> LogFiles(std::string_view) override {
    return std::vector<LogFile>{};
  }
  Status ReportProgress(std::string_view, std::string_view, std::vector<ProgressReport>) override {
    return Status::Ok();
  }
  Status MayReport(std::string_view, std::string_view) override { return Status::Ok(); }
  ProgressView Progress(const Job& job) override {
    std::lock_guard lock(mu_);
    ++progress_calls_;
    ProgressView v;
    auto it = steps_.find(job.name());
    if (it != steps_.end()) v.step = it->second;
    return v;
  }
  void SetStep(const std::string& name, std::int64_t step) {
    std::lock_guard lock(mu_);
    steps_[name] = step;
  }
  Result<std::vector<MetricPoint>> MetricSeries(std::string_view, std::string_view) override {
    return std::vector<MetricPoint>{};
  }
  Result<std::vector<MetricPoint>> MetricSeriesAfter(std::string_view, std::string_view,
                                                     std::int64_t, std::size_t) override {
    return std::vector<MetricPoint>{};
  }
  Result<std::vector<std::string>> MetricNames(std::string_view) override {
    return std::vector<std::string>{};
  }
  std::string PendingReason(std::string_view) override { return {}; }
  std::vector<QueueStatus> Queues() override { return {}; }
  std::vector<NodeStatus> Nodes() override { return {}; }

 private:
  std::mutex mu_;
  std::map<std::string, Job> jobs_;
  std::map<std::string, std::int64_t> steps_;
  int progress_calls_ = 0;
};

Job MakeJob(const std::string& name, const std::string& team, JobState state) {
  Job job;
  job.spec.name = name;
  job.spec.team = team;
  job.state = state;
  return job;
}

WatchCacheOptions EveryTick() {
  WatchCacheOptions options;
  options.refresh = std::chrono::milliseconds(0);
  return options;
}

std::vector<std::string> Names(const std::vector<std::shared_ptr<const WatchCache::Entry>>& v) {
  std::vector<std::string> out;
  for (const auto& e : v) out.push_back(e->name);
  return out;
}

TEST(WatchCache, AReaderSeesOnlyWhatChangedSinceItsVersion) {
  FakeJobs jobs;
  WatchCache cache(jobs, EveryTick());
  Job a = MakeJob("a", "vision", JobState::kQueued), b = MakeJob("b", "nlp", JobState::kQueued);
  cache.OnTick({a, b});
  cache.Flush();
  std::vector<std::shared_ptr<const WatchCache::Entry>> changed;
  std::uint64_t seen = cache.ChangesSince(0, "", changed);
  EXPECT_EQ(Names(changed), (std::vector<std::string>{"a", "b"}));
  auto view = nlohmann::json::parse(cache.Find("a")->view);
  EXPECT_EQ(view["state"], "Queued");
  EXPECT_FALSE(view.contains("spec")) << "the jobs stream's view leaves the spec out";

  // The same jobs again: nothing new for the reader.
  cache.OnTick({a, b});
  cache.Flush();
  changed.clear();
  EXPECT_EQ(cache.ChangesSince(seen, "", changed), seen);
  EXPECT_TRUE(changed.empty());

  // Progress moves: only that job, and a team filter applies.
  jobs.SetStep("b", 10);
  cache.OnTick({a, b});
  cache.Flush();
  changed.clear();
  seen = cache.ChangesSince(seen, "", changed);
  EXPECT_EQ(Names(changed), (std::vector<std::string>{"b"}));
  EXPECT_EQ(nlohmann::json::parse(changed[0]->view)["progress"]["step"], 10);
  changed.clear();
  cache.ChangesSince(0, "vision", changed);
  EXPECT_EQ(Names(changed), (std::vector<std::string>{"a"}));
}

TEST(WatchCache, AFirstLookHasEveryJobFedSoFarOnceTheActiveJobsWereSeen) {
  FakeJobs jobs;
  WatchCache cache(jobs, EveryTick());
  std::vector<std::shared_ptr<const WatchCache::Entry>> all;
  // Nothing listed the active jobs yet: the cache may lack some, and says so.
  Job early = MakeJob("early", "vision", JobState::kQueued);
  jobs.Put(early);  // in the store: still active when the tick leaves it out
  cache.OnSubmitted(early);
  EXPECT_EQ(cache.Everything("", all), std::nullopt);
  EXPECT_TRUE(all.empty());

  cache.OnTick(
      {MakeJob("a", "vision", JobState::kQueued), MakeJob("b", "nlp", JobState::kRunning)});
  // Fed but maybe not rendered yet: the look waits for them, with no Flush().
  cache.OnSubmitted(MakeJob("c", "vision", JobState::kQueued));
  cache.OnChange(MakeJob("d", "vision", JobState::kSucceeded));
  cache.OnChange(MakeJob("gone", "vision", JobState::kFailed));
  cache.OnRemoved(MakeJob("gone", "vision", JobState::kFailed));
  std::optional<std::uint64_t> version = cache.Everything("", all);
  ASSERT_TRUE(version.has_value());
  EXPECT_EQ(*version, cache.version());
  EXPECT_EQ(Names(all), (std::vector<std::string>{"a", "b", "c", "d", "early"}))
      << "by name, the deleted job left out";
  auto row = nlohmann::json::parse(all[3]->row);
  ASSERT_TRUE(row.is_array());
  EXPECT_EQ(row[0], "d");
  EXPECT_EQ(row[2], "Succeeded");
  all.clear();
  cache.Everything("nlp", all);
  EXPECT_EQ(Names(all), (std::vector<std::string>{"b"}));
}

TEST(WatchCache, AJobThatLeftTheActiveListIsReadOnceAndShownEnded) {
  FakeJobs jobs;
  WatchCache cache(jobs, EveryTick());
  Job a = MakeJob("a", "t", JobState::kRunning);
  jobs.Put(a);
  cache.OnTick({a});
  cache.Flush();
  std::uint64_t seen = cache.version();
  a.state = JobState::kSucceeded;
  jobs.Put(a);  // ended without a change reaching the cache
  cache.OnTick({});
  cache.Flush();
  std::vector<std::shared_ptr<const WatchCache::Entry>> changed;
  cache.ChangesSince(seen, "", changed);
  ASSERT_EQ(Names(changed), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(changed[0]->ended);
  EXPECT_EQ(nlohmann::json::parse(changed[0]->view)["state"], "Succeeded");
}

TEST(WatchCache, ASubmittedJobDoesNotHideALaterView) {
  FakeJobs jobs;
  WatchCache cache(jobs, EveryTick());
  Job a = MakeJob("a", "t", JobState::kQueued);
  Job started = a;
  started.state = JobState::kRunning;
  cache.OnChange(started);
  cache.OnSubmitted(a);  // the API's copy arrives late
  cache.Flush();
  EXPECT_EQ(nlohmann::json::parse(cache.Find("a")->view)["state"], "Running");
}

TEST(WatchCache, ADeletedJobReachesReadersAsDeletedAndANewOneOfItsNameIsShown) {
  FakeJobs jobs;
  WatchCache cache(jobs, EveryTick());
  Job a = MakeJob("a", "t", JobState::kSucceeded);
  cache.OnChange(a);
  cache.Flush();
  const std::uint64_t seen = cache.version();
  cache.OnRemoved(a);
  cache.Flush();
  EXPECT_EQ(cache.Find("a"), nullptr);
  std::vector<std::shared_ptr<const WatchCache::Entry>> changed;
  cache.ChangesSince(seen, "", changed);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_TRUE(changed[0]->deleted);
  EXPECT_EQ(changed[0]->name, "a");
  // Submitted again under the same name: a job like any other.
  cache.OnSubmitted(MakeJob("a", "t", JobState::kQueued));
  cache.Flush();
  ASSERT_NE(cache.Find("a"), nullptr);
  EXPECT_EQ(nlohmann::json::parse(cache.Find("a")->view)["state"], "Queued");
}

TEST(WatchCache, UnchangedJobsAreNotRenderedAgainButTheirProgressIsAsked) {
  FakeJobs jobs;
  WatchCache cache(jobs, EveryTick());
  std::vector<Job> many;
  for (int i = 0; i < 100; ++i)
    many.push_back(MakeJob("j" + std::to_string(i), "t", JobState::kQueued));
  cache.OnTick(many);
  cache.Flush();
  std::uint64_t v = cache.version();
  EXPECT_EQ(v, 100u);
  cache.OnTick(many);
  cache.Flush();
  EXPECT_EQ(cache.version(), v);
  EXPECT_EQ(jobs.progress_calls(), 200);
}

}  // namespace
}  // namespace headway::api
