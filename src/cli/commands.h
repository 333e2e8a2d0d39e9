// The client subcommands of `headway` (submit, get, describe, logs, stop):
// thin REST clients. Exit codes: 0 success, 1 the server refused or failed the
// request (its message is printed), 2 bad usage, 3 the server is unreachable.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>

namespace headway::cli {

// Registers the client subcommands on `app`; `exit_code` receives the result
// of the one that ran. The returned object must outlive app.parse().
std::shared_ptr<void> AddClientCommands(CLI::App& app, int& exit_code);

}  // namespace headway::cli
