// A small HTTP/1.1 server on Boost.Beast: keep-alive, a body size limit,
// read timeouts, and chunked streaming responses (log follow, event streams).
//
// Admission: a connection takes a general slot while fewer than
// `max_connections` are open and its client address holds fewer than
// `max_connections_per_client` of them. Otherwise it takes one of
// `reserved_connections` extra slots, where only requests `reserved_for`
// accepts are served (the jobs' progress reports): others get 503. Beyond
// both, a new connection gets 503 at once. A connection must send each
// request's headers within `header_timeout` (of connecting, or of its
// previous answer), so idle sockets do not hold slots for long.
//
// Thread safety: the handler is called concurrently from the I/O threads
// and the handler threads (HttpServerOptions) and must be thread-safe. A
// handler may block unless `inline_for` accepts its request, but a
// streaming response's Next() must not: it is polled on an I/O thread every
// `interval`.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace headway::api {

struct HttpRequest {
  std::string method;                          // "GET", "POST", ...
  std::string target;                          // as sent: path and query, undecoded
  std::string path;                            // decoded path, no query
  std::map<std::string, std::string> query;    // decoded; a repeated key keeps the last value
  std::map<std::string, std::string> headers;  // keys lowercased
  // Headers that decide who asks or from where (host, origin, authorization,
  // cookie, x-headway-job) that came more than once: which one counts would
  // differ between this server and a proxy in front of it, so such a request
  // is refused (CheckHostAndOrigin) rather than read by its last copy.
  std::vector<std::string> repeated_headers;
  std::string body;
  // For a request whose body was written to a file (see
  // HttpServerOptions::body_to_file): that file, which the server removes
  // once the handler returns (a handler that keeps it moves it away).
  std::string body_file;

  std::string Header(const std::string& lowercase_name) const {
    auto it = headers.find(lowercase_name);
    return it == headers.end() ? std::string() : it->second;
  }
  std::string Query(const std::string& key, std::string fallback = {}) const {
    auto it = query.find(key);
    return it == query.end() ? fallback : it->second;
  }
};

// A response body produced over time. Next() appends what is new to `out` and
// returns false once the body is complete. Called on an I/O thread.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  virtual bool Next(std::string& out) = 0;
  virtual std::chrono::milliseconds interval() const { return std::chrono::milliseconds(200); }
};

// Where a proxied request goes (HttpResponse::proxy): the request is sent
// on, as it came but for the headers named here, to http://host:port, and
// the answer streamed back. A WebSocket upgrade the upstream accepts (101)
// turns the connection into a tunnel both ways until either side closes.
struct ProxyTarget {
  std::string host;  // an IP address
  int port = 0;
  // When set, the upstream connection is the socket this returns (already
  // connected; blocking, briefly) instead of one to host:port: a port inside
  // a job's own network.
  std::function<Result<int>()> connect;
  std::vector<std::string> remove_headers;                       // lowercase names, not sent on
  std::vector<std::pair<std::string, std::string>> set_headers;  // sent on, replacing any
  // Called once the upstream answered (its status) or could not be reached (0).
  std::function<void(int status)> on_answer;
  // When set, each Set-Cookie of the answer is replaced by what this makes
  // of it (a notebook's cookies confined to its path and host).
  std::function<std::string(std::string_view set_cookie)> rewrite_set_cookie;
  // Headers the answer gets when the upstream sent none of that name.
  std::vector<std::pair<std::string, std::string>> default_response_headers;
};

// A process attached to a WebSocket (HttpResponse::attach) with Kubernetes'
// exec protocol (v5.channel.k8s.io, also v4 and base.channel.k8s.io): each
// binary message starts with its channel, 0 the process's stdin, 1 its
// stdout, 2 its stderr, 3 the final status (Kubernetes' Status JSON: Success,
// or Failure with reason NonZeroExitCode and the exit code), 4 a terminal
// resize ({"Width": W, "Height": H}), and [255, 0] (v5) closes its stdin.
// The server owns the descriptors and closes them; the process ends when
// its output does and it has exited, or is killed when the client goes.
struct AttachedProcess {
  int input = -1;   // written with channel 0
  int output = -1;  // read into channel 1
  int error = -1;   // read into channel 2; -1 when output carries both (a terminal)
  std::function<void(int columns, int rows)> resize;
  std::function<std::optional<int>()> exit_code;  // nullopt while it runs; must not block
  std::function<void()> kill;                     // the client went away
  std::function<void(std::optional<int> exit_code)> on_end;  // once, when it is over
};

