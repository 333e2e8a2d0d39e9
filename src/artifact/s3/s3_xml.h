// S3's XML: the few response bodies the S3 client reads and the one request
// body it writes. Parsing goes through expat (no DTDs, no external entities,
// expat's own limits on entity expansion) into a small element tree with a
// depth and size limit; the per-response functions read only the elements
// they need and ignore the rest, as S3-compatible servers add their own.
// Pure: no I/O. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace headway {

struct XmlElement {
  std::string name;  // as written, namespace prefix included (S3 uses none)
  std::string text;  // the element's own character data, entities decoded
  std::vector<XmlElement> children;

  const XmlElement* Child(std::string_view child_name) const;  // first, or null
  std::string ChildText(std::string_view child_name) const;    // "" when absent
};

// Refuses documents over 64 MiB, deeper than 32 levels, with a DOCTYPE, or
// malformed; InvalidArgument says where.
[[nodiscard]] Result<XmlElement> ParseXml(std::string_view body);

// <Error><Code>NoSuchKey</Code><Message>...</Message></Error>
struct S3ErrorBody {
  std::string code;
  std::string message;
};
// nullopt-like: an empty code when the body is not an S3 error document.
S3ErrorBody ParseS3Error(std::string_view body);

struct S3Object {
  std::string key;
  std::uint64_t size = 0;
  std::string etag;           // quotes removed
  std::string last_modified;  // as sent: ISO 8601 in listings
};

struct ListObjectsPage {
  std::vector<S3Object> objects;
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string next_continuation_token;  // set when truncated
};
[[nodiscard]] Result<ListObjectsPage> ParseListObjectsV2(std::string_view body);

struct S3Part {
  int number = 0;
  std::uint64_t size = 0;
  std::string etag;  // quotes removed
};
struct ListPartsPage {
  std::vector<S3Part> parts;
  bool truncated = false;
  int next_part_number_marker = 0;
};
[[nodiscard]] Result<ListPartsPage> ParseListParts(std::string_view body);

// An unfinished multipart upload, as ListMultipartUploads names it.
struct S3Upload {
  std::string key;
  std::string upload_id;
  std::string initiated;  // as sent: ISO 8601
};
struct ListUploadsPage {
  std::vector<S3Upload> uploads;
  bool truncated = false;
  std::string next_key_marker;        // set when truncated
  std::string next_upload_id_marker;  // set when truncated
};
[[nodiscard]] Result<ListUploadsPage> ParseListMultipartUploads(std::string_view body);

// The UploadId of an InitiateMultipartUploadResult.
[[nodiscard]] Result<std::string> ParseInitiateMultipartUpload(std::string_view body);
// The ETag of a CompleteMultipartUploadResult (quotes removed). S3 may answer
// 200 and still fail: an <Error> body is returned as its error.
[[nodiscard]] Result<std::string> ParseCompleteMultipartUpload(std::string_view body);

// <CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"..."</ETag>...
std::string CompleteMultipartUploadXml(const std::vector<S3Part>& parts);

// Removes one pair of surrounding double quotes ("\"abc\"" -> "abc").
std::string UnquoteEtag(std::string_view etag);

}  // namespace headway
