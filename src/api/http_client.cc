#include "api/http_client.h"

#include <fcntl.h>
#include <openssl/ssl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <cstring>
#include <deque>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/ascii.h"

namespace headway::api {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

// Reads one response with a body of at most `body_limit` bytes; header names lowercased.
template <class Stream>
Result<ClientResponse> ReadResponse(Stream& stream, std::uint64_t body_limit) {
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(body_limit);
  beast::error_code ec;
  http::read(stream, buffer, parser, ec);
  if (ec) return Unavailable("reading response: " + ec.message());
  ClientResponse response{static_cast<int>(parser.get().result_int()), parser.get().body(), {}};
  for (const auto& field : parser.get()) {
    response.headers.emplace(
        AsciiLower(std::string_view(field.name_string().data(), field.name_string().size())),
        std::string(field.value()));
  }
  return response;
}

}  // namespace

HttpClient::HttpClient(std::string base_url, std::string bearer_token, std::string ca_file)
    : base_url_(std::move(base_url)),
      token_(std::move(bearer_token)),
      ca_file_(std::move(ca_file)) {
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
}

Status HttpClient::ParseUrl(std::string& host, std::string& port, bool& tls) const {
  tls = base_url_.rfind("https://", 0) == 0;
  if (!tls && base_url_.rfind("http://", 0) != 0) {
    return InvalidArgument("server URL must start with http:// or https:// (got '" + base_url_ +
                           "')");
  }
  std::string rest = base_url_.substr(tls ? 8 : 7);
  auto slash = rest.find('/');
  if (slash != std::string::npos) rest = rest.substr(0, slash);
  auto colon = rest.rfind(':');
  host = colon == std::string::npos ? rest : rest.substr(0, colon);
  port = colon == std::string::npos ? (tls ? "443" : "80") : rest.substr(colon + 1);
  if (host.empty()) return InvalidArgument("server URL has no host: '" + base_url_ + "'");
  return Status::Ok();
}

namespace {

// RFC 9110: the port is part of Host unless it is the scheme's default.
// Servers compare it with a browser's Origin (api/request_guard.h).
std::string HostHeader(const std::string& host, const std::string& port, bool tls) {
  return port == (tls ? "443" : "80") ? host : host + ":" + port;
}

Result<beast::tcp_stream> Connect(net::io_context& io, const std::string& host,
                                  const std::string& port, const std::string& url,
                                  const std::function<Result<int>()>& connector) {
  beast::error_code ec;
  if (connector) {
    auto fd = connector();
    if (!fd.ok()) return fd.status();
    beast::tcp_stream stream(io);
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    ::getsockname(*fd, reinterpret_cast<sockaddr*>(&address), &length);
    stream.socket().assign(address.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), *fd, ec);
    if (ec) {
      ::close(*fd);
      return Unavailable("cannot use the connection to " + url + ": " + ec.message());
    }
    return stream;
  }
  tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(host, port, ec);
  if (ec) return Unavailable("cannot resolve " + host + ": " + ec.message());
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(10));
  stream.connect(endpoints, ec);
  if (ec) {
    return Unavailable("cannot reach the Headway server at " + url + ": " + ec.message() +
                       " (is `headway server` running? set --server or HEADWAY_SERVER)");
  }
  return stream;
}

}  // namespace

