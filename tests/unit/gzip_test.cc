// gzip Content-Encoding: the encoder against zlib's own decoder, and the
// server choosing it only for clients that accept it.
#include "api/gzip.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

#include "api/http_client.h"
#include "api/http_server.h"

namespace headway::api {
namespace {

// Decodes gzip `data` fed in the given pieces; what came out after each.
std::vector<std::string> Gunzip(const std::vector<std::string>& pieces) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  std::vector<std::string> out;
  for (const std::string& piece : pieces) {
    std::string text;
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(piece.data()));
    z.avail_in = static_cast<uInt>(piece.size());
    char buffer[4096];
    do {
      z.next_out = reinterpret_cast<Bytef*>(buffer);
      z.avail_out = sizeof buffer;
      int rc = inflate(&z, Z_SYNC_FLUSH);
      EXPECT_TRUE(rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR) << rc;
      text.append(buffer, sizeof buffer - z.avail_out);
    } while (z.avail_out == 0);
    out.push_back(text);
  }
  inflateEnd(&z);
  return out;
}

std::string Json(std::size_t items) {
  std::string body = "{\"jobs\":[";
  for (std::size_t i = 0; i < items; ++i) {
    if (i) body += ',';
    body += "{\"name\":\"job-" + std::to_string(i) + "\",\"state\":\"Pending\",\"gpus\":1}";
  }
  return body + "]}";
}

TEST(Gzip, AcceptEncodingIsReadAsBrowsersAndClientsSendIt) {
  EXPECT_TRUE(AcceptsGzip("gzip"));
  EXPECT_TRUE(AcceptsGzip("gzip, deflate, br"));
  EXPECT_TRUE(AcceptsGzip("deflate, GZIP;q=0.5"));
  EXPECT_TRUE(AcceptsGzip("*"));
  EXPECT_FALSE(AcceptsGzip(""));
  EXPECT_FALSE(AcceptsGzip("deflate, br"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip; q=0.000"));
  EXPECT_FALSE(AcceptsGzip("x-gzip2"));
  EXPECT_TRUE(WorthGzip("application/json"));
  EXPECT_TRUE(WorthGzip("text/event-stream"));
  EXPECT_FALSE(WorthGzip("application/octet-stream"));
}

TEST(Gzip, ABodyDecodesToItselfAtATenthOfItsSize) {
  std::string body = Json(5000);
  std::string packed = Gzip(body);
  EXPECT_LT(packed.size() * 8, body.size());
  EXPECT_EQ(Gunzip({packed}).at(0), body);
  EXPECT_EQ(Gunzip({Gzip("")}).at(0), "");
}

TEST(Gzip, EachFlushedPieceDecodesOnArrival) {
  GzipEncoder encoder;
  std::string first = encoder.Add("event: snapshot\ndata: {}\n\n", /*flush=*/true);
  std::string second = encoder.Add("event: update\ndata: {}\n\n", /*flush=*/true);
  std::string last = encoder.Finish();
  auto out = Gunzip({first, second, last});
  EXPECT_EQ(out.at(0), "event: snapshot\ndata: {}\n\n") << "nothing may wait in the compressor";
  EXPECT_EQ(out.at(1), "event: update\ndata: {}\n\n");
  EXPECT_EQ(out.at(2), "");
}

TEST(Gzip, TheServerCompressesOnlyForClientsThatAskAndOnlyText) {
  const std::string json = Json(500);
  auto server = HttpServer::Start({"127.0.0.1", 0, 2}, [&](const HttpRequest& req) {
    if (req.path == "/blob") {
      return HttpResponse{200, "application/octet-stream", std::string(4096, 'x'), {}, nullptr};
    }
    if (req.path == "/small") return HttpResponse{200, "application/json", "{}", {}, nullptr};
    return HttpResponse{200, "application/json", json, {}, nullptr};
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  HttpClient client("http://127.0.0.1:" + std::to_string((*server)->port()));

  auto plain = client.Request("GET", "/jobs");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->Header("content-encoding"), "");
  EXPECT_EQ(plain->body, json);

  auto packed = client.Request("GET", "/jobs", "", "application/json",
                               {{"Accept-Encoding", "gzip, deflate, br"}});
  ASSERT_TRUE(packed.ok());
  EXPECT_EQ(packed->Header("content-encoding"), "gzip");
  EXPECT_EQ(packed->Header("vary"), "Accept-Encoding");
  EXPECT_LT(packed->body.size() * 4, json.size());
  EXPECT_EQ(Gunzip({packed->body}).at(0), json);

  auto blob = client.Request("GET", "/blob", "", "application/json", {{"Accept-Encoding", "gzip"}});
  ASSERT_TRUE(blob.ok());
  EXPECT_EQ(blob->Header("content-encoding"), "") << "binary bodies go as they are";
  auto small =
      client.Request("GET", "/small", "", "application/json", {{"Accept-Encoding", "gzip"}});
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->body, "{}") << "a tiny body is not worth a gzip header";
}

}  // namespace
}  // namespace headway::api
