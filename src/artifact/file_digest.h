// The SHA-256 of a file, as artifacts are addressed by it, and its MD5; and
// the same for a byte range of one (a part of a multipart upload).
#pragma once

#include <cstdint>
#include <optional>
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

struct RangeDigest {
  std::string sha256_hex;
  std::string md5_hex;     // as S3 gives a part's ETag
  std::string md5_base64;  // as Content-MD5
  std::uint64_t size = 0;  // bytes read
};

// Reads [offset, offset + length) of the open file `fd` (named `path` in
// errors) once; without a length, to its end. Conflict when the file ends
// before the range does (it shrank under the caller).
Result<RangeDigest> DigestRange(int fd, const std::string& path, std::uint64_t offset,
                                std::optional<std::uint64_t> length);

}  // namespace headway
