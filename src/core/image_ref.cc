#include "core/image_ref.h"

#include <cctype>

namespace headway {
namespace {

bool IsRefAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// A path component: [a-z0-9]+ joined by '.', '_', '__' or one or more '-'.
bool IsPathComponent(std::string_view s) {
  if (s.empty() || !IsRefAlnum(s.front()) || !IsRefAlnum(s.back())) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (IsRefAlnum(c) || c == '-') continue;
    if (c == '.' || c == '_') {
      // Separators other than '-' do not repeat, except "__".
      if (!IsRefAlnum(s[i + 1]) &&
          !(c == '_' && s[i + 1] == '_' && i + 2 < s.size() && IsRefAlnum(s[i + 2]))) {
        return false;
      }
      if (c == '_' && s[i + 1] == '_') ++i;
      continue;
    }
    return false;
  }
  return true;
}

bool IsImageTag(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  if (!(std::isalnum(static_cast<unsigned char>(s.front())) || s.front() == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) {
      return false;
    }
  }
  return true;
}

bool IsImageDigest(std::string_view s) {
  constexpr std::string_view kPrefix = "sha256:";
  if (s.substr(0, kPrefix.size()) != kPrefix || s.size() != kPrefix.size() + 64) return false;
  for (char c : s.substr(kPrefix.size())) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool IsRegistryHost(std::string_view s) {
  if (s.empty() || s.size() > 255) return false;
  // host[:port], the port in digits (an IPv6 host is bracketed).
  if (const auto colon = s.rfind(':');
      colon != std::string_view::npos && s.find(']', colon) == std::string_view::npos) {
    const std::string_view port = s.substr(colon + 1);
    if (port.empty() || port.find_first_not_of("0123456789") != std::string_view::npos) {
      return false;
    }
  }
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' ||
          c == '[' || c == ']')) {
      return false;
    }
  }
  return true;
}

Status BadImageReference(std::string_view text, const std::string& why) {
  return InvalidArgument("'" + std::string(text.substr(0, 256)) +
                         "' is not an image reference: " + why);
}

}  // namespace

std::string ImageRef::Canonical() const {
  std::string out = registry + "/" + repository;
  if (!tag.empty()) out += ":" + tag;
  if (!digest.empty()) out += "@" + digest;
  return out;
}

bool ImageRef::Floating() const { return digest.empty() && tag == "latest"; }

Result<ImageRef> ParseImageRef(std::string_view text) {
  if (text.empty()) return BadImageReference(text, "it is empty");
  if (text.size() > 512) return BadImageReference(text, "it is longer than 512 characters");
  ImageRef ref;
  std::string_view rest = text;
  if (const auto at = rest.find('@'); at != std::string_view::npos) {
    ref.digest = std::string(rest.substr(at + 1));
    if (!IsImageDigest(ref.digest)) {
      return BadImageReference(text, "a digest is 'sha256:' and 64 lower-case hex digits");
    }
    rest = rest.substr(0, at);
  }
  // A tag follows the last ':' after the last '/' (a registry's port comes before one).
  const auto slash = rest.rfind('/');
  const auto colon = rest.rfind(':');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    ref.tag = std::string(rest.substr(colon + 1));
    if (!IsImageTag(ref.tag)) {
      return BadImageReference(text, "a tag is 1-128 letters, digits, '_', '.' or '-'");
    }
    rest = rest.substr(0, colon);
  }
  if (const auto first = rest.find('/'); first != std::string_view::npos) {
    const std::string_view host = rest.substr(0, first);
    if (host.find_first_of(".:") != std::string_view::npos || host == "localhost") {
      if (!IsRegistryHost(host)) return BadImageReference(text, "the registry host is malformed");
      ref.registry = std::string(host);
      rest = rest.substr(first + 1);
    }
  }
  if (ref.registry.empty()) ref.registry = "docker.io";
  std::size_t begin = 0;
  while (true) {
    const auto end = rest.find('/', begin);
    const std::string_view component = rest.substr(begin, end - begin);
    if (!IsPathComponent(component)) {
      return BadImageReference(text,
                               "each part of the name is lower-case letters and digits, "
                               "joined by '.', '_' or '-'");
    }
    if (end == std::string_view::npos) break;
    begin = end + 1;
  }
  ref.repository = std::string(rest);
  if (ref.registry == "docker.io" && ref.repository.find('/') == std::string::npos) {
    ref.repository = "library/" + ref.repository;
  }
  if (ref.tag.empty() && ref.digest.empty()) ref.tag = "latest";
  return ref;
}

std::optional<ImagePullPolicy> ParseImagePullPolicy(std::string_view text) {
  if (text.empty()) return ImagePullPolicy::kDefault;
  if (text == "Always") return ImagePullPolicy::kAlways;
  if (text == "IfNotPresent") return ImagePullPolicy::kIfNotPresent;
  if (text == "Never") return ImagePullPolicy::kNever;
  return std::nullopt;
}

std::string_view ImagePullPolicyName(ImagePullPolicy policy) {
  switch (policy) {
    case ImagePullPolicy::kAlways:
      return "Always";
    case ImagePullPolicy::kIfNotPresent:
      return "IfNotPresent";
    case ImagePullPolicy::kNever:
      return "Never";
    case ImagePullPolicy::kDefault:
      break;
  }
  return "";
}

ImagePullPolicy EffectivePullPolicy(ImagePullPolicy policy, const ImageRef& ref) {
  if (policy != ImagePullPolicy::kDefault) return policy;
  return ref.Floating() ? ImagePullPolicy::kAlways : ImagePullPolicy::kIfNotPresent;
}

}  // namespace headway
