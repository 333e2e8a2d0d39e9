// The Store keeps every job, its events and its log index durably. It is the
// source of truth: the server holds no job state that is not written here
// first, so a restart loses nothing that was acknowledged.
//
// Thread safety: all methods may be called from any thread concurrently.
// Errors: NotFound for an unknown job, Conflict for a duplicate name,
// Unavailable when the database cannot be read or written.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/access.h"
#include "core/artifact.h"
#include "core/experiment.h"
#include "core/job.h"
#include "core/notebook.h"
#include "core/progress_report.h"
#include "core/status.h"
#include "core/workflow_record.h"

namespace headway {

// Reports of one job received in one request.
struct ProgressBatch {
  std::string job;
  std::vector<ProgressReport> reports;
  Time received{};  // stands in for reports without a time
};

class Store {
 public:
  virtual ~Store() = default;

  // Inserts a new job and its first event atomically; assigns job.submit_seq.
  virtual Status CreateJob(Job& job, const JobEvent& submitted) = 0;
  // Replaces the job's row and appends events, in one transaction.
  virtual Status SaveJob(const Job& job, const std::vector<JobEvent>& events) = 0;
  virtual Result<Job> GetJob(std::string_view name) = 0;
  // Removes the job with everything kept of it (events, log index, progress
  // series) in one transaction; its name is free again. NotFound if unknown.
  virtual Status DeleteJob(std::string_view name) = 0;
  // Ordered by submission.
  virtual Result<std::vector<Job>> ListJobs(const JobFilter& filter) = 0;
  // Events of one job with id > after_id, oldest first.
  virtual Result<std::vector<JobEvent>> ListEvents(std::string_view job,
                                                   std::int64_t after_id = 0) = 0;

  // Events of every job with id > after_id whose type is one of `types` (any
  // type when empty), oldest first, at most `limit` of them. Ids only grow
  // and are never reused, and an event is visible only once every event with
  // a smaller id is, so a consumer that remembers the last id it handled
  // reads each event once: the webhook outbox does.
  virtual Result<std::vector<JobEvent>> ListEventsAfter(std::int64_t after_id,
                                                        const std::vector<std::string>& types,
                                                        std::size_t limit) = 0;
  // The id of the newest event; 0 when there is none.
  virtual Result<std::int64_t> LastEventId() = 0;

  // Webhook delivery cursors: per endpoint key, the id of the last event
  // delivered to it (or given up on). nullopt for a key never set.
  virtual Result<std::optional<std::int64_t>> GetWebhookCursor(std::string_view endpoint) = 0;
  // Durable when this returns Ok.
  virtual Status SetWebhookCursor(std::string_view endpoint, std::int64_t event_id,
                                  Time updated_at) = 0;

  // Stores every report of every batch in one transaction: durable when this
  // returns Ok. Idempotent on (job, step) and (job, metric, step): a repeated
  // step replaces the earlier values.
  virtual Status AppendProgress(const std::vector<ProgressBatch>& batches) = 0;
  // Reports are stored as they come (one record per request, cheap to make
  // durable) and filed by job, metric and step later, in groups. This files
  // the oldest waiting ones, about `max_reports` (at least one request's),
  // and returns how many it filed: 0 when none wait. Reads file everything
  // waiting first, so calling this is never needed for correctness; it moves
  // the work off the path of reads and of acknowledgements.
  virtual Result<std::size_t> FoldProgress(std::size_t max_reports) = 0;
  // The last `limit` step points of a job, ascending by step.
  virtual Result<std::vector<StepPoint>> RecentSteps(std::string_view job, std::size_t limit) = 0;
  // The last `limit` points of one metric, ascending by step.
  virtual Result<std::vector<MetricPoint>> RecentMetric(std::string_view job,
                                                        std::string_view metric,
                                                        std::size_t limit) = 0;
  // Up to `limit` points of one metric with step > after_step, ascending by step.
  virtual Result<std::vector<MetricPoint>> MetricAfter(std::string_view job,
                                                       std::string_view metric,
                                                       std::int64_t after_step,
                                                       std::size_t limit) = 0;
  // Every point of one metric in step order, without materialising the series.
  virtual Status ScanMetric(std::string_view job, std::string_view metric,
                            const std::function<void(const MetricPoint&)>& visit) = 0;
  virtual Result<std::vector<std::string>> MetricNames(std::string_view job) = 0;
  // The rows a job's progress takes: its stored steps plus its metric values.
  virtual Result<std::uint64_t> CountProgressPoints(std::string_view job) = 0;
  // Which of `steps` the job has stored.
  virtual Result<std::set<std::int64_t>> StoredSteps(std::string_view job,
                                                     const std::vector<std::int64_t>& steps) = 0;

