#include "core/terminal_text.h"

#include <cstdio>

namespace headway {
namespace {

void AppendHex(std::string& out, unsigned char byte) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", byte);
  out += buf;
}

void AppendCodePoint(std::string& out, unsigned int cp) {
  char buf[12];
  std::snprintf(buf, sizeof buf, "\\u%04x", cp);
  out += buf;
}

bool IsBidiControl(unsigned int cp) {
  return cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

// The length of the well-formed UTF-8 sequence (RFC 3629) at text[i] and its
// code point; 0 when the bytes there are not one.
std::size_t DecodeUtf8(std::string_view text, std::size_t i, unsigned int& cp) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char c = byte(i);
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    length = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    length = 3;
    cp = c & 0x0F;
    if (c == 0xE0) low = 0xA0;
    if (c == 0xED) high = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    length = 4;
    cp = c & 0x07;
    if (c == 0xF0) low = 0x90;
    if (c == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  return length;
}

}  // namespace

std::string EscapeForTerminal(std::string_view text, bool keep_newlines) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c >= 0x20 && c != 0x7F) {
        out += static_cast<char>(c);
      } else if (c == '\n') {
        out += keep_newlines ? "\n" : "\\n";
      } else if (c == '\t') {
        out += "\\t";
      } else if (c == '\r') {
        out += "\\r";
      } else {
        AppendHex(out, c);
      }
      ++i;
      continue;
    }
    unsigned int cp = 0;
    std::size_t length = DecodeUtf8(text, i, cp);
    if (length == 0) {
      AppendHex(out, c);  // a lone byte such as 0x9B is CSI on an 8-bit terminal
      ++i;
      continue;
    }
    if (cp <= 0x9F || IsBidiControl(cp)) {
      AppendCodePoint(out, cp);
    } else {
      out.append(text.substr(i, length));
    }
    i += length;
  }
  return out;
}

}  // namespace headway
