#include "store/sql/migrate_progress_rows.h"

#include <limits>
#include <string>
#include <vector>

#include "store/sql/progress_chunks.h"

namespace headway::sql {
namespace {

Status InsertChunks(Connection& db, const std::string& job, const std::string& series,
                    NewPoints& points) {
  if (points.empty()) return Status::Ok();
  auto changes = MergeIntoChunks({}, points.Sorted());
  if (!changes.ok()) return changes.status();
  Statement insert(db,
                   "INSERT INTO progress_chunks (job, series, first_step, last_step, "
                   "point_count, points) VALUES (?, ?, ?, ?, ?, ?)");
  for (const Chunk& c : changes->write) {
    insert.Reset();
    insert.Bind(1, job);
    insert.Bind(2, series);
    insert.Bind(3, c.first_step);
    insert.Bind(4, c.last_step);
    insert.Bind(5, static_cast<std::int64_t>(c.points));
    insert.Bind(6, c.text);
    if (!insert.Run()) return Unavailable("write progress_chunks: " + db.LastError());
  }
  points = NewPoints();
  return Status::Ok();
}

}  // namespace

Status MoveProgressRowsIntoChunks(Connection& db) {
  std::vector<std::string> jobs;
  {
    Statement q(db, "SELECT job FROM progress_steps UNION SELECT job FROM metric_points");
    while (q.Step()) jobs.push_back(q.ColumnText(0));
    if (q.failed()) return Unavailable("read progress rows: " + db.LastError());
  }
  Statement steps(db,
                  "SELECT step, time, total_steps, epoch, total_epochs FROM progress_steps "
                  "WHERE job = ? ORDER BY step");
  Statement metrics(db,
                    "SELECT metric, step, value, special FROM metric_points WHERE job = ? "
                    "ORDER BY metric, step");
  for (const std::string& job : jobs) {
    NewPoints points;
    steps.Reset();
    steps.Bind(1, job);
    while (steps.Step()) {
      std::optional<std::int64_t> total_steps;
      std::optional<double> epoch, total_epochs;
      if (!steps.IsNull(2)) total_steps = steps.ColumnInt64(2);
      if (!steps.IsNull(3)) epoch = steps.ColumnDouble(3);
      if (!steps.IsNull(4)) total_epochs = steps.ColumnDouble(4);
      points.AddStep(steps.ColumnInt64(0), steps.ColumnInt64(1), total_steps, epoch, total_epochs);
    }
    if (steps.failed()) return Unavailable("read progress_steps: " + db.LastError());
    HEADWAY_RETURN_IF_ERROR(InsertChunks(db, job, std::string(kStepSeries), points));

    metrics.Reset();
    metrics.Bind(1, job);
    std::string metric;
    while (metrics.Step()) {
      std::string name = metrics.ColumnText(0);
      if (name != metric) {
        HEADWAY_RETURN_IF_ERROR(InsertChunks(db, job, metric, points));
        metric = std::move(name);
      }
      double value = std::numeric_limits<double>::quiet_NaN();
      if (!metrics.IsNull(2)) {
        value = metrics.ColumnDouble(2);
      } else {
        const std::string special = metrics.ColumnText(3);
        if (special == "inf") value = std::numeric_limits<double>::infinity();
        if (special == "-inf") value = -std::numeric_limits<double>::infinity();
      }
      points.AddMetric(metrics.ColumnInt64(1), value);
    }
    if (metrics.failed()) return Unavailable("read metric_points: " + db.LastError());
    HEADWAY_RETURN_IF_ERROR(InsertChunks(db, job, metric, points));
  }
  for (const char* table : {"progress_steps", "metric_points"}) {
    HEADWAY_RETURN_IF_ERROR(db.Exec(std::string("DELETE FROM ") + table));
  }
  return Status::Ok();
}

}  // namespace headway::sql
