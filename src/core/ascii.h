// ASCII case folding, as protocols define it (HTTP header names, S3 and
// SigV4 canonical forms, enum names a user types): bytes outside A-Z are
// left alone, whatever the locale.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

namespace headway {

constexpr char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

inline std::string AsciiLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = AsciiLower(c);
  return out;
}

constexpr bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return AsciiLower(x) == AsciiLower(y);
         });
}

}  // namespace headway