class DeferredResponse;

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::shared_ptr<ResponseStream> stream;        // when set, sent chunked after `body`
  std::shared_ptr<ProxyTarget> proxy = nullptr;  // when set, the rest is ignored: see ProxyTarget
  // When set (for a WebSocket upgrade), the rest is ignored: see AttachedProcess.
  std::shared_ptr<AttachedProcess> attach = nullptr;
  // When set, the rest is ignored and the answer is what Complete() gives
  // later: see DeferredResponse.
  std::shared_ptr<DeferredResponse> deferred = nullptr;
};

// An answer that is not ready when the handler returns (a progress report
// waiting for its group commit). The connection waits for Complete()
// without holding an I/O thread, so requests in flight are not bounded by
// the number of threads. Thread-safe; Complete() is called once, from any
// thread.
class DeferredResponse {
 public:
  void Complete(HttpResponse response);

  // For the server. Await() registers `wake`, called once (from the thread
  // that completes) when the answer is ready, and returns true; or returns
  // false when it is ready already. Detach() drops `wake` (the connection
  // went); Take() gives the answer once it is ready.
  bool Await(std::function<void()> wake);
  void Detach();
  HttpResponse Take();

 private:
  std::mutex mu_;
  bool ready_ = false;                    // guarded by mu_
  std::unique_ptr<HttpResponse> answer_;  // guarded by mu_
  std::function<void()> wake_;            // guarded by mu_
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  std::string address = "127.0.0.1";
  int port = 8080;  // 0: pick a free port; see HttpServer::port()
  // I/O threads: sockets, TLS, and the handlers of requests `inline_for`
  // accepts. Every other handler runs on one of `handler_threads`, which may
  // block (store reads, a request forwarded to the leader); 0: all inline.
  int threads = 4;
  int handler_threads = 0;
  // Requests (method, decoded path) whose handler never blocks for long
  // (a progress report, which defers its answer): run on the I/O thread,
  // sparing two thread hand-offs.
  std::function<bool(std::string_view method, std::string_view path)> inline_for = {};
  std::size_t max_body_bytes = 1 << 20;  // larger bodies get 413
  std::chrono::seconds read_timeout{30};
  int max_connections = 1024;  // general slots; see Admission above
  // General slots one client address may hold (loopback included); its
  // further connections go to the reserve.
  int max_connections_per_client = 64;
  // Slots beyond max_connections for requests `reserved_for` accepts.
  int reserved_connections = 64;
  // Which requests (method, decoded path) may use a reserved slot; none when unset.
  std::function<bool(std::string_view method, std::string_view path)> reserved_for = {};
  // Each request's line and headers must arrive within this (and within
  // read_timeout) of connecting or of the previous answer.
  std::chrono::seconds header_timeout{10};
  // Requests (method, decoded path) whose body goes to a file instead of
  // memory: uploads of any size up to max_file_body_bytes. The file is made
  // (0600) in `file_body_dir`, which must exist; the body may take as long
  // as it needs while each read brings something within read_timeout.
  std::function<bool(std::string_view method, std::string_view path)> body_to_file = {};
  std::string file_body_dir = {};
  std::uint64_t max_file_body_bytes = 5ull << 30;
  // Requests (method, decoded path) whose body may be up to
  // max_large_body_bytes in memory instead of max_body_bytes: what a
  // notebook's proxy passes on (Jupyter uploads a file in 1 MiB pieces as
  // base64 in JSON, and saves a notebook whole).
  std::function<bool(std::string_view method, std::string_view path)> large_body_for = {};
  std::size_t max_large_body_bytes = 64 << 20;
  // Both set: HTTPS only (TLS 1.2+), with this PEM certificate chain and key.
  std::string tls_cert_file = {};
  std::string tls_key_file = {};
};

class HttpServer {
 public:
  // Binds and starts serving; Unavailable if the address cannot be bound,
  // InvalidArgument if the TLS certificate or key cannot be used.
  static Result<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                   HttpHandler handler);
  virtual ~HttpServer() = default;
  virtual int port() const = 0;
  // Stops accepting, closes connections and joins the I/O threads. Idempotent.
  virtual void Stop() = 0;
};

// Percent-decoding of URL components ('+' is a space only in queries).
std::string UrlDecode(std::string_view text, bool plus_is_space);

// Sets `req.path` and `req.query` from a raw request target ("/a%20b?x=1").
void SetRequestTarget(HttpRequest& req, std::string_view target);

// Parses one complete raw HTTP/1.1 request (request line, headers, body) the
// way the server does for requests off the socket. InvalidArgument when it
// is malformed or its body exceeds `max_body_bytes`. For fuzzing and tests.
Result<HttpRequest> ParseHttpRequest(std::string_view raw, std::size_t max_body_bytes = 1 << 20);

}  // namespace headway::api
