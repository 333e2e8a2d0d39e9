#include "exec/oci/image_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace headway::oci {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kRefAnnotation = "org.opencontainers.image.ref.name";

std::optional<json> ReadImageJson(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

fs::path ImageBlobPath(const std::string& layout, const std::string& digest) {
  const auto colon = digest.find(':');
  if (colon == std::string::npos) return {};
  return fs::path(layout) / "blobs" / digest.substr(0, colon) / digest.substr(colon + 1);
}

// A name the OCI layout may hold for `canonical`: [a-z0-9._-].
std::string LayoutTag(const std::string& canonical) {
  std::string out;
  for (char c : canonical) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
    out.push_back(plain ? c : '_');
  }
  return out;
}

// Disk blocks under `dir`, links not followed.
std::uint64_t TreeBytes(const std::string& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0) {
      total += static_cast<std::uint64_t>(st.st_blocks) * 512;
    }
  }
  return total;
}

// Every entry under `dir` (and `dir`) owned by uid:gid, links themselves
// rather than what they point to.
bool ChownTree(const std::string& dir, uid_t uid, gid_t gid) {
  if (::lchown(dir.c_str(), uid, gid) != 0) return false;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; it != end; it.increment(ec)) {
    if (ec || ::lchown(it->path().c_str(), uid, gid) != 0) return false;
  }
  return !ec;
}

// skopeo's and umoci's errors, without their logger's decoration
// (time="..." level=fatal msg="WHAT").
std::string TrimmedToolOutput(const std::string& text) {
  std::string out = text;
  if (const auto msg = out.rfind("msg=\""); msg != std::string::npos) {
    out = out.substr(msg + 5);
    if (const auto end = out.rfind('"'); end != std::string::npos) out = out.substr(0, end);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (out.size() > 600) out = "..." + out.substr(out.size() - 600);
  return out;
}

bool ToolSaid(const std::string& text, const char* needle) {
  return text.find(needle) != std::string::npos;
}

void WriteImageFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

std::string ReadImageFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void TouchImageFile(const fs::path& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::futimens(fd, nullptr);
    ::close(fd);
  }
}

}  // namespace

std::string LayoutDigest(const std::string& layout, const std::string& tag) {
  auto index = ReadImageJson(fs::path(layout) / "index.json");
  if (!index || !index->contains("manifests") || !(*index)["manifests"].is_array()) return "";
  for (const json& m : (*index)["manifests"]) {
    if (!m.is_object() || !m.contains("annotations")) continue;
    const json& annotations = m["annotations"];
    if (annotations.is_object() && annotations.value(kRefAnnotation, "") == tag) {
      return m.value("digest", "");
    }
  }
  return "";
}

ImageStore::ImageStore(ImageStoreOptions options, CommandRunner& runner)
    : options_(std::move(options)), runner_(runner) {}

std::string ImageStore::LayoutDir() const { return (fs::path(options_.dir) / "oci").string(); }