namespace {

// Runs `exchange` over a new connection to the server: plain TCP, or TLS
// verified against the system's CAs (and `ca_file`) and the host name.
template <class Exchange>
auto OverConnection(const std::string& host, const std::string& port, const std::string& url,
                    bool tls, const std::string& ca_file,
                    const std::function<Result<int>()>& connector, Exchange&& exchange)
    -> decltype(exchange(std::declval<beast::tcp_stream&>())) {
  net::io_context io;
  auto stream = Connect(io, host, port, url, connector);
  if (!stream.ok()) return stream.status();
  if (!tls) return exchange(*stream);
  net::ssl::context context(net::ssl::context::tls_client);
  beast::error_code ec;
  context.set_default_verify_paths(ec);
  if (!ca_file.empty()) {
    context.load_verify_file(ca_file, ec);
    if (ec) return InvalidArgument("CA file " + ca_file + ": " + ec.message());
  }
  context.set_verify_mode(net::ssl::verify_peer);
  beast::ssl_stream<beast::tcp_stream> secure(std::move(stream.value()), context);
  secure.set_verify_callback(net::ssl::host_name_verification(host));
  if (!SSL_set_tlsext_host_name(secure.native_handle(), host.c_str())) {
    return Unavailable("TLS: cannot set the server name " + host);
  }
  secure.handshake(net::ssl::stream_base::client, ec);
  if (ec) {
    return Unavailable("TLS handshake with " + url + " failed: " + ec.message() +
                       (ca_file.empty() ? " (for a certificate your system does not trust, pass "
                                          "--cacert FILE or set HEADWAY_CA_FILE)"
                                        : ""));
  }
  return exchange(secure);
}

}  // namespace

Result<ClientResponse> HttpClient::Request(
    std::string_view method, std::string_view target, std::string body,
    std::string_view content_type,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string host, port;
  bool tls = false;
  HEADWAY_RETURN_IF_ERROR(ParseUrl(host, port, tls));
  http::request<http::string_body> req{
      http::string_to_verb(beast::string_view(method.data(), method.size())), std::string(target),
      11};
  req.set(http::field::host, HostHeader(host, port, tls));
  req.set(http::field::user_agent, "headway-cli");
  if (!token_.empty()) req.set(http::field::authorization, "Bearer " + token_);
  if (!body.empty()) req.set(http::field::content_type, std::string(content_type));
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = std::move(body);
  req.prepare_payload();
  return OverConnection(host, port, base_url_, tls, ca_file_, connector_,
                        [&](auto& stream) -> Result<ClientResponse> {
                          beast::error_code ec;
                          beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(60));
                          if (timeout_.count() > 0) {
                            // expires_after bounds only asynchronous operations; these are
                            // blocking.
                            timeval tv{static_cast<time_t>(timeout_.count() / 1000),
                                       static_cast<suseconds_t>((timeout_.count() % 1000) * 1000)};
                            int fd = beast::get_lowest_layer(stream).socket().native_handle();
                            ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
                            ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
                          }
                          http::write(stream, req, ec);
                          if (ec) return Unavailable("sending request: " + ec.message());
                          auto response = ReadResponse(stream, 256 * 1024 * 1024);
                          beast::error_code ignored;
                          beast::get_lowest_layer(stream).socket().shutdown(
                              tcp::socket::shutdown_both, ignored);
                          return response;
                        });
}

std::pair<std::string, std::string> SplitUrl(const std::string& url) {
  std::size_t scheme = url.find("://");
  std::size_t path = scheme == std::string::npos ? std::string::npos : url.find('/', scheme + 3);
  if (path == std::string::npos) return {url, "/"};
  return {url.substr(0, path), url.substr(path)};
}

Result<ClientResponse> HttpClient::SendFile(
    std::string_view method, std::string_view target, const std::string& path,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Unavailable("cannot read " + path + ": " + std::strerror(errno));
  }
  return SendFileRange(method, target, path, 0, static_cast<std::uint64_t>(st.st_size), headers);
}

