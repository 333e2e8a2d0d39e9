// The SQL store's class, declared once for the files that define its
// members, one file per concern: sql_store.cc (jobs, their events and log
// files), sql_store_progress.cc, sql_store_tokens.cc, sql_store_notebooks.cc,
// sql_store_experiments.cc, sql_store_artifacts.cc and sql_store_workflows.cc.
// Internal to store/sql/; callers open a store with MakeSqlStore (sql_store.h).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "store/sql/connection.h"
#include "store/sql/progress_chunks.h"
#include "store/store.h"

// A namespace of its own, not headway::sql, so that the members' bodies
// look names up as they did when the class was private to one file.
namespace headway::sql_internal {

using sql::Constraint;
using sql::Statement;

// A statement built clause by clause, each `?` with its value, for queries
// whose filters vary: parameters stay numbered in order on every backend.
class Query {
 public:
  using Value = std::variant<std::string, std::int64_t>;
  explicit Query(std::string sql) : sql_(std::move(sql)) {}
  Query(std::string sql, Value value) : sql_(std::move(sql)) {
    values_.push_back(std::move(value));
  }
  void Add(std::string_view clause) { sql_ += clause; }
  void Add(std::string_view clause, Value value) {
    sql_ += clause;
    values_.push_back(std::move(value));
  }
  Statement Prepare(sql::Connection& db) const {
    Statement q(db, sql_);
    int i = 1;
    for (const Value& v : values_) {
      std::visit([&](const auto& x) { q.Bind(i++, x); }, v);
    }
    return q;
  }

 private:
  std::string sql_;
  std::vector<Value> values_;
};

class SqlStore final : public Store {
 public:
  explicit SqlStore(std::unique_ptr<sql::Connection> db) : db_(std::move(db)) {}

  // Jobs, their events and the webhook cursors: sql_store.cc.
  Status CreateJob(Job& job, const JobEvent& submitted) override;
  Status SaveJob(const Job& job, const std::vector<JobEvent>& events) override;
  Status DeleteJob(std::string_view name) override;
  Result<Job> GetJob(std::string_view name) override;
  Result<std::vector<Job>> ListJobs(const JobFilter& filter) override;
  Result<std::vector<JobEvent>> ListEvents(std::string_view job, std::int64_t after_id) override;
  Result<std::vector<JobEvent>> ListEventsAfter(std::int64_t after_id,
                                                const std::vector<std::string>& types,
                                                std::size_t limit) override;
  Result<std::int64_t> LastEventId() override;
  Result<std::optional<std::int64_t>> GetWebhookCursor(std::string_view endpoint) override;
  Status SetWebhookCursor(std::string_view endpoint, std::int64_t event_id,
                          Time updated_at) override;

  // Progress and metrics: sql_store_progress.cc.

  // A series' newest chunk, as tails_ keeps it (below).
  struct Tail {
    std::int64_t first_step = 0;
    std::int64_t last_step = 0;
    std::size_t points = 0;  // 0: the series has no chunk
  };

  // The chunk table's columns and key (progress_chunks.h).
  static inline const std::vector<std::string> kChunkColumns = {
      "job", "series", "first_step", "last_step", "point_count", "points"};
  static inline const std::vector<std::string> kChunkKey = {"job", "series", "first_step"};

  // Reports are acknowledged once appended to `progress_log`, one row per
  // request at the end of one index: a commit writes a page or two. Filing
  // them into their series at once rewrote every reporting job's pages in
  // every commit (about 80 pages for 16 jobs), which bounded ingest. Filed
  // into those tables later in groups (FoldProgress, between the ingest
  // writer's commits), each page takes many reports per write. Every read of
  // the series chunks files what waits first, so readers never see the log.

  // A request this long is filed at once: its reports fill their series'
  // chunks by themselves, so the log would only add work.
  static constexpr std::size_t kFiledAtOnce = 64;

  Status AppendProgress(const std::vector<ProgressBatch>& batches) override;

  // Inserts `rows` (job, text) into progress_log in their order, which is
  // the order they are filed in, and empties it. Inside a write transaction.
  Status AppendLogRows(std::vector<std::pair<const std::string*, std::string>>& rows);

  // Appends the reports of log row `seq` to `batch`. A row this store did not
  // write is Internal: the log is never read back from outside.
  static Status ReadLogRow(std::int64_t seq, const std::string& text, ProgressBatch& batch);

