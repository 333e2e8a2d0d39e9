#include "core/artifact.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

namespace headway {
namespace {

constexpr std::string_view kKindNames[] = {"checkpoint", "model", "dataset", "output"};
constexpr std::string_view kStateNames[] = {"Pending", "Ready"};

constexpr std::size_t kMaxNameLength = 200;
constexpr std::size_t kMaxLabels = 64;
constexpr std::size_t kMaxLabelKey = 63;
constexpr std::size_t kMaxLabelValue = 256;
constexpr std::size_t kMaxMetrics = 256;
constexpr std::size_t kMaxMetricName = 128;

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool IsLabelKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxLabelKey) return false;
  for (char c : key) {
    if (!IsLowerAlnum(c) && !(c >= 'A' && c <= 'Z') && c != '-' && c != '_' && c != '.' &&
        c != '/') {
      return false;
    }
  }
  return true;
}

bool IsPrintable(std::string_view text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

std::string_view ArtifactKindName(ArtifactKind kind) { return kKindNames[static_cast<int>(kind)]; }

std::optional<ArtifactKind> ParseArtifactKind(std::string_view name) {
  for (int i = 0; i < 4; ++i) {
    if (kKindNames[i] == name) return static_cast<ArtifactKind>(i);
  }
  return std::nullopt;
}

std::string_view ArtifactStateName(ArtifactState state) {
  return kStateNames[static_cast<int>(state)];
}

std::optional<ArtifactState> ParseArtifactState(std::string_view name) {
  for (int i = 0; i < 2; ++i) {
    if (kStateNames[i] == name) return static_cast<ArtifactState>(i);
  }
  return std::nullopt;
}

bool IsValidArtifactName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  if (!IsLowerAlnum(name.front()) || !IsLowerAlnum(name.back())) return false;
  char previous = 0;
  for (char c : name) {
    bool separator = c == '-' || c == '_' || c == '.';
    if (!IsLowerAlnum(c) && !separator) return false;
    if (c == '.' && previous == '.') return false;  // never reads as a path that climbs
    previous = c;
  }
  return true;
}

bool IsValidDigest(std::string_view digest) {
  constexpr std::string_view kPrefix = "sha256:";
  if (digest.size() != kPrefix.size() + 64 || digest.substr(0, kPrefix.size()) != kPrefix) {
    return false;
  }
  for (char c : digest.substr(kPrefix.size())) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string ContentKey(std::string_view digest) {
  std::string_view hex = digest.substr(digest.find(':') + 1);
  return "sha256/" + std::string(hex.substr(0, 2)) + "/" + std::string(hex);
}

std::string ObjectKey(const Artifact& artifact) {
  return artifact.team + "/" + ContentKey(artifact.digest);
}

std::optional<ObjectKeyParts> ParseObjectKey(std::string_view key) {
  // TEAM/sha256/ab/<64 hex>
  constexpr std::size_t kTail = std::string_view("/sha256/ab/").size() + 64;
  if (key.size() <= kTail) return std::nullopt;
  const std::string_view team = key.substr(0, key.size() - kTail);
  const std::string_view hex = key.substr(key.size() - 64);
  ObjectKeyParts parts{std::string(team), "sha256:" + std::string(hex)};
  if (team.find('/') != std::string_view::npos || !IsValidDigest(parts.digest) ||
      key.substr(team.size()) != "/" + ContentKey(parts.digest)) {
    return std::nullopt;
  }
  return parts;
}

bool IsValidContentMd5(std::string_view text) {
  // 16 bytes: 22 base64 characters and "==".
  if (text.size() != 24 || text.substr(22) != "==") return false;
  for (char c : text.substr(0, 22)) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '/') return false;
  }
  return true;
}

Result<ArtifactRef> ParseArtifactRef(std::string_view text) {
  ArtifactRef ref;
  std::size_t colon = text.rfind(':');
  std::string_view name = colon == std::string_view::npos ? text : text.substr(0, colon);
  if (!IsValidArtifactName(name)) {
    return InvalidArgument("'" + std::string(text) +
                           "' is not an artifact reference: NAME or NAME:VERSION, where NAME is "
                           "lowercase letters, digits and - _ . (at most 200)");
  }
  ref.name = std::string(name);
  if (colon == std::string_view::npos) return ref;
  std::string_view version = text.substr(colon + 1);
  if (version == "latest") return ref;
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), v);
  if (ec != std::errc() || end != version.data() + version.size() || v < 1) {
    return InvalidArgument("'" + std::string(text) +
                           "': the version after ':' must be a number from 1 or 'latest'");
  }
  ref.version = v;
  return ref;
}

