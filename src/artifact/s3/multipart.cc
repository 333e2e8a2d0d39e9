#include "artifact/s3/multipart.h"

#include <openssl/evp.h>

#include <algorithm>

namespace headway {

std::uint64_t PartPlan::Offset(int part_number) const {
  return static_cast<std::uint64_t>(part_number - 1) * part_size;
}

std::uint64_t PartPlan::Length(int part_number) const {
  std::uint64_t offset = Offset(part_number);
  return offset >= object_size ? 0 : std::min(part_size, object_size - offset);
}

Result<PartPlan> PlanParts(std::uint64_t object_size, std::uint64_t preferred_part_size) {
  if (object_size > kS3MaxObjectSize)
    return InvalidArgument("object size: " + std::to_string(object_size) +
                           " bytes is over S3's 5 TiB limit");
  if (preferred_part_size > kS3MaxPartSize)
    return InvalidArgument("part size: over S3's 5 GiB limit");
  std::uint64_t part = std::max(preferred_part_size, kS3MinPartSize);
  std::uint64_t needed = (object_size + kS3MaxParts - 1) / kS3MaxParts;  // ceil
  if (part < needed) part = (needed + kMiB - 1) / kMiB * kMiB;
  PartPlan plan;
  plan.object_size = object_size;
  plan.part_size = part;
  plan.part_count = object_size == 0 ? 1 : static_cast<int>((object_size + part - 1) / part);
  return plan;
}

std::string MultipartEtag(const std::vector<std::string>& part_md5_hex) {
  auto hex_value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string binary;
  for (const std::string& hex : part_md5_hex) {
    if (hex.size() != 32) return "";
    for (size_t i = 0; i < 32; i += 2) {
      int hi = hex_value(hex[i]), lo = hex_value(hex[i + 1]);
      if (hi < 0 || lo < 0) return "";
      binary.push_back(static_cast<char>(hi * 16 + lo));
    }
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(binary.data(), binary.size(), md, &len, EVP_md5(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 0xf]);
  }
  return out + "-" + std::to_string(part_md5_hex.size());
}

}  // namespace headway
