// The artifact manager: artifact records in the Store, their bytes in an
// ObjectStore, addressed by content (core/artifact.h), with per-team quotas
// on the bytes stored.
//
// Thread safety: every method may be called concurrently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "api/artifact_service.h"
#include "artifact/object_store.h"
#include "artifact/s3/multipart.h"
#include "core/time.h"
#include "server/control_loop.h"
#include "store/store.h"

namespace headway {

struct ArtifactManagerOptions {
  // Bytes a team's versions may hold (Pending ones included); a team not
  // listed gets `default_quota_bytes`; 0: no limit.
  std::map<std::string, std::uint64_t> quota_bytes;
  std::uint64_t default_quota_bytes = 0;
  // How long a presigned URL it hands out stays valid.
  std::chrono::seconds presign_ttl{3600};
  // A version still Pending this long after it was created (its upload never
  // came, or never finished) is removed, and its room in the quota freed.
  Duration pending_ttl = std::chrono::hours(24);
  // Versions at least this large go up in parts of part_size (raised as
  // S3's 10,000-part limit needs), when the client and the store can.
  std::uint64_t multipart_threshold = 64ull << 20;
  std::uint64_t part_size = 64ull << 20;
  // How often the loop looks for objects no version holds, and how old such
  // an object must be before it goes.
  Duration orphan_sweep_period = std::chrono::hours(24);
  Duration orphan_min_age = std::chrono::hours(24);
  // Where bytes read back from the object store are checked (its SHA-256)
  // before a directly uploaded version is Ready; empty: the system's temp.
  std::string scratch_dir;
};

class ArtifactManager final : public api::ArtifactService {
 public:
  // `store`, `objects` and `clock` must outlive the manager.
  ArtifactManager(Store& store, ObjectStore& objects, const Clock& clock,
                  ArtifactManagerOptions options = {});

  Result<api::NewArtifact> Create(Artifact draft, bool client_multipart,
                                  bool direct = true) override;
  Status CheckRoom(const std::string& team, std::uint64_t bytes) override;
  Result<Artifact> Receive(std::string_view name, std::int64_t version,
                           const std::string& path) override;
  Result<std::vector<UploadedPart>> UploadedParts(std::string_view name, std::int64_t version,
                                                  const std::string& upload_id) override;
  Result<std::vector<PresignedRequest>> PresignParts(
      std::string_view name, std::int64_t version, const std::string& upload_id,
      const std::vector<api::PartToSend>& parts) override;
  Result<Artifact> Commit(std::string_view name, std::int64_t version,
                          const std::optional<std::string>& upload_id) override;
  Result<Artifact> Get(std::string_view name, std::optional<std::int64_t> version) override;
  Result<std::vector<Artifact>> List(const ArtifactFilter& filter) override;
  Result<api::ArtifactDownload> Open(std::string_view name, std::optional<std::int64_t> version,
                                     const std::optional<ArtifactUse>& use) override;
  Status Fetch(std::string_view name, std::int64_t version, const std::string& path,
               const std::optional<ArtifactUse>& use) override;
  Status Delete(std::string_view name, std::int64_t version) override;
  Result<std::vector<ArtifactUse>> Uses(std::string_view name,
                                        std::optional<std::int64_t> version) override;
  Result<std::vector<ArtifactUse>> UsesByJob(std::string_view job) override;

  // Removes the versions Pending for longer than options.pending_ttl;
  // returns how many.
  std::size_t ReleaseStalePending();
  // Deletes the objects of the store that no version holds (bytes left by
  // a failure between storing and recording them, or of a version deleted
  // while the store was away) once older than `min_age`; returns how many.
  // Objects whose key is not one this server makes (another tool's, in a
  // shared bucket) are never touched.
  std::size_t SweepOrphans(Duration min_age);
  // Calls ReleaseStalePending every `period`, and SweepOrphans every
  // options.orphan_sweep_period, until Shutdown().
  void RunLoop(Duration period);
  void Shutdown();

 private:
  // Marks a version Ready, then lets go of the versions its name's
  // retention policy does not keep (core/artifact.h).
  Result<Artifact> MarkReady(Artifact artifact);
  void ApplyRetention(const Artifact& newest);
  std::uint64_t QuotaOf(const std::string& team) const;
  Status CheckRoomLocked(const std::string& team, std::uint64_t bytes);  // callers hold mu_
  // A Pending version and the plan of its multipart upload.
  Result<std::pair<Artifact, PartPlan>> PendingMultipart(std::string_view name,
                                                         std::int64_t version);
  Status CompleteMultipart(const Artifact& artifact, const std::string& upload_id);
  // Whether the object of `artifact` holds the bytes its digest names: read
  // back and hashed where the store could not check them as they came (a
  // presigned or multipart upload); true at once for the local store, which
  // checked them in Receive.
  Result<bool> StoredBytesMatch(const Artifact& artifact);

  Store& store_;
  ObjectStore& objects_;
  const Clock& clock_;
  const ArtifactManagerOptions options_;
  // Serialises quota checks with the creations they admit, and deletions
  // with the checks of whether bytes are still referenced.
  std::mutex mu_;
  ControlLoop loop_;
  std::optional<Time> last_sweep_;  // used by RunLoop's thread only
};

}  // namespace headway
