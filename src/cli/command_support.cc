#include "cli/command_support.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>

#include "cli/job_table.h"

namespace headway::cli {

using nlohmann::json;

std::string Client::CaFile(const Options& o) {
  if (!o.ca_file.empty()) return o.ca_file;
  if (const char* env = std::getenv("HEADWAY_CA_FILE"); env && *env) return env;
  return o.config.cacert;
}

std::string Client::ApiToken(const Options& o) {
  if (!o.token.empty()) return o.token;
  if (const char* env = std::getenv("HEADWAY_API_TOKEN"); env && *env) return env;
  // The Python SDK's name for it, accepted too.
  if (const char* env = std::getenv("HEADWAY_USER_TOKEN"); env && *env) return env;
  if (!o.config.token.empty()) return o.config.token;
  std::ifstream file(o.admin_token_file);
  std::string line;
  if (file && std::getline(file, line)) return line;
  return {};
}

std::string Client::TokenSource(const Options& o) {
  if (!o.token.empty()) return "--token";
  if (const char* env = std::getenv("HEADWAY_API_TOKEN"); env && *env) return "$HEADWAY_API_TOKEN";
  if (const char* env = std::getenv("HEADWAY_USER_TOKEN"); env && *env) {
    return "$HEADWAY_USER_TOKEN";
  }
  if (!o.config.token.empty()) return o.config.path;
  std::ifstream file(o.admin_token_file);
  std::string line;
  if (file && std::getline(file, line)) return o.admin_token_file;
  return {};
}

std::string Client::ServerUrl(const Options& o) {
  if (!o.server.empty()) return o.server;
  if (const char* env = std::getenv("HEADWAY_SERVER"); env && *env) return env;
  if (!o.config.server.empty()) return o.config.server;
  return "http://127.0.0.1:8080";
}

std::optional<nlohmann::json> Client::Call(
    std::string_view method, const std::string& target, std::string body,
    std::string_view content_type,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  return Answer(http_.Request(method, target, std::move(body), content_type, headers));
}

std::optional<nlohmann::json> Client::Answer(const Result<api::ClientResponse>& resp) {
  if (!resp.ok()) {
    std::cerr << "error: " << Safe(resp.status().message()) << "\n";
    exit_code =
        resp.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitUnreachable;
    return std::nullopt;
  }
  // Kubernetes' warnings (`Warning: 299 - "TEXT"`, one header each), as
  // kubectl prints them: what the server accepted but ignores or changed.
  for (auto [it, end] = resp->headers.equal_range("warning"); it != end; ++it) {
    const std::string& value = it->second;
    const auto quote = value.find('"');
    auto text = quote == std::string::npos ? nlohmann::json(value)
                                           : nlohmann::json::parse(value.substr(quote), nullptr,
                                                                   /*allow_exceptions=*/false);
    std::cerr << "Warning: " << Safe(text.is_string() ? text.get<std::string>() : value) << "\n";
  }
  auto parsed = nlohmann::json::parse(resp->body, nullptr, /*allow_exceptions=*/false);
  if (resp->status >= 400) {
    PrintError(resp->status, parsed, resp->body);
    if (resp->status == 401) {
      // Which token was sent, and the ways to send another: the flag, the
      // variable, the config file, or the data directory of the server meant.
      std::cerr << "hint: "
                << (token_source_.empty() ? "no token was found"
                                          : "the token came from " + Safe(token_source_))
                << "; pass --token, set HEADWAY_API_TOKEN, or write token: in the config file "
                   "(~/.config/headway/config); a local server started with --data-dir DIR "
                   "keeps its admin token in DIR/admin-token (HEADWAY_DATA_DIR=DIR finds it)\n";
    }
    exit_code = kExitFailed;
    return std::nullopt;
  }
  if (parsed.is_discarded()) {
    std::cerr << "error: the server sent a response that is not JSON\n";
    exit_code = kExitFailed;
    return std::nullopt;
  }
  return parsed;
}

std::optional<nlohmann::json> Client::CallRetrying(
    const std::string& target, std::optional<std::chrono::steady_clock::time_point> deadline,
    bool& timed_out) {
  timed_out = false;
  auto backoff = std::chrono::milliseconds(250);
  bool lost = false;
  for (;;) {
    auto resp = http_.Request("GET", target);
    bool away = !resp.ok() ? resp.status().code() != StatusCode::kInvalidArgument
                           : resp->status == 502 || resp->status == 503 || resp->status == 504;
    if (!away) {
      if (lost) std::cerr << "headway: reconnected to " << Safe(http_.base_url()) << "\n";
      // This answer, not a second request: a server gone between the two
      // would end the wait with an error instead of being waited for.
      return Answer(resp);
    }
    if (!lost) {
      std::cerr << "headway: lost " << Safe(http_.base_url()) << " ("
                << Safe(resp.ok() ? "HTTP " + std::to_string(resp->status)
                                  : resp.status().message())
                << "); reconnecting\n";
      lost = true;
    }
    auto now = std::chrono::steady_clock::now();
    if (deadline && now + backoff > *deadline) {
      if (now < *deadline) std::this_thread::sleep_until(*deadline);
      timed_out = true;
      return std::nullopt;
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
  }
}

void Client::PrintError(int status, const nlohmann::json& parsed, const std::string& raw) {
  if (parsed.is_object() && parsed.contains("error") && parsed["error"].is_object()) {
    const nlohmann::json& e = parsed["error"];
    std::cerr << "error: ";
    if (e.contains("field") && e["field"].is_string()) {
      std::cerr << Safe(e["field"].get<std::string>());
      if (e.contains("line") && e["line"].is_number_integer()) {
        std::cerr << " (line " << e["line"].get<int>() << ")";
      }
      std::cerr << ": ";
    }
    std::string message =
        e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : raw;
    std::cerr << Safe(message) << "\n";
  } else if (parsed.is_object() && parsed.contains("message") && parsed["message"].is_string()) {
    // Argo's shape, on the workflow routes.
    std::cerr << "error: " << Safe(parsed["message"].get<std::string>()) << "\n";
  } else {
    std::cerr << "error: server answered " << status << ": " << Safe(raw) << "\n";
  }
}

std::string UrlEncode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '=' || c == ',') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

bool PrintStructured(const Options& o, const nlohmann::json& value) {
  if (o.output == "json") {
    std::cout << ToJson(value) << "\n";
    return true;
  }
  if (o.output == "yaml") {
    std::cout << ToYaml(value);
    return true;
  }
  return false;
}

std::string ReadSpecFile(const std::string& file, bool& ok) {
  std::string text;
  ok = true;
  if (file == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), {});
    return text;
  }
  std::ifstream in(file);
  if (!in) {
    std::cerr << "error: cannot read " << file << "\n";
    ok = false;
    return text;
  }
  text.assign(std::istreambuf_iterator<char>(in), {});
  return text;
}

