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
      {"\xc2\x9b"
       "31m",
       "\\u009b31m"},  // C1 CSI as UTF-8
      {"\xc2\x85", "\\u0085"},
      {"\x9b"
       "31m",
       "\\x9b31m"},                         // a lone C1 byte (CSI on 8-bit terminals)
      {"\xff\xfe", "\\xff\\xfe"},           // not UTF-8
      {"\xe2\x82", "\\xe2\\x82"},           // truncated sequence
      {"\xc0\xaf", "\\xc0\\xaf"},           // overlong
      {"\xed\xa0\x80", "\\xed\\xa0\\x80"},  // surrogate
      {"abc\xe2\x80\xae"
       "cba",
       "abc\\u202ecba"},  // right-to-left override
      {"\xe2\x81\xa6", "\\u2066"},
      {"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80",
       "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80"},
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

TEST(DisplayWidth, CountsColumnsNotBytes) {
  EXPECT_EQ(DisplayWidth(""), 0u);
  EXPECT_EQ(DisplayWidth("loss"), 4u);
  // The progress bar's cells are 3 bytes each and one column each.
  EXPECT_EQ(std::string("\u2588\u2588\u2591").size(), 9u);
  EXPECT_EQ(DisplayWidth("\u2588\u2588\u2591"), 3u);
  EXPECT_EQ(DisplayWidth("caf\xc3\xa9"), 4u);               // é: 2 bytes, 1 column
  EXPECT_EQ(DisplayWidth("e\xcc\x81"), 1u);                 // e + combining acute
  EXPECT_EQ(DisplayWidth("\xe6\x97\xa5\xe6\x9c\xac"), 4u);  // 日本: wide
  EXPECT_EQ(DisplayWidth("\xea\xb0\x80"), 2u);              // Hangul syllable
  EXPECT_EQ(DisplayWidth("\xf0\x9f\x9a\x80"), 2u);          // rocket emoji
  EXPECT_EQ(DisplayWidth("\xef\xbc\xa1"), 2u);              // fullwidth A
  EXPECT_EQ(DisplayWidth("a\xe2\x80\x8b"
                         "b"),
            2u);                        // zero-width space
  EXPECT_EQ(DisplayWidth("\xff"), 1u);  // not UTF-8: one column per byte
}

TEST(DisplayWidth, TruncationNeverSplitsACharacter) {
  EXPECT_EQ(TruncateToWidth("abcdef", 4), "abcd");
  EXPECT_EQ(TruncateToWidth("abc", 4), "abc");
  EXPECT_EQ(TruncateToWidth("abcdef", 4, /*ellipsis=*/true), "abc\u2026");
  // 日本語 is 6 columns; 5 columns hold two characters, not two and a half.
  EXPECT_EQ(TruncateToWidth("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", 5), "\xe6\x97\xa5\xe6\x9c\xac");
  EXPECT_EQ(TruncateToWidth("\u2588\u2588\u2588", 2), "\u2588\u2588");
  EXPECT_EQ(TruncateToWidth("abc", 0), "");
}

}  // namespace
}  // namespace headway
