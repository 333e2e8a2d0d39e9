// Artifacts: checkpoints, models, datasets and step outputs, kept as records
// that say what they are, who made them and who used them (lineage), over
// bytes held by content in an object store (artifact/). Plain values and
// validation, no I/O.
//
// A record is NAME:VERSION. Versions of a name count up from 1; a new
// version is Pending until its bytes are in the store and checked, then
// Ready. Bytes are addressed by their SHA-256, so two versions with the same
// content share one object, and an object is removed only when no record
// points to it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace headway {

enum class ArtifactKind { kCheckpoint, kModel, kDataset, kOutput };
std::string_view ArtifactKindName(ArtifactKind kind);  // "checkpoint", ...
std::optional<ArtifactKind> ParseArtifactKind(std::string_view name);

enum class ArtifactState { kPending, kReady };
std::string_view ArtifactStateName(ArtifactState state);
std::optional<ArtifactState> ParseArtifactState(std::string_view name);

// What made an artifact: a job's attempt at a step, or a pipeline node; or a
// user who put it by hand (job empty).
struct ArtifactProducer {
  std::string job;
  std::optional<int> attempt;
  std::optional<std::int64_t> step;
  std::string pipeline_node;
};

struct Artifact {
  std::string name;
  std::int64_t version = 0;  // assigned by the store
  ArtifactKind kind = ArtifactKind::kOutput;
  ArtifactState state = ArtifactState::kPending;
  std::string team;
  std::string created_by;  // user or "job/NAME"
  std::uint64_t size = 0;  // bytes
  std::string digest;      // "sha256:" + 64 lowercase hex digits
  ArtifactProducer producer;
  std::map<std::string, double> metrics;  // at the time, e.g. the checkpoint's eval_loss
  std::map<std::string, std::string> labels;
  Time created_at{};
  std::optional<Time> ready_at;
  // Only in a request to create a version, never stored: the bytes' MD5
  // (base64, as HTTP's Content-MD5), which binds a presigned upload to them.
  std::string content_md5;

  std::string Ref() const { return name + ":" + std::to_string(version); }
};

// A job that read an artifact.
struct ArtifactUse {
  std::string name;
  std::int64_t version = 0;
  std::string job;
  std::optional<int> attempt;
  Time used_at{};
};

struct ArtifactFilter {
  std::string team;  // empty: any
  std::string name;  // empty: any
  std::string job;   // producer job; empty: any
  std::optional<ArtifactKind> kind;
  bool ready_only = false;
};

// Which versions of a name to keep, set by labels on its versions (the
// newest version's labels decide): "headway.dev/keep-latest": N keeps the N
// newest Ready versions; "headway.dev/keep-best": N with
// "headway.dev/best-metric": NAME and "headway.dev/best-mode": min|max (min
// by default) keeps the N best by that metric (a version without it, or with
// NaN, is the worst). A version is kept if either rule keeps it.
struct RetentionPolicy {
  std::optional<int> keep_latest;
  std::optional<int> keep_best;
  std::string metric;
  bool minimize = true;
};
inline constexpr std::string_view kKeepLatestLabel = "headway.dev/keep-latest";
inline constexpr std::string_view kKeepBestLabel = "headway.dev/keep-best";
inline constexpr std::string_view kBestMetricLabel = "headway.dev/best-metric";
inline constexpr std::string_view kBestModeLabel = "headway.dev/best-mode";
// nullopt when the labels set no rule; InvalidArgument naming the label
// when one is malformed.
Result<std::optional<RetentionPolicy>> RetentionFromLabels(
    const std::map<std::string, std::string>& labels);
// The Ready versions of one name (`versions`, any order) that the policy
// lets go, oldest first. Never one in `protected_versions` (read by a job
// still running), never a Pending one.
std::vector<std::int64_t> VersionsToRelease(const std::vector<Artifact>& versions,
                                            const RetentionPolicy& policy,
                                            const std::set<std::int64_t>& protected_versions);

// Artifact names: like job names, with '.' and '_' inside ("mnist-resnet18.v2"); one
// URL path segment, one file name.
bool IsValidArtifactName(std::string_view name);
// "sha256:<64 lowercase hex>".
bool IsValidDigest(std::string_view digest);
// The object key of the bytes with `digest` (valid) in a content-addressed
// store: "sha256/ab/abcdef...", so no directory holds more than 256 entries.
std::string ContentKey(std::string_view digest);
// Where a team's copy of those bytes is kept: "TEAM/sha256/ab/abcdef...".
// Bytes are shared within a team, never across: an upload a store cannot
// check against its SHA-256 (a presigned one) can then mislead only its own
// team, and readers check the digest anyway.
std::string ObjectKey(const Artifact& artifact);
// The team and digest an ObjectKey names; nullopt for any other key (an
// object some other tool put in a shared bucket).
struct ObjectKeyParts {
  std::string team;
  std::string digest;  // "sha256:..."
};
std::optional<ObjectKeyParts> ParseObjectKey(std::string_view key);
// A Content-MD5 value: base64 of 16 bytes.
bool IsValidContentMd5(std::string_view text);

// "NAME" (latest), "NAME:7" or "NAME:latest".
struct ArtifactRef {
  std::string name;
  std::optional<std::int64_t> version;  // nullopt: the latest ready one
};
Result<ArtifactRef> ParseArtifactRef(std::string_view text);

// The largest artifact a client may declare: 1 PiB. Far above any real
// file, and far enough below 2^63 that no sum of a team's artifacts (how
// quotas are checked, and how the databases add them up in signed 64-bit
// integers) can wrap around.
inline constexpr std::uint64_t kMaxArtifactBytes = std::uint64_t{1} << 50;

// Checks a record a client asks to create: name, kind, digest, size, labels
// and metrics within bounds. The field that is wrong is named in the error.
Status ValidateNewArtifact(const Artifact& artifact);

}  // namespace headway
