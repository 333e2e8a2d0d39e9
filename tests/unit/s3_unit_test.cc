// The S3 client's parts that need no server: addressing, part planning, the
// XML it reads and writes, and how S3 errors become a Status.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "artifact/s3/multipart.h"
#include "artifact/s3/s3_client.h"
#include "artifact/s3/s3_xml.h"

namespace headway {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(S3Url, PathStyleByDefaultVirtualHostWhenAsked) {
  S3ClientOptions o;
  o.endpoint = "http://127.0.0.1:9000";
  auto u = S3ObjectUrl(o, "my-bucket", "dir/a b+c.txt", {{"uploads", ""}});
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(UrlString(*u), "http://127.0.0.1:9000/my-bucket/dir/a%20b%2Bc.txt?uploads=");
  auto bucket = S3ObjectUrl(o, "my-bucket", "");
  ASSERT_TRUE(bucket.ok());
  EXPECT_EQ(UrlString(*bucket), "http://127.0.0.1:9000/my-bucket");
  o.endpoint = "https://s3.eu-west-3.amazonaws.com";
  o.virtual_host_style = true;
  auto v = S3ObjectUrl(o, "my-bucket", "k");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(UrlString(*v), "https://my-bucket.s3.eu-west-3.amazonaws.com/k");
}

TEST(S3Url, RefusesBadEndpointsBucketsAndKeys) {
  S3ClientOptions o;
  o.endpoint = "http://127.0.0.1:9000/base";
  EXPECT_THAT(S3ObjectUrl(o, "bucket", "k").status().message(), HasSubstr("endpoint"));
  o.endpoint = "http://127.0.0.1:9000";
  for (const std::string& bad :
       std::vector<std::string>{"ab", "Upper", "-lead", "trail-", "sp ace", std::string(64, 'a')})
    EXPECT_THAT(S3ObjectUrl(o, bad, "k").status().message(), HasSubstr("bucket")) << bad;
  EXPECT_THAT(S3ObjectUrl(o, "bucket", std::string(1025, 'k')).status().message(),
              HasSubstr("1024"));
}

TEST(S3Client, CreateRefusesIncompleteOptions) {
  SystemClock clock;
  S3ClientOptions o;
  o.endpoint = "http://127.0.0.1:9000";
  EXPECT_THAT(S3Client::Create(o, clock).status().message(), HasSubstr("credentials"));
  o.credentials = {"AKID", "secret", ""};
  EXPECT_TRUE(S3Client::Create(o, clock).ok());
  o.part_size = 6ull << 30;
  EXPECT_THAT(S3Client::Create(o, clock).status().message(), HasSubstr("part_size"));
}

TEST(PartPlan, KeepsWithinS3Limits) {
  auto small = PlanParts(100 * kMiB, 16 * kMiB);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->part_size, 16 * kMiB);
  EXPECT_EQ(small->part_count, 7);
  EXPECT_EQ(small->Offset(7), 96 * kMiB);
  EXPECT_EQ(small->Length(7), 4 * kMiB);  // the last part may be under 5 MiB
  auto tiny_parts = PlanParts(20 * kMiB, 1);
  ASSERT_TRUE(tiny_parts.ok());
  EXPECT_EQ(tiny_parts->part_size, kS3MinPartSize);
  EXPECT_EQ(tiny_parts->part_count, 4);
  // 1 TiB in 16 MiB parts would be 65,536 parts: the part grows to fit 10,000.
  auto huge = PlanParts(1024 * 1024 * kMiB, 16 * kMiB);
  ASSERT_TRUE(huge.ok());
  EXPECT_LE(huge->part_count, kS3MaxParts);
  EXPECT_EQ(huge->part_size % kMiB, 0u);
  EXPECT_EQ(huge->part_size, 105 * kMiB);
  auto max = PlanParts(kS3MaxObjectSize, 0);
  ASSERT_TRUE(max.ok());
  EXPECT_LE(max->part_count, kS3MaxParts);
  EXPECT_LE(max->part_size, kS3MaxPartSize);
  EXPECT_EQ(max->Offset(max->part_count) + max->Length(max->part_count), kS3MaxObjectSize);
  EXPECT_FALSE(PlanParts(kS3MaxObjectSize + 1, 0).ok());
  EXPECT_FALSE(PlanParts(kMiB, kS3MaxPartSize + 1).ok());
  auto empty = PlanParts(0, 16 * kMiB);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->part_count, 1);
  EXPECT_EQ(empty->Length(1), 0u);
}

TEST(PartPlan, MultipartEtagIsTheMd5OfThePartMd5s) {
  // Two parts with the MD5s of "a" and "b"; value from Python:
  // hashlib.md5(md5(b"a").digest() + md5(b"b").digest()).hexdigest() + "-2"
  EXPECT_EQ(MultipartEtag({"0cc175b9c0f1b6a831c399e269772661", "92eb5ffee6ae2fec3ad71c777531578f"}),
            "96e024ba2074fe77e8e965ba43a704be-2");
  EXPECT_EQ(MultipartEtag({"not-hex"}), "");
}

