// `headway completion bash|zsh`: a shell completion script made from the
// command tree itself, so it never lags behind the commands. It completes
// commands, their flags, fixed choices (get's resources) and, where a job
// name is expected, the names `headway get jobs -o name` prints.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace headway::cli {

// The script for `shell` ("bash" or "zsh") completing `root`'s commands.
std::string CompletionScript(const CLI::App& root, const std::string& shell);
// Adds the `completion` subcommand to `root`.
void AddCompletionCommand(CLI::App& root, int& exit_code);

}  // namespace headway::cli
