// A blocking HTTP/1.1 client (Boost.Beast) for the CLI and outgoing webhooks.
// One connection per request: callers make few.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace headway::api {

struct ClientResponse {
  int status = 0;
  std::string body;
  std::multimap<std::string, std::string> headers;  // names lowercased

  // The first value of a header ("" if absent); `lowercase_name` as stored.
  std::string Header(const std::string& lowercase_name) const {
    auto it = headers.find(lowercase_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// "http://host:port/path?query" as ("http://host:port", "/path?query"): the
// base URL an HttpClient takes and the target of a request, as for a
// presigned URL.
std::pair<std::string, std::string> SplitUrl(const std::string& url);

class HttpClient {
 public:
  // `base_url`: "http://host:port" or "https://host:port"; InvalidArgument
  // from Request when malformed. Over https the server's certificate must
  // chain to a CA the system trusts or to one in `ca_file` (PEM), and name
  // the host.
  explicit HttpClient(std::string base_url, std::string bearer_token = {},
                      std::string ca_file = {});

  // Unavailable (with a hint) when the server cannot be reached.
  Result<ClientResponse> Request(
      std::string_view method, std::string_view target, std::string body = {},
      std::string_view content_type = "application/json",
      const std::vector<std::pair<std::string, std::string>>& headers = {});
  // Sends the file at `path` as the body (streamed from disk, with its
  // Content-Length); for uploads of any size.
  Result<ClientResponse> SendFile(
      std::string_view method, std::string_view target, const std::string& path,
      const std::vector<std::pair<std::string, std::string>>& headers = {});
  // Sends bytes [offset, offset + length) of the file at `path` as the body
  // (a part of a multipart upload).
  Result<ClientResponse> SendFileRange(
      std::string_view method, std::string_view target, const std::string& path,
      std::uint64_t offset, std::uint64_t length,
      const std::vector<std::pair<std::string, std::string>>& headers = {});
  // GETs `target` and hands each piece of the body to `on_data` as it arrives.
  // Returns the status once the body ends; a non-2xx body goes to `error_body`.
  Result<int> Stream(std::string_view target, const std::function<void(std::string_view)>& on_data,
                     std::string& error_body);

  // Runs a command in a job over the exec WebSocket at `target` (GET
  // /api/v1/jobs/NAME/exec?..., Kubernetes' channel protocol; see
  // AttachedProcess in api/http_server.h): with `forward_stdin` this
  // process's stdin goes to it and its end closes the command's; the
  // command's stdout and stderr come out on ours; with `tty` the terminal's
  // size is sent now and on every SIGWINCH. Returns the command's exit code,
  // or the server's refusal (its message) as an error.
  Result<int> Exec(std::string_view target, bool forward_stdin, bool tty);

  const std::string& base_url() const { return base_url_; }
  // Each blocking send or receive of Request fails (Unavailable) after
  // `timeout` without progress; 0 (the default): no bound but the server's.
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  // Each request goes over a socket `connect` returns (already connected)
  // instead of one to the URL's host and port, which then name the Host
  // header only: how the server reaches a port inside a job's own network.
  void set_connector(std::function<Result<int>()> connect) { connector_ = std::move(connect); }

 private:
  Status ParseUrl(std::string& host, std::string& port, bool& tls) const;
  std::string base_url_;
  std::string token_;
  std::string ca_file_;
  std::chrono::milliseconds timeout_{0};
  std::function<Result<int>()> connector_;
};

}  // namespace headway::api
