// A migration step written in C++, not SQL: schemas before progress chunks
// kept a row per point in progress_steps and metric_points; this moves
// them into progress_chunks (progress_chunks.h), job by job, and empties
// the old tables. Run by each backend's migrations, inside the caller's
// transaction, between the version that creates progress_chunks and the
// one that drops the old tables. Internal to store/.
#pragma once

#include "core/status.h"
#include "store/sql/connection.h"

namespace headway::sql {

// Stands in the backends' lists of migrations (SQL texts) for this step.
inline constexpr char kMoveProgressRowsIntoChunks[] = "-- sql::MoveProgressRowsIntoChunks";

Status MoveProgressRowsIntoChunks(Connection& db);

}  // namespace headway::sql
