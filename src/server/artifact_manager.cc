#include "server/artifact_manager.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "artifact/file_digest.h"

namespace headway {

ArtifactManager::ArtifactManager(Store& store, ObjectStore& objects, const Clock& clock,
                                 ArtifactManagerOptions options)
    : store_(store), objects_(objects), clock_(clock), options_(std::move(options)) {}

std::uint64_t ArtifactManager::QuotaOf(const std::string& team) const {
  auto it = options_.quota_bytes.find(team);
  return it != options_.quota_bytes.end() ? it->second : options_.default_quota_bytes;
}

Status ArtifactManager::CheckRoomLocked(const std::string& team, std::uint64_t bytes) {
  std::uint64_t quota = QuotaOf(team);
  if (quota == 0) return Status::Ok();
  auto used = store_.TeamArtifactBytes(team);
  if (!used.ok()) return used.status();
  // Checked so that no sum wraps: room is what the quota leaves.
  if (bytes > quota || *used > quota - bytes) {
    return PermissionDenied("team '" + team + "' would hold " + std::to_string(*used + bytes) +
                            " bytes of artifacts, over its quota of " + std::to_string(quota) +
                            " (it holds " + std::to_string(*used) + "): delete old versions first");
  }
  return Status::Ok();
}

Status ArtifactManager::CheckRoom(const std::string& team, std::uint64_t bytes) {
  std::lock_guard lock(mu_);
  return CheckRoomLocked(team, bytes);
}

Result<api::NewArtifact> ArtifactManager::Create(Artifact draft, bool client_multipart,
                                                 bool direct) {
  HEADWAY_RETURN_IF_ERROR(ValidateNewArtifact(draft));
  // "<job>.checkpoint" is the name save_checkpoint() gives that job's
  // checkpoints: only the job's own team may take it, so no one can claim a
  // job's checkpoint name before the job saves (and make its saves fail).
  constexpr std::string_view kCheckpointSuffix = ".checkpoint";
  if (draft.name.size() > kCheckpointSuffix.size() &&
      draft.name.compare(draft.name.size() - kCheckpointSuffix.size(), kCheckpointSuffix.size(),
                         kCheckpointSuffix) == 0) {
    const std::string job_name = draft.name.substr(0, draft.name.size() - kCheckpointSuffix.size());
    auto job = store_.GetJob(job_name);
    if (!job.ok() || job->spec.team != draft.team) {
      return PermissionDenied("artifact '" + draft.name + "' would be the checkpoint of job '" +
                              job_name + "', which is not a job of team '" + draft.team +
                              "': names ending in .checkpoint belong to the job of that name")
          .WithField("name");
    }
  }
  draft.version = 0;
  draft.state = ArtifactState::kPending;
  draft.created_at = clock_.Now();
  draft.ready_at.reset();
  const std::string key = ObjectKey(draft);
  bool stored_already = false;
  bool unchecked = false;
  {
    // Under the lock: the orphan sweep cannot delete the object between
    // this look and the record that then holds it.
    std::lock_guard lock(mu_);
    auto existing = objects_.Head(key);
    if (!existing.ok()) return existing.status();
    auto checked = store_.CountReadyArtifactsWithDigest(draft.team, draft.digest);
    if (!checked.ok()) return checked.status();
    // An object under the team's key for this digest that a Ready version
    // holds has these bytes: they were checked when that version was
    // committed. One no Ready version holds yet is checked below.
    if (existing->has_value() && *checked > 0 && (*existing)->size != draft.size) {
      return InvalidArgument("the bytes with digest " + draft.digest + " are " +
                             std::to_string((*existing)->size) + " bytes long, not " +
                             std::to_string(draft.size))
          .WithField("size");
    }
    stored_already = existing->has_value() && (*existing)->size == draft.size;
    unchecked = stored_already && *checked == 0;
    HEADWAY_RETURN_IF_ERROR(CheckRoomLocked(draft.team, draft.size));
    HEADWAY_RETURN_IF_ERROR(store_.CreateArtifact(draft));
  }
  if (unchecked) {
    // Left by an upload never committed (or one that is being committed):
    // the same bytes only if they hash to the digest; else upload again.
    auto match = StoredBytesMatch(draft);
    if (!match.ok()) return match.status();
    stored_already = *match;
  }
  api::NewArtifact out;
  if (stored_already) {
    // The same bytes under another version: nothing to upload.
    auto ready = MarkReady(draft);
    if (!ready.ok()) return ready.status();
    out.artifact = std::move(ready.value());
    return out;
  }
  out.artifact = draft;
  if (!direct) {
    out.upload_through_server = true;
    return out;
  }
  if (client_multipart && draft.size >= options_.multipart_threshold) {
    auto upload_id = objects_.OpenMultipart(key);
    if (!upload_id.ok()) return upload_id.status();
    if (upload_id->has_value()) {
      auto plan = PlanParts(draft.size, options_.part_size);
      if (!plan.ok()) return plan.status();
      out.multipart = api::MultipartPlan{std::move(**upload_id), plan->part_size, plan->part_count};
      return out;
    }
  }
  out.presigned = objects_.PresignPut(key, draft.size, draft.content_md5, options_.presign_ttl);
  out.upload_through_server = !out.presigned.has_value();
  return out;
}

Result<Artifact> ArtifactManager::MarkReady(Artifact artifact) {
  artifact.state = ArtifactState::kReady;
  artifact.ready_at = clock_.Now();
  HEADWAY_RETURN_IF_ERROR(store_.SaveArtifact(artifact));
  ApplyRetention(artifact);
  return artifact;
}

void ArtifactManager::ApplyRetention(const Artifact& newest) {
  auto policy = RetentionFromLabels(newest.labels);
  if (!policy.ok() || !policy->has_value()) return;
  ArtifactFilter filter;
  filter.name = newest.name;
  auto versions = store_.ListArtifacts(filter);
  if (!versions.ok()) return;
  // What a running job read stays until it ends (a later version's arrival
  // releases it then).
  std::set<std::int64_t> in_use;
  auto uses = store_.ListArtifactUses(newest.name, std::nullopt);
  if (!uses.ok()) return;  // cannot tell what is in use: release nothing
  for (const ArtifactUse& use : *uses) {
    auto job = store_.GetJob(use.job);
    if (job.ok() && !IsTerminal(job->state)) in_use.insert(use.version);
  }
  for (std::int64_t version : VersionsToRelease(*versions, **policy, in_use)) {
    (void)Delete(newest.name, version);
  }
}

Result<Artifact> ArtifactManager::Receive(std::string_view name, std::int64_t version,
                                          const std::string& path) {
  auto artifact = store_.GetArtifact(name, version);
  if (!artifact.ok()) return artifact.status();
  if (artifact->state == ArtifactState::kReady) {
    return Conflict("artifact '" + artifact->Ref() + "' is uploaded already");
  }
  auto got = DigestFile(path);
  if (!got.ok()) return got.status();
  if (got->size != artifact->size) {
    return InvalidArgument("the upload has " + std::to_string(got->size) +
                           " bytes; the record of " + artifact->Ref() + " says " +
                           std::to_string(artifact->size) + ": nothing was stored");
  }
  if (got->digest != artifact->digest) {
    return InvalidArgument("the upload's digest is " + got->digest + "; the record of " +
                           artifact->Ref() + " says " + artifact->digest + ": nothing was stored");
  }
  HEADWAY_RETURN_IF_ERROR(objects_.PutFile(ObjectKey(*artifact), path));
  return MarkReady(std::move(artifact.value()));
}

Result<std::pair<Artifact, PartPlan>> ArtifactManager::PendingMultipart(std::string_view name,
                                                                        std::int64_t version) {
  auto artifact = store_.GetArtifact(name, version);
  if (!artifact.ok()) return artifact.status();
  if (artifact->state == ArtifactState::kReady) {
    return Conflict("artifact '" + artifact->Ref() + "' is uploaded already");
  }
  auto plan = PlanParts(artifact->size, options_.part_size);
  if (!plan.ok()) return plan.status();
  return std::pair<Artifact, PartPlan>(std::move(artifact.value()), *plan);
}

Result<std::vector<UploadedPart>> ArtifactManager::UploadedParts(std::string_view name,
                                                                 std::int64_t version,
                                                                 const std::string& upload_id) {
  auto pending = PendingMultipart(name, version);
  if (!pending.ok()) return pending.status();
  return objects_.ListParts(ObjectKey(pending->first), upload_id);
}

Result<std::vector<PresignedRequest>> ArtifactManager::PresignParts(
    std::string_view name, std::int64_t version, const std::string& upload_id,
    const std::vector<api::PartToSend>& parts) {
  auto pending = PendingMultipart(name, version);
  if (!pending.ok()) return pending.status();
  const auto& [artifact, plan] = *pending;
  std::vector<PresignedRequest> out;
  out.reserve(parts.size());
  for (const api::PartToSend& part : parts) {
    if (part.number < 1 || part.number > plan.part_count) {
      return InvalidArgument("part " + std::to_string(part.number) + " is not one of the " +
                             std::to_string(plan.part_count) + " parts of " + artifact.Ref());
    }
    auto request =
        objects_.PresignPart(ObjectKey(artifact), upload_id, part.number, plan.Length(part.number),
                             part.content_md5, options_.presign_ttl);
    if (!request) return InvalidArgument("this object store takes no multipart uploads");
    out.push_back(std::move(*request));
  }
  return out;
}

Status ArtifactManager::CompleteMultipart(const Artifact& artifact, const std::string& upload_id) {
  auto plan = PlanParts(artifact.size, options_.part_size);
  if (!plan.ok()) return plan.status();
  const std::string key = ObjectKey(artifact);
  auto listed = objects_.ListParts(key, upload_id);
  if (!listed.ok()) return listed.status();
  std::map<int, UploadedPart> by_number;
  for (UploadedPart& p : *listed) by_number[p.number] = std::move(p);
  std::vector<UploadedPart> parts;
  std::vector<std::string> md5s;
  for (int n = 1; n <= plan->part_count; ++n) {
    auto it = by_number.find(n);
    if (it == by_number.end()) {
      return Conflict("part " + std::to_string(n) + " of " + std::to_string(plan->part_count) +
                      " of " + artifact.Ref() + " has not been uploaded");
    }
    if (it->second.size != plan->Length(n)) {
      return Conflict("part " + std::to_string(n) + " of " + artifact.Ref() + " has " +
                      std::to_string(it->second.size) + " bytes; it should have " +
                      std::to_string(plan->Length(n)));
    }
    md5s.push_back(it->second.etag);
    parts.push_back(it->second);
  }
  auto etag = objects_.CompleteMultipart(key, upload_id, parts);
  if (!etag.ok()) return etag.status();
  // Each part was bound to its MD5; the whole is the parts S3 listed.
  if (const std::string expected = MultipartEtag(md5s); !expected.empty() && *etag != expected) {
    return Unavailable("the object store assembled " + artifact.Ref() + " with ETag " + *etag +
                       ", not the " + expected + " its parts give");
  }
  return Status::Ok();
}

Result<Artifact> ArtifactManager::Commit(std::string_view name, std::int64_t version,
                                         const std::optional<std::string>& upload_id) {
  auto artifact = store_.GetArtifact(name, version);
  if (!artifact.ok()) return artifact.status();
  if (artifact->state == ArtifactState::kReady) return artifact;
  if (upload_id) {
    auto there = objects_.Head(ObjectKey(*artifact));
    if (!there.ok()) return there.status();
    // Another version of the same bytes may have completed it already, or
    // may complete it while this one tries (the upload is then gone).
    if (!there->has_value() || (*there)->size != artifact->size) {
      Status completed = CompleteMultipart(*artifact, *upload_id);
      if (!completed.ok()) {
        auto now = objects_.Head(ObjectKey(*artifact));
        if (!now.ok() || !now->has_value() || (*now)->size != artifact->size) return completed;
      }
    }
  }
  auto info = objects_.Head(ObjectKey(*artifact));
  if (!info.ok()) return info.status();
  if (!info->has_value()) {
    return Conflict("artifact '" + artifact->Ref() + "' has no uploaded bytes yet");
  }
  if ((*info)->size != artifact->size) {
    return Conflict("the stored object of " + artifact->Ref() + " has " +
                    std::to_string((*info)->size) + " bytes; the record says " +
                    std::to_string(artifact->size));
  }
  auto checked = store_.CountReadyArtifactsWithDigest(artifact->team, artifact->digest);
  if (!checked.ok()) return checked.status();
  if (*checked == 0) {
    // A presigned upload is bound to the MD5 its uploader chose, and a
    // multipart one to its parts': neither to the SHA-256 the record names,
    // which other versions of the team will trust once this one is Ready.
    auto match = StoredBytesMatch(*artifact);
    if (!match.ok()) return match.status();
    if (!*match) {
      {
        std::lock_guard lock(mu_);
        auto now_checked = store_.CountReadyArtifactsWithDigest(artifact->team, artifact->digest);
        if (now_checked.ok() && *now_checked == 0) (void)objects_.Delete(ObjectKey(*artifact));
      }
      return InvalidArgument("the bytes uploaded for " + artifact->Ref() +
                             " do not have the digest its record names (" + artifact->digest +
                             "): they were removed; upload the file again");
    }
  }
  return MarkReady(std::move(artifact.value()));
}

Result<bool> ArtifactManager::StoredBytesMatch(const Artifact& artifact) {
  const std::string key = ObjectKey(artifact);
  if (objects_.LocalPath(key)) return true;
  std::error_code ec;
  const std::string dir = options_.scratch_dir.empty()
                              ? std::filesystem::temp_directory_path(ec).string()
                              : options_.scratch_dir;
  std::string path = (std::filesystem::path(dir) / "verify-XXXXXX").string();
  const int fd = ::mkstemp(path.data());
  if (fd < 0) return Unavailable("cannot make a file in " + dir + " to check an upload");
  ::close(fd);
  Status got = objects_.GetFile(key, path);
  Result<FileDigest> digest = got.ok() ? DigestFile(path) : Result<FileDigest>(got);
  ::unlink(path.c_str());
  if (!digest.ok()) return digest.status();
  return digest->digest == artifact.digest && digest->size == artifact.size;
}

Result<Artifact> ArtifactManager::Get(std::string_view name, std::optional<std::int64_t> version) {
  return store_.GetArtifact(name, version);
}

Result<std::vector<Artifact>> ArtifactManager::List(const ArtifactFilter& filter) {
  return store_.ListArtifacts(filter);
}

Result<api::ArtifactDownload> ArtifactManager::Open(std::string_view name,
                                                    std::optional<std::int64_t> version,
                                                    const std::optional<ArtifactUse>& use) {
  auto artifact = store_.GetArtifact(name, version);
  if (!artifact.ok()) return artifact.status();
  if (artifact->state != ArtifactState::kReady) {
    return Conflict("artifact '" + artifact->Ref() + "' is still being uploaded");
  }
  if (use) {
    ArtifactUse record = *use;
    record.name = artifact->name;
    record.version = artifact->version;
    record.used_at = clock_.Now();
    HEADWAY_RETURN_IF_ERROR(store_.AddArtifactUse(record));
  }
  api::ArtifactDownload out;
  const std::string key = ObjectKey(*artifact);
  out.local_path = objects_.LocalPath(key);
  if (!out.local_path) out.presigned = objects_.PresignGet(key, options_.presign_ttl);
  out.artifact = std::move(artifact.value());
  return out;
}

Status ArtifactManager::Fetch(std::string_view name, std::int64_t version, const std::string& path,
                              const std::optional<ArtifactUse>& use) {
  auto opened = Open(name, version, use);
  if (!opened.ok()) return opened.status();
  return objects_.GetFile(ObjectKey(opened->artifact), path);
}

Status ArtifactManager::Delete(std::string_view name, std::int64_t version) {
  std::lock_guard lock(mu_);
  auto artifact = store_.GetArtifact(name, version);
  if (!artifact.ok()) return artifact.status();
  HEADWAY_RETURN_IF_ERROR(store_.DeleteArtifact(name, version));
  auto holders = store_.CountArtifactsWithDigest(artifact->team, artifact->digest);
  if (holders.ok() && *holders == 0) {
    // The record is gone either way; bytes left behind by a failure here
    // are found again by their digest when the same content comes back.
    (void)objects_.Delete(ObjectKey(*artifact));
    // And the parts of an upload that never finished.
    if (artifact->state == ArtifactState::kPending)
      (void)objects_.AbortMultiparts(ObjectKey(*artifact));
  }
  return Status::Ok();
}

Result<std::vector<ArtifactUse>> ArtifactManager::Uses(std::string_view name,
                                                       std::optional<std::int64_t> version) {
  return store_.ListArtifactUses(name, version);
}

Result<std::vector<ArtifactUse>> ArtifactManager::UsesByJob(std::string_view job) {
  return store_.ListJobArtifactUses(job);
}

std::size_t ArtifactManager::ReleaseStalePending() {
  auto all = store_.ListArtifacts(ArtifactFilter{});
  if (!all.ok()) return 0;
  const Time cutoff = clock_.Now() - options_.pending_ttl;
  std::size_t released = 0;
  for (const Artifact& a : *all) {
    if (a.state != ArtifactState::kPending || a.created_at > cutoff) continue;
    if (Delete(a.name, a.version).ok()) ++released;
  }
  return released;
}

std::size_t ArtifactManager::SweepOrphans(Duration min_age) {
  auto objects = objects_.List();
  if (!objects.ok()) return 0;
  // S3 gives an object's time to the second, and Swift rounds it up, so an
  // object may read up to a second younger than it is.
  const Time cutoff = clock_.Now() - min_age + std::chrono::seconds(1);
  std::size_t removed = 0;
  for (const StoredObject& object : *objects) {
    auto parts = ParseObjectKey(object.key);
    if (!parts || !object.modified || *object.modified > cutoff) continue;
    std::lock_guard lock(mu_);
    auto holders = store_.CountArtifactsWithDigest(parts->team, parts->digest);
    if (!holders.ok() || *holders > 0) continue;
    if (objects_.Delete(object.key).ok()) ++removed;
  }
  return removed;
}

void ArtifactManager::RunLoop(Duration period) {
  loop_.Run(period, [this] {
    ReleaseStalePending();
    if (!last_sweep_ || clock_.Now() - *last_sweep_ >= options_.orphan_sweep_period) {
      last_sweep_ = clock_.Now();
      SweepOrphans(options_.orphan_min_age);
    }
  });
}

void ArtifactManager::Shutdown() { loop_.Stop(); }

}  // namespace headway