Result<ClientResponse> HttpClient::SendFileRange(
    std::string_view method, std::string_view target, const std::string& path, std::uint64_t offset,
    std::uint64_t length, const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string host, port;
  bool tls = false;
  HEADWAY_RETURN_IF_ERROR(ParseUrl(host, port, tls));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Unavailable("cannot read " + path + ": " + std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  // The body goes in 1 MiB writes: Beast's file_body reads and sends 4 KiB
  // at a time, which costs both ends a system call (and the server a timer
  // reset) per 4 KiB.
  http::request<http::buffer_body> req{
      http::string_to_verb(beast::string_view(method.data(), method.size())), std::string(target),
      11};
  req.set(http::field::host, HostHeader(host, port, tls));
  req.set(http::field::user_agent, "headway-cli");
  req.set(http::field::content_type, "application/octet-stream");
  if (!token_.empty()) req.set(http::field::authorization, "Bearer " + token_);
  for (const auto& [name, value] : headers) req.set(name, value);
  req.content_length(length);
  return OverConnection(
      host, port, base_url_, tls, ca_file_, connector_,
      [&](auto& stream) -> Result<ClientResponse> {
        beast::error_code ec;
        beast::get_lowest_layer(stream).expires_never();
        req.body().data = nullptr;
        req.body().more = true;
        http::request_serializer<http::buffer_body> serializer{req};
        http::write_header(stream, serializer, ec);
        if (ec) return Unavailable("sending " + path + ": " + ec.message());
        std::vector<char> chunk(1 << 20);
        std::uint64_t sent = 0;
        while (sent < length) {
          ssize_t n =
              ::pread(fd, chunk.data(), std::min<std::uint64_t>(chunk.size(), length - sent),
                      static_cast<off_t>(offset + sent));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) return Unavailable("reading " + path + ": it changed while being sent");
          sent += static_cast<std::uint64_t>(n);
          req.body().data = chunk.data();
          req.body().size = static_cast<std::size_t>(n);
          req.body().more = sent < length;
          http::write(stream, serializer, ec);
          if (ec == http::error::need_buffer) ec = {};
          if (ec) return Unavailable("sending " + path + ": " + ec.message());
        }
        if (!serializer.is_done()) {
          req.body().data = nullptr;
          req.body().size = 0;
          req.body().more = false;
          http::write(stream, serializer, ec);
          if (ec == http::error::need_buffer) ec = {};
          if (ec) return Unavailable("sending " + path + ": " + ec.message());
        }
        return ReadResponse(stream, 16 * 1024 * 1024);
      });
}

Result<int> HttpClient::Stream(std::string_view target,
                               const std::function<void(std::string_view)>& on_data,
                               std::string& error_body) {
  std::string host, port;
  bool tls = false;
  HEADWAY_RETURN_IF_ERROR(ParseUrl(host, port, tls));
  http::request<http::empty_body> req{http::verb::get, std::string(target), 11};
  req.set(http::field::host, HostHeader(host, port, tls));
  req.set(http::field::user_agent, "headway-cli");
  if (!token_.empty()) req.set(http::field::authorization, "Bearer " + token_);
  return OverConnection(host, port, base_url_, tls, ca_file_, connector_,
                        [&](auto& stream) -> Result<int> {
                          beast::error_code ec;
                          http::write(stream, req, ec);
                          if (ec) return Unavailable("sending request: " + ec.message());
                          beast::get_lowest_layer(stream).expires_never();
                          beast::flat_buffer buffer;
                          http::response_parser<http::buffer_body> parser;
                          parser.body_limit(std::numeric_limits<std::uint64_t>::max());
                          http::read_header(stream, buffer, parser, ec);
                          if (ec) return Unavailable("reading response: " + ec.message());
                          int status = static_cast<int>(parser.get().result_int());
                          char chunk[8192];
                          while (!parser.is_done()) {
                            parser.get().body().data = chunk;
                            parser.get().body().size = sizeof chunk;
                            // read_some, not read: read would wait until the 8 KiB chunk buffer is
                            // full, holding back a followed log line or an event for as long.
                            http::read_some(stream, buffer, parser, ec);
                            if (ec == http::error::need_buffer) ec = {};
                            if (ec) return Unavailable("stream interrupted: " + ec.message());
                            std::size_t n = sizeof chunk - parser.get().body().size;
                            if (n == 0) continue;
                            if (status >= 200 && status < 300) {
                              on_data(std::string_view(chunk, n));
                            } else {
                              error_body.append(chunk, n);
                            }
                          }
                          return status;
                        });
}

}  // namespace headway::api

