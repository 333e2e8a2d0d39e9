// Command-line handling shared by every `headway` subcommand: global flags
// anywhere on the line, "did you mean" for a mistyped command, and help text
// without the parser's type annotations.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

namespace headway::cli {

// The client's global flags, each taking a value: --server, --token,
// --cacert, --config.
const std::vector<std::string>& GlobalValueFlags();

// `args` (without argv[0]) with every global flag and its value moved to the
// front, keeping their order, so `headway get jobs --server URL` means what
// `headway --server URL get jobs` does. Both "--flag VALUE" and
// "--flag=VALUE" are taken; nothing after "--" is touched.
std::vector<std::string> HoistGlobalFlags(const std::vector<std::string>& args,
                                          const std::vector<std::string>& value_flags);

// The candidate nearest to `word`: within an edit distance of 2 (1 for words
// of up to 4 letters), or one `word` is a prefix of; "" when none is near.
std::string ClosestMatch(const std::string& word, const std::vector<std::string>& candidates);

// A help formatter that shows "--gpus N" instead of "--gpus INT:INT in [0 - 4096]",
// choices as "{a|b}" and defaults in the description.
std::shared_ptr<CLI::Formatter> CleanHelpFormatter();

// Parses `argc/argv` into `app` (already holding every subcommand) and runs the
// chosen one's callback. Returns the process exit code for help (0) or bad
// usage (2, with a suggestion for a mistyped command); -1 when the command ran
// (its result is wherever its callback put it).
int ParseAndRun(CLI::App& app, int argc, char** argv);

}  // namespace headway::cli