  // Experiments and their trials. Creating a trial twice (same experiment
  // and index) is Conflict, so a resumed controller never doubles one.
  virtual Status CreateExperiment(const ExperimentRecord& experiment) = 0;
  virtual Status SaveExperiment(const ExperimentRecord& experiment) = 0;
  virtual Result<ExperimentRecord> GetExperiment(std::string_view name) = 0;
  // Ordered by creation.
  virtual Result<std::vector<ExperimentRecord>> ListExperiments() = 0;
  virtual Status CreateTrial(const TrialRecord& trial) = 0;
  virtual Status SaveTrial(const TrialRecord& trial) = 0;
  // Ordered by index.
  virtual Result<std::vector<TrialRecord>> ListTrials(std::string_view experiment) = 0;
  // Deletes the experiment and its trial records (not their jobs); NotFound
  // when there is none.
  virtual Status DeleteExperiment(std::string_view name) = 0;

  // User tokens (see core/access.h). Creating a taken name is Conflict;
  // revoking an unknown or already revoked one is NotFound.
  virtual Status CreateUserToken(const UserToken& token) = 0;
  // Ordered by creation, revoked ones included.
  virtual Result<std::vector<UserToken>> ListUserTokens() = 0;
  virtual Status RevokeUserToken(std::string_view name, Time when) = 0;
  // Deletes the sessions (tokens with a parent) that expired at or before
  // `now`; other tokens, expired or revoked, stay listed.
  virtual Status DeleteExpiredSessions(Time now) = 0;

  // Artifacts (core/artifact.h). CreateArtifact assigns the next version of
  // its name (versions are never reused, deleted ones included); a name
  // belongs to the team of its first version, and another team's version of
  // it is Conflict.
  virtual Status CreateArtifact(Artifact& artifact) = 0;
  // Replaces a version's state, size, ready time, metrics and labels; NotFound if unknown.
  virtual Status SaveArtifact(const Artifact& artifact) = 0;
  // `version` nullopt: the newest Ready version.
  virtual Result<Artifact> GetArtifact(std::string_view name,
                                       std::optional<std::int64_t> version) = 0;
  // Ordered by name, then version.
  virtual Result<std::vector<Artifact>> ListArtifacts(const ArtifactFilter& filter) = 0;
  // Removes a version and the record of its uses. NotFound if unknown.
  virtual Status DeleteArtifact(std::string_view name, std::int64_t version) = 0;
  // How many of `team`'s versions (of any name) hold the bytes with `digest`.
  virtual Result<std::uint64_t> CountArtifactsWithDigest(std::string_view team,
                                                         std::string_view digest) = 0;
  // How many of them are Ready: their bytes were checked when committed.
  virtual Result<std::uint64_t> CountReadyArtifactsWithDigest(std::string_view team,
                                                              std::string_view digest) = 0;
  // The bytes a team's versions hold, Pending ones included (an upload in
  // flight has its room reserved).
  virtual Result<std::uint64_t> TeamArtifactBytes(std::string_view team) = 0;
  // Idempotent on (name, version, job, attempt).
  virtual Status AddArtifactUse(const ArtifactUse& use) = 0;
  // The jobs that used `name` (every version when `version` is nullopt), oldest first.
  virtual Result<std::vector<ArtifactUse>> ListArtifactUses(
      std::string_view name, std::optional<std::int64_t> version) = 0;
  // What `job` used, oldest first.
  virtual Result<std::vector<ArtifactUse>> ListJobArtifactUses(std::string_view job) = 0;

  // Workflows (core/workflow_record.h). CreateWorkflow assigns seq and sets
  // revision to 1; Conflict for a name taken.
  virtual Status CreateWorkflow(WorkflowRecord& workflow) = 0;
  // Writes the workflow (its revision must still be the stored one: else
  // Conflict, nothing written; on success workflow.revision is bumped) and
  // the given nodes (inserted or replaced), and removes the nodes named in
  // `removed` (a retry drops what it runs again), in one transaction.
  virtual Status SaveWorkflow(WorkflowRecord& workflow,
                              const std::vector<WorkflowNodeRecord>& nodes,
                              const std::vector<std::string>& removed = {}) = 0;
  virtual Result<WorkflowRecord> GetWorkflow(std::string_view name) = 0;
  // Newest first (by seq).
  virtual Result<std::vector<WorkflowRecord>> ListWorkflows(const WorkflowFilter& filter) = 0;
  // Removes the workflow with its nodes and labels; NotFound if unknown.
  virtual Status DeleteWorkflow(std::string_view name) = 0;
  // In id order.
  virtual Result<std::vector<WorkflowNodeRecord>> ListWorkflowNodes(std::string_view workflow) = 0;
  // The node a job runs; nullopt when no workflow node names the job.
  virtual Result<std::optional<WorkflowNodeRecord>> WorkflowNodeOfJob(std::string_view job) = 0;
  // WorkflowTemplates and CronWorkflows: Create (Conflict when taken),
  // Update (Conflict on a stale revision; bumps it), Get, List (by name,
  // of one team when `team` is not empty), Delete.
  virtual Status CreateWorkflowManifest(WorkflowManifestRecord& manifest) = 0;
  virtual Status UpdateWorkflowManifest(WorkflowManifestRecord& manifest) = 0;
  virtual Result<WorkflowManifestRecord> GetWorkflowManifest(std::string_view kind,
                                                             std::string_view name) = 0;
  virtual Result<std::vector<WorkflowManifestRecord>> ListWorkflowManifests(
      std::string_view kind, std::string_view team) = 0;
  virtual Status DeleteWorkflowManifest(std::string_view kind, std::string_view name) = 0;

