// Text from the API made safe to print on a terminal. Names, labels, reasons,
// messages and events can hold control characters (a YAML "\e[2J" or a JSON
// "\u001b" in a spec, a stop reason, a backend's message); printed raw they
// would move the cursor, clear the screen, retitle the window or hide text
// (kubectl CVE-2021-25743). Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace headway {

// `text` with every control character made visible, never raw:
//   C0 and DEL        "\x1b", "\x7f"; tab, newline and CR as "\t", "\n", "\r"
//   C1 (U+0080-009F)  "\u009b"
//   bidi overrides    "\u202e" (U+200E-200F, U+202A-202E, U+2066-2069)
//   invalid UTF-8     each byte as "\xNN"
// Everything else, other UTF-8 included, passes unchanged. With
// `keep_newlines`, "\n" stays a line break (for multi-line text).
std::string EscapeForTerminal(std::string_view text, bool keep_newlines = false);

// `text` as one word for a POSIX shell, in single quotes: safe for any value
// (a ' inside becomes '\'').
std::string ShellQuote(std::string_view text);

// Columns `text` takes on a terminal: UTF-8 aware, East Asian wide and
// fullwidth characters (CJK, Hangul, most emoji) count 2, combining marks
// and zero-width characters 0, everything else 1. Meant for text already
// made safe by EscapeForTerminal; a byte that is not UTF-8 counts 1.
std::size_t DisplayWidth(std::string_view text);
// The longest prefix of `text` that fits in `width` columns, never cutting a
// character in two; when it had to cut and `ellipsis` is set, the last
// column holds "…" instead.
std::string TruncateToWidth(std::string_view text, std::size_t width, bool ellipsis = false);

}  // namespace headway
