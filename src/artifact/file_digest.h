// The SHA-256 of a file, as artifacts are addressed by it.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace headway {

struct FileDigest {
  std::string digest;  // "sha256:<64 lowercase hex>"
  std::uint64_t size = 0;
};

// Reads the whole file once. Unavailable when it cannot be read.
Result<FileDigest> DigestFile(const std::string& path);

}  // namespace headway
