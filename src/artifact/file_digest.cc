#include "artifact/file_digest.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

namespace headway {

Result<FileDigest> DigestFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Unavailable("cannot read " + path + ": " + std::strerror(errno));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> md5(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  EVP_DigestInit_ex(md5.get(), EVP_md5(), nullptr);
  std::vector<unsigned char> buf(1 << 20);
  FileDigest out;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return Unavailable("cannot read " + path + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<std::size_t>(n));
    EVP_DigestUpdate(md5.get(), buf.data(), static_cast<std::size_t>(n));
    out.size += static_cast<std::uint64_t>(n);
  }
  ::close(fd);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  static const char* kHex = "0123456789abcdef";
  out.digest = "sha256:";
  for (unsigned int i = 0; i < len; ++i) {
    out.digest += kHex[md[i] >> 4];
    out.digest += kHex[md[i] & 15];
  }
  unsigned char md5_bytes[EVP_MAX_MD_SIZE];
  unsigned int md5_len = 0;
  EVP_DigestFinal_ex(md5.get(), md5_bytes, &md5_len);
  unsigned char base64[32];
  int written = EVP_EncodeBlock(base64, md5_bytes, static_cast<int>(md5_len));
  out.content_md5.assign(reinterpret_cast<const char*>(base64), static_cast<std::size_t>(written));
  return out;
}

}  // namespace headway
