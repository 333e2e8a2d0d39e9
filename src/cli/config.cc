#include "cli/config.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace headway::cli {

std::string ConfigPath(const std::string& explicit_path) {
  if (!explicit_path.empty()) return explicit_path;
  if (const char* env = std::getenv("HEADWAY_CONFIG"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg && xdg[0] == '/') {
    return std::string(xdg) + "/headway/config";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::string(home) + "/.config/headway/config";
  }
  return {};
}

Result<ClientConfig> LoadClientConfig(const std::string& explicit_path) {
  ClientConfig config;
  bool named =
      !explicit_path.empty() || (std::getenv("HEADWAY_CONFIG") && *std::getenv("HEADWAY_CONFIG"));
  std::string path = ConfigPath(explicit_path);
  if (path.empty()) return config;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT && !named) return config;
    return InvalidArgument("config file " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return InvalidArgument("config file " + path + ": not a regular file");
  std::ifstream in(path);
  if (!in) return InvalidArgument("config file " + path + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    return InvalidArgument("config file " + path + " (line " + std::to_string(e.mark.line + 1) +
                           "): " + e.msg);
  }
  config.path = path;
  if (root.IsNull()) return config;
  if (!root.IsMap()) {
    return InvalidArgument("config file " + path + ": expected keys server, token, cacert");
  }
  for (const auto& entry : root) {
    std::string key = entry.first.as<std::string>();
    std::string* field = key == "server"   ? &config.server
                         : key == "token"  ? &config.token
                         : key == "cacert" ? &config.cacert
                                           : nullptr;
    if (!field) {
      return InvalidArgument("config file " + path + ": unknown key '" + key +
                             "' (known: server, token, cacert)");
    }
    if (!entry.second.IsScalar()) {
      return InvalidArgument("config file " + path + ": " + key + " must be a string");
    }
    *field = entry.second.as<std::string>();
  }
  if (!config.cacert.empty() && config.cacert[0] != '/') {
    config.cacert = (std::filesystem::path(path).parent_path() / config.cacert).string();
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    std::string why =
        "config file " + path + " is mode " + mode + ": others may read it; run chmod 600 " + path;
    if (!config.token.empty()) {
      return PermissionDenied(why + " (it holds a token, so it is not used)");
    }
    config.warnings.push_back(why);
  }
  return config;
}

}  // namespace headway::cli
