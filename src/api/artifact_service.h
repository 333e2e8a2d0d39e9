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

// A multipart upload the client drives: it asks which parts the store has
// (UploadedParts), sends the others with presigned requests (PresignParts),
// then commits with the upload's id. Resumable: a later Create of the same
// bytes gets the same unfinished upload back.
struct MultipartPlan {
  std::string upload_id;
  std::uint64_t part_size = 0;  // every part but the last
  int part_count = 0;
};

// A new version and how its bytes get to the store: none needed (the store
// holds these bytes already: the version is Ready), a presigned request to
// the object store, a multipart upload of presigned parts, or an upload
// through the server (local store).
struct NewArtifact {
  Artifact artifact;
  std::optional<PresignedRequest> presigned;
  std::optional<MultipartPlan> multipart;
  bool upload_through_server = false;
};

// A part the client is about to send: its number and its MD5 (base64),
// which the presigned request is bound to.
struct PartToSend {
  int number = 0;
  std::string content_md5;
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
  // (Ready at once when its bytes are stored already). `client_multipart`:
  // the client can drive a multipart upload, which large versions then get.
  // `direct`: the client may send the bytes to the object store itself
  // (presigned); otherwise it uploads them through the server (a job whose
  // network reaches only the server).
  virtual Result<NewArtifact> Create(Artifact draft, bool client_multipart, bool direct = true) = 0;
  // Whether `team`'s quota has room for `bytes` more: Create's check, for a
  // caller that would copy the bytes somewhere first (PermissionDenied if not).
  virtual Status CheckRoom(const std::string& team, std::uint64_t bytes) = 0;
  // The bytes of a Pending version, uploaded through the server into the
  // file `path`: checked against the record's size and digest, then stored.
  virtual Result<Artifact> Receive(std::string_view name, std::int64_t version,
                                   const std::string& path) = 0;
  // For a multipart upload of a Pending version: the parts the store has,
  // and requests that send the given ones.
  virtual Result<std::vector<UploadedPart>> UploadedParts(std::string_view name,
                                                          std::int64_t version,
                                                          const std::string& upload_id) = 0;
  virtual Result<std::vector<PresignedRequest>> PresignParts(
      std::string_view name, std::int64_t version, const std::string& upload_id,
      const std::vector<PartToSend>& parts) = 0;
  // After a presigned upload: assembles the parts of `upload_id` when given
  // (each must be there, with the size the plan gives it), checks that the
  // object is there with the record's size, then marks the version Ready.
  virtual Result<Artifact> Commit(std::string_view name, std::int64_t version,
                                  const std::optional<std::string>& upload_id) = 0;
  virtual Result<Artifact> Get(std::string_view name, std::optional<std::int64_t> version) = 0;
  virtual Result<std::vector<Artifact>> List(const ArtifactFilter& filter) = 0;
  // A Ready version's bytes. Records `use` first when it is set.
  virtual Result<ArtifactDownload> Open(std::string_view name, std::optional<std::int64_t> version,
                                        const std::optional<ArtifactUse>& use) = 0;
  // Copies a Ready version's bytes into the file `path`, recording `use`
  // first when it is set (the server staging a workflow step's input).
  virtual Status Fetch(std::string_view name, std::int64_t version, const std::string& path,
                       const std::optional<ArtifactUse>& use) = 0;
  // Removes the record, and the bytes once no other version holds them.
  virtual Status Delete(std::string_view name, std::int64_t version) = 0;
  virtual Result<std::vector<ArtifactUse>> Uses(std::string_view name,
                                                std::optional<std::int64_t> version) = 0;
  virtual Result<std::vector<ArtifactUse>> UsesByJob(std::string_view job) = 0;
};

}  // namespace headway::api
