// The client's configuration file: where the CLI finds its server, token and
// CA when no flag or environment variable names them.
//
// Path: --config, else $HEADWAY_CONFIG, else $XDG_CONFIG_HOME/headway/config,
// else ~/.config/headway/config. A missing file at the default path is no
// error (every field empty); a missing file that was named is. Format: YAML,
//
//   server: https://headway.example.com:8443
//   token: hw_...
//   cacert: /etc/headway/ca.pem
//
// Unknown keys are refused by name. Because the file can hold a token, one
// that group or others may read or write (mode & 077) is refused when it
// holds a token and warned about otherwise; `chmod 600` it.
//
// Precedence for each setting: flag > environment variable > this file >
// built-in default (tokens: the admin token a local server wrote).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace headway::cli {

struct ClientConfig {
  std::string path;    // the file read ("" when none was found)
  std::string server;  // base URL
  std::string token;
  std::string cacert;                 // a path; relative ones are taken from the file's folder
  std::vector<std::string> warnings;  // to print on stderr, e.g. a loose mode
};

// `explicit_path` from --config ("" when not given).
std::string ConfigPath(const std::string& explicit_path);
// Reads and checks the file (see above). InvalidArgument names the file and
// what is wrong with it.
[[nodiscard]] Result<ClientConfig> LoadClientConfig(const std::string& explicit_path);

}  // namespace headway::cli
