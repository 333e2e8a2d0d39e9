#include "api/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "core/ascii.h"

namespace headway::api {

bool AcceptsGzip(std::string_view accept_encoding) {
  std::string value = AsciiLower(accept_encoding);
  std::string_view rest = value;
  while (!rest.empty()) {
    std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    std::size_t semi = item.find(';');
    std::string_view coding = item.substr(0, semi);
    while (!coding.empty() && coding.front() == ' ') coding.remove_prefix(1);
    while (!coding.empty() && coding.back() == ' ') coding.remove_suffix(1);
    if (coding != "gzip" && coding != "*") continue;
    if (semi == std::string_view::npos) return true;
    std::string_view params = item.substr(semi + 1);
    std::size_t q = params.find("q=");
    if (q == std::string_view::npos) return true;
    std::string_view weight = params.substr(q + 2);
    // q=0, q=0.0, q=0.000: refused; any other weight accepts.
    bool zero = !weight.empty() && weight.front() == '0';
    for (std::size_t i = 1; zero && i < weight.size() && weight[i] != ' '; ++i) {
      zero = weight[i] == '.' || weight[i] == '0';
    }
    return !zero;
  }
  return false;
}

bool WorthGzip(std::string_view content_type) {
  std::string type = AsciiLower(content_type);
  return type.starts_with("text/") || type.find("json") != std::string::npos ||
         type.find("javascript") != std::string::npos;
}

struct GzipEncoder::State {
  z_stream z{};
};

GzipEncoder::GzipEncoder() : state_(std::make_unique<State>()) {
  // windowBits 15 + 16: a gzip header and trailer; level 1: the fastest, which
  // still takes JSON to about a tenth.
  if (deflateInit2(&state_->z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("zlib: deflateInit2 failed");
  }
}

GzipEncoder::~GzipEncoder() { deflateEnd(&state_->z); }

namespace {

std::string Deflate(z_stream& z, std::string_view data, int mode) {
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  char buffer[64 * 1024];
  for (;;) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    int rc = deflate(&z, mode);
    if (rc == Z_STREAM_ERROR) throw std::runtime_error("zlib: deflate failed");
    out.append(buffer, sizeof buffer - z.avail_out);
    // Done when deflate left room in the buffer: all input taken and, for a
    // flush or finish, all output given.
    if (z.avail_out != 0 || rc == Z_STREAM_END) break;
  }
  return out;
}

}  // namespace

std::string GzipEncoder::Add(std::string_view data, bool flush) {
  std::string out;
  // zlib counts input in uInt: feed very large pieces in parts.
  constexpr std::size_t kPiece = 1u << 30;
  while (data.size() > kPiece) {
    out += Deflate(state_->z, data.substr(0, kPiece), Z_NO_FLUSH);
    data.remove_prefix(kPiece);
  }
  out += Deflate(state_->z, data, flush ? Z_SYNC_FLUSH : Z_NO_FLUSH);
  return out;
}

std::string GzipEncoder::Finish() { return Deflate(state_->z, {}, Z_FINISH); }

std::string Gzip(std::string_view data) {
  GzipEncoder encoder;
  std::string out = encoder.Add(data, false);
  out += encoder.Finish();
  return out;
}

}  // namespace headway::api
