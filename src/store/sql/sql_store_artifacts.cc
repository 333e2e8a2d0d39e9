// The SQL store's artifacts, their versions and the jobs that used them.
// The class is in sql_store_internal.h.
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/sql/sql_store_internal.h"

namespace headway::sql_internal {

Status SqlStore::CreateArtifact(Artifact& a) {
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
  insert.BindOptional(
      10, a.producer.attempt ? std::optional<std::int64_t>(*a.producer.attempt) : std::nullopt);
  insert.BindOptional(11, a.producer.step);
  insert.Bind(12, a.producer.pipeline_node);
  insert.Bind(13, MetricsJson(a.metrics));
  insert.Bind(14, nlohmann::json(a.labels).dump());
  insert.Bind(15, ToUnixMillis(a.created_at));
  insert.BindOptional(16, Millis(a.ready_at));
  if (!insert.Run()) return Rollback("insert artifact");
  return Commit();
}

Status SqlStore::SaveArtifact(const Artifact& a) {
  std::lock_guard lock(mu_);
  Statement q(*db_,
              "UPDATE artifacts SET state = ?, size = ?, ready_at = ?, metrics = ?, "
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

Result<Artifact> SqlStore::GetArtifact(std::string_view name, std::optional<std::int64_t> version) {
  std::lock_guard lock(mu_);
  Statement q(*db_, std::string(kSelectArtifact) +
                        (version ? " WHERE name = ? AND version = ?"
                                 : " WHERE name = ? AND state = 'Ready' ORDER BY version DESC "
                                   "LIMIT 1"));
  q.Bind(1, std::string(name));
  if (version) q.Bind(2, *version);
  if (!q.Step()) {
    if (q.failed()) return Unavailable("read artifact: " + LastError());
    return NotFound(version ? "artifact '" + std::string(name) + ":" + std::to_string(*version) +
                                  "' not found"
                            : "artifact '" + std::string(name) + "' has no ready version");
  }
  return ReadArtifact(q);
}

Result<std::vector<Artifact>> SqlStore::ListArtifacts(const ArtifactFilter& filter) {
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

Status SqlStore::DeleteArtifact(std::string_view name, std::int64_t version) {
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

Result<std::uint64_t> SqlStore::CountArtifactsWithDigest(std::string_view team,
                                                         std::string_view digest) {
  return CountWithDigest(team, digest, std::nullopt);
}

Result<std::uint64_t> SqlStore::CountReadyArtifactsWithDigest(std::string_view team,
                                                              std::string_view digest) {
  return CountWithDigest(team, digest, ArtifactState::kReady);
}

Result<std::uint64_t> SqlStore::CountWithDigest(std::string_view team, std::string_view digest,
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

Result<std::uint64_t> SqlStore::TeamArtifactBytes(std::string_view team) {
  std::lock_guard lock(mu_);
  Statement q(*db_, "SELECT COALESCE(SUM(size), 0) FROM artifacts WHERE team = ?");
  q.Bind(1, std::string(team));
  if (!q.Step()) return Unavailable("sum artifact bytes: " + LastError());
  return static_cast<std::uint64_t>(q.ColumnInt64(0));
}

Status SqlStore::AddArtifactUse(const ArtifactUse& u) {
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

Result<std::vector<ArtifactUse>> SqlStore::ListArtifactUses(std::string_view name,
                                                            std::optional<std::int64_t> version) {
  std::lock_guard lock(mu_);
  Statement q(*db_, std::string(kSelectUse) + " WHERE name = ?" +
                        (version ? " AND version = ?" : "") + " ORDER BY used_at, job");
  q.Bind(1, std::string(name));
  if (version) q.Bind(2, *version);
  return ReadUses(q);
}

Result<std::vector<ArtifactUse>> SqlStore::ListJobArtifactUses(std::string_view job) {
  std::lock_guard lock(mu_);
  Statement q(*db_, std::string(kSelectUse) + " WHERE job = ? ORDER BY used_at, name, version");
  q.Bind(1, std::string(job));
  return ReadUses(q);
}

std::string SqlStore::MetricsJson(const std::map<std::string, double>& metrics) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, value] : metrics) out[name] = MetricValueToJson(value);
  return out.dump();
}

Result<Artifact> SqlStore::ReadArtifact(const Statement& q) {
  Artifact a;
  a.name = q.ColumnText(0);
  a.version = q.ColumnInt64(1);
  auto kind = ParseArtifactKind(q.ColumnText(2));
  auto state = ParseArtifactState(q.ColumnText(3));
  if (!kind || !state)
    return Internal("stored artifact " + a.Ref() + " has an unknown kind or state");
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

Result<std::vector<ArtifactUse>> SqlStore::ReadUses(Statement& q) {
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

}  // namespace headway::sql_internal
