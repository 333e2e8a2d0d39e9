#include "store/sql/sql_store.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <variant>

#include "core/job_spec_json.h"
#include "core/job_spec_parser.h"
#include "store/sql/connection.h"
#include "store/sql/progress_chunks.h"
#include "store/sql/progress_log.h"
#include "store/store.h"

namespace headway {
namespace {

// "('Succeeded', 'Failed', 'Stopped')": the ended states, as core/job.h says.
const std::string& EndedStatesSql() {
  static const std::string list = [] {
    std::string out;
    for (JobState state : kAllJobStates) {
      if (!IsTerminal(state)) continue;
      out += (out.empty() ? "('" : ", '") + std::string(JobStateName(state)) + "'";
    }
    return out + ")";
  }();
  return list;
}

using sql::Constraint;
using sql::Statement;

bool IsActive(JobState s) { return !IsTerminal(s); }

// A statement built clause by clause, each `?` with its value, for queries
// whose filters vary: parameters stay numbered in order on every backend.
class Query {
 public:
  using Value = std::variant<std::string, std::int64_t>;
  explicit Query(std::string sql) : sql_(std::move(sql)) {}
  Query(std::string sql, Value value) : sql_(std::move(sql)) { values_.push_back(std::move(value)); }
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

// A spec as stored: JSON in ASCII only. nlohmann writes DEL and C1 controls
// raw, which the spec parser refuses on reading back (a label holding YAML's
// "\x7f" made the job, and so every listing, unreadable); as \u escapes they
// read back as the same characters.
std::string StoredSpec(const JobSpec& spec) {
  return JobSpecToJson(spec).dump(-1, ' ', /*ensure_ascii=*/true);
}

class SqlStore final : public Store {
 public:
  explicit SqlStore(std::unique_ptr<sql::Connection> db) : db_(std::move(db)) {}

  Status CreateJob(Job& job, const JobEvent& submitted) override {
    std::lock_guard lock(mu_);
    HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
    Statement exists(*db_, "SELECT 1 FROM jobs WHERE name = ?");
    exists.Bind(1, job.name());
    if (exists.Step()) {
      (void)Exec("ROLLBACK");
      return Conflict("job '" + job.name() + "' already exists");
    }
    Statement insert(*db_,
                     "INSERT INTO jobs (name, team, spec, state, created_at, token_hash, created_by) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING seq");
    insert.Bind(1, job.name());
    insert.Bind(2, job.spec.team);
    insert.Bind(3, StoredSpec(job.spec));
    insert.Bind(4, std::string(JobStateName(job.state)));
    insert.Bind(5, ToUnixMillis(job.created_at));
    insert.Bind(6, job.token_hash);
    insert.Bind(7, job.created_by);
    if (!insert.Step()) return Rollback("insert job");
    job.submit_seq = insert.ColumnInt64(0);
    insert.Reset();
    Status s = WriteJob(job);
    if (s.ok()) s = WriteEvents({submitted});
    if (!s.ok()) return Rollback(s.message());
    return Commit();
  }

  Status SaveJob(const Job& job, const std::vector<JobEvent>& events) override {
    std::lock_guard lock(mu_);
    HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
    Status s = WriteJob(job);
    if (s.ok()) s = WriteEvents(events);
    if (!s.ok()) {
      (void)Exec("ROLLBACK");
      return s;
    }
    return Commit();
  }

  Status DeleteJob(std::string_view name) override {
    std::lock_guard lock(mu_);
    const std::string job(name);
    ForgetTails(job);
    HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
    Statement del(*db_, "DELETE FROM jobs WHERE name = ?");
    del.Bind(1, job);
    if (!del.Run()) return Rollback("delete job");
    if (del.changes() == 0) {
      (void)Exec("ROLLBACK");
      return NotFound("job '" + job + "' not found");
    }
    for (const char* table : {"job_events", "job_logs", "progress_chunks", "progress_log"}) {
      Statement q(*db_, std::string("DELETE FROM ") + table + " WHERE job = ?");
      q.Bind(1, job);
      if (!q.Run()) return Rollback(std::string("delete from ") + table);
    }
    return Commit();
  }

  Result<Job> GetJob(std::string_view name) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, std::string(kSelectJob) + " WHERE name = ?");
    q.Bind(1, std::string(name));
    if (!q.Step()) {
      if (q.failed()) return Unavailable("read job: " + LastError());
      return NotFound("job '" + std::string(name) + "' not found");
    }
    return ReadJob(q);
  }

  Result<std::vector<Job>> ListJobs(const JobFilter& filter) override {
    std::lock_guard lock(mu_);
    Query sql(std::string(kSelectJob) + " WHERE 1=1");
    if (filter.state) sql.Add(" AND state = ?", std::string(JobStateName(*filter.state)));
    if (!filter.team.empty()) sql.Add(" AND team = ?", filter.team);
    if (filter.active_only) sql.Add(" AND state NOT IN " + EndedStatesSql());
    if (filter.ended_only) sql.Add(" AND state IN " + EndedStatesSql());
    if (filter.submitted_after > 0) sql.Add(" AND seq > ?", filter.submitted_after);
    if (!filter.labels.empty()) {
      // Escaped as the stored specs are, for a backend that compares the
      // JSON text of keys (MariaDB).
      sql.Add(" AND " + db_->JobLabelsContain(),
              nlohmann::json(filter.labels).dump(-1, ' ', /*ensure_ascii=*/true));
    }
    sql.Add(" ORDER BY seq");
    Statement q = sql.Prepare(*db_);
    std::vector<Job> jobs;
    while (q.Step()) {
      auto job = ReadJob(q);
      if (!job.ok()) return job.status();
      if (filter.active_only && !IsActive(job->state)) continue;
      if (filter.ended_only && IsActive(job->state)) continue;
      jobs.push_back(std::move(job.value()));
    }
    if (q.failed()) return Unavailable("list jobs: " + LastError());
    return jobs;
  }

  Result<std::vector<JobEvent>> ListEvents(std::string_view job, std::int64_t after_id) override {
    std::lock_guard lock(mu_);
    Statement q(*db_,
                "SELECT id, job, time, type, message FROM job_events WHERE job = ? AND id > ? "
                "ORDER BY id");
    q.Bind(1, std::string(job));
    q.Bind(2, after_id);
    std::vector<JobEvent> events;
    while (q.Step()) {
      events.push_back({q.ColumnInt64(0), q.ColumnText(1), FromUnixMillis(q.ColumnInt64(2)),
                        q.ColumnText(3), q.ColumnText(4)});
    }
    if (q.failed()) return Unavailable("list events: " + LastError());
    return events;
  }

  Result<std::vector<JobEvent>> ListEventsAfter(std::int64_t after_id,
                                                const std::vector<std::string>& types,
                                                std::size_t limit) override {
    std::lock_guard lock(mu_);
    Query sql("SELECT id, job, time, type, message FROM job_events WHERE id > ?", after_id);
    if (!types.empty()) {
      sql.Add(" AND type IN (");
      for (std::size_t i = 0; i < types.size(); ++i) sql.Add(i == 0 ? "?" : ", ?", types[i]);
      sql.Add(")");
    }
    sql.Add(" ORDER BY id LIMIT ?",
            static_cast<std::int64_t>(std::min<std::size_t>(
                limit, static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max()))));
    Statement q = sql.Prepare(*db_);
    std::vector<JobEvent> events;
    while (q.Step()) {
      events.push_back({q.ColumnInt64(0), q.ColumnText(1), FromUnixMillis(q.ColumnInt64(2)),
                        q.ColumnText(3), q.ColumnText(4)});
    }
    if (q.failed()) return Unavailable("list events: " + LastError());
    return events;
  }

  Result<std::int64_t> LastEventId() override {
    std::lock_guard lock(mu_);
    Statement q(*db_, "SELECT COALESCE(MAX(id), 0) FROM job_events");
    if (!q.Step()) return Unavailable("last event id: " + LastError());
    return q.ColumnInt64(0);
  }

