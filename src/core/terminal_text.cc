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

namespace {

// Zero-width: combining marks, zero-width spaces and joiners, variation selectors.
bool IsZeroWidth(unsigned int cp) {
  return (cp >= 0x0300 && cp <= 0x036F) || (cp >= 0x0483 && cp <= 0x0489) ||
         (cp >= 0x0591 && cp <= 0x05BD) || (cp >= 0x0610 && cp <= 0x061A) ||
         (cp >= 0x064B && cp <= 0x065F) || (cp >= 0x1AB0 && cp <= 0x1AFF) ||
         (cp >= 0x1DC0 && cp <= 0x1DFF) || (cp >= 0x200B && cp <= 0x200F) ||
         (cp >= 0x20D0 && cp <= 0x20FF) || (cp >= 0xFE00 && cp <= 0xFE0F) ||
         (cp >= 0xFE20 && cp <= 0xFE2F) || cp == 0xFEFF || (cp >= 0xE0100 && cp <= 0xE01EF);
}

// East Asian Wide (W) and Fullwidth (F) ranges, as terminals draw them.
bool IsWide(unsigned int cp) {
  return (cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x231A && cp <= 0x231B) ||
         (cp >= 0x2329 && cp <= 0x232A) || (cp >= 0x23E9 && cp <= 0x23EC) ||
         (cp >= 0x25FD && cp <= 0x25FE) || (cp >= 0x2614 && cp <= 0x2615) ||
         (cp >= 0x26AA && cp <= 0x26AB) || cp == 0x26A1 || cp == 0x26BD || cp == 0x26BE ||
         cp == 0x26C4 || cp == 0x26C5 || cp == 0x26D4 || cp == 0x26EA || cp == 0x26F5 ||
         cp == 0x26FA || cp == 0x26FD || cp == 0x2705 || (cp >= 0x270A && cp <= 0x270B) ||
         cp == 0x2728 || cp == 0x274C || cp == 0x2753 || cp == 0x2757 || cp == 0x2B50 ||
         (cp >= 0x2E80 && cp <= 0x303E) || (cp >= 0x3041 && cp <= 0x33FF) ||
         (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x4E00 && cp <= 0x9FFF) ||
         (cp >= 0xA000 && cp <= 0xA4CF) || (cp >= 0xA960 && cp <= 0xA97F) ||
         (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xF900 && cp <= 0xFAFF) ||
         (cp >= 0xFE10 && cp <= 0xFE19) || (cp >= 0xFE30 && cp <= 0xFE6F) ||
         (cp >= 0xFF00 && cp <= 0xFF60) || (cp >= 0xFFE0 && cp <= 0xFFE6) ||
         (cp >= 0x16FE0 && cp <= 0x18AFF) || (cp >= 0x1B000 && cp <= 0x1B2FF) ||
         (cp >= 0x1F004 && cp <= 0x1F004) || cp == 0x1F0CF || cp == 0x1F18E ||
         (cp >= 0x1F191 && cp <= 0x1F19A) || (cp >= 0x1F200 && cp <= 0x1F251) ||
         (cp >= 0x1F300 && cp <= 0x1F64F) || (cp >= 0x1F680 && cp <= 0x1F6FF) ||
         (cp >= 0x1F7E0 && cp <= 0x1F7EB) || (cp >= 0x1F90C && cp <= 0x1F9FF) ||
         (cp >= 0x1FA70 && cp <= 0x1FAFF) || (cp >= 0x20000 && cp <= 0x3FFFD);
}

// The next character of `text` at `i`: its byte length and its columns.
std::size_t NextCharacter(std::string_view text, std::size_t i, std::size_t& columns) {
  auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x80) {
    columns = 1;
    return 1;
  }
  unsigned int cp = 0;
  std::size_t length = DecodeUtf8(text, i, cp);
  if (length == 0) {
    columns = 1;
    return 1;
  }
  columns = IsZeroWidth(cp) ? 0 : IsWide(cp) ? 2 : 1;
  return length;
}

}  // namespace

std::size_t DisplayWidth(std::string_view text) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t columns = 0;
    i += NextCharacter(text, i, columns);
    width += columns;
  }
  return width;
}

std::string TruncateToWidth(std::string_view text, std::size_t width, bool ellipsis) {
  if (DisplayWidth(text) <= width) return std::string(text);
  std::size_t room = ellipsis && width > 0 ? width - 1 : width;
  std::size_t used = 0, i = 0;
  while (i < text.size()) {
    std::size_t columns = 0;
    std::size_t length = NextCharacter(text, i, columns);
    if (used + columns > room) break;
    used += columns;
    i += length;
  }
  std::string out(text.substr(0, i));
  if (ellipsis && width > 0) out += "\u2026";
  return out;
}

std::string ShellQuote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace headway