namespace headway::api {

Result<int> HttpClient::Exec(std::string_view target, bool forward_stdin, bool tty) {
  namespace websocket = beast::websocket;
  using net::awaitable;
  using net::use_awaitable;
  std::string host, port;
  bool tls = false;
  HEADWAY_RETURN_IF_ERROR(ParseUrl(host, port, tls));
  const std::string host_header = HostHeader(host, port, tls);
  bool declined = false;
  auto result = OverConnection(
      host, port, base_url_, tls, ca_file_, connector_, [&](auto& stream) -> Result<int> {
        using Stream = std::remove_reference_t<decltype(stream)>;
        auto& io = static_cast<net::io_context&>(
            net::query(beast::get_lowest_layer(stream).get_executor(), net::execution::context));
        beast::get_lowest_layer(stream).expires_never();
        websocket::stream<Stream&> ws(stream);
        ws.set_option(websocket::stream_base::decorator([this](websocket::request_type& req) {
          req.set(http::field::user_agent, "headway-cli");
          req.set(http::field::sec_websocket_protocol, "v5.channel.k8s.io");
          if (!token_.empty()) req.set(http::field::authorization, "Bearer " + token_);
        }));
        beast::error_code ec;
        ws.handshake(host_header, std::string(target), ec);
        if (ec == websocket::error::upgrade_declined) {
          declined = true;
          return 0;
        }
        if (ec) return Unavailable("exec: " + ec.message());
        ws.binary(true);

        // One writer at a time on a WebSocket: what stdin and resizes send waits here.
        struct Outbox {
          explicit Outbox(net::any_io_executor e) : wake(e) {}
          std::deque<std::string> messages;
          net::steady_timer wake;
          bool done = false;
          void Push(std::string m) {
            messages.push_back(std::move(m));
            wake.cancel();
          }
        };
        auto executor = io.get_executor();
        Outbox outbox(executor);
        std::optional<int> exit_code;
        std::string failure;
        auto window = [] {
          struct winsize size {};
          if (::ioctl(0, TIOCGWINSZ, &size) != 0 || size.ws_col == 0) return std::string();
          return std::string(1, '\4') +
                 nlohmann::json{{"Width", size.ws_col}, {"Height", size.ws_row}}.dump();
        };
        if (tty) {
          if (std::string size = window(); !size.empty()) outbox.Push(size);
        }
        net::co_spawn(
            executor,
            [&]() -> awaitable<void> {
              while (!outbox.done) {
                while (!outbox.messages.empty()) {
                  std::string m = std::move(outbox.messages.front());
                  outbox.messages.pop_front();
                  beast::error_code write_ec;
                  co_await ws.async_write(net::buffer(m),
                                          net::redirect_error(use_awaitable, write_ec));
                  if (write_ec) co_return;
                }
                if (outbox.done) break;
                outbox.wake.expires_at(std::chrono::steady_clock::time_point::max());
                beast::error_code ignored;
                co_await outbox.wake.async_wait(net::redirect_error(use_awaitable, ignored));
              }
            },
            net::detached);
        // Lives as long as the session: each wait's handler starts the next.
        net::signal_set resizes(executor);
        std::function<void()> on_resize = [&] {
          resizes.async_wait([&](const beast::error_code& e, int) {
            if (e) return;
            if (std::string size = window(); !size.empty()) outbox.Push(size);
            on_resize();
          });
        };
        if (tty) {
          resizes.add(SIGWINCH);
          on_resize();
        }
        // This process's stdin: a pipe or terminal through the reactor, a regular
        // file (which epoll cannot watch) by plain reads.
        net::posix::stream_descriptor input(executor);
        if (forward_stdin) {
          struct stat st {};
          const bool regular = ::fstat(0, &st) == 0 && S_ISREG(st.st_mode);
          int fd = ::dup(0);
          if (!regular && fd >= 0) input.assign(fd);
          net::co_spawn(
              executor,
              [&, regular, fd]() -> awaitable<void> {
                std::vector<char> piece(32 * 1024);
                for (;;) {
                  std::size_t n = 0;
                  beast::error_code read_ec;
                  if (regular) {
                    ssize_t got = fd >= 0 ? ::read(fd, piece.data(), piece.size()) : 0;
                    if (got <= 0) read_ec = net::error::eof;
                    n = got > 0 ? static_cast<std::size_t>(got) : 0;
                    co_await net::post(executor, use_awaitable);  // let output through
                  } else {
                    n = co_await input.async_read_some(net::buffer(piece),
                                                       net::redirect_error(use_awaitable, read_ec));
                  }
                  if (n > 0) outbox.Push(std::string(1, '\0') + std::string(piece.data(), n));
                  if (read_ec) break;
                  // Backpressure: a command that does not read its stdin holds ours.
                  while (outbox.messages.size() > 64 && !outbox.done) {
                    net::steady_timer pause(executor, std::chrono::milliseconds(10));
                    beast::error_code ignored;
                    co_await pause.async_wait(net::redirect_error(use_awaitable, ignored));
                  }
                }
                if (regular && fd >= 0) ::close(fd);
                if (!tty) outbox.Push(std::string("\xff\0", 2));  // v5: its stdin ends
              },
              net::detached);
        }
        net::co_spawn(
            executor,
            [&]() -> awaitable<void> {
              beast::flat_buffer buffer;
              for (;;) {
                beast::error_code read_ec;
                co_await ws.async_read(buffer, net::redirect_error(use_awaitable, read_ec));
                if (read_ec) break;
                std::string m = beast::buffers_to_string(buffer.data());
                buffer.consume(buffer.size());
                if (m.empty()) continue;
                const char channel = m[0];
                if (channel == 1 || channel == 2) {
                  const int fd = channel;
                  for (std::size_t done = 1; done < m.size();) {
                    ssize_t w = ::write(fd, m.data() + done, m.size() - done);
                    if (w <= 0) break;
                    done += static_cast<std::size_t>(w);
                  }
                } else if (channel == 3) {
                  auto status = nlohmann::json::parse(m.substr(1), nullptr, false);
                  if (status.is_object() && status.value("status", "") == "Success") {
                    exit_code = 0;
                  } else if (status.is_object() &&
                             status.value("reason", "") == "NonZeroExitCode") {
                    exit_code = 1;
                    try {
                      exit_code = std::stoi(status["details"]["causes"][0].value("message", "1"));
                    } catch (const std::exception&) {
                    }
                  } else {
                    failure =
                        status.is_object() ? status.value("message", m.substr(1)) : m.substr(1);
                  }
                }
              }
              outbox.done = true;
              outbox.wake.cancel();
              beast::error_code ignored;
              resizes.cancel(ignored);
              input.close(ignored);
              io.stop();  // a stdin read on a regular file may still be queued
            },
            net::detached);
        io.restart();
        io.run();
        if (exit_code) return *exit_code;
        if (!failure.empty()) return Unavailable("exec: " + failure);
        return Unavailable("exec: the connection ended before the command did");
      });
  if (!declined) return result;
  // The server refused the upgrade: the same request without one says why.
  auto why = Request("GET", target);
  if (!why.ok()) return why.status();
  auto body = nlohmann::json::parse(why->body, nullptr, false);
  std::string message = body.is_object() && body.contains("error") && body["error"].is_object()
                            ? body["error"].value("message", why->body)
                            : why->body;
  StatusCode code = why->status == 401   ? StatusCode::kUnauthenticated
                    : why->status == 403 ? StatusCode::kPermissionDenied
                    : why->status == 404 ? StatusCode::kNotFound
                    : why->status == 409 ? StatusCode::kConflict
                    : why->status == 400 ? StatusCode::kInvalidArgument
                                         : StatusCode::kUnavailable;
  return Status(code, message);
}

}  // namespace headway::api