  Result<std::optional<std::int64_t>> GetWebhookCursor(std::string_view endpoint) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, "SELECT last_event_id FROM webhook_cursors WHERE endpoint = ?");
    q.Bind(1, std::string(endpoint));
    if (q.Step()) return std::optional<std::int64_t>(q.ColumnInt64(0));
    if (q.failed()) return Unavailable("read webhook cursor: " + LastError());
    return std::optional<std::int64_t>();
  }

  Status SetWebhookCursor(std::string_view endpoint, std::int64_t event_id,
                          Time updated_at) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, db_->Upsert("webhook_cursors", {"endpoint", "last_event_id", "updated_at"},
                                  {"endpoint"}, /*replace=*/true));
    q.Bind(1, std::string(endpoint));
    q.Bind(2, event_id);
    q.Bind(3, ToUnixMillis(updated_at));
    if (!q.Run()) return Unavailable("write webhook cursor: " + LastError());
    return Status::Ok();
  }

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

  Status AppendProgress(const std::vector<ProgressBatch>& batches) override {
    std::lock_guard lock(mu_);
    pending_tails_.clear();
    HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
    // Log rows go to a server many to a statement: one round trip per row
    // made a group commit of 64 reports take 5 ms on PostgreSQL and MariaDB.
    std::vector<std::pair<const std::string*, std::string>> rows;
    for (const ProgressBatch& batch : batches) {
      if (batch.reports.size() >= kFiledAtOnce) {
        // The job's reports still in the log are older: filed first, so
        // this request's steps replace theirs and not the other way round.
        Status s = AppendLogRows(rows);
        if (s.ok()) s = FileJobLog(batch.job);
        if (s.ok()) s = UpsertProgress(std::span(&batch, 1));
        if (!s.ok()) {
          (void)Exec("ROLLBACK");
          return s;
        }
        continue;
      }
      for (std::string& text :
           sql::EncodeProgressLog(batch.reports, ToUnixMillis(batch.received))) {
        rows.emplace_back(&batch.job, std::move(text));
      }
    }
    if (Status s = AppendLogRows(rows); !s.ok()) {
      (void)Exec("ROLLBACK");
      return s;
    }
    return CommitProgress();
  }

  // Inserts `rows` (job, text) into progress_log in their order, which is
  // the order they are filed in, and empties it. Inside a write transaction.
  Status AppendLogRows(std::vector<std::pair<const std::string*, std::string>>& rows) {
    Status s = ManyToAStatement(
        rows.size(),
        [](std::size_t n) {
          return "INSERT INTO progress_log (job, reports) VALUES " + sql::ValuesPlaceholders(2, n);
        },
        [&](Statement& q, std::size_t first, std::size_t n) {
          for (std::size_t r = 0; r < n; ++r) {
            q.Bind(static_cast<int>(2 * r + 1), *rows[first + r].first);
            q.Bind(static_cast<int>(2 * r + 2), rows[first + r].second);
          }
          if (!q.Run()) return Unavailable("write progress_log: " + LastError());
          return Status::Ok();
        });
    rows.clear();
    return s;
  }

  // Appends the reports of log row `seq` to `batch`. A row this store did not
  // write is Internal: the log is never read back from outside.
  static Status ReadLogRow(std::int64_t seq, const std::string& text, ProgressBatch& batch) {
    Status s =
        sql::DecodeProgressLog(text, [&](const ProgressReport& r) { batch.reports.push_back(r); });
    if (!s.ok()) return Internal("progress_log row " + std::to_string(seq) + ": " + s.message());
    return Status::Ok();
  }

  // Files every report of `job` still in the log. Inside a write
  // transaction; requires mu_.
  Status FileJobLog(const std::string& job) {
    ProgressBatch batch{job, {}, {}};
    {
      Statement q(*db_, "SELECT seq, reports FROM progress_log WHERE job = ? ORDER BY seq");
      q.Bind(1, job);
      while (q.Step()) {
        HEADWAY_RETURN_IF_ERROR(ReadLogRow(q.ColumnInt64(0), q.ColumnText(1), batch));
      }
      if (q.failed()) return Unavailable("read progress_log: " + LastError());
    }
    if (batch.reports.empty()) return Status::Ok();
    HEADWAY_RETURN_IF_ERROR(UpsertProgress(std::span(&batch, 1)));
    Statement del(*db_, "DELETE FROM progress_log WHERE job = ?");
    del.Bind(1, job);
    if (!del.Run()) return Unavailable("delete from progress_log: " + LastError());
    return Status::Ok();
  }

  Result<std::size_t> FoldProgress(std::size_t max_reports) override {
    std::lock_guard lock(mu_);
    return FoldInTransaction(max_reports);
  }

  // Folds the whole log before a read of the series chunks, without a write
  // transaction when nothing waits; requires mu_.
  Status FoldBeforeRead() {
    {
      Statement any(*db_, "SELECT seq FROM progress_log ORDER BY seq LIMIT 1");
      if (!any.Step()) {
        if (any.failed()) return Unavailable("read progress_log: " + LastError());
        return Status::Ok();
      }
    }
    return FoldInTransaction(std::numeric_limits<std::size_t>::max()).status();
  }

  // FoldProgressLog in a write transaction of its own; requires mu_.
  Result<std::size_t> FoldInTransaction(std::size_t max_reports) {
    pending_tails_.clear();
    HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
    auto folded = FoldProgressLog(max_reports);
    if (!folded.ok()) {
      (void)Exec("ROLLBACK");
      return folded.status();
    }
    HEADWAY_RETURN_IF_ERROR(CommitProgress());
    return folded;
  }

  // Moves the oldest rows of the log, about `max_reports` reports (at least
  // one row), into the series chunks in the order they were appended (a step
  // reported again replaces it), and deletes them from the log. Inside a
  // write transaction; requires mu_. Returns the reports moved.
  Result<std::size_t> FoldProgressLog(std::size_t max_reports) {
    constexpr std::int64_t kRowsPerRead = 64;
    std::vector<ProgressBatch> batches;
    std::size_t reports = 0;
    std::int64_t last_seq = 0;
    Statement q(*db_,
                "SELECT seq, job, reports FROM progress_log WHERE seq > ? ORDER BY seq LIMIT ?");
    for (bool more = true; more && reports < max_reports;) {
      q.Reset();
      q.Bind(1, last_seq);
      q.Bind(2, kRowsPerRead);
      std::int64_t rows = 0;
      while (reports < max_reports && q.Step()) {
        ++rows;
        last_seq = q.ColumnInt64(0);
        ProgressBatch& batch = batches.emplace_back();
        batch.job = q.ColumnText(1);
        HEADWAY_RETURN_IF_ERROR(ReadLogRow(last_seq, q.ColumnText(2), batch));
        reports += batch.reports.size();
      }
      if (q.failed()) return Unavailable("read progress_log: " + LastError());
      more = rows == kRowsPerRead;
    }
    if (batches.empty()) return std::size_t{0};
    HEADWAY_RETURN_IF_ERROR(UpsertProgress(batches));
    Statement del(*db_, "DELETE FROM progress_log WHERE seq <= ?");
    del.Bind(1, last_seq);
    if (!del.Run()) return Unavailable("delete from progress_log: " + LastError());
    return reports;
  }

  // Files `batches` into their series' chunks (progress_chunks.h), a later
  // report of a step replacing an earlier one. Inside a write transaction.
  Status UpsertProgress(std::span<const ProgressBatch> batches) {
    // Each series' new points, in the order they came. Series are numbered
    // by first appearance: a job reports a handful of metrics.
    struct Series {
      std::string_view job;
      std::string_view name;
      sql::NewPoints points;
    };
    std::vector<Series> series;
    struct SeriesOfJob {
      std::uint32_t steps;
      std::vector<std::uint32_t> metrics;  // indices into `series`
    };
    std::unordered_map<std::string_view, SeriesOfJob> of_job;
    for (const ProgressBatch& batch : batches) {
      auto [it, added] =
          of_job.try_emplace(batch.job, SeriesOfJob{static_cast<std::uint32_t>(series.size()), {}});
      SeriesOfJob& job = it->second;
      if (added) series.push_back({batch.job, sql::kStepSeries, {}});
      const std::int64_t received = ToUnixMillis(batch.received);
      for (const ProgressReport& r : batch.reports) {
        series[job.steps].points.AddStep(r.step, r.time ? ToUnixMillis(*r.time) : received,
                                         r.total_steps, r.epoch, r.total_epochs);
        for (const auto& [name, value] : r.metrics) {
          auto m = std::find_if(job.metrics.begin(), job.metrics.end(),
                                [&](std::uint32_t i) { return series[i].name == name; });
          if (m == job.metrics.end()) {
            m = job.metrics.insert(m, static_cast<std::uint32_t>(series.size()));
            series.push_back({batch.job, name, {}});
          }
          series[*m].points.AddMetric(r.step, value);
        }
      }
    }
    std::vector<
        std::pair<std::tuple<std::string, std::string, std::int64_t>, std::vector<sql::Value>>>
        rows;
    // First what each series needs read: nothing when its points start
    // chunks of their own, its newest chunk when they extend it (on a
    // server read with the other series' newest, many to a query: a round
    // trip each made filing twice as slow on MariaDB), or a scan.
    enum class Read {
      kNothing,  // no chunk yet, or new points past the newest that leave it alone
      kNewest,   // new points past the newest chunk that extend it
      kScan,     // new points at or before the newest chunk's last step
    };
    struct Plan {
      std::vector<sql::SeriesLine> fresh;  // by step, the last report of a step kept
      Tail tail;
      Read read = Read::kNothing;
      std::optional<std::size_t> tail_key;  // into `keys`: its newest chunk is read by key
    };
    std::vector<Plan> plans;
    plans.reserve(series.size());
    std::vector<ChunkKey> keys;
    // SQLite, in the process, gains nothing from reading by key (it runs
    // one key per statement) and reads each series' chunks as before.
    const bool by_key = db_->RowsPerStatement() > 1;
    for (Series& s : series) {
      Plan plan{s.points.Sorted(), {}, Read::kNothing, std::nullopt};
      if (const Tail* tail = FindTail(s.job, s.name)) {
        plan.tail = *tail;
      } else {
        auto newest = ReadNewestChunk(s.job, s.name);
        if (!newest.ok()) return newest.status();
        plan.tail = *newest;
        pending_tails_.emplace_back(std::string(s.job), std::string(s.name), *newest);
      }
      if (plan.tail.points == 0) {
        plan.read = Read::kNothing;
      } else if (plan.fresh.front().step > plan.tail.last_step) {
        plan.read = sql::LeavesChunkAlone(plan.tail.points, plan.fresh.size()) ? Read::kNothing
                                                                               : Read::kNewest;
      } else {
        plan.read = Read::kScan;
      }
      if (by_key && plan.read == Read::kNewest) {
        plan.tail_key = keys.size();
        keys.emplace_back(std::string(s.job), std::string(s.name), plan.tail.first_step);
      }
      plans.push_back(std::move(plan));
    }
    auto tail_chunks = ReadChunksByKey(keys);
    if (!tail_chunks.ok()) return tail_chunks.status();

    std::vector<sql::Chunk> stored;
    Statement chunks_at_or_below(*db_, kChunksAtOrBelow);
    for (std::size_t i = 0; i < series.size(); ++i) {
      const Series& s = series[i];
      Plan& plan = plans[i];
      const std::vector<sql::SeriesLine>& fresh = plan.fresh;
      const Tail& tail = plan.tail;
      stored.clear();
      std::optional<sql::Chunk>* read = plan.tail_key ? &(*tail_chunks)[*plan.tail_key] : nullptr;
      if (read != nullptr && read->has_value()) {
        stored.push_back(std::move(**read));
      } else if (plan.read != Read::kNothing) {  // and on SQLite, or not found by key
        HEADWAY_RETURN_IF_ERROR(ReadChunksToMerge(chunks_at_or_below, s.job, s.name,
                                                  fresh.front().step, fresh.back().step,
                                                  fresh.size(), stored));
      }
      auto changes = sql::MergeIntoChunks(stored, fresh);
      if (!changes.ok()) return changes.status();
      const std::string job(s.job), name(s.name);
      if (const sql::Chunk& newest = changes->write.back();
          tail.points == 0 || newest.first_step >= tail.first_step) {
        pending_tails_.emplace_back(job, name,
                                    Tail{newest.first_step, newest.last_step, newest.points});
      }
      for (std::int64_t first_step : changes->remove) {
        HEADWAY_RETURN_IF_ERROR(DeleteChunk(job, name, first_step));
      }
      for (sql::Chunk& c : changes->write) {
        rows.push_back({{job, name, c.first_step},
                        {job, name, c.first_step, c.last_step, static_cast<std::int64_t>(c.points),
                         std::move(c.text)}});
      }
    }
    return UpsertRows("progress_chunks", kChunkColumns, kChunkKey, rows);
  }

  // (job, series, first_step): a chunk's key.
  using ChunkKey = std::tuple<std::string, std::string, std::int64_t>;

  // The chunks at `keys` (distinct), with their text, in the order of
  // `keys`; nullopt where there is none. Many keys to a query on a server.
  Result<std::vector<std::optional<sql::Chunk>>> ReadChunksByKey(
      const std::vector<ChunkKey>& keys) {
    std::vector<std::optional<sql::Chunk>> out(keys.size());
    std::map<ChunkKey, std::size_t> index;
    for (std::size_t i = 0; i < keys.size(); ++i) index.emplace(keys[i], i);
    auto query = [](std::size_t n) {
      std::string sql =
          "SELECT job, series, first_step, last_step, point_count, points FROM progress_chunks "
          "WHERE ";
      for (std::size_t r = 0; r < n; ++r) {
        if (r > 0) sql += " OR ";
        sql += "(job = ? AND series = ? AND first_step = ?)";
      }
      return sql;
    };
    HEADWAY_RETURN_IF_ERROR(
        ManyToAStatement(keys.size(), query, [&](Statement& q, std::size_t first, std::size_t n) {
          for (std::size_t r = 0; r < n; ++r) {
            const auto& [job, series, first_step] = keys[first + r];
            q.Bind(static_cast<int>(3 * r + 1), job);
            q.Bind(static_cast<int>(3 * r + 2), series);
            q.Bind(static_cast<int>(3 * r + 3), first_step);
          }
          while (q.Step()) {
            auto it = index.find({q.ColumnText(0), q.ColumnText(1), q.ColumnInt64(2)});
            if (it == index.end()) continue;
            sql::Chunk& c = out[it->second].emplace();
            c.first_step = q.ColumnInt64(2);
            c.last_step = q.ColumnInt64(3);
            c.points = static_cast<std::size_t>(q.ColumnInt64(4));
            c.text = q.ColumnText(5);
          }
          if (q.failed()) return Unavailable("read progress_chunks: " + LastError());
          return Status::Ok();
        }));
    return out;
  }

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
                           std::vector<sql::Chunk>& out) {
    const std::string job_name(job), series_name(series);
    std::int64_t below = last;
    std::int64_t limit = 1;
    for (;;) {
      q.Reset();
      q.Bind(1, job_name);
      q.Bind(2, series_name);
      q.Bind(3, below);
      q.Bind(4, limit);
      std::int64_t rows = 0;
      bool reached = false;
      while (q.Step()) {
        ++rows;
        sql::Chunk c;
        const std::int64_t first_step = c.first_step = q.ColumnInt64(0);
        c.last_step = q.ColumnInt64(1);
        c.points = static_cast<std::size_t>(q.ColumnInt64(2));
        const bool preceding = first_step <= first;
        if (!preceding || c.last_step >= first || !sql::LeavesChunkAlone(c.points, count)) {
          c.text = q.ColumnText(3);
          out.push_back(std::move(c));
        }
        if (preceding) {
          reached = true;
          break;
        }
        below = first_step - 1;
      }
      if (q.failed()) return Unavailable("read progress_chunks: " + LastError());
      if (reached || rows < limit) break;
      limit = 16;  // out of order: the new points span chunks
    }
    std::reverse(out.begin(), out.end());
    return Status::Ok();
  }

  // The newest chunk of a series, or a Tail of no points if it has none.
  Result<Tail> ReadNewestChunk(std::string_view job, std::string_view series) {
    Statement q(*db_,
                "SELECT first_step, last_step, point_count FROM progress_chunks "
                "WHERE job = ? AND series = ? ORDER BY first_step DESC LIMIT 1");
    q.Bind(1, std::string(job));
    q.Bind(2, std::string(series));
    Tail tail;
    if (q.Step()) {
      tail.first_step = q.ColumnInt64(0);
      tail.last_step = q.ColumnInt64(1);
      tail.points = static_cast<std::size_t>(q.ColumnInt64(2));
    }
    if (q.failed()) return Unavailable("read progress_chunks: " + LastError());
    return tail;
  }

  Status DeleteChunk(const std::string& job, const std::string& series, std::int64_t first_step) {
    Statement q(*db_,
                "DELETE FROM progress_chunks WHERE job = ? AND series = ? AND first_step = ?");
    q.Bind(1, job);
    q.Bind(2, series);
    q.Bind(3, first_step);
    if (!q.Run()) return Unavailable("delete from progress_chunks: " + LastError());
    return Status::Ok();
  }

  enum class Order { kNewestFirst, kOldestFirst };

  // Calls `visit` with the text of each chunk of a series in `order` until
  // it returns false: newest first, or oldest first from the chunk that
  // holds (or would hold) step `from` on. Rows are read a page at a time: a
  // server database sends a whole result at once.
  Status VisitChunks(std::string_view job, std::string_view series, Order order,
                     const std::function<bool(std::string_view)>& visit,
                     std::int64_t from = std::numeric_limits<std::int64_t>::min()) {
    const std::string job_name(job), series_name(series);
    const bool newest_first = order == Order::kNewestFirst;
    std::int64_t bound = std::numeric_limits<std::int64_t>::max();  // of first_step, inclusive
    if (!newest_first) {
      bound = std::numeric_limits<std::int64_t>::min();
      Statement start(*db_,
                      "SELECT first_step FROM progress_chunks WHERE job = ? AND "
                      "series = ? AND first_step <= ? ORDER BY first_step DESC LIMIT 1");
      start.Bind(1, job_name);
      start.Bind(2, series_name);
      start.Bind(3, from);
      if (start.Step()) bound = start.ColumnInt64(0);
      if (start.failed()) return Unavailable("read progress_chunks: " + LastError());
    }
    Statement q(*db_, newest_first
                          ? "SELECT first_step, points FROM progress_chunks WHERE job = ? AND "
                            "series = ? AND first_step <= ? ORDER BY first_step DESC LIMIT ?"
                          : "SELECT first_step, points FROM progress_chunks WHERE job = ? AND "
                            "series = ? AND first_step >= ? ORDER BY first_step LIMIT ?");
    const std::int64_t last = newest_first ? std::numeric_limits<std::int64_t>::min()
                                           : std::numeric_limits<std::int64_t>::max();
    for (;;) {
      q.Reset();
      q.Bind(1, job_name);
      q.Bind(2, series_name);
      q.Bind(3, bound);
      q.Bind(4, kChunksPerPage);
      std::int64_t rows = 0;
      while (q.Step()) {
        ++rows;
        const std::int64_t first_step = q.ColumnInt64(0);
        if (!visit(q.ColumnText(1)) || first_step == last) return Status::Ok();
        bound = newest_first ? first_step - 1 : first_step + 1;
      }
      if (q.failed()) return Unavailable("read progress_chunks: " + LastError());
      if (rows < kChunksPerPage) return Status::Ok();
    }
  }
  static constexpr std::int64_t kChunksPerPage = 8;

  // The newest `limit` points of a series, oldest first; Decode is
  // sql::DecodeStepChunk or sql::DecodeMetricChunk.
  template <typename Point, typename Decode>
  Result<std::vector<Point>> RecentPoints(std::string_view job, std::string_view series,
                                          std::size_t limit, Decode decode) {
    std::vector<Point> newest_first, chunk;
    Status decoded = Status::Ok();
    HEADWAY_RETURN_IF_ERROR(
        VisitChunks(job, series, Order::kNewestFirst, [&](std::string_view text) {
          chunk.clear();
          decoded = decode(text, [&](const Point& p) { chunk.push_back(p); });
          if (!decoded.ok()) return false;
          for (auto it = chunk.rbegin(); it != chunk.rend() && newest_first.size() < limit; ++it) {
            newest_first.push_back(*it);
          }
          return newest_first.size() < limit;
        }));
    HEADWAY_RETURN_IF_ERROR(decoded);
    std::reverse(newest_first.begin(), newest_first.end());
    return newest_first;
  }

  Result<std::vector<StepPoint>> RecentSteps(std::string_view job, std::size_t limit) override {
    std::lock_guard lock(mu_);
    HEADWAY_RETURN_IF_ERROR(FoldBeforeRead());
    if (limit == 0) return std::vector<StepPoint>{};
    return RecentPoints<StepPoint>(job, sql::kStepSeries, limit, sql::DecodeStepChunk);
  }

  Result<std::vector<MetricPoint>> RecentMetric(std::string_view job, std::string_view metric,
                                                std::size_t limit) override {
    std::lock_guard lock(mu_);
    HEADWAY_RETURN_IF_ERROR(FoldBeforeRead());
    if (limit == 0 || metric.empty()) return std::vector<MetricPoint>{};
    return RecentPoints<MetricPoint>(job, metric, limit, sql::DecodeMetricChunk);
  }

  Result<std::vector<MetricPoint>> MetricAfter(std::string_view job, std::string_view metric,
                                               std::int64_t after_step,
                                               std::size_t limit) override {
    std::lock_guard lock(mu_);
    HEADWAY_RETURN_IF_ERROR(FoldBeforeRead());
    std::vector<MetricPoint> points;
    if (limit == 0 || metric.empty()) return points;
    Status decoded = Status::Ok();
    HEADWAY_RETURN_IF_ERROR(VisitChunks(
        job, metric, Order::kOldestFirst,
        [&](std::string_view text) {
          decoded = sql::DecodeMetricChunk(text, [&](const MetricPoint& p) {
            if (p.step > after_step && points.size() < limit) points.push_back(p);
          });
          return decoded.ok() && points.size() < limit;
        },
        after_step));
    HEADWAY_RETURN_IF_ERROR(decoded);
    return points;
  }

  Status ScanMetric(std::string_view job, std::string_view metric,
                    const std::function<void(const MetricPoint&)>& visit) override {
    std::lock_guard lock(mu_);
    HEADWAY_RETURN_IF_ERROR(FoldBeforeRead());
    if (metric.empty()) return Status::Ok();
    Status decoded = Status::Ok();
    HEADWAY_RETURN_IF_ERROR(
        VisitChunks(job, metric, Order::kOldestFirst, [&](std::string_view text) {
          decoded = sql::DecodeMetricChunk(text, visit);
          return decoded.ok();
        }));
    return decoded;
  }

  Result<std::vector<std::string>> MetricNames(std::string_view job) override {
    std::lock_guard lock(mu_);
    HEADWAY_RETURN_IF_ERROR(FoldBeforeRead());
    Statement q(*db_,
                "SELECT DISTINCT series FROM progress_chunks WHERE job = ? AND series <> ? "
                "ORDER BY series");
    q.Bind(1, std::string(job));
    q.Bind(2, std::string(sql::kStepSeries));
    std::vector<std::string> names;
    while (q.Step()) names.push_back(q.ColumnText(0));
    if (q.failed()) return Unavailable("metric names: " + LastError());
    return names;
  }

  Result<std::uint64_t> CountProgressPoints(std::string_view job) override {
    std::lock_guard lock(mu_);
    HEADWAY_RETURN_IF_ERROR(FoldBeforeRead());
    Statement q(*db_, "SELECT COALESCE(SUM(point_count), 0) FROM progress_chunks WHERE job = ?");
    q.Bind(1, std::string(job));
    std::uint64_t n = 0;
    if (q.Step()) n = static_cast<std::uint64_t>(q.ColumnInt64(0));
    if (q.failed()) return Unavailable("count progress points: " + LastError());
    return n;
  }

  Result<std::set<std::int64_t>> StoredSteps(std::string_view job,
                                             const std::vector<std::int64_t>& steps) override {
    std::lock_guard lock(mu_);
    HEADWAY_RETURN_IF_ERROR(FoldBeforeRead());
    Statement q(*db_,
                "SELECT first_step, last_step, points FROM progress_chunks WHERE job = ? "
                "AND series = ? AND first_step <= ? ORDER BY first_step DESC LIMIT 1");
    std::vector<std::int64_t> sorted(steps);
    std::sort(sorted.begin(), sorted.end());
    std::set<std::int64_t> stored;
    const std::string name(job), series(sql::kStepSeries);
    // The chunk that holds the step before, kept: asked steps come close together.
    std::int64_t chunk_first = 1, chunk_last = 0;
    std::string text;
    std::vector<sql::SeriesLine> lines;
    for (std::int64_t step : sorted) {
      if (step < chunk_first || step > chunk_last) {
        q.Reset();
        q.Bind(1, name);
        q.Bind(2, series);
        q.Bind(3, step);
        lines.clear();
        chunk_first = 1;
        chunk_last = 0;
        if (q.Step()) {
          chunk_first = q.ColumnInt64(0);
          chunk_last = q.ColumnInt64(1);
          text = q.ColumnText(2);
          HEADWAY_RETURN_IF_ERROR(sql::SplitChunk(text, lines));
        }
        if (q.failed()) return Unavailable("read steps: " + LastError());
        if (step < chunk_first || step > chunk_last) continue;
      }
      auto at = std::lower_bound(
          lines.begin(), lines.end(), step,
          [](const sql::SeriesLine& line, std::int64_t s) { return line.step < s; });
      if (at != lines.end() && at->step == step) {
        stored.insert(step);
      }
    }
    return stored;
  }

  Status CreateUserToken(const UserToken& t) override {
    std::lock_guard lock(mu_);
    Statement q(*db_,
                "INSERT INTO user_tokens (name, team, role, hash, created_at, revoked_at, "
                "expires_at, parent) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
    q.Bind(1, t.name);
    q.Bind(2, t.team);
    q.Bind(3, std::string(RoleName(t.role)));
    q.Bind(4, t.hash);
    q.Bind(5, ToUnixMillis(t.created_at));
    if (t.revoked_at) q.Bind(6, ToUnixMillis(*t.revoked_at));
    if (t.expires_at) q.Bind(7, ToUnixMillis(*t.expires_at));
    q.Bind(8, t.parent);
    if (!q.Run()) {
      if (q.broken_constraint() == Constraint::kUnique) {
        return Conflict("token '" + t.name + "' already exists");
      }
      return Unavailable("create token: " + LastError());
    }
    return Status::Ok();
  }

  Result<std::vector<UserToken>> ListUserTokens() override {
    std::lock_guard lock(mu_);
    Statement q(*db_,
                "SELECT name, team, role, hash, created_at, revoked_at, expires_at, parent "
                "FROM user_tokens ORDER BY seq");
    std::vector<UserToken> tokens;
    while (q.Step()) {
      UserToken t;
      t.name = q.ColumnText(0);
      t.team = q.ColumnText(1);
      t.role = ParseRole(q.ColumnText(2)).value_or(Role::kViewer);
      t.hash = q.ColumnText(3);
      t.created_at = FromUnixMillis(q.ColumnInt64(4));
      if (!q.IsNull(5)) t.revoked_at = FromUnixMillis(q.ColumnInt64(5));
      if (!q.IsNull(6)) t.expires_at = FromUnixMillis(q.ColumnInt64(6));
      t.parent = q.ColumnText(7);
      tokens.push_back(std::move(t));
    }
    if (q.failed()) return Unavailable("list tokens: " + LastError());
    return tokens;
  }

  Status RevokeUserToken(std::string_view name, Time when) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, "UPDATE user_tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL");
    q.Bind(1, ToUnixMillis(when));
    q.Bind(2, std::string(name));
    if (!q.Run()) return Unavailable("revoke token: " + LastError());
    if (q.changes() == 0) {
      return NotFound("no active token named '" + std::string(name) + "'");
    }
    return Status::Ok();
  }

  Status DeleteExpiredSessions(Time now) override {
    std::lock_guard lock(mu_);
    Statement q(*db_,
                "DELETE FROM user_tokens WHERE parent != '' AND expires_at IS NOT NULL "
                "AND expires_at <= ?");
    q.Bind(1, ToUnixMillis(now));
    if (!q.Run()) return Unavailable("delete expired sessions: " + LastError());
    return Status::Ok();
  }

  Status CreateNotebook(const NotebookRecord& n) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, "INSERT INTO notebooks (name, team, created_by, profile, gpus, state, job, "
                     "starts, message, created_at, cull_warned_at, hub_user, server_env) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    BindNotebook(q, n);
    if (!q.Run()) {
      if (q.broken_constraint() == Constraint::kUnique) {
        return Conflict("notebook '" + n.name + "' already exists");
      }
      return Unavailable("create notebook: " + LastError());
    }
    return Status::Ok();
  }

  Status SaveNotebook(const NotebookRecord& n) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, "UPDATE notebooks SET name=?, team=?, created_by=?, profile=?, gpus=?, "
                     "state=?, job=?, starts=?, message=?, created_at=?, cull_warned_at=?, "
                     "hub_user=?, server_env=? WHERE name=?");
    BindNotebook(q, n);
    q.Bind(14, n.name);
    if (!q.Run()) return Unavailable("save notebook: " + LastError());
    if (q.changes() == 0) return NotFound("notebook '" + n.name + "' not found");
    return Status::Ok();
  }

  Result<NotebookRecord> GetNotebook(std::string_view name) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, std::string(kSelectNotebook) + " WHERE name = ?");
    q.Bind(1, std::string(name));
    if (!q.Step()) {
      if (q.failed()) return Unavailable("read notebook: " + LastError());
      return NotFound("notebook '" + std::string(name) + "' not found");
    }
    return ReadNotebook(q);
  }

  Result<std::vector<NotebookRecord>> ListNotebooks(std::string_view team) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, std::string(kSelectNotebook) +
                         (team.empty() ? " ORDER BY name" : " WHERE team = ? ORDER BY name"));
    if (!team.empty()) q.Bind(1, std::string(team));
    std::vector<NotebookRecord> out;
    while (q.Step()) {
      auto n = ReadNotebook(q);
      if (!n.ok()) return n.status();
      out.push_back(std::move(n.value()));
    }
    if (q.failed()) return Unavailable("list notebooks: " + LastError());
    return out;
  }

  Status DeleteNotebook(std::string_view name) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, "DELETE FROM notebooks WHERE name = ?");
    q.Bind(1, std::string(name));
    if (!q.Run()) return Unavailable("delete notebook: " + LastError());
    if (q.changes() == 0) return NotFound("notebook '" + std::string(name) + "' not found");
    return Status::Ok();
  }

  Status CreateExperiment(const ExperimentRecord& e) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, "INSERT INTO experiments (name, spec, state, message, created_at, finished_at) "
                     "VALUES (?, ?, ?, ?, ?, ?)");
    BindExperiment(q, e);
    if (!q.Run()) {
      if (q.broken_constraint() == Constraint::kUnique) {
        return Conflict("experiment '" + e.name + "' already exists");
      }
      return Unavailable("create experiment: " + LastError());
    }
    return Status::Ok();
  }

  Status SaveExperiment(const ExperimentRecord& e) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, "UPDATE experiments SET name=?, spec=?, state=?, message=?, created_at=?, "
                     "finished_at=? WHERE name=?");
    BindExperiment(q, e);
    q.Bind(7, e.name);
    if (!q.Run()) return Unavailable("save experiment: " + LastError());
    if (q.changes() == 0) return NotFound("experiment '" + e.name + "' not found");
    return Status::Ok();
  }

  Result<ExperimentRecord> GetExperiment(std::string_view name) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, std::string(kSelectExperiment) + " WHERE name = ?");
    q.Bind(1, std::string(name));
    if (!q.Step()) {
      if (q.failed()) return Unavailable("read experiment: " + LastError());
      return NotFound("experiment '" + std::string(name) + "' not found");
    }
    return ReadExperiment(q);
  }

  Result<std::vector<ExperimentRecord>> ListExperiments() override {
    std::lock_guard lock(mu_);
    Statement q(*db_, std::string(kSelectExperiment) + " ORDER BY seq");
    std::vector<ExperimentRecord> out;
    while (q.Step()) {
      auto e = ReadExperiment(q);
      if (!e.ok()) return e.status();
      out.push_back(std::move(e.value()));
    }
    if (q.failed()) return Unavailable("list experiments: " + LastError());
    return out;
  }

  Status CreateTrial(const TrialRecord& t) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, "INSERT INTO trials (experiment, idx, job, params, state, stop_requested, "
                     "objective, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
    BindTrial(q, t);
    if (!q.Run()) {
      Constraint code = q.broken_constraint();
      if (code == Constraint::kUnique) {
        return Conflict("trial " + std::to_string(t.index) + " of '" + t.experiment + "' exists");
      }
      if (code == Constraint::kForeignKey) {
        return NotFound("experiment '" + t.experiment + "' not found");
      }
      return Unavailable("create trial: " + LastError());
    }
    return Status::Ok();
  }

  Status SaveTrial(const TrialRecord& t) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, "UPDATE trials SET experiment=?, idx=?, job=?, params=?, state=?, "
                     "stop_requested=?, objective=?, message=? WHERE experiment=? AND idx=?");
    BindTrial(q, t);
    q.Bind(9, t.experiment);
    q.Bind(10, t.index);
    if (!q.Run()) return Unavailable("save trial: " + LastError());
    if (q.changes() == 0) return NotFound("trial not found");
    return Status::Ok();
  }

  Result<std::vector<TrialRecord>> ListTrials(std::string_view experiment) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, "SELECT experiment, idx, job, params, state, stop_requested, objective, "
                     "message FROM trials WHERE experiment = ? ORDER BY idx");
    q.Bind(1, std::string(experiment));
    std::vector<TrialRecord> out;
    while (q.Step()) {
      TrialRecord t;
      t.experiment = q.ColumnText(0);
      t.index = q.ColumnInt64(1);
      t.job = q.ColumnText(2);
      t.params_json = q.ColumnText(3);
      auto state = ParseTrialState(q.ColumnText(4));
      if (!state) return Internal("stored trial state is unknown: " + q.ColumnText(4));
      t.state = *state;
      t.stop_requested = q.ColumnInt(5) != 0;
      if (!q.IsNull(6)) t.objective = q.ColumnDouble(6);
      t.message = q.ColumnText(7);
      out.push_back(std::move(t));
    }
    if (q.failed()) return Unavailable("list trials: " + LastError());
    return out;
  }

  Status DeleteExperiment(std::string_view name) override {
    std::lock_guard lock(mu_);
    const std::string experiment(name);
    HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
    // Its trials first: they refer to it.
    Statement trials(*db_, "DELETE FROM trials WHERE experiment = ?");
    trials.Bind(1, experiment);
    if (!trials.Run()) return Rollback("delete trials");
    Statement del(*db_, "DELETE FROM experiments WHERE name = ?");
    del.Bind(1, experiment);
    if (!del.Run()) return Rollback("delete experiment");
    if (del.changes() == 0) {
      (void)Exec("ROLLBACK");
      return NotFound("experiment '" + experiment + "' not found");
    }
    return Commit();
  }

  Status CreateArtifact(Artifact& a) override {
    std::lock_guard lock(mu_);
    HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
    Statement owner(*db_, "SELECT team, last_version FROM artifact_names WHERE name = ?");
    owner.Bind(1, a.name);
    std::int64_t version = 1;
    if (owner.Step()) {
      if (owner.ColumnText(0) != a.team) {
        (void)Exec("ROLLBACK");
        return Conflict("artifact '" + a.name + "' belongs to team '" + owner.ColumnText(0) +
                        "': choose another name");
      }
      version = owner.ColumnInt64(1) + 1;
    } else if (owner.failed()) {
      return Rollback("read artifact name");
    }
    // The team of a taken name never changes (checked above).
    Statement name(*db_, db_->Upsert("artifact_names", {"name", "team", "last_version"}, {"name"},
                                     /*replace=*/true));
    name.Bind(1, a.name);
    name.Bind(2, a.team);
    name.Bind(3, version);
    if (!name.Run()) return Rollback("record artifact name");
    a.version = version;
    Statement insert(*db_,
                     "INSERT INTO artifacts (name, version, kind, state, team, created_by, size, "
                     "digest, producer_job, producer_attempt, producer_step, producer_node, "
                     "metrics, labels, created_at, ready_at) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    insert.Bind(1, a.name);
    insert.Bind(2, a.version);
    insert.Bind(3, std::string(ArtifactKindName(a.kind)));
    insert.Bind(4, std::string(ArtifactStateName(a.state)));
    insert.Bind(5, a.team);
    insert.Bind(6, a.created_by);
    insert.Bind(7, static_cast<std::int64_t>(a.size));
    insert.Bind(8, a.digest);
    insert.Bind(9, a.producer.job);
    insert.BindOptional(10, a.producer.attempt ? std::optional<std::int64_t>(*a.producer.attempt)
                                               : std::nullopt);
    insert.BindOptional(11, a.producer.step);
    insert.Bind(12, a.producer.pipeline_node);
    insert.Bind(13, MetricsJson(a.metrics));
    insert.Bind(14, nlohmann::json(a.labels).dump());
    insert.Bind(15, ToUnixMillis(a.created_at));
    insert.BindOptional(16, Millis(a.ready_at));
    if (!insert.Run()) return Rollback("insert artifact");
    return Commit();
  }

  Status SaveArtifact(const Artifact& a) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, "UPDATE artifacts SET state = ?, size = ?, ready_at = ?, metrics = ?, "
                     "labels = ? WHERE name = ? AND version = ?");
    q.Bind(1, std::string(ArtifactStateName(a.state)));
    q.Bind(2, static_cast<std::int64_t>(a.size));
    q.BindOptional(3, Millis(a.ready_at));
    q.Bind(4, MetricsJson(a.metrics));
    q.Bind(5, nlohmann::json(a.labels).dump());
    q.Bind(6, a.name);
    q.Bind(7, a.version);
    if (!q.Run()) return Unavailable("save artifact: " + LastError());
    if (q.changes() == 0) return NotFound("artifact '" + a.Ref() + "' not found");
    return Status::Ok();
  }

  Result<Artifact> GetArtifact(std::string_view name,
                               std::optional<std::int64_t> version) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, std::string(kSelectArtifact) +
                         (version ? " WHERE name = ? AND version = ?"
                                  : " WHERE name = ? AND state = 'Ready' ORDER BY version DESC "
                                    "LIMIT 1"));
    q.Bind(1, std::string(name));
    if (version) q.Bind(2, *version);
    if (!q.Step()) {
      if (q.failed()) return Unavailable("read artifact: " + LastError());
      return NotFound(version ? "artifact '" + std::string(name) + ":" +
                                    std::to_string(*version) + "' not found"
                              : "artifact '" + std::string(name) + "' has no ready version");
    }
    return ReadArtifact(q);
  }

  Result<std::vector<Artifact>> ListArtifacts(const ArtifactFilter& filter) override {
    std::lock_guard lock(mu_);
    Query sql(std::string(kSelectArtifact) + " WHERE 1=1");
    if (!filter.team.empty()) sql.Add(" AND team = ?", filter.team);
    if (!filter.name.empty()) sql.Add(" AND name = ?", filter.name);
    if (!filter.job.empty()) sql.Add(" AND producer_job = ?", filter.job);
    if (filter.kind) sql.Add(" AND kind = ?", std::string(ArtifactKindName(*filter.kind)));
    if (filter.ready_only) sql.Add(" AND state = 'Ready'");
    sql.Add(" ORDER BY name, version");
    Statement q = sql.Prepare(*db_);
    std::vector<Artifact> out;
    while (q.Step()) {
      auto a = ReadArtifact(q);
      if (!a.ok()) return a.status();
      out.push_back(std::move(a.value()));
    }
    if (q.failed()) return Unavailable("list artifacts: " + LastError());
    return out;
  }

  Status DeleteArtifact(std::string_view name, std::int64_t version) override {
    std::lock_guard lock(mu_);
    HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
    for (const char* table : {"artifacts", "artifact_uses"}) {
      Statement q(*db_, std::string("DELETE FROM ") + table + " WHERE name = ? AND version = ?");
      q.Bind(1, std::string(name));
      q.Bind(2, version);
      if (!q.Run()) return Rollback(std::string("delete from ") + table);
      if (std::string_view(table) == "artifacts" && q.changes() == 0) {
        (void)Exec("ROLLBACK");
        return NotFound("artifact '" + std::string(name) + ":" + std::to_string(version) +
                        "' not found");
      }
    }
    return Commit();
  }

  Result<std::uint64_t> CountArtifactsWithDigest(std::string_view team,
                                                 std::string_view digest) override {
    return CountWithDigest(team, digest, std::nullopt);
  }

  Result<std::uint64_t> CountReadyArtifactsWithDigest(std::string_view team,
                                                      std::string_view digest) override {
    return CountWithDigest(team, digest, ArtifactState::kReady);
  }

  // Versions of `team` holding `digest`, in `state` where one is given.
  Result<std::uint64_t> CountWithDigest(std::string_view team, std::string_view digest,
                                        std::optional<ArtifactState> state) {
    std::lock_guard lock(mu_);
    Statement q(*db_, state ? "SELECT COUNT(*) FROM artifacts WHERE digest = ? AND team = ? "
                              "AND state = ?"
                            : "SELECT COUNT(*) FROM artifacts WHERE digest = ? AND team = ?");
    q.Bind(1, std::string(digest));
    q.Bind(2, std::string(team));
    if (state) q.Bind(3, std::string(ArtifactStateName(*state)));
    if (!q.Step()) return Unavailable("count artifacts: " + LastError());
    return static_cast<std::uint64_t>(q.ColumnInt64(0));
  }

  Result<std::uint64_t> TeamArtifactBytes(std::string_view team) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, "SELECT COALESCE(SUM(size), 0) FROM artifacts WHERE team = ?");
    q.Bind(1, std::string(team));
    if (!q.Step()) return Unavailable("sum artifact bytes: " + LastError());
    return static_cast<std::uint64_t>(q.ColumnInt64(0));
  }

  Status AddArtifactUse(const ArtifactUse& u) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, db_->Upsert("artifact_uses", {"name", "version", "job", "attempt", "used_at"},
                                  {"name", "version", "job", "attempt"}, /*replace=*/false));
    q.Bind(1, u.name);
    q.Bind(2, u.version);
    q.Bind(3, u.job);
    q.Bind(4, static_cast<std::int64_t>(u.attempt.value_or(-1)));
    q.Bind(5, ToUnixMillis(u.used_at));
    if (!q.Run()) return Unavailable("record artifact use: " + LastError());
    return Status::Ok();
  }

  Result<std::vector<ArtifactUse>> ListArtifactUses(std::string_view name,
                                                    std::optional<std::int64_t> version) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, std::string(kSelectUse) + " WHERE name = ?" +
                         (version ? " AND version = ?" : "") + " ORDER BY used_at, job");
    q.Bind(1, std::string(name));
    if (version) q.Bind(2, *version);
    return ReadUses(q);
  }

  Result<std::vector<ArtifactUse>> ListJobArtifactUses(std::string_view job) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, std::string(kSelectUse) + " WHERE job = ? ORDER BY used_at, name, version");
    q.Bind(1, std::string(job));
    return ReadUses(q);
  }

  Status CreateWorkflow(WorkflowRecord& w) override {
    std::lock_guard lock(mu_);
    HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
    Statement exists(*db_, "SELECT 1 FROM workflows WHERE name = ?");
    exists.Bind(1, w.name);
    if (exists.Step()) {
      (void)Exec("ROLLBACK");
      return Conflict("workflow '" + w.name + "' already exists");
    }
    Statement insert(*db_,
                     "INSERT INTO workflows (name, team, uid, created_by, phase, manifest, status, "
                     "created_at, started_at, finished_at, revision) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1) RETURNING seq");
    BindWorkflow(insert, w);
    if (!insert.Step()) return Rollback("insert workflow");
    w.seq = insert.ColumnInt64(0);
    insert.Reset();
    w.revision = 1;
    Status s = WriteWorkflowLabels(w);
    if (!s.ok()) return Rollback(s.message());
    return Commit();
  }

  Status SaveWorkflow(WorkflowRecord& w, const std::vector<WorkflowNodeRecord>& nodes,
                      const std::vector<std::string>& removed) override {
    std::lock_guard lock(mu_);
    HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
    Statement update(*db_,
                     "UPDATE workflows SET name = ?, team = ?, uid = ?, created_by = ?, "
                     "phase = ?, manifest = ?, status = ?, created_at = ?, started_at = ?, "
                     "finished_at = ?, revision = revision + 1 WHERE name = ? AND revision = ?");
    BindWorkflow(update, w);
    update.Bind(11, w.name);
    update.Bind(12, w.revision);
    if (!update.Run()) return Rollback("save workflow");
    if (update.changes() == 0) {
      Statement exists(*db_, "SELECT revision FROM workflows WHERE name = ?");
      exists.Bind(1, w.name);
      const bool found = exists.Step();
      (void)Exec("ROLLBACK");
      if (!found) return NotFound("workflow '" + w.name + "' not found");
      return Conflict("workflow '" + w.name + "' changed since it was read (revision " +
                      std::to_string(w.revision) + ", now " +
                      std::to_string(exists.ColumnInt64(0)) + ")");
    }
    Status s = WriteWorkflowLabels(w);
    Statement node(*db_, db_->Upsert("workflow_nodes", {"workflow", "id", "phase", "job", "body"},
                                     {"workflow", "id"}, /*replace=*/true));
    for (const WorkflowNodeRecord& n : nodes) {
      if (!s.ok()) break;
      if (n.workflow != w.name) {
        s = InvalidArgument("node '" + n.id + "' is of workflow '" + n.workflow + "', not '" +
                            w.name + "'");
        break;
      }
      node.Reset();
      node.Bind(1, n.workflow);
      node.Bind(2, n.id);
      node.Bind(3, n.phase);
      node.Bind(4, n.job);
      node.Bind(5, n.body);
      if (!node.Run()) s = Unavailable("save workflow node: " + LastError());
    }
    Statement drop(*db_, "DELETE FROM workflow_nodes WHERE workflow = ? AND id = ?");
    for (const std::string& id : removed) {
      if (!s.ok()) break;
      drop.Reset();
      drop.Bind(1, w.name);
      drop.Bind(2, id);
      if (!drop.Run()) s = Unavailable("remove workflow node: " + LastError());
    }
    if (!s.ok()) {
      (void)Exec("ROLLBACK");
      return s;
    }
    HEADWAY_RETURN_IF_ERROR(Commit());
    ++w.revision;
    return Status::Ok();
  }

  Result<WorkflowRecord> GetWorkflow(std::string_view name) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, std::string(kSelectWorkflow) + " WHERE name = ?");
    q.Bind(1, std::string(name));
    if (!q.Step()) {
      if (q.failed()) return Unavailable("read workflow: " + LastError());
      return NotFound("workflow '" + std::string(name) + "' not found");
    }
    WorkflowRecord w = ReadWorkflow(q);
    HEADWAY_RETURN_IF_ERROR(ReadWorkflowLabels(w));
    return w;
  }

  Result<std::vector<WorkflowRecord>> ListWorkflows(const WorkflowFilter& filter) override {
    std::lock_guard lock(mu_);
    Query sql(std::string(kSelectWorkflow) + " WHERE 1=1");
    if (!filter.team.empty()) sql.Add(" AND team = ?", filter.team);
    if (filter.phase) sql.Add(" AND phase = ?", *filter.phase);
    if (filter.finished_only) sql.Add(" AND finished_at IS NOT NULL");
    if (filter.active_only) sql.Add(" AND finished_at IS NULL");
    if (filter.created_after) sql.Add(" AND created_at > ?", ToUnixMillis(*filter.created_after));
    if (filter.created_before) sql.Add(" AND created_at < ?", ToUnixMillis(*filter.created_before));
    if (filter.before_seq > 0) sql.Add(" AND seq < ?", filter.before_seq);
    if (!filter.uid.empty()) sql.Add(" AND uid = ?", filter.uid);
    // A range on the name, so the name's index serves it. U+10FFFF is the
    // last code point: no UTF-8 text with the prefix sorts after the prefix
    // followed by it, bytewise (names are compared bytewise on every backend).
    if (!filter.name_prefix.empty()) {
      sql.Add(" AND name >= ?", filter.name_prefix);
      sql.Add(" AND name < ?", filter.name_prefix + "\xf4\x8f\xbf\xbf");
    }
    for (const auto& [key, value] : filter.labels) {
      sql.Add(" AND EXISTS (SELECT 1 FROM workflow_labels l WHERE l.workflow = workflows.name "
              "AND l.\"key\" = ?", key);
      sql.Add(" AND l.value = ?)", value);
    }
    sql.Add(" ORDER BY seq DESC");
    if (filter.limit > 0) sql.Add(" LIMIT ?", static_cast<std::int64_t>(filter.limit));
    Statement q = sql.Prepare(*db_);
    std::vector<WorkflowRecord> out;
    while (q.Step()) out.push_back(ReadWorkflow(q));
    if (q.failed()) return Unavailable("list workflows: " + LastError());
    for (WorkflowRecord& w : out) HEADWAY_RETURN_IF_ERROR(ReadWorkflowLabels(w));
    return out;
  }

  Status DeleteWorkflow(std::string_view name) override {
    std::lock_guard lock(mu_);
    HEADWAY_RETURN_IF_ERROR(db_->BeginWrite());
    const std::string workflow(name);
    Statement del(*db_, "DELETE FROM workflows WHERE name = ?");
    del.Bind(1, workflow);
    if (!del.Run()) return Rollback("delete workflow");
    if (del.changes() == 0) {
      (void)Exec("ROLLBACK");
      return NotFound("workflow '" + workflow + "' not found");
    }
    for (const char* table : {"workflow_labels", "workflow_nodes"}) {
      Statement q(*db_, std::string("DELETE FROM ") + table + " WHERE workflow = ?");
      q.Bind(1, workflow);
      if (!q.Run()) return Rollback(std::string("delete from ") + table);
    }
    return Commit();
  }

  Result<std::vector<WorkflowNodeRecord>> ListWorkflowNodes(std::string_view workflow) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, "SELECT workflow, id, phase, job, body FROM workflow_nodes "
                     "WHERE workflow = ? ORDER BY id");
    q.Bind(1, std::string(workflow));
    std::vector<WorkflowNodeRecord> out;
    while (q.Step()) out.push_back(ReadWorkflowNode(q));
    if (q.failed()) return Unavailable("list workflow nodes: " + LastError());
    return out;
  }

  Result<std::optional<WorkflowNodeRecord>> WorkflowNodeOfJob(std::string_view job) override {
    std::lock_guard lock(mu_);
    if (job.empty()) return std::optional<WorkflowNodeRecord>();
    Statement q(*db_, "SELECT workflow, id, phase, job, body FROM workflow_nodes WHERE job = ? "
                     "LIMIT 1");
    q.Bind(1, std::string(job));
    if (!q.Step()) {
      if (q.failed()) return Unavailable("find workflow node: " + LastError());
      return std::optional<WorkflowNodeRecord>();
    }
    return std::optional<WorkflowNodeRecord>(ReadWorkflowNode(q));
  }

  Status CreateWorkflowManifest(WorkflowManifestRecord& m) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, "INSERT INTO workflow_manifests (kind, name, team, body, created_at, "
                     "updated_at, revision) VALUES (?, ?, ?, ?, ?, ?, 1)");
    q.Bind(1, m.kind);
    q.Bind(2, m.name);
    q.Bind(3, m.team);
    q.Bind(4, m.body);
    q.Bind(5, ToUnixMillis(m.created_at));
    q.Bind(6, ToUnixMillis(m.updated_at));
    if (!q.Run()) {
      if (q.broken_constraint() == Constraint::kUnique) {
        return Conflict(m.kind + " '" + m.name + "' already exists");
      }
      return Unavailable("create " + m.kind + ": " + LastError());
    }
    m.revision = 1;
    return Status::Ok();
  }

  Status UpdateWorkflowManifest(WorkflowManifestRecord& m) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, "UPDATE workflow_manifests SET team = ?, body = ?, updated_at = ?, "
                     "revision = revision + 1 WHERE kind = ? AND name = ? AND revision = ?");
    q.Bind(1, m.team);
    q.Bind(2, m.body);
    q.Bind(3, ToUnixMillis(m.updated_at));
    q.Bind(4, m.kind);
    q.Bind(5, m.name);
    q.Bind(6, m.revision);
    if (!q.Run()) return Unavailable("update " + m.kind + ": " + LastError());
    if (q.changes() == 0) {
      Statement exists(*db_, "SELECT 1 FROM workflow_manifests WHERE kind = ? AND name = ?");
      exists.Bind(1, m.kind);
      exists.Bind(2, m.name);
      if (!exists.Step()) return NotFound(m.kind + " '" + m.name + "' not found");
      return Conflict(m.kind + " '" + m.name + "' changed since it was read");
    }
    ++m.revision;
    return Status::Ok();
  }

  Result<WorkflowManifestRecord> GetWorkflowManifest(std::string_view kind,
                                                     std::string_view name) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, std::string(kSelectManifest) + " WHERE kind = ? AND name = ?");
    q.Bind(1, std::string(kind));
    q.Bind(2, std::string(name));
    if (!q.Step()) {
      if (q.failed()) return Unavailable("read " + std::string(kind) + ": " + LastError());
      return NotFound(std::string(kind) + " '" + std::string(name) + "' not found");
    }
    return ReadManifest(q);
  }

  Result<std::vector<WorkflowManifestRecord>> ListWorkflowManifests(std::string_view kind,
                                                                    std::string_view team) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, std::string(kSelectManifest) + " WHERE kind = ?" +
                         (team.empty() ? "" : " AND team = ?") + " ORDER BY name");
    q.Bind(1, std::string(kind));
    if (!team.empty()) q.Bind(2, std::string(team));
    std::vector<WorkflowManifestRecord> out;
    while (q.Step()) out.push_back(ReadManifest(q));
    if (q.failed()) return Unavailable("list " + std::string(kind) + ": " + LastError());
    return out;
  }

  Status DeleteWorkflowManifest(std::string_view kind, std::string_view name) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, "DELETE FROM workflow_manifests WHERE kind = ? AND name = ?");
    q.Bind(1, std::string(kind));
    q.Bind(2, std::string(name));
    if (!q.Run()) return Unavailable("delete " + std::string(kind) + ": " + LastError());
    if (q.changes() == 0) {
      return NotFound(std::string(kind) + " '" + std::string(name) + "' not found");
    }
    return Status::Ok();
  }

  Status AddLogFile(const LogFile& log) override {
    std::lock_guard lock(mu_);
    Statement q(*db_, db_->Upsert("job_logs", {"job", "attempt", "rank", "path"},
                                  {"job", "attempt", "rank"}, /*replace=*/true));
    q.Bind(1, log.job);
    q.Bind(2, log.attempt);
    q.Bind(3, log.rank);
    q.Bind(4, log.path);
    if (!q.Run()) return Unavailable("add log file: " + LastError());
    return Status::Ok();
  }

  Result<std::vector<LogFile>> ListLogFiles(std::string_view job) override {
    std::lock_guard lock(mu_);
    Statement q(*db_,
                "SELECT job, attempt, rank, path FROM job_logs WHERE job = ? "
                "ORDER BY attempt, rank");
    q.Bind(1, std::string(job));
    std::vector<LogFile> logs;
    while (q.Step()) {
      logs.push_back({q.ColumnText(0), q.ColumnInt(1), q.ColumnInt(2), q.ColumnText(3)});
    }
    if (q.failed()) return Unavailable("list log files: " + LastError());
    return logs;
  }

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

  static std::string MetricsJson(const std::map<std::string, double>& metrics) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [name, value] : metrics) out[name] = MetricValueToJson(value);
    return out.dump();
  }

  static Result<Artifact> ReadArtifact(const Statement& q) {
    Artifact a;
    a.name = q.ColumnText(0);
    a.version = q.ColumnInt64(1);
    auto kind = ParseArtifactKind(q.ColumnText(2));
    auto state = ParseArtifactState(q.ColumnText(3));
    if (!kind || !state) return Internal("stored artifact " + a.Ref() + " has an unknown kind or state");
    a.kind = *kind;
    a.state = *state;
    a.team = q.ColumnText(4);
    a.created_by = q.ColumnText(5);
    a.size = static_cast<std::uint64_t>(q.ColumnInt64(6));
    a.digest = q.ColumnText(7);
    a.producer.job = q.ColumnText(8);
    if (!q.IsNull(9)) a.producer.attempt = q.ColumnInt(9);
    if (!q.IsNull(10)) a.producer.step = q.ColumnInt64(10);
    a.producer.pipeline_node = q.ColumnText(11);
    auto metrics = nlohmann::json::parse(q.ColumnText(12), nullptr, false);
    if (metrics.is_object()) {
      for (const auto& [name, value] : metrics.items()) {
        if (auto number = ParseMetricValue(name, value); number.ok()) a.metrics[name] = *number;
      }
    }
    auto labels = nlohmann::json::parse(q.ColumnText(13), nullptr, false);
    if (labels.is_object()) {
      for (const auto& [key, value] : labels.items()) {
        if (value.is_string()) a.labels[key] = value.get<std::string>();
      }
    }
    a.created_at = FromUnixMillis(q.ColumnInt64(14));
    if (!q.IsNull(15)) a.ready_at = FromUnixMillis(q.ColumnInt64(15));
    return a;
  }

  Result<std::vector<ArtifactUse>> ReadUses(Statement& q) {
    std::vector<ArtifactUse> out;
    while (q.Step()) {
      ArtifactUse u;
      u.name = q.ColumnText(0);
      u.version = q.ColumnInt64(1);
      u.job = q.ColumnText(2);
      if (q.ColumnInt64(3) >= 0) u.attempt = q.ColumnInt(3);
      u.used_at = FromUnixMillis(q.ColumnInt64(4));
      out.push_back(std::move(u));
    }
    if (q.failed()) return Unavailable("list artifact uses: " + LastError());
    return out;
  }

  static constexpr const char* kSelectNotebook =
      "SELECT name, team, created_by, profile, gpus, state, job, starts, message, created_at, "
      "cull_warned_at, hub_user, server_env FROM notebooks";

  static void BindNotebook(Statement& q, const NotebookRecord& n) {
    q.Bind(1, n.name);
    q.Bind(2, n.team);
    q.Bind(3, n.created_by);
    q.Bind(4, n.profile);
    q.Bind(5, n.gpus);
    q.Bind(6, std::string(NotebookStateName(n.state)));
    q.Bind(7, n.job);
    q.Bind(8, n.starts);
    q.Bind(9, n.message);
    q.Bind(10, ToUnixMillis(n.created_at));
    q.BindOptional(11, Millis(n.cull_warned_at));
    q.Bind(12, n.hub_user);
    q.Bind(13, n.server_env_json);
  }

  static Result<NotebookRecord> ReadNotebook(Statement& q) {
    NotebookRecord n;
    n.name = q.ColumnText(0);
    n.team = q.ColumnText(1);
    n.created_by = q.ColumnText(2);
    n.profile = q.ColumnText(3);
    n.gpus = q.ColumnInt(4);
    auto state = ParseNotebookState(q.ColumnText(5));
    if (!state) return Internal("stored notebook state is unknown: " + q.ColumnText(5));
    n.state = *state;
    n.job = q.ColumnText(6);
    n.starts = q.ColumnInt(7);
    n.message = q.ColumnText(8);
    n.created_at = FromUnixMillis(q.ColumnInt64(9));
    if (!q.IsNull(10)) n.cull_warned_at = FromUnixMillis(q.ColumnInt64(10));
    n.hub_user = q.ColumnText(11);
    n.server_env_json = q.ColumnText(12);
    return n;
  }

  static constexpr const char* kSelectExperiment =
      "SELECT name, spec, state, message, created_at, finished_at FROM experiments";

  static void BindExperiment(Statement& q, const ExperimentRecord& e) {
    q.Bind(1, e.name);
    q.Bind(2, e.spec_json);
    q.Bind(3, std::string(ExperimentStateName(e.state)));
    q.Bind(4, e.message);
    q.Bind(5, ToUnixMillis(e.created_at));
    q.BindOptional(6, Millis(e.finished_at));
  }

  static Result<ExperimentRecord> ReadExperiment(Statement& q) {
    ExperimentRecord e;
    e.name = q.ColumnText(0);
    e.spec_json = q.ColumnText(1);
    auto state = ParseExperimentState(q.ColumnText(2));
    if (!state) return Internal("stored experiment state is unknown: " + q.ColumnText(2));
    e.state = *state;
    e.message = q.ColumnText(3);
    e.created_at = FromUnixMillis(q.ColumnInt64(4));
    if (!q.IsNull(5)) e.finished_at = FromUnixMillis(q.ColumnInt64(5));
    return e;
  }

  static void BindTrial(Statement& q, const TrialRecord& t) {
    q.Bind(1, t.experiment);
    q.Bind(2, t.index);
    q.Bind(3, t.job);
    q.Bind(4, t.params_json);
    q.Bind(5, std::string(TrialStateName(t.state)));
    q.Bind(6, t.stop_requested ? 1 : 0);
    if (t.objective && std::isfinite(*t.objective)) {
      q.Bind(7, *t.objective);
    } else {
      q.BindNull(7);
    }
    q.Bind(8, t.message);
  }

  Result<Job> ReadJob(Statement& q) {
    Job job;
    job.submit_seq = q.ColumnInt64(0);
    auto spec = ParseStoredSpec(q.ColumnText(1));
    if (!spec.ok()) return spec.status();
    job.spec = std::move(spec.value());
    auto state = ParseJobState(q.ColumnText(2));
    if (!state) return Internal("stored state is unknown: " + q.ColumnText(2));
    job.state = *state;
    job.reason = q.ColumnText(3);
    job.message = q.ColumnText(4);
    if (!q.IsNull(5)) job.exit_code = q.ColumnInt(5);
    job.restarts = q.ColumnInt(6);
    job.gpu_ids = nlohmann::json::parse(q.ColumnText(7)).get<std::vector<int>>();
    job.executor = q.ColumnText(8);
    job.executor_handle = q.ColumnText(9);
    job.token_hash = q.ColumnText(10);
    job.created_at = FromUnixMillis(q.ColumnInt64(11));
    if (!q.IsNull(12)) job.started_at = FromUnixMillis(q.ColumnInt64(12));
    if (!q.IsNull(13)) job.finished_at = FromUnixMillis(q.ColumnInt64(13));
    if (!q.IsNull(14)) job.stop_requested_at = FromUnixMillis(q.ColumnInt64(14));
    auto stop_reason = ParseStopReason(q.ColumnText(15));
    if (!stop_reason) return Internal("stored stop reason is unknown: " + q.ColumnText(15));
    job.stop_reason = *stop_reason;
    job.preemptions = q.ColumnInt(16);
    if (!q.IsNull(17)) job.preempt_requested_at = FromUnixMillis(q.ColumnInt64(17));
    job.preempt_message = q.ColumnText(18);
    if (!q.IsNull(19)) job.requeued_at = FromUnixMillis(q.ColumnInt64(19));
    job.created_by = q.ColumnText(20);
    job.health = ParseHealth(q.ColumnText(21)).value_or(Health::kUnknown);
    job.health_reason = q.ColumnText(22);
    if (!q.IsNull(23)) job.delete_requested_at = FromUnixMillis(q.ColumnInt64(23));
    return job;
  }

  Status WriteJob(const Job& job) {
    Statement q(*db_,
                "UPDATE jobs SET team=?, spec=?, state=?, reason=?, message=?, exit_code=?, "
                "restarts=?, gpu_ids=?, executor=?, executor_handle=?, token_hash=?, "
                "started_at=?, finished_at=?, stop_requested_at=?, stop_reason=?, preemptions=?, "
                "preempt_requested_at=?, preempt_message=?, requeued_at=?, health=?, health_reason=?, "
                "delete_requested_at=? WHERE name=?");
    q.Bind(1, job.spec.team);
    q.Bind(2, StoredSpec(job.spec));
    q.Bind(3, std::string(JobStateName(job.state)));
    q.Bind(4, job.reason);
    q.Bind(5, job.message);
    q.BindOptional(6, job.exit_code ? std::optional<std::int64_t>(*job.exit_code) : std::nullopt);
    q.Bind(7, job.restarts);
    q.Bind(8, nlohmann::json(job.gpu_ids).dump());
    q.Bind(9, job.executor);
    q.Bind(10, job.executor_handle);
    q.Bind(11, job.token_hash);
    q.BindOptional(12, Millis(job.started_at));
    q.BindOptional(13, Millis(job.finished_at));
    q.BindOptional(14, Millis(job.stop_requested_at));
    q.Bind(15, std::string(StopReasonName(job.stop_reason)));
    q.Bind(16, job.preemptions);
    q.BindOptional(17, Millis(job.preempt_requested_at));
    q.Bind(18, job.preempt_message);
    q.BindOptional(19, Millis(job.requeued_at));
    q.Bind(20, std::string(HealthName(job.health)));
    q.Bind(21, job.health_reason);
    q.BindOptional(22, Millis(job.delete_requested_at));
    q.Bind(23, job.name());
    if (!q.Run()) return Unavailable("write job: " + LastError());
    if (q.changes() == 0) return NotFound("job '" + job.name() + "' not found");
    return Status::Ok();
  }

  Status WriteEvents(const std::vector<JobEvent>& events) {
    for (const JobEvent& e : events) {
      Statement q(*db_, "INSERT INTO job_events (job, time, type, message) VALUES (?, ?, ?, ?)");
      q.Bind(1, e.job);
      q.Bind(2, ToUnixMillis(e.time));
      q.Bind(3, e.type);
      q.Bind(4, e.message);
      if (!q.Run()) return Unavailable("write event: " + LastError());
    }
    return Status::Ok();
  }

  static constexpr const char* kSelectWorkflow =
      "SELECT seq, name, team, uid, created_by, phase, manifest, status, created_at, started_at, "
      "finished_at, revision FROM workflows";
  static constexpr const char* kSelectManifest =
      "SELECT kind, name, team, body, created_at, updated_at, revision FROM workflow_manifests";

  // Binds ?1..?10 in kSelectWorkflow's order, without seq and revision.
  static void BindWorkflow(Statement& q, const WorkflowRecord& w) {
    q.Bind(1, w.name);
    q.Bind(2, w.team);
    q.Bind(3, w.uid);
    q.Bind(4, w.created_by);
    q.Bind(5, w.phase);
    q.Bind(6, w.manifest);
    q.Bind(7, w.status);
    q.Bind(8, ToUnixMillis(w.created_at));
    q.BindOptional(9, Millis(w.started_at));
    q.BindOptional(10, Millis(w.finished_at));
  }

  static WorkflowRecord ReadWorkflow(const Statement& q) {
    WorkflowRecord w;
    w.seq = q.ColumnInt64(0);
    w.name = q.ColumnText(1);
    w.team = q.ColumnText(2);
    w.uid = q.ColumnText(3);
    w.created_by = q.ColumnText(4);
    w.phase = q.ColumnText(5);
    w.manifest = q.ColumnText(6);
    w.status = q.ColumnText(7);
    w.created_at = FromUnixMillis(q.ColumnInt64(8));
    if (!q.IsNull(9)) w.started_at = FromUnixMillis(q.ColumnInt64(9));
    if (!q.IsNull(10)) w.finished_at = FromUnixMillis(q.ColumnInt64(10));
    w.revision = q.ColumnInt64(11);
    return w;
  }

  static WorkflowNodeRecord ReadWorkflowNode(const Statement& q) {
    return {q.ColumnText(0), q.ColumnText(1), q.ColumnText(2), q.ColumnText(3), q.ColumnText(4)};
  }

  static WorkflowManifestRecord ReadManifest(const Statement& q) {
    WorkflowManifestRecord m;
    m.kind = q.ColumnText(0);
    m.name = q.ColumnText(1);
    m.team = q.ColumnText(2);
    m.body = q.ColumnText(3);
    m.created_at = FromUnixMillis(q.ColumnInt64(4));
    m.updated_at = FromUnixMillis(q.ColumnInt64(5));
    m.revision = q.ColumnInt64(6);
    return m;
  }

  // Replaces the workflow's labels; inside the caller's transaction.
  Status WriteWorkflowLabels(const WorkflowRecord& w) {
    Statement clear(*db_, "DELETE FROM workflow_labels WHERE workflow = ?");
    clear.Bind(1, w.name);
    if (!clear.Run()) return Unavailable("write workflow labels: " + LastError());
    Statement insert(*db_, "INSERT INTO workflow_labels (workflow, \"key\", value) VALUES (?, ?, ?)");
    for (const auto& [key, value] : w.labels) {
      insert.Reset();
      insert.Bind(1, w.name);
      insert.Bind(2, key);
      insert.Bind(3, value);
      if (!insert.Run()) return Unavailable("write workflow labels: " + LastError());
    }
    return Status::Ok();
  }

  Status ReadWorkflowLabels(WorkflowRecord& w) {
    Statement q(*db_, "SELECT \"key\", value FROM workflow_labels WHERE workflow = ?");
    q.Bind(1, w.name);
    while (q.Step()) w.labels[q.ColumnText(0)] = q.ColumnText(1);
    if (q.failed()) return Unavailable("read workflow labels: " + LastError());
    return Status::Ok();
  }

  // Replaces or inserts `rows` (a map from key to the row's values), the
  // backend's RowsPerStatement at a time; inside the caller's transaction.
  template <typename Rows>
  Status UpsertRows(const std::string& table, const std::vector<std::string>& columns,
                    const std::vector<std::string>& key, const Rows& rows) {
    auto it = rows.begin();  // rows are bound in order, statement after statement
    return ManyToAStatement(
        rows.size(),
        [&](std::size_t n) { return db_->Upsert(table, columns, key, /*replace=*/true, n); },
        [&](Statement& q, std::size_t, std::size_t n) {
          int i = 1;
          for (std::size_t r = 0; r < n; ++r, ++it) {
            for (const sql::Value& v : it->second) q.BindValue(i++, v);
          }
          if (!q.Run()) return Unavailable("write " + table + ": " + LastError());
          return Status::Ok();
        });
  }

  // Statements of up to the backend's RowsPerStatement rows each over
  // `count` rows: `sql(n)` makes the statement for n rows (the one for a
  // full statement is prepared once and reused), and `each(q, first, n)`
  // binds rows [first, first + n) to `q` and runs it.
  Status ManyToAStatement(std::size_t count, const std::function<std::string(std::size_t)>& sql,
                          const std::function<Status(Statement&, std::size_t, std::size_t)>& each) {
    const std::size_t per_statement = std::max<std::size_t>(1, db_->RowsPerStatement());
    std::optional<Statement> full;
    for (std::size_t done = 0; done < count;) {
      const std::size_t n = std::min(per_statement, count - done);
      std::optional<Statement> last;
      Statement* q = nullptr;
      if (n == per_statement) {
        if (full) {
          full->Reset();
        } else {
          full.emplace(*db_, sql(n));
        }
        q = &*full;
      } else {
        q = &last.emplace(*db_, sql(n));
      }
      HEADWAY_RETURN_IF_ERROR(each(*q, done, n));
      done += n;
    }
    return Status::Ok();
  }

  static std::optional<std::int64_t> Millis(const std::optional<Time>& t) {
    if (!t) return std::nullopt;
    return ToUnixMillis(*t);
  }

  Status Exec(const std::string& sql) { return db_->Exec(sql); }

  Status Commit() {
    Status s = Exec("COMMIT");
    if (!s.ok()) (void)Exec("ROLLBACK");
    return s;
  }

  const Tail* FindTail(std::string_view job, std::string_view series) const {
    for (auto it = pending_tails_.rbegin(); it != pending_tails_.rend(); ++it) {
      if (std::get<0>(*it) == job && std::get<1>(*it) == series) return &std::get<2>(*it);
    }
    auto jt = tails_.find(std::string(job));
    if (jt == tails_.end()) return nullptr;
    for (const auto& [name, tail] : jt->second) {
      if (name == series) return &tail;
    }
    return nullptr;
  }

  // Commit() for a transaction that filed progress: its tails are kept
  // once it is committed.
  Status CommitProgress() {
    Status s = Commit();
    if (s.ok()) {
      for (auto& [job, series, tail] : pending_tails_) {
        auto& of_job = tails_[job];
        auto it = std::find_if(of_job.begin(), of_job.end(),
                               [&](const auto& entry) { return entry.first == series; });
        if (it != of_job.end()) {
          it->second = tail;
          continue;
        }
        if (tail_count_ >= kMaxTails) {
          tails_.clear();
          tail_count_ = 0;
        }
        tails_[job].emplace_back(std::move(series), tail);
        ++tail_count_;
      }
    }
    pending_tails_.clear();
    return s;
  }

  void ForgetTails(const std::string& job) {
    auto it = tails_.find(job);
    if (it == tails_.end()) return;
    tail_count_ -= it->second.size();
    tails_.erase(it);
  }

  Status Rollback(const std::string& what) {
    std::string error = LastError();
    (void)Exec("ROLLBACK");
    return Unavailable(what + ": " + error);
  }

  std::string LastError() { return db_->LastError(); }

  // Specs never change once stored, and the control loop reads every active
  // job several times a second: parsing each again (yaml-cpp) dominated an
  // idle server with a long queue. Keyed by the stored text itself.
  Result<JobSpec> ParseStoredSpec(const std::string& text) {
    auto it = spec_cache_.find(text);
    if (it != spec_cache_.end()) return it->second;
    if (spec_cache_.size() >= kSpecCacheSize) spec_cache_.clear();
    // The canonical JSON it was stored as, read as JSON: a listing of 100k
    // jobs spent most of its time in the YAML reader.
    auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!json.is_discarded()) {
      if (auto fast = JobSpecFromStoredJson(json)) return spec_cache_.emplace(text, *fast).first->second;
    }
    auto spec = ParseJobSpec(text);
    if (!spec.ok()) return Internal("stored spec is unreadable: " + spec.status().ToString());
    spec_cache_.emplace(text, *spec);
    return spec;
  }
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
  std::unique_ptr<sql::Connection> db_;  // guarded by mu_
  std::unordered_map<std::string, JobSpec> spec_cache_;  // guarded by mu_
};

}  // namespace

std::unique_ptr<Store> sql::MakeSqlStore(std::unique_ptr<Connection> db) {
  return std::make_unique<SqlStore>(std::move(db));
}

}  // namespace headway
