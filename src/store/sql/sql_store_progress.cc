// The SQL store's progress: reports appended to progress_log, folded into
// each series' chunks (progress_chunks.h), and the reads of steps and
// metrics over those chunks. The class is in sql_store_internal.h.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "store/sql/progress_chunks.h"
#include "store/sql/progress_log.h"
#include "store/sql/sql_store_internal.h"

namespace headway::sql_internal {

Status SqlStore::AppendProgress(const std::vector<ProgressBatch>& batches) {
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
    for (std::string& text : sql::EncodeProgressLog(batch.reports, ToUnixMillis(batch.received))) {
      rows.emplace_back(&batch.job, std::move(text));
    }
  }
  if (Status s = AppendLogRows(rows); !s.ok()) {
    (void)Exec("ROLLBACK");
    return s;
  }
  return CommitProgress();
}

Status SqlStore::AppendLogRows(std::vector<std::pair<const std::string*, std::string>>& rows) {
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

Status SqlStore::ReadLogRow(std::int64_t seq, const std::string& text, ProgressBatch& batch) {
  Status s =
      sql::DecodeProgressLog(text, [&](const ProgressReport& r) { batch.reports.push_back(r); });
  if (!s.ok()) return Internal("progress_log row " + std::to_string(seq) + ": " + s.message());
  return Status::Ok();
}

Status SqlStore::FileJobLog(const std::string& job) {
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

Result<std::size_t> SqlStore::FoldProgress(std::size_t max_reports) {
  std::lock_guard lock(mu_);
  return FoldInTransaction(max_reports);
}

Status SqlStore::FoldBeforeRead() {
  {
    Statement any(*db_, "SELECT seq FROM progress_log ORDER BY seq LIMIT 1");
    if (!any.Step()) {
      if (any.failed()) return Unavailable("read progress_log: " + LastError());
      return Status::Ok();
    }
  }
  return FoldInTransaction(std::numeric_limits<std::size_t>::max()).status();
}

Result<std::size_t> SqlStore::FoldInTransaction(std::size_t max_reports) {
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

Result<std::size_t> SqlStore::FoldProgressLog(std::size_t max_reports) {
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

Status SqlStore::UpsertProgress(std::span<const ProgressBatch> batches) {
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
                                                fresh.front().step, fresh.back().step, fresh.size(),
                                                stored));
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

Result<std::vector<std::optional<sql::Chunk>>> SqlStore::ReadChunksByKey(
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

Status SqlStore::ReadChunksToMerge(Statement& q, std::string_view job, std::string_view series,
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

Result<SqlStore::Tail> SqlStore::ReadNewestChunk(std::string_view job, std::string_view series) {
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

Status SqlStore::DeleteChunk(const std::string& job, const std::string& series,
                             std::int64_t first_step) {
  Statement q(*db_, "DELETE FROM progress_chunks WHERE job = ? AND series = ? AND first_step = ?");
  q.Bind(1, job);
  q.Bind(2, series);
  q.Bind(3, first_step);
  if (!q.Run()) return Unavailable("delete from progress_chunks: " + LastError());
  return Status::Ok();
}

Status SqlStore::VisitChunks(std::string_view job, std::string_view series, Order order,
                             const std::function<bool(std::string_view)>& visit,
                             std::int64_t from) {
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

template <typename Point, typename Decode>
Result<std::vector<Point>> SqlStore::RecentPoints(std::string_view job, std::string_view series,
                                                  std::size_t limit, Decode decode) {
  std::vector<Point> newest_first, chunk;
  Status decoded = Status::Ok();
  HEADWAY_RETURN_IF_ERROR(VisitChunks(job, series, Order::kNewestFirst, [&](std::string_view text) {
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

Result<std::vector<StepPoint>> SqlStore::RecentSteps(std::string_view job, std::size_t limit) {
  std::lock_guard lock(mu_);
  HEADWAY_RETURN_IF_ERROR(FoldBeforeRead());
  if (limit == 0) return std::vector<StepPoint>{};
  return RecentPoints<StepPoint>(job, sql::kStepSeries, limit, sql::DecodeStepChunk);
}

Result<std::vector<MetricPoint>> SqlStore::RecentMetric(std::string_view job,
                                                        std::string_view metric,
                                                        std::size_t limit) {
  std::lock_guard lock(mu_);
  HEADWAY_RETURN_IF_ERROR(FoldBeforeRead());
  if (limit == 0 || metric.empty()) return std::vector<MetricPoint>{};
  return RecentPoints<MetricPoint>(job, metric, limit, sql::DecodeMetricChunk);
}

Result<std::vector<MetricPoint>> SqlStore::MetricAfter(std::string_view job,
                                                       std::string_view metric,
                                                       std::int64_t after_step, std::size_t limit) {
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

Status SqlStore::ScanMetric(std::string_view job, std::string_view metric,
                            const std::function<void(const MetricPoint&)>& visit) {
  std::lock_guard lock(mu_);
  HEADWAY_RETURN_IF_ERROR(FoldBeforeRead());
  if (metric.empty()) return Status::Ok();
  Status decoded = Status::Ok();
  HEADWAY_RETURN_IF_ERROR(VisitChunks(job, metric, Order::kOldestFirst, [&](std::string_view text) {
    decoded = sql::DecodeMetricChunk(text, visit);
    return decoded.ok();
  }));
  return decoded;
}

Result<std::vector<std::string>> SqlStore::MetricNames(std::string_view job) {
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

Result<std::uint64_t> SqlStore::CountProgressPoints(std::string_view job) {
  std::lock_guard lock(mu_);
  HEADWAY_RETURN_IF_ERROR(FoldBeforeRead());
  Statement q(*db_, "SELECT COALESCE(SUM(point_count), 0) FROM progress_chunks WHERE job = ?");
  q.Bind(1, std::string(job));
  std::uint64_t n = 0;
  if (q.Step()) n = static_cast<std::uint64_t>(q.ColumnInt64(0));
  if (q.failed()) return Unavailable("count progress points: " + LastError());
  return n;
}

Result<std::set<std::int64_t>> SqlStore::StoredSteps(std::string_view job,
                                                     const std::vector<std::int64_t>& steps) {
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
    auto at =
        std::lower_bound(lines.begin(), lines.end(), step,
                         [](const sql::SeriesLine& line, std::int64_t s) { return line.step < s; });
    if (at != lines.end() && at->step == step) {
      stored.insert(step);
    }
  }
  return stored;
}

template <typename Rows>
Status SqlStore::UpsertRows(const std::string& table, const std::vector<std::string>& columns,
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

Status SqlStore::ManyToAStatement(
    std::size_t count, const std::function<std::string(std::size_t)>& sql,
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

const SqlStore::Tail* SqlStore::FindTail(std::string_view job, std::string_view series) const {
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

Status SqlStore::CommitProgress() {
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

void SqlStore::ForgetTails(const std::string& job) {
  auto it = tails_.find(job);
  if (it == tails_.end()) return;
  tail_count_ -= it->second.size();
  tails_.erase(it);
}

}  // namespace headway::sql_internal
