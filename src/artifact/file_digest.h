// The SHA-256 of a file, as artifacts are addressed by it, and its MD5.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace headway {

struct FileDigest {
  std::string digest;       // "sha256:<64 lowercase hex>"
  std::string content_md5;  // base64 MD5, as HTTP's Content-MD5 (binds presigned uploads)
  std::uint64_t size = 0;
};

// Reads the whole file once. Unavailable when it cannot be read.
Result<FileDigest> DigestFile(const std::string& path);

}  // namespace headway
