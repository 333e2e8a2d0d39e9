#include "artifact/s3/s3_xml.h"

#include <expat.h>

#include <charconv>
#include <memory>

namespace headway {
namespace internal {
namespace {

constexpr std::size_t kMaxXmlBytes = 64u << 20;
constexpr int kMaxDepth = 32;

struct TreeBuilder {
  XmlElement root;
  std::vector<XmlElement*> stack;
  bool have_root = false;
  bool too_deep = false;
  bool doctype = false;
  XML_Parser parser = nullptr;
};

void OnStart(void* data, const XML_Char* name, const XML_Char** /*attrs*/) {
  auto* b = static_cast<TreeBuilder*>(data);
  if (b->stack.size() >= static_cast<std::size_t>(kMaxDepth)) {
    b->too_deep = true;
    XML_StopParser(b->parser, XML_FALSE);
    return;
  }
  if (b->stack.empty()) {
    b->root.name = name;
    b->have_root = true;
    b->stack.push_back(&b->root);
    return;
  }
  XmlElement* parent = b->stack.back();
  parent->children.push_back(XmlElement{name, "", {}});
  b->stack.push_back(&parent->children.back());
}

void OnEnd(void* data, const XML_Char* /*name*/) {
  auto* b = static_cast<TreeBuilder*>(data);
  if (!b->stack.empty()) b->stack.pop_back();
}

void OnText(void* data, const XML_Char* s, int len) {
  auto* b = static_cast<TreeBuilder*>(data);
  if (!b->stack.empty()) b->stack.back()->text.append(s, static_cast<std::size_t>(len));
}

void OnDoctype(void* data, const XML_Char*, const XML_Char*, const XML_Char*, int) {
  auto* b = static_cast<TreeBuilder*>(data);
  b->doctype = true;
  XML_StopParser(b->parser, XML_FALSE);
}

bool ParseUint(std::string_view s, std::uint64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

Status Expect(const XmlElement& root, std::string_view name) {
  if (root.name == "Error") {
    S3ErrorBody e{root.ChildText("Code"), root.ChildText("Message")};
    return Unavailable("S3 error in a 200 response: " + e.code + ": " + e.message);
  }
  if (root.name != name)
    return InvalidArgument("S3 response: expected <" + std::string(name) + ">, got <" + root.name +
                           ">");
  return Status::Ok();
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

}  // namespace
}  // namespace internal

using namespace internal;  // NOLINT: this file's own helpers

const XmlElement* XmlElement::Child(std::string_view child_name) const {
  for (const XmlElement& c : children)
    if (c.name == child_name) return &c;
  return nullptr;
}

std::string XmlElement::ChildText(std::string_view child_name) const {
  const XmlElement* c = Child(child_name);
  return c == nullptr ? std::string() : c->text;
}

Result<XmlElement> ParseXml(std::string_view body) {
  if (body.size() > kMaxXmlBytes) return InvalidArgument("XML: document over 64 MiB");
  TreeBuilder b;
  std::unique_ptr<XML_ParserStruct, void (*)(XML_Parser)> parser(XML_ParserCreate("UTF-8"),
                                                                 XML_ParserFree);
  if (!parser) return Internal("XML: cannot create a parser");
  b.parser = parser.get();
  XML_SetUserData(b.parser, &b);
  XML_SetElementHandler(b.parser, OnStart, OnEnd);
  XML_SetCharacterDataHandler(b.parser, OnText);
  XML_SetStartDoctypeDeclHandler(b.parser, OnDoctype);
  XML_SetParamEntityParsing(b.parser, XML_PARAM_ENTITY_PARSING_NEVER);
  XML_Status st = XML_Parse(b.parser, body.data(), static_cast<int>(body.size()), XML_TRUE);
  if (b.doctype) return InvalidArgument("XML: DOCTYPE is not allowed");
  if (b.too_deep) return InvalidArgument("XML: nested deeper than 32 elements");
  if (st != XML_STATUS_OK) {
    return InvalidArgument("XML: " + std::string(XML_ErrorString(XML_GetErrorCode(b.parser))) +
                           " at line " + std::to_string(XML_GetCurrentLineNumber(b.parser)));
  }
  if (!b.have_root) return InvalidArgument("XML: no root element");
  return std::move(b.root);
}

S3ErrorBody ParseS3Error(std::string_view body) {
  auto root = ParseXml(body);
  if (!root.ok() || root->name != "Error") return {};
  return {root->ChildText("Code"), root->ChildText("Message")};
}

std::string UnquoteEtag(std::string_view etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"')
    etag = etag.substr(1, etag.size() - 2);
  // Some servers escape the quotes as &quot; which expat has already decoded.
  return std::string(etag);
}

Result<ListObjectsPage> ParseListObjectsV2(std::string_view body) {
  auto root = ParseXml(body);
  if (!root.ok()) return root.status();
  HEADWAY_RETURN_IF_ERROR(Expect(*root, "ListBucketResult"));
  ListObjectsPage page;
  page.truncated = root->ChildText("IsTruncated") == "true";
  page.next_continuation_token = root->ChildText("NextContinuationToken");
  if (page.truncated && page.next_continuation_token.empty())
    return InvalidArgument("ListObjectsV2: truncated without a NextContinuationToken");
  for (const XmlElement& c : root->children) {
    if (c.name == "Contents") {
      S3Object o;
      o.key = c.ChildText("Key");
      if (o.key.empty()) return InvalidArgument("ListObjectsV2: Contents without a Key");
      if (!ParseUint(c.ChildText("Size"), o.size))
        return InvalidArgument("ListObjectsV2: bad Size for key " + o.key);
      o.etag = UnquoteEtag(c.ChildText("ETag"));
      o.last_modified = c.ChildText("LastModified");
      page.objects.push_back(std::move(o));
    } else if (c.name == "CommonPrefixes") {
      page.common_prefixes.push_back(c.ChildText("Prefix"));
    }
  }
  return page;
}

Result<ListPartsPage> ParseListParts(std::string_view body) {
  auto root = ParseXml(body);
  if (!root.ok()) return root.status();
  HEADWAY_RETURN_IF_ERROR(Expect(*root, "ListPartsResult"));
  ListPartsPage page;
  page.truncated = root->ChildText("IsTruncated") == "true";
  std::uint64_t marker = 0;
  if (page.truncated) {
    if (!ParseUint(root->ChildText("NextPartNumberMarker"), marker) || marker > 10000)
      return InvalidArgument("ListParts: truncated without a valid NextPartNumberMarker");
    page.next_part_number_marker = static_cast<int>(marker);
  }
  for (const XmlElement& c : root->children) {
    if (c.name != "Part") continue;
    S3Part p;
    std::uint64_t number = 0;
    if (!ParseUint(c.ChildText("PartNumber"), number) || number < 1 || number > 10000)
      return InvalidArgument("ListParts: bad PartNumber");
    p.number = static_cast<int>(number);
    if (!ParseUint(c.ChildText("Size"), p.size))
      return InvalidArgument("ListParts: bad Size for part " + std::to_string(p.number));
    p.etag = UnquoteEtag(c.ChildText("ETag"));
    page.parts.push_back(std::move(p));
  }
  return page;
}

Result<ListUploadsPage> ParseListMultipartUploads(std::string_view body) {
  auto root = ParseXml(body);
  if (!root.ok()) return root.status();
  HEADWAY_RETURN_IF_ERROR(Expect(*root, "ListMultipartUploadsResult"));
  ListUploadsPage page;
  page.truncated = root->ChildText("IsTruncated") == "true";
  if (page.truncated) {
    page.next_key_marker = root->ChildText("NextKeyMarker");
    page.next_upload_id_marker = root->ChildText("NextUploadIdMarker");
    if (page.next_key_marker.empty())
      return InvalidArgument("ListMultipartUploads: truncated without a NextKeyMarker");
  }
  for (const XmlElement& c : root->children) {
    if (c.name != "Upload") continue;
    S3Upload u;
    u.key = c.ChildText("Key");
    u.upload_id = c.ChildText("UploadId");
    u.initiated = c.ChildText("Initiated");
    if (u.key.empty() || u.upload_id.empty())
      return InvalidArgument("ListMultipartUploads: an Upload without a Key or UploadId");
    page.uploads.push_back(std::move(u));
  }
  return page;
}

Result<std::string> ParseInitiateMultipartUpload(std::string_view body) {
  auto root = ParseXml(body);
  if (!root.ok()) return root.status();
  HEADWAY_RETURN_IF_ERROR(Expect(*root, "InitiateMultipartUploadResult"));
  std::string id = root->ChildText("UploadId");
  if (id.empty()) return InvalidArgument("CreateMultipartUpload: no UploadId in the response");
  return id;
}

Result<std::string> ParseCompleteMultipartUpload(std::string_view body) {
  auto root = ParseXml(body);
  if (!root.ok()) return root.status();
  HEADWAY_RETURN_IF_ERROR(Expect(*root, "CompleteMultipartUploadResult"));
  return UnquoteEtag(root->ChildText("ETag"));
}

std::string CompleteMultipartUploadXml(const std::vector<S3Part>& parts) {
  std::string out = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
  for (const S3Part& p : parts) {
    out += "<Part><PartNumber>" + std::to_string(p.number) + "</PartNumber><ETag>&quot;" +
           XmlEscape(p.etag) + "&quot;</ETag></Part>";
  }
  out += "</CompleteMultipartUpload>";
  return out;
}

}  // namespace headway