Status ImageStore::Pull(const ImageRef& ref, const std::string& tag, const std::string& team,
                        PreparedImage& out) {
  std::vector<std::string> argv = {"skopeo", "copy", "--quiet"};
  auto auth = options_.auth_files.find(team);
  if (auth == options_.auth_files.end()) auth = options_.auth_files.find("*");
  if (auth != options_.auth_files.end())
    argv.push_back("--src-authfile=" + auth->second);
  else
    argv.push_back("--src-no-creds");
  if (std::find(options_.insecure_registries.begin(), options_.insecure_registries.end(),
                ref.registry) != options_.insecure_registries.end()) {
    argv.push_back("--src-tls-verify=false");
  }
  argv.push_back("docker://" + ref.Canonical());
  argv.push_back("oci:" + LayoutDir() + ":" + tag);
  const auto start = std::chrono::steady_clock::now();
  CommandOutput result = runner_.Run(argv, options_.pull_timeout);
  out.pull_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (result.exit_code != 0) {
    const std::string why = TrimmedToolOutput(result.err.empty() ? result.out : result.err);
    std::string what = "pulling image " + out.reference + " failed";
    if (result.exit_code == -1 && why.empty()) {
      what += ": skopeo did not start or did not finish in time (is skopeo installed?)";
    } else if (ToolSaid(why, "unauthorized") || ToolSaid(why, "authentication required") ||
               ToolSaid(why, "denied")) {
      what += ": the registry " + ref.registry + " refused " +
              (auth == options_.auth_files.end()
                   ? std::string("an anonymous pull (give team '" + team +
                                 "' credentials with --registry-auth)")
                   : "team '" + team + "''s credentials (" + auth->second + ")");
      what += ": " + why;
      return PermissionDenied(what);
    } else if (ToolSaid(why, "manifest unknown") || ToolSaid(why, "not found") ||
               ToolSaid(why, "name unknown")) {
      return NotFound(what + ": the registry " + ref.registry + " has no such image: " + why);
    } else {
      what += ": " + why;
    }
    return Unavailable(what);
  }
  out.pulled = true;
  out.digest = LayoutDigest(LayoutDir(), tag);
  if (auto manifest = ReadImageJson(ImageBlobPath(LayoutDir(), out.digest));
      manifest && manifest->contains("layers") && (*manifest)["layers"].is_array()) {
    for (const json& layer : (*manifest)["layers"]) {
      if (layer.is_object()) out.pull_bytes += layer.value("size", std::uint64_t{0});
    }
  }
  return Status::Ok();
}

Result<PreparedImage> ImageStore::Prepare(const std::string& reference, ImagePullPolicy policy,
                                          const std::string& team, uid_t uid, gid_t gid) {
  auto ref = ParseImageRef(reference);
  if (!ref.ok()) return ref.status();
  std::lock_guard lock(mu_);
  std::error_code ec;
  fs::create_directories(LayoutDir(), ec);
  fs::create_directories(fs::path(options_.dir) / "roots", ec);
  ::chmod(options_.dir.c_str(), 0700);
  PreparedImage out;
  out.reference = reference;
  const std::string tag = LayoutTag(ref->Canonical());
  out.digest = LayoutDigest(LayoutDir(), tag);
  // An image in the cache is the team's only once the team pulled it with its
  // own credentials: another team's pull of a private image grants nothing
  // (Kubernetes' IfNotPresent gap, closed as its "ensure secret pulled
  // images" proposal does).
  const fs::path teams_file = fs::path(options_.dir) / "teams" / tag;
  std::string teams = ReadImageFile(teams_file);
  const bool present = !out.digest.empty() && teams.find("\n" + team + "\n") != std::string::npos;
  switch (EffectivePullPolicy(policy, *ref)) {
    case ImagePullPolicy::kNever:
      if (!present) {
        return NotFound("image " + reference + " is not on this machine" +
                        (out.digest.empty() ? "" : " for team '" + team + "'") +
                        " and its imagePullPolicy is Never");
      }
      break;
    case ImagePullPolicy::kIfNotPresent:
      if (!present) HEADWAY_RETURN_IF_ERROR(Pull(*ref, tag, team, out));
      break;
    default:
      HEADWAY_RETURN_IF_ERROR(Pull(*ref, tag, team, out));
      break;
  }
  if (out.pulled && teams.find("\n" + team + "\n") == std::string::npos) {
    if (teams.empty()) teams = "\n";
    fs::create_directories(teams_file.parent_path(), ec);
    WriteImageFile(teams_file, teams + team + "\n");
  }
  if (out.digest.empty()) return Internal("image " + reference + " has no manifest after its pull");
  auto manifest = ReadImageJson(ImageBlobPath(LayoutDir(), out.digest));
  if (!manifest || !manifest->contains("config")) {
    return Internal("image " + reference + "'s manifest " + out.digest + " is unreadable");
  }
  auto config =
      ReadImageJson(ImageBlobPath(LayoutDir(), (*manifest)["config"].value("digest", "")));
  if (!config) return Internal("image " + reference + "'s configuration is unreadable");
  out.defaults = ImageDefaults::FromImageConfig(*config);

  const std::string hex = out.digest.substr(out.digest.find(':') + 1, 16);
  const fs::path bundle = fs::path(options_.dir) / "roots" /
                          (hex + "-" + std::to_string(uid) + "-" + std::to_string(gid));
  out.bundle = bundle.string();
  out.rootfs = (bundle / "rootfs").string();
  // Inside the bundle: the attempt's sandbox shows it the bundle only.
  out.lock_path = (bundle / "lock").string();
  if (!fs::exists(bundle / "ready", ec)) {
    const fs::path partial = bundle.string() + ".partial";
    fs::remove_all(partial, ec);
    CommandOutput unpack =
        runner_.Run({"umoci", "unpack", "--image", LayoutDir() + ":" + tag, partial.string()},
                    options_.pull_timeout);
    if (unpack.exit_code != 0) {
      fs::remove_all(partial, ec);
      return Unavailable("unpacking image " + reference + " failed: " +
                         TrimmedToolOutput(unpack.err.empty() ? unpack.out : unpack.err));
    }
    if (!ChownTree((partial / "rootfs").string(), uid, gid)) {
      fs::remove_all(partial, ec);
      return Internal("cannot hand image " + reference + "'s files to uid " + std::to_string(uid));
    }
    WriteImageFile(partial / "tag", tag);
    WriteImageFile(partial / "bytes", std::to_string(TreeBytes(partial.string())));
    fs::remove_all(bundle, ec);
    fs::rename(partial, bundle, ec);
    if (ec) return Internal("cannot keep image " + reference + ": " + ec.message());
    WriteImageFile(bundle / "ready", out.digest);
  }
  TouchImageFile(bundle / "used");
  out.lock_fd = ::open(out.lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (out.lock_fd < 0 || ::flock(out.lock_fd, LOCK_SH) != 0) {
    if (out.lock_fd >= 0) ::close(out.lock_fd);
    return Internal("cannot lock image " + reference + ": " + std::strerror(errno));
  }
  if (options_.max_bytes > 0) Evict(bundle.string(), out);
  return out;
}

std::uint64_t ImageStore::Bytes() const {
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(options_.dir) / "roots", ec)) {
    if (!entry.is_directory()) continue;
    const std::string text = ReadImageFile(entry.path() / "bytes");
    if (!text.empty()) total += std::strtoull(text.c_str(), nullptr, 10);
  }
  const fs::path blobs = fs::path(options_.dir) / "oci" / "blobs";
  if (fs::exists(blobs, ec)) total += TreeBytes(blobs.string());
  return total;
}

