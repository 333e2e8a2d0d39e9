// The client subcommands of `headway` (submit, get, describe, logs, stop, top,
// wait, exp, token, version, completion):
// thin REST clients. Exit codes: 0 success, 1 the server refused or failed the
// request (its message is printed) or the job ended without meeting a `wait`
// condition, 2 bad usage, 3 the server is unreachable, 4 `wait` timed out.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace headway::cli {

// Registers the client subcommands on `app`; `exit_code` receives the result
// of the one that ran. The returned object must outlive app.parse().
// Requests carry a user token from --token, else $HEADWAY_API_TOKEN, else the
// config file's (cli/config.h), else the file `admin_token_file` when it
// exists and is readable (the admin token a local `headway server --auth`
// wrote); the server URL and CA file follow the same order. `wait`,
// `logs -f`, `get -w` and `top` reconnect with backoff while the server is
// away instead of exiting 3.
std::shared_ptr<void> AddClientCommands(CLI::App& app, int& exit_code,
                                        std::string admin_token_file);

}  // namespace headway::cli
