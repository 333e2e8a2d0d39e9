// What the REST API needs for artifacts. The server's artifact manager
// implements it over the Store (records) and an ObjectStore (bytes).
//
// Thread safety: implementations must allow concurrent calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "artifact/object_store.h"
#include "core/artifact.h"
#include "core/status.h"

namespace headway::api {

// A new version and how its bytes get to the store: none needed (the store
// holds these bytes already: the version is Ready), a presigned request to
// the object store, or an upload through the server (local store).
struct NewArtifact {
  Artifact artifact;
  std::optional<PresignedRequest> presigned;
  bool upload_through_server = false;
};

// Where to read a version's bytes: a local file, or a presigned request.
struct ArtifactDownload {
  Artifact artifact;
  std::optional<std::string> local_path;
  std::optional<PresignedRequest> presigned;
};

class ArtifactService {
 public:
  virtual ~ArtifactService() = default;
  // `draft` is checked (ValidateNewArtifact), counted against its team's
  // quota (ResourceExhausted beyond it) and stored as a new Pending version
  // (Ready at once when its bytes are stored already).
  virtual Result<NewArtifact> Create(Artifact draft) = 0;
  // The bytes of a Pending version, uploaded through the server into the
  // file `path`: checked against the record's size and digest, then stored.
  virtual Result<Artifact> Receive(std::string_view name, std::int64_t version,
                                   const std::string& path) = 0;
  // After a presigned upload: checks that the object is there with the
  // record's size, then marks the version Ready.
  virtual Result<Artifact> Commit(std::string_view name, std::int64_t version) = 0;
  virtual Result<Artifact> Get(std::string_view name, std::optional<std::int64_t> version) = 0;
  virtual Result<std::vector<Artifact>> List(const ArtifactFilter& filter) = 0;
  // A Ready version's bytes. Records `use` first when it is set.
  virtual Result<ArtifactDownload> Open(std::string_view name, std::optional<std::int64_t> version,
                                        const std::optional<ArtifactUse>& use) = 0;
  // Removes the record, and the bytes once no other version holds them.
  virtual Status Delete(std::string_view name, std::int64_t version) = 0;
  virtual Result<std::vector<ArtifactUse>> Uses(std::string_view name,
                                                std::optional<std::int64_t> version) = 0;
  virtual Result<std::vector<ArtifactUse>> UsesByJob(std::string_view job) = 0;
};

}  // namespace headway::api
