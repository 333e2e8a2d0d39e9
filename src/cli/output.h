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
// Cells and header are escaped with Safe().
std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);
// "5s", "3m", "2h", "4d": how long ago `rfc3339` was at `now` ("<unknown>" if unparsable).
std::string Age(const std::string& rfc3339, Time now);
std::string ToYaml(const nlohmann::json& value);
// Indented JSON; control characters only as \u escapes.
std::string ToJson(const nlohmann::json& value);

}  // namespace headway::cli