  // Files every report of `job` still in the log. Inside a write
  // transaction; requires mu_.
  Status FileJobLog(const std::string& job);
  Result<std::size_t> FoldProgress(std::size_t max_reports) override;

  // Folds the whole log before a read of the series chunks, without a write
  // transaction when nothing waits; requires mu_.
  Status FoldBeforeRead();

  // FoldProgressLog in a write transaction of its own; requires mu_.
  Result<std::size_t> FoldInTransaction(std::size_t max_reports);

  // Moves the oldest rows of the log, about `max_reports` reports (at least
  // one row), into the series chunks in the order they were appended (a step
  // reported again replaces it), and deletes them from the log. Inside a
  // write transaction; requires mu_. Returns the reports moved.
  Result<std::size_t> FoldProgressLog(std::size_t max_reports);

  // Files `batches` into their series' chunks (progress_chunks.h), a later
  // report of a step replacing an earlier one. Inside a write transaction.
  Status UpsertProgress(std::span<const ProgressBatch> batches);

  // (job, series, first_step): a chunk's key.
  using ChunkKey = std::tuple<std::string, std::string, std::int64_t>;

  // The chunks at `keys` (distinct), with their text, in the order of
  // `keys`; nullopt where there is none. Many keys to a query on a server.
  Result<std::vector<std::optional<sql::Chunk>>> ReadChunksByKey(const std::vector<ChunkKey>& keys);

  // The chunks of a series that MergeIntoChunks needs for `count` new
  // points from step `first` to `last`: the last one starting at or before
  // `first` (unless it ends before them and LeavesChunkAlone), and those
  // starting after it up to `last`, by first_step. Appending, that is one
  // row of one query, whose text is read only if it is to be extended.
  // `q` is kChunksAtOrBelow, prepared once for many series.
  static constexpr const char* kChunksAtOrBelow =
      "SELECT first_step, last_step, point_count, points FROM progress_chunks "
      "WHERE job = ? AND series = ? AND first_step <= ? ORDER BY first_step DESC LIMIT ?";
  Status ReadChunksToMerge(Statement& q, std::string_view job, std::string_view series,
                           std::int64_t first, std::int64_t last, std::size_t count,
                           std::vector<sql::Chunk>& out);

  // The newest chunk of a series, or a Tail of no points if it has none.
  Result<Tail> ReadNewestChunk(std::string_view job, std::string_view series);
  Status DeleteChunk(const std::string& job, const std::string& series, std::int64_t first_step);

  enum class Order { kNewestFirst, kOldestFirst };

  // Calls `visit` with the text of each chunk of a series in `order` until
  // it returns false: newest first, or oldest first from the chunk that
  // holds (or would hold) step `from` on. Rows are read a page at a time: a
  // server database sends a whole result at once.
  Status VisitChunks(std::string_view job, std::string_view series, Order order,
                     const std::function<bool(std::string_view)>& visit,
                     std::int64_t from = std::numeric_limits<std::int64_t>::min());
  static constexpr std::int64_t kChunksPerPage = 8;

  // The newest `limit` points of a series, oldest first; Decode is
  // sql::DecodeStepChunk or sql::DecodeMetricChunk.
  template <typename Point, typename Decode>
  Result<std::vector<Point>> RecentPoints(std::string_view job, std::string_view series,
                                          std::size_t limit, Decode decode);
  Result<std::vector<StepPoint>> RecentSteps(std::string_view job, std::size_t limit) override;
  Result<std::vector<MetricPoint>> RecentMetric(std::string_view job, std::string_view metric,
                                                std::size_t limit) override;
  Result<std::vector<MetricPoint>> MetricAfter(std::string_view job, std::string_view metric,
                                               std::int64_t after_step, std::size_t limit) override;
  Status ScanMetric(std::string_view job, std::string_view metric,
                    const std::function<void(const MetricPoint&)>& visit) override;
  Result<std::vector<std::string>> MetricNames(std::string_view job) override;
  Result<std::uint64_t> CountProgressPoints(std::string_view job) override;
  Result<std::set<std::int64_t>> StoredSteps(std::string_view job,
                                             const std::vector<std::int64_t>& steps) override;

  // User tokens and sessions: sql_store_tokens.cc.
  Status CreateUserToken(const UserToken& t) override;
  Result<std::vector<UserToken>> ListUserTokens() override;
  Status RevokeUserToken(std::string_view name, Time when) override;
  Status DeleteExpiredSessions(Time now) override;