  // Notebooks (core/notebook.h). Create is Conflict for a taken name; Save
  // and Delete are NotFound for an unknown one. List is by name, of one team
  // when `team` is not empty.
  virtual Status CreateNotebook(const NotebookRecord& notebook) = 0;
  virtual Status SaveNotebook(const NotebookRecord& notebook) = 0;
  virtual Result<NotebookRecord> GetNotebook(std::string_view name) = 0;
  virtual Result<std::vector<NotebookRecord>> ListNotebooks(std::string_view team) = 0;
  virtual Status DeleteNotebook(std::string_view name) = 0;

  virtual Status AddLogFile(const LogFile& log) = 0;
  // Ordered by attempt, then rank.
  virtual Result<std::vector<LogFile>> ListLogFiles(std::string_view job) = 0;
};

// Opens (creating if needed) a SQLite database in WAL mode at `path` and
// brings its schema up to date. Fails with Unavailable if the file cannot be
// opened, or with Internal if it was written by a newer Headway.
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path);

// Connects to PostgreSQL (a libpq connection URI or "key=value" string) and
// brings the schema up to date; Unavailable when it cannot connect.
Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url);

// Connects to MariaDB (10.5 or later) or MySQL with INSERT ... RETURNING:
// mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?option_file=PATH], where an
// option file ([client] password=...) keeps the password off the command line.
Result<std::unique_ptr<Store>> OpenMysqlStore(const std::string& url);

// The store a --store URL names: sqlite:///ABSOLUTE/PATH (or a plain path),
// postgresql://USER@HOST:PORT/DB?... (postgres:// too), mysql://... (or
// mariadb://). InvalidArgument for another scheme.
Result<std::unique_ptr<Store>> OpenStore(const std::string& url);

// Copies everything a store holds from one database to another (any two
// kinds; the target's schema is made or brought up to date), keeping ids and
// versions, and checks each table by row count and SHA-256 on both sides.
// Resumable: run again after an interruption, it copies what is missing.
// The source's server must be stopped. Internal when a table differs after
// copying. `progress` is called after each table.
struct StoreTableCopy {
  std::string table;
  std::int64_t source_rows = 0;
  std::int64_t target_rows = 0;
  std::int64_t copied = 0;  // rows this run wrote
  std::string checksum;     // SHA-256 of the table's rows, equal on both sides
};
Result<std::vector<StoreTableCopy>> CopyStore(
    const std::string& from_url, const std::string& to_url,
    const std::function<void(const StoreTableCopy&)>& progress = {});

// Which of several servers sharing one database leads: it alone schedules,
// launches and watches jobs and runs the controllers; the others serve the
// API by passing requests on to it. The lead is a lock held through a
// connection of its own, so it goes the moment the leader dies or loses the
// database (PostgreSQL: an advisory lock; MariaDB: GET_LOCK). A SQLite store
// has one server, which always leads.
class Leadership {
 public:
  virtual ~Leadership() = default;
  // Takes the lead if no server holds it, and then records `address` (how
  // the others reach this server) as the leader's. True when this one leads.
  virtual Result<bool> TryLead(const std::string& address, Time now) = 0;
  // Whether this server still leads: false once its connection was lost.
  virtual Result<bool> StillLeading() = 0;
  // The address the leader recorded; "" before any did.
  virtual Result<std::string> LeaderAddress() = 0;
};
Result<std::unique_ptr<Leadership>> OpenLeadership(const std::string& url);

// Whether the URL names a database server that several Headway servers may
// share (PostgreSQL, MariaDB), rather than a SQLite file.
bool StoreIsShared(const std::string& url);

// The URL without its password, for logs and errors.
std::string RedactedStoreUrl(const std::string& url);

}  // namespace headway
