#include "core/terminal_text.h"

#include <gtest/gtest.h>

namespace headway {
namespace {

TEST(EscapeForTerminal, ControlCharactersArePrintedVisiblyNeverRaw) {
  struct Case {
    std::string in, out;
  };
  const Case cases[] = {
      {"plain text-1.5", "plain text-1.5"},
      {"", ""},
      {"\x1b[2J", "\\x1b[2J"},                     // ESC: clear screen
      {"\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"},  // OSC: window title, BEL
      {std::string("a\0b", 3), "a\\x00b"},
      {"a\tb\nc\rd", "a\\tb\\nc\\rd"},
      {"\x7f", "\\x7f"},
      {"\xc2\x9b" "31m", "\\u009b31m"},  // C1 CSI as UTF-8
      {"\xc2\x85", "\\u0085"},
      {"\x9b" "31m", "\\x9b31m"},          // a lone C1 byte (CSI on 8-bit terminals)
      {"\xff\xfe", "\\xff\\xfe"},          // not UTF-8
      {"\xe2\x82", "\\xe2\\x82"},          // truncated sequence
      {"\xc0\xaf", "\\xc0\\xaf"},          // overlong
      {"\xed\xa0\x80", "\\xed\\xa0\\x80"},  // surrogate
      {"abc\xe2\x80\xae" "cba", "abc\\u202ecba"},  // right-to-left override
      {"\xe2\x81\xa6", "\\u2066"},
      {"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80"},
      {"\xc2\xa0", "\xc2\xa0"},  // U+00A0 is printable
  };
  for (const Case& c : cases) {
    std::string got = EscapeForTerminal(c.in);
    EXPECT_EQ(got, c.out);
    for (unsigned char ch : got) {
      EXPECT_TRUE(ch >= 0x20 && ch != 0x7f) << "raw control byte in " << got;
    }
  }
}

TEST(EscapeForTerminal, KeepsLineBreaksWhenAsked) {
  EXPECT_EQ(EscapeForTerminal("a\nb\x1b", /*keep_newlines=*/true), "a\nb\\x1b");
  EXPECT_EQ(EscapeForTerminal("a\nb", /*keep_newlines=*/false), "a\\nb");
}

}  // namespace
}  // namespace headway
