// gzip Content-Encoding (RFC 1952 over zlib's deflate) for responses whose
// client sends "Accept-Encoding: gzip": a 10k-job list or dashboard snapshot
// is ~10 MiB of JSON and a tenth of that compressed.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace headway::api {

// Whether an Accept-Encoding header value accepts gzip (not "gzip;q=0").
bool AcceptsGzip(std::string_view accept_encoding);

// Whether a body of this type and size is worth compressing: text, JSON,
// JavaScript, event streams; at least `kMinGzipBytes`.
inline constexpr std::size_t kMinGzipBytes = 1024;
bool WorthGzip(std::string_view content_type);

// One gzip member, fed in pieces. Each Add() returns the bytes to send for
// its input: with `flush`, everything so far decodes on arrival (a streamed
// event must not wait in the compressor); Finish() returns the trailer.
class GzipEncoder {
 public:
  GzipEncoder();
  ~GzipEncoder();
  GzipEncoder(const GzipEncoder&) = delete;
  GzipEncoder& operator=(const GzipEncoder&) = delete;

  std::string Add(std::string_view data, bool flush);
  std::string Finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The whole body as one gzip member.
std::string Gzip(std::string_view data);

}  // namespace headway::api