bool IsKatibExperiment(const std::string& text) {
  try {
    YAML::Node root = YAML::Load(text);
    return root.IsMap() && root["apiVersion"] && root["kind"] && root["apiVersion"].IsScalar() &&
           root["kind"].IsScalar() && root["apiVersion"].Scalar().rfind("kubeflow.org/", 0) == 0 &&
           root["kind"].Scalar() == "Experiment";
  } catch (const YAML::Exception&) {
    return false;  // the server says what is wrong with it
  }
}

std::string FormatNumber(const json& v) { return FormatMetric(v); }

std::optional<std::vector<json>> GetOneOrAll(const Options& o, const std::string& collection,
                                             const std::string& key, int& exit_code) {
  Client client(o);
  std::vector<json> items;
  auto answer =
      client.Call("GET", o.name.empty() ? collection : collection + "/" + UrlEncode(o.name));
  exit_code = client.exit_code;
  if (!answer) return std::nullopt;
  exit_code = kExitOk;
  if (PrintStructured(o, *answer)) return std::nullopt;
  if (o.name.empty()) {
    for (const auto& item : (*answer)[key]) items.push_back(item);
  } else {
    items.push_back(*answer);
  }
  if (o.output == "name") {
    for (const auto& item : items) std::cout << Safe(FieldText(item, "name")) << "\n";
    return std::nullopt;
  }
  return items;
}

}  // namespace headway::cli