  // Notebooks: sql_store_notebooks.cc.
  Status CreateNotebook(const NotebookRecord& n) override;
  Status SaveNotebook(const NotebookRecord& n) override;
  Result<NotebookRecord> GetNotebook(std::string_view name) override;
  Result<std::vector<NotebookRecord>> ListNotebooks(std::string_view team) override;
  Status DeleteNotebook(std::string_view name) override;

  // Experiments and their trials: sql_store_experiments.cc.
  Status CreateExperiment(const ExperimentRecord& e) override;
  Status SaveExperiment(const ExperimentRecord& e) override;
  Result<ExperimentRecord> GetExperiment(std::string_view name) override;
  Result<std::vector<ExperimentRecord>> ListExperiments() override;
  Status CreateTrial(const TrialRecord& t) override;
  Status SaveTrial(const TrialRecord& t) override;
  Result<std::vector<TrialRecord>> ListTrials(std::string_view experiment) override;
  Status DeleteExperiment(std::string_view name) override;

  // Artifacts and their uses: sql_store_artifacts.cc.
  Status CreateArtifact(Artifact& a) override;
  Status SaveArtifact(const Artifact& a) override;
  Result<Artifact> GetArtifact(std::string_view name, std::optional<std::int64_t> version) override;
  Result<std::vector<Artifact>> ListArtifacts(const ArtifactFilter& filter) override;
  Status DeleteArtifact(std::string_view name, std::int64_t version) override;
  Result<std::uint64_t> CountArtifactsWithDigest(std::string_view team,
                                                 std::string_view digest) override;
  Result<std::uint64_t> CountReadyArtifactsWithDigest(std::string_view team,
                                                      std::string_view digest) override;

  // Versions of `team` holding `digest`, in `state` where one is given.
  Result<std::uint64_t> CountWithDigest(std::string_view team, std::string_view digest,
                                        std::optional<ArtifactState> state);
  Result<std::uint64_t> TeamArtifactBytes(std::string_view team) override;
  Status AddArtifactUse(const ArtifactUse& u) override;
  Result<std::vector<ArtifactUse>> ListArtifactUses(std::string_view name,
                                                    std::optional<std::int64_t> version) override;
  Result<std::vector<ArtifactUse>> ListJobArtifactUses(std::string_view job) override;

  // Workflows, their nodes and the stored manifests: sql_store_workflows.cc.
  Status CreateWorkflow(WorkflowRecord& w) override;
  Status SaveWorkflow(WorkflowRecord& w, const std::vector<WorkflowNodeRecord>& nodes,
                      const std::vector<std::string>& removed) override;
  Result<WorkflowRecord> GetWorkflow(std::string_view name) override;
  Result<std::vector<WorkflowRecord>> ListWorkflows(const WorkflowFilter& filter) override;
  Status DeleteWorkflow(std::string_view name) override;
  Result<std::vector<WorkflowNodeRecord>> ListWorkflowNodes(std::string_view workflow) override;
  Result<std::optional<WorkflowNodeRecord>> WorkflowNodeOfJob(std::string_view job) override;
  Status CreateWorkflowManifest(WorkflowManifestRecord& m) override;
  Status UpdateWorkflowManifest(WorkflowManifestRecord& m) override;
  Result<WorkflowManifestRecord> GetWorkflowManifest(std::string_view kind,
                                                     std::string_view name) override;
  Result<std::vector<WorkflowManifestRecord>> ListWorkflowManifests(std::string_view kind,
                                                                    std::string_view team) override;
  Status DeleteWorkflowManifest(std::string_view kind, std::string_view name) override;

  // Log files: sql_store.cc.
  Status AddLogFile(const LogFile& log) override;
  Result<std::vector<LogFile>> ListLogFiles(std::string_view job) override;

 private:
  static constexpr const char* kSelectJob =
      "SELECT seq, spec, state, reason, message, exit_code, restarts, gpu_ids, executor, "
      "executor_handle, token_hash, created_at, started_at, finished_at, stop_requested_at, "
      "stop_reason, preemptions, preempt_requested_at, preempt_message, requeued_at, created_by, "
      "health, health_reason, delete_requested_at FROM jobs";

  static constexpr const char* kSelectArtifact =
      "SELECT name, version, kind, state, team, created_by, size, digest, producer_job, "
      "producer_attempt, producer_step, producer_node, metrics, labels, created_at, ready_at "
      "FROM artifacts";
  static constexpr const char* kSelectUse =
      "SELECT name, version, job, attempt, used_at FROM artifact_uses";

