// How a file is cut into the parts of an S3 multipart upload, and the ETag
// S3 gives the assembled object. Pure.
//
// S3's limits: parts of 5 MiB .. 5 GiB (the last may be smaller), at most
// 10,000 parts, objects up to 5 TiB.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace headway {

inline constexpr std::uint64_t kMiB = 1024ull * 1024;
inline constexpr std::uint64_t kS3MinPartSize = 5 * kMiB;
inline constexpr std::uint64_t kS3MaxPartSize = 5 * 1024 * kMiB;
inline constexpr int kS3MaxParts = 10000;
inline constexpr std::uint64_t kS3MaxObjectSize = 5 * 1024 * 1024 * kMiB;

struct PartPlan {
  std::uint64_t object_size = 0;
  std::uint64_t part_size = 0;  // every part but the last
  int part_count = 0;           // >= 1

  std::uint64_t Offset(int part_number) const;  // part_number 1..part_count
  std::uint64_t Length(int part_number) const;
};

// The part size: preferred_part_size, raised to 5 MiB and then to a whole
// number of MiB large enough for the object to fit in 10,000 parts.
// InvalidArgument when the object is over 5 TiB or preferred is over 5 GiB.
[[nodiscard]] Result<PartPlan> PlanParts(std::uint64_t object_size,
                                         std::uint64_t preferred_part_size);

// hex(MD5(md5(part 1) || ... || md5(part n))) + "-n": the ETag S3 (and MinIO,
// Ceph, Swift's s3api) gives an object assembled from parts whose ETags are
// the hex MD5s given here. Empty when an ETag is not 32 hex digits.
std::string MultipartEtag(const std::vector<std::string>& part_md5_hex);

}  // namespace headway
