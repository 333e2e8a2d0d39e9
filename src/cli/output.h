// Terminal output for the CLI: aligned tables, ages, YAML and JSON.
//
// Everything here that prints text from the server escapes control
// characters (core/terminal_text.h), so a name, label, reason or message
// holding "\e[2J" shows as "\x1b[2J" instead of acting on the terminal
// (kubectl CVE-2021-25743). JSON and YAML keep their values exact: they carry
// such characters as their own escapes ("\u001b", "\e"), never raw.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"

namespace headway::cli {

// `text` safe to print: control characters made visible (EscapeForTerminal).
std::string Safe(std::string_view text);

// Columns padded to their widest cell, separated by three spaces, like kubectl.
// Cells and header are escaped with Safe(). Widths are display columns
// (DisplayWidth), not bytes: "\u2588" or a CJK name lines up like ASCII.
// Without `with_header` the header only counts towards the widths.
std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows, bool with_header = true);
// The column widths FormatTable would use, and one row laid out with them
// (for rows printed later under a header already shown, as `get -w` does).
std::vector<std::size_t> TableWidths(const std::vector<std::string>& header,
                                     const std::vector<std::vector<std::string>>& rows);
std::string FormatTableRow(const std::vector<std::string>& row,
                           const std::vector<std::size_t>& widths);

// The dashboard's formatters (web/format.js), so both show the same text.
// duration(): "42s", "4m12s", "2h05m", "3d04h"; negative counts as 0.
std::string FormatSeconds(double seconds);
// age(): how long ago `rfc3339` was at `now`, as FormatSeconds ("-" if unparsable).
std::string Age(const std::string& rfc3339, Time now);
// metric(): 4 significant digits ("0.09091", "12350"), exponential outside
// [1e-3, 1e5) ("1.23e+5", "4.00e-4"); strings ("NaN", "Infinity") as they
// are; "-" for anything else.
std::string FormatMetric(const nlohmann::json& value);
// number(): an integer as it is, else `digits` decimals; "-" if not a number.
std::string FormatFixed(const nlohmann::json& value, int digits);
// percent(): rounded down, "42%".
std::string FormatPercent(double percent);
std::string ToYaml(const nlohmann::json& value);
// Indented JSON; control characters only as \u escapes.
std::string ToJson(const nlohmann::json& value);

}  // namespace headway::cli