TEST(S3Xml, ParsesListObjectsV2) {
  auto page = ParseListObjectsV2(R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bucket</Name><Prefix>ck/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
  <Contents><Key>ck/a &amp; b.pt</Key><LastModified>2026-12-03T10:00:00.000Z</LastModified>
    <ETag>&quot;0cc175b9c0f1b6a831c399e269772661&quot;</ETag><Size>1</Size>
    <StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>ck/données.bin</Key><ETag>"x-2"</ETag><Size>12582912</Size></Contents>
  <CommonPrefixes><Prefix>ck/sub/</Prefix></CommonPrefixes>
</ListBucketResult>)");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_continuation_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "ck/a & b.pt");
  EXPECT_EQ(page->objects[0].etag, "0cc175b9c0f1b6a831c399e269772661");
  EXPECT_EQ(page->objects[0].size, 1u);
  EXPECT_EQ(page->objects[1].key,
            "ck/donn\xC3\xA9"
            "es.bin");
  EXPECT_EQ(page->objects[1].size, 12582912u);
  EXPECT_EQ(page->common_prefixes, std::vector<std::string>{"ck/sub/"});
}

TEST(S3Xml, ParsesListPartsAndMultipartAnswers) {
  auto parts = ParseListParts(R"(<ListPartsResult><Bucket>b</Bucket><Key>k</Key>
    <UploadId>u</UploadId><NextPartNumberMarker>2</NextPartNumberMarker>
    <IsTruncated>true</IsTruncated>
    <Part><PartNumber>1</PartNumber><ETag>"aa"</ETag><Size>5242880</Size></Part>
    <Part><PartNumber>2</PartNumber><ETag>"bb"</ETag><Size>7</Size></Part></ListPartsResult>)");
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  EXPECT_TRUE(parts->truncated);
  EXPECT_EQ(parts->next_part_number_marker, 2);
  ASSERT_EQ(parts->parts.size(), 2u);
  EXPECT_EQ(parts->parts[0].number, 1);
  EXPECT_EQ(parts->parts[0].size, 5242880u);
  EXPECT_EQ(parts->parts[1].etag, "bb");
  EXPECT_FALSE(ParseListParts("<ListPartsResult><Part><PartNumber>0</PartNumber><Size>1</Size>"
                              "</Part></ListPartsResult>")
                   .ok());
  auto id = ParseInitiateMultipartUpload(
      "<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key>"
      "<UploadId>VXBsb2FkIElE</UploadId></InitiateMultipartUploadResult>");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, "VXBsb2FkIElE");
  auto etag = ParseCompleteMultipartUpload(
      "<CompleteMultipartUploadResult><ETag>&quot;3858f62230ac3c915f300c664312c11f-9&quot;"
      "</ETag></CompleteMultipartUploadResult>");
  ASSERT_TRUE(etag.ok());
  EXPECT_EQ(*etag, "3858f62230ac3c915f300c664312c11f-9");
  // A 200 answer that is an error after all.
  auto failed = ParseCompleteMultipartUpload(
      "<Error><Code>InternalError</Code><Message>try again</Message></Error>");
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("InternalError"));
  EXPECT_EQ(CompleteMultipartUploadXml({{1, 0, "aa"}, {2, 0, "b<b"}}),
            "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
            "<Part><PartNumber>1</PartNumber><ETag>&quot;aa&quot;</ETag></Part>"
            "<Part><PartNumber>2</PartNumber><ETag>&quot;b&lt;b&quot;</ETag></Part>"
            "</CompleteMultipartUpload>");
}

TEST(S3Xml, RefusesMalformedHostileAndUnexpectedDocuments) {
  EXPECT_FALSE(ParseXml("").ok());
  EXPECT_FALSE(ParseXml("<a><b></a>").ok());
  EXPECT_THAT(ParseXml("<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>").status().message(),
              HasSubstr("DOCTYPE"));
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "<a>";
  for (int i = 0; i < 40; ++i) deep += "</a>";
  EXPECT_THAT(ParseXml(deep).status().message(), HasSubstr("deeper"));
  EXPECT_FALSE(ParseListObjectsV2("<ListPartsResult/>").ok());
  EXPECT_FALSE(
      ParseListObjectsV2("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>")
          .ok());  // truncated without a token would loop forever
  EXPECT_FALSE(
      ParseListObjectsV2("<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents>"
                         "</ListBucketResult>")
          .ok());
}

TEST(S3Errors, CarryS3sCodeAndMessageMappedOntoStatusCodes) {
  Status s = S3ErrorStatus("GetObject b/k", 404,
                           "<Error><Code>NoSuchKey</Code><Message>The specified key does not "
                           "exist.</Message><Key>k</Key></Error>");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "GetObject b/k: NoSuchKey: The specified key does not exist. (HTTP 404)");
  EXPECT_EQ(S3ErrorStatus("x", 403,
                          "<Error><Code>SignatureDoesNotMatch</Code><Message>m</Message>"
                          "<StringToSign>AWS4-HMAC-SHA256\n...</StringToSign></Error>")
                .code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(S3ErrorStatus("x", 403, "<Error><Code>AccessDenied</Code></Error>").code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(S3ErrorStatus("x", 409, "<Error><Code>BucketNotEmpty</Code></Error>").code(),
            StatusCode::kConflict);
  EXPECT_EQ(S3ErrorStatus("x", 503, "<Error><Code>SlowDown</Code></Error>").code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(S3ErrorStatus("x", 400, "<Error><Code>BadDigest</Code></Error>").code(),
            StatusCode::kInvalidArgument);
  Status no_body = S3ErrorStatus("HeadObject b/k", 404, "");
  EXPECT_EQ(no_body.code(), StatusCode::kNotFound);
  EXPECT_THAT(no_body.message(), HasSubstr("NotFound"));
  // Line breaks in a server's message do not reach a log line as such.
  EXPECT_THAT(
      S3ErrorStatus("x", 400, "<Error><Code>C</Code><Message>a\nb</Message></Error>").message(),
      Not(HasSubstr("\n")));
}

}  // namespace
}  // namespace headway
