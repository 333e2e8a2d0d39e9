#include "artifact/file_digest.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "core/ascii.h"

namespace headway {
namespace {

std::string Base64(const unsigned char* bytes, unsigned int len) {
  std::string out(4 * ((len + 2) / 3) + 1, '\0');
  int written =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes, static_cast<int>(len));
  out.resize(static_cast<std::size_t>(written));
  return out;
}

}  // namespace

Result<RangeDigest> DigestRange(int fd, const std::string& path, std::uint64_t offset,
                                std::optional<std::uint64_t> length) {
  using Ctx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;
  Ctx sha(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  Ctx md5(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(sha.get(), EVP_sha256(), nullptr);
  EVP_DigestInit_ex(md5.get(), EVP_md5(), nullptr);
  std::vector<unsigned char> buf(1 << 20);
  RangeDigest out;
  while (!length || out.size < *length) {
    std::size_t want =
        length ? static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), *length - out.size))
               : buf.size();
    ssize_t n = ::pread(fd, buf.data(), want, static_cast<off_t>(offset + out.size));
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string m = "cannot read " + path + ": " + std::strerror(errno);
      return errno == ENOENT ? NotFound(m) : Unavailable(m);
    }
    if (n == 0) {
      if (!length) break;
      return Conflict("reading " + path + ": the file shrank while being read");
    }
    EVP_DigestUpdate(sha.get(), buf.data(), static_cast<std::size_t>(n));
    EVP_DigestUpdate(md5.get(), buf.data(), static_cast<std::size_t>(n));
    out.size += static_cast<std::uint64_t>(n);
  }
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(sha.get(), d, &len);
  out.sha256_hex = LowerHex(d, len);
  EVP_DigestFinal_ex(md5.get(), d, &len);
  out.md5_hex = LowerHex(d, len);
  out.md5_base64 = Base64(d, len);
  return out;
}

Result<FileDigest> DigestFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Unavailable("cannot read " + path + ": " + std::strerror(errno));
  auto range = DigestRange(fd, path, 0, std::nullopt);
  ::close(fd);
  if (!range.ok()) return range.status();
  FileDigest out;
  out.digest = "sha256:" + range->sha256_hex;
  out.content_md5 = std::move(range->md5_base64);
  out.size = range->size;
  return out;
}

}  // namespace headway