  static std::string MetricsJson(const std::map<std::string, double>& metrics);

  static Result<Artifact> ReadArtifact(const Statement& q);

  Result<std::vector<ArtifactUse>> ReadUses(Statement& q);

  static constexpr const char* kSelectNotebook =
      "SELECT name, team, created_by, profile, gpus, state, job, starts, message, created_at, "
      "cull_warned_at, hub_user, server_env FROM notebooks";

  static void BindNotebook(Statement& q, const NotebookRecord& n);

  static Result<NotebookRecord> ReadNotebook(Statement& q);

  static constexpr const char* kSelectExperiment =
      "SELECT name, spec, state, message, created_at, finished_at FROM experiments";

  static void BindExperiment(Statement& q, const ExperimentRecord& e);

  static Result<ExperimentRecord> ReadExperiment(Statement& q);

  static void BindTrial(Statement& q, const TrialRecord& t);

  Result<Job> ReadJob(Statement& q);

  Status WriteJob(const Job& job);

  Status WriteEvents(const std::vector<JobEvent>& events);

  static constexpr const char* kSelectWorkflow =
      "SELECT seq, name, team, uid, created_by, phase, manifest, status, created_at, started_at, "
      "finished_at, revision FROM workflows";
  static constexpr const char* kSelectManifest =
      "SELECT kind, name, team, body, created_at, updated_at, revision FROM workflow_manifests";

  // Binds ?1..?10 in kSelectWorkflow's order, without seq and revision.
  static void BindWorkflow(Statement& q, const WorkflowRecord& w);

  static WorkflowRecord ReadWorkflow(const Statement& q);

  static WorkflowNodeRecord ReadWorkflowNode(const Statement& q);

  static WorkflowManifestRecord ReadManifest(const Statement& q);

  // Replaces the workflow's labels; inside the caller's transaction.
  Status WriteWorkflowLabels(const WorkflowRecord& w);

  Status ReadWorkflowLabels(WorkflowRecord& w);

  // Replaces or inserts `rows` (a map from key to the row's values), the
  // backend's RowsPerStatement at a time; inside the caller's transaction.
  template <typename Rows>
  Status UpsertRows(const std::string& table, const std::vector<std::string>& columns,
                    const std::vector<std::string>& key, const Rows& rows);

  // Statements of up to the backend's RowsPerStatement rows each over
  // `count` rows: `sql(n)` makes the statement for n rows (the one for a
  // full statement is prepared once and reused), and `each(q, first, n)`
  // binds rows [first, first + n) to `q` and runs it.
  Status ManyToAStatement(std::size_t count, const std::function<std::string(std::size_t)>& sql,
                          const std::function<Status(Statement&, std::size_t, std::size_t)>& each);

  static std::optional<std::int64_t> Millis(const std::optional<Time>& t);

  Status Exec(const std::string& sql);

  Status Commit();

  const Tail* FindTail(std::string_view job, std::string_view series) const;

  // Commit() for a transaction that filed progress: its tails are kept
  // once it is committed.
  Status CommitProgress();

  void ForgetTails(const std::string& job);

  Status Rollback(const std::string& what);

  std::string LastError();

  // Specs never change once stored, and the control loop reads every active
  // job several times a second: parsing each again (yaml-cpp) dominated an
  // idle server with a long queue. Keyed by the stored text itself.
  Result<JobSpec> ParseStoredSpec(const std::string& text);
  static constexpr std::size_t kSpecCacheSize = 50000;

  std::mutex mu_;

  // The newest chunk of each series this store has written, by job then
  // series: an append whose points all come after it, and which
  // LeavesChunkAlone, needs no read at all. Sound because one server writes
  // a database's progress at a time (the leader). Updated by progress
  // commits only (pending until then), so a rolled-back write leaves
  // nothing; dropped with the job. Bounded: cleared when it holds kMaxTails
  // series.
  using Tails = std::unordered_map<std::string, std::vector<std::pair<std::string, Tail>>>;
  static constexpr std::size_t kMaxTails = 100'000;
  Tails tails_;
  std::size_t tail_count_ = 0;
  std::vector<std::tuple<std::string, std::string, Tail>> pending_tails_;
  std::unique_ptr<sql::Connection> db_;                  // guarded by mu_
  std::unordered_map<std::string, JobSpec> spec_cache_;  // guarded by mu_
};

}  // namespace headway::sql_internal
