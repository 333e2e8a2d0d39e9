// OCI image references as Docker and Kubernetes read them
// ("registry.example:5000/team/trainer:2.1", "python@sha256:...", "busybox"),
// and the image pull policy a job spec names. Pure: no I/O.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace headway {

struct ImageRef {
  std::string registry;    // "docker.io" when the reference names none
  std::string repository;  // "library/busybox", "team/trainer"
  std::string tag;         // "latest" when the reference names neither tag nor digest
  std::string digest;      // "sha256:<64 hex>" or empty

  // registry/repository[:tag][@digest], the form skopeo's docker:// takes.
  std::string Canonical() const;
  // Whether the reference pins nothing: no digest and the tag "latest"
  // (written or implied), which Kubernetes pulls on every start.
  bool Floating() const;
};

// A reference by Docker's grammar: lower-case path components separated by
// '/', an optional registry host (it holds a '.' or ':' or is "localhost"),
// an optional tag and an optional digest. The error says what is wrong.
Result<ImageRef> ParseImageRef(std::string_view text);

// Kubernetes' imagePullPolicy.
enum class ImagePullPolicy { kDefault, kAlways, kIfNotPresent, kNever };

// "Always", "IfNotPresent", "Never" (and "" for kDefault); nullopt otherwise.
std::optional<ImagePullPolicy> ParseImagePullPolicy(std::string_view text);
std::string_view ImagePullPolicyName(ImagePullPolicy policy);
// What kDefault means for `ref`, as Kubernetes decides it: Always for a
// floating reference (":latest" or no tag), IfNotPresent otherwise.
ImagePullPolicy EffectivePullPolicy(ImagePullPolicy policy, const ImageRef& ref);

}  // namespace headway
