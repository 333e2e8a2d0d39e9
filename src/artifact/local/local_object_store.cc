#include "artifact/local/local_object_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace headway {
namespace {

namespace fs = std::filesystem;

// Keys come from ContentKey(): "sha256/ab/abcd..". Anything that could climb
// out of the root is refused before it reaches the file system.
bool IsSafeKey(const std::string& key) {
  if (key.empty() || key.front() == '/' || key.back() == '/') return false;
  for (std::size_t start = 0; start <= key.size();) {
    std::size_t end = key.find('/', start);
    if (end == std::string::npos) end = key.size();
    std::string_view part(key.data() + start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return key.find('\0') == std::string::npos;
}

Status SyncPath(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return Unavailable("cannot open " + path + ": " + std::strerror(errno));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Unavailable("cannot sync " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

class LocalObjectStore final : public ObjectStore {
 public:
  explicit LocalObjectStore(std::string root) : root_(std::move(root)) {}

  std::string Describe() const override { return "local " + root_; }

  Result<std::optional<ObjectInfo>> Head(const std::string& key) override {
    if (!IsSafeKey(key)) return InvalidArgument("bad object key '" + key + "'");
    struct stat st {};
    if (::stat(PathOf(key).c_str(), &st) != 0) {
      if (errno == ENOENT) return std::optional<ObjectInfo>();
      return Unavailable("cannot read " + PathOf(key) + ": " + std::strerror(errno));
    }
    return std::optional<ObjectInfo>(ObjectInfo{static_cast<std::uint64_t>(st.st_size)});
  }

  Status PutFile(const std::string& key, const std::string& path) override {
    if (!IsSafeKey(key)) return InvalidArgument("bad object key '" + key + "'");
    const std::string target = PathOf(key);
    std::error_code ec;
    fs::create_directories(fs::path(target).parent_path(), ec);
    if (ec)
      return Unavailable("cannot create " + fs::path(target).parent_path().string() + ": " +
                         ec.message());
    // The file's bytes are durable before its name points at them.
    HEADWAY_RETURN_IF_ERROR(SyncPath(path, false));
    const std::string staged = target + ".partial";
    fs::rename(path, staged, ec);
    if (ec) {
      // Another file system: copy, then move into place.
      ec.clear();
      fs::copy_file(path, staged, fs::copy_options::overwrite_existing, ec);
      if (ec) return Unavailable("cannot store " + key + ": " + ec.message());
      HEADWAY_RETURN_IF_ERROR(SyncPath(staged, false));
    }
    ::chmod(staged.c_str(), 0600);
    fs::rename(staged, target, ec);
    if (ec) return Unavailable("cannot store " + key + ": " + ec.message());
    return SyncPath(fs::path(target).parent_path().string(), true);
  }

  Status GetFile(const std::string& key, const std::string& path) override {
    if (!IsSafeKey(key)) return InvalidArgument("bad object key '" + key + "'");
    const std::string partial = path + ".partial";
    std::error_code ec;
    fs::copy_file(PathOf(key), partial, fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::rename(partial, path, ec);
    if (ec) {
      fs::remove(partial, ec);
      return Unavailable("cannot copy object '" + key + "' to " + path + ": " + ec.message());
    }
    return Status::Ok();
  }

  std::optional<std::string> LocalPath(const std::string& key) const override {
    if (!IsSafeKey(key)) return std::nullopt;
    return PathOf(key);
  }

  Status Delete(const std::string& key) override {
    if (!IsSafeKey(key)) return InvalidArgument("bad object key '" + key + "'");
    if (::unlink(PathOf(key).c_str()) != 0 && errno != ENOENT) {
      return Unavailable("cannot delete " + PathOf(key) + ": " + std::strerror(errno));
    }
    return Status::Ok();
  }

  Result<std::vector<StoredObject>> List() override {
    std::vector<StoredObject> out;
    std::error_code ec;
    fs::recursive_directory_iterator it(root_, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      std::error_code stat_error;
      if (!it->is_regular_file(stat_error) || stat_error) continue;
      const std::string path = it->path().string();
      if (path.size() >= 8 && path.compare(path.size() - 8, 8, ".partial") == 0) continue;
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0) continue;  // gone since
      StoredObject object;
      object.key = path.substr(root_.size() + 1);
      object.size = static_cast<std::uint64_t>(st.st_size);
      object.modified = Time(std::chrono::duration_cast<Time::duration>(
          std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
      out.push_back(std::move(object));
    }
    if (ec) return Unavailable("cannot list " + root_ + ": " + ec.message());
    return out;
  }

  std::optional<PresignedRequest> PresignPut(const std::string&, std::uint64_t, const std::string&,
                                             std::chrono::seconds) override {
    return std::nullopt;
  }
  std::optional<PresignedRequest> PresignGet(const std::string&, std::chrono::seconds) override {
    return std::nullopt;
  }

 private:
  std::string PathOf(const std::string& key) const { return root_ + "/" + key; }
  std::string root_;
};

}  // namespace

Result<std::unique_ptr<ObjectStore>> OpenLocalObjectStore(const std::string& root) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return Unavailable("cannot create the artifact directory " + root + ": " + ec.message());
  ::chmod(root.c_str(), 0700);
  return std::unique_ptr<ObjectStore>(std::make_unique<LocalObjectStore>(root));
}

}  // namespace headway