Result<std::optional<RetentionPolicy>> RetentionFromLabels(
    const std::map<std::string, std::string>& labels) {
  RetentionPolicy policy;
  bool any = false;
  auto count = [&](std::string_view key, std::optional<int>& out) -> Status {
    auto it = labels.find(std::string(key));
    if (it == labels.end()) return Status::Ok();
    int n = 0;
    auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), n);
    if (ec != std::errc() || end != it->second.data() + it->second.size() || n < 1 || n > 10000) {
      return InvalidArgument("label " + std::string(key) +
                             " must be a number from 1 to 10000, got '" + it->second + "'")
          .WithField("labels");
    }
    out = n;
    any = true;
    return Status::Ok();
  };
  HEADWAY_RETURN_IF_ERROR(count(kKeepLatestLabel, policy.keep_latest));
  HEADWAY_RETURN_IF_ERROR(count(kKeepBestLabel, policy.keep_best));
  if (auto it = labels.find(std::string(kBestMetricLabel)); it != labels.end())
    policy.metric = it->second;
  if (auto it = labels.find(std::string(kBestModeLabel)); it != labels.end()) {
    if (it->second != "min" && it->second != "max") {
      return InvalidArgument("label " + std::string(kBestModeLabel) + " must be min or max")
          .WithField("labels");
    }
    policy.minimize = it->second == "min";
  }
  if (policy.keep_best && policy.metric.empty()) {
    return InvalidArgument("label " + std::string(kKeepBestLabel) + " needs " +
                           std::string(kBestMetricLabel))
        .WithField("labels");
  }
  if (!any) return std::optional<RetentionPolicy>();
  return std::optional<RetentionPolicy>(policy);
}

std::vector<std::int64_t> VersionsToRelease(const std::vector<Artifact>& versions,
                                            const RetentionPolicy& policy,
                                            const std::set<std::int64_t>& protected_versions) {
  std::vector<const Artifact*> ready;
  for (const Artifact& a : versions) {
    if (a.state == ArtifactState::kReady) ready.push_back(&a);
  }
  std::set<std::int64_t> keep(protected_versions);
  if (!policy.keep_latest && !policy.keep_best) return {};
  std::sort(ready.begin(), ready.end(),
            [](const Artifact* x, const Artifact* y) { return x->version > y->version; });
  if (policy.keep_latest) {
    for (std::size_t i = 0; i < ready.size() && i < static_cast<std::size_t>(*policy.keep_latest);
         ++i) {
      keep.insert(ready[i]->version);
    }
  }
  if (policy.keep_best) {
    // Worst last: missing or NaN values; ties go to the newer version.
    auto score = [&](const Artifact* a) -> std::optional<double> {
      auto it = a->metrics.find(policy.metric);
      if (it == a->metrics.end() || std::isnan(it->second)) return std::nullopt;
      return policy.minimize ? it->second : -it->second;
    };
    std::vector<const Artifact*> ranked = ready;
    std::stable_sort(ranked.begin(), ranked.end(), [&](const Artifact* x, const Artifact* y) {
      auto sx = score(x), sy = score(y);
      if (!sx || !sy) return sx.has_value() && !sy.has_value();
      return *sx < *sy;
    });
    for (std::size_t i = 0; i < ranked.size() && i < static_cast<std::size_t>(*policy.keep_best);
         ++i) {
      keep.insert(ranked[i]->version);
    }
  }
  std::vector<std::int64_t> release;
  for (const Artifact* a : ready) {
    if (!keep.count(a->version)) release.push_back(a->version);
  }
  std::sort(release.begin(), release.end());
  return release;
}

Status ValidateNewArtifact(const Artifact& a) {
  if (!IsValidArtifactName(a.name)) {
    return InvalidArgument(
               "must be lowercase letters, digits and - _ . (at most 200), "
               "starting and ending with a letter or digit, got '" +
               a.name + "'")
        .WithField("name");
  }
  if (!IsValidDigest(a.digest)) {
    return InvalidArgument("must be sha256: and 64 lowercase hex digits").WithField("digest");
  }
  if (a.size > kMaxArtifactBytes) {
    return InvalidArgument("at most " + std::to_string(kMaxArtifactBytes) + " bytes (1 PiB), got " +
                           std::to_string(a.size))
        .WithField("size");
  }
  if (a.labels.size() > kMaxLabels) {
    return InvalidArgument("at most " + std::to_string(kMaxLabels) + " labels").WithField("labels");
  }
  for (const auto& [key, value] : a.labels) {
    if (!IsLabelKey(key)) {
      return InvalidArgument("label '" + key + "': keys are 1-63 letters, digits and - _ . /")
          .WithField("labels");
    }
    if (value.size() > kMaxLabelValue || !IsPrintable(value)) {
      return InvalidArgument("label '" + key + "': values are at most 256 printable characters")
          .WithField("labels");
    }
  }
  HEADWAY_RETURN_IF_ERROR(RetentionFromLabels(a.labels).status());
  if (a.metrics.size() > kMaxMetrics) {
    return InvalidArgument("at most " + std::to_string(kMaxMetrics) + " metrics")
        .WithField("metrics");
  }
  for (const auto& [name, value] : a.metrics) {
    if (name.empty() || name.size() > kMaxMetricName || !IsPrintable(name)) {
      return InvalidArgument("metric names are 1-128 printable characters").WithField("metrics");
    }
    (void)value;  // NaN and infinities are kept as such: a diverged checkpoint says so
  }
  if (!a.content_md5.empty() && !IsValidContentMd5(a.content_md5)) {
    return InvalidArgument("must be the base64 of 16 bytes (as Content-MD5)")
        .WithField("content_md5");
  }
  if (a.producer.step && *a.producer.step < 0) {
    return InvalidArgument("must be >= 0").WithField("producer.step");
  }
  if (a.producer.attempt && *a.producer.attempt < 0) {
    return InvalidArgument("must be >= 0").WithField("producer.attempt");
  }
  return Status::Ok();
}

}  // namespace headway