void ImageStore::Evict(const std::string& keep, PreparedImage& out) {
  struct Root {
    fs::path dir;
    fs::file_time_type used;
  };
  std::vector<Root> roots;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(options_.dir) / "roots", ec)) {
    if (!entry.is_directory() || entry.path().string() == keep) continue;
    if (!fs::exists(entry.path() / "ready", ec)) continue;
    roots.push_back({entry.path(), fs::last_write_time(entry.path() / "used", ec)});
  }
  std::sort(roots.begin(), roots.end(),
            [](const Root& a, const Root& b) { return a.used < b.used; });
  std::uint64_t total = Bytes();
  for (const Root& root : roots) {
    if (total <= options_.max_bytes) break;
    // An attempt that runs the image holds its lock shared.
    const std::string lock_path = (root.dir / "lock").string();
    int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      continue;
    }
    const std::string tag = ReadImageFile(root.dir / "tag");
    fs::remove_all(root.dir, ec);
    ::close(fd);
    ++out.evicted;
    bool tag_in_use = false;
    for (const auto& entry : fs::directory_iterator(fs::path(options_.dir) / "roots", ec)) {
      if (entry.is_directory() && ReadImageFile(entry.path() / "tag") == tag) tag_in_use = true;
    }
    if (!tag_in_use && !tag.empty()) {
      runner_.Run({"umoci", "rm", "--image", LayoutDir() + ":" + tag}, std::chrono::minutes(5));
      runner_.Run({"umoci", "gc", "--layout", LayoutDir()}, std::chrono::minutes(5));
      fs::remove(fs::path(options_.dir) / "teams" / tag, ec);
    }
    total = Bytes();
  }
}

}  // namespace headway::oci
