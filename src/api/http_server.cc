#include "api/http_server.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "api/beast_request.h"
#include "api/gzip.h"
#include "core/ascii.h"

namespace headway::api {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using net::awaitable;
using net::use_awaitable;

std::string ErrorJson(std::string_view code, std::string_view message) {
  // Hand-built: the inputs are ours and need no escaping.
  return std::string(R"({"error":{"code":")") + std::string(code) + R"(","message":")" +
         std::string(message) + "\"}}";
}

// A name no other upload in flight has.
std::string RandomName() {
  static std::atomic<std::uint64_t> counter{0};
  std::random_device random;
  char text[40];
  std::snprintf(text, sizeof text, "%08x%08x-%llu", random(), random(),
                static_cast<unsigned long long>(counter.fetch_add(1)));
  return text;
}

class Server final : public HttpServer {
 public:
  Server(HttpServerOptions options, HttpHandler handler)
      : options_(std::move(options)), handler_(std::move(handler)), acceptor_(io_) {}

  ~Server() override { Stop(); }

  Status Listen() {
    if (!options_.tls_cert_file.empty()) {
      tls_ = std::make_unique<net::ssl::context>(net::ssl::context::tls_server);
      // TLS 1.2 at least; the library's default ciphers.
      tls_->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                        net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                        net::ssl::context::no_tlsv1_1 | net::ssl::context::single_dh_use);
      beast::error_code tls_ec;
      tls_->use_certificate_chain_file(options_.tls_cert_file, tls_ec);
      if (tls_ec) {
        return InvalidArgument("TLS certificate " + options_.tls_cert_file + ": " +
                               tls_ec.message());
      }
      tls_->use_private_key_file(options_.tls_key_file, net::ssl::context::pem, tls_ec);
      if (tls_ec) {
        return InvalidArgument("TLS key " + options_.tls_key_file + ": " + tls_ec.message());
      }
    }
    beast::error_code ec;
    auto address = net::ip::make_address(options_.address, ec);
    if (ec) return InvalidArgument("bad listen address '" + options_.address + "'");
    tcp::endpoint endpoint(address, static_cast<unsigned short>(options_.port));
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return Unavailable("cannot listen on " + options_.address + ":" +
                         std::to_string(options_.port) + ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint().port();
    net::co_spawn(io_, Accept(), net::detached);
    if (options_.handler_threads > 0) {
      pool_.emplace(static_cast<std::size_t>(options_.handler_threads));
    }
    for (int i = 0; i < std::max(1, options_.threads); ++i) {
      threads_.emplace_back([this] { io_.run(); });
    }
    return Status::Ok();
  }

  int port() const override { return port_; }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    io_.stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
    if (pool_) {
      pool_->stop();  // handlers not started are dropped; those running finish
      pool_->join();
    }
  }

 private:
  awaitable<void> Accept() {
    for (;;) {
      beast::error_code ec;
      tcp::socket socket = co_await acceptor_.async_accept(net::make_strand(io_),
                                                           net::redirect_error(use_awaitable, ec));
      if (ec) {
        if (ec == net::error::operation_aborted) co_return;
        continue;  // e.g. EMFILE: keep serving the connections we have
      }
      auto executor = socket.get_executor();
      if (tls_) {
        net::co_spawn(executor, TlsSession(std::move(socket)), net::detached);
      } else {
        net::co_spawn(executor, Session(std::make_shared<beast::tcp_stream>(std::move(socket))),
                      net::detached);
      }
    }
  }

  awaitable<void> TlsSession(tcp::socket socket) {
    using TlsStream = beast::ssl_stream<beast::tcp_stream>;
    auto stream = std::make_shared<TlsStream>(beast::tcp_stream(std::move(socket)), *tls_);
    // The handshake comes before any header: the same short deadline.
    beast::get_lowest_layer(*stream).expires_after(
        std::min(options_.header_timeout, options_.read_timeout));
    beast::error_code ec;
    co_await stream->async_handshake(net::ssl::stream_base::server,
                                     net::redirect_error(use_awaitable, ec));
    if (ec) co_return;  // not TLS, or gave up: nothing to answer in plain text
    co_await Session(stream);
  }

  enum class Slot { kNone, kGeneral, kReserved };

  // Holds a connection's slot (see Admission in the header) until it closes.
  class Admission {
   public:
    Admission(Server& server, std::string client) : server_(server), client_(std::move(client)) {
      std::lock_guard lock(server_.admission_mu_);
      int& mine = server_.per_client_[client_];
      int cap =
          std::min(server_.options_.max_connections_per_client, server_.options_.max_connections);
      if (server_.general_ < server_.options_.max_connections && mine < cap) {
        ++server_.general_;
        ++mine;
        slot_ = Slot::kGeneral;
      } else if (server_.reserved_ < server_.options_.reserved_connections &&
                 server_.options_.reserved_for) {
        ++server_.reserved_;
        slot_ = Slot::kReserved;
      }
      if (mine == 0) server_.per_client_.erase(client_);
    }
    ~Admission() {
      std::lock_guard lock(server_.admission_mu_);
      if (slot_ == Slot::kGeneral) {
        --server_.general_;
        auto it = server_.per_client_.find(client_);
        if (it != server_.per_client_.end() && --it->second <= 0) server_.per_client_.erase(it);
      } else if (slot_ == Slot::kReserved) {
        --server_.reserved_;
      }
    }
    Slot slot() const { return slot_; }

   private:
    Server& server_;
    std::string client_;
    Slot slot_ = Slot::kNone;
  };

  // One connection: requests in turn until the client closes, a stream
  // response ends it, or it idles past the read timeout. `Stream` is a
  // beast::tcp_stream or a TLS stream over one.
  template <class Stream>
  awaitable<void> Session(std::shared_ptr<Stream> stream) {
    auto& tcp_layer = beast::get_lowest_layer(*stream);
    beast::error_code peer_ec;
    auto peer = tcp_layer.socket().remote_endpoint(peer_ec);
    Admission admission(*this, peer_ec ? std::string() : peer.address().to_string());
    beast::flat_buffer buffer;
    if (admission.slot() == Slot::kNone) {
      co_await WriteSimple(*stream, 503, ErrorJson("Unavailable", "too many connections"), false);
      co_return;
    }
    for (;;) {
      http::request_parser<http::string_body> parser;
      // The body's limit depends on where it goes (memory or a file): set
      // once the headers say which.
      parser.body_limit(std::numeric_limits<std::uint64_t>::max());
      parser.header_limit(16 * 1024);
      beast::error_code ec;
      // Headers first, on a short deadline, for every request: a new socket
      // that sends nothing and a kept-alive one left idle both give their
      // slot back soon (clients reconnect, as after Apache's KeepAliveTimeout).
      tcp_layer.expires_after(std::min(options_.header_timeout, options_.read_timeout));
      co_await http::async_read_header(*stream, buffer, parser,
                                       net::redirect_error(use_awaitable, ec));
      if (!ec && options_.body_to_file && WantsFileBody(parser.get())) {
        bool keep_going = co_await ServeFileBody(stream, buffer, std::move(parser), admission);
        if (keep_going) continue;
        break;
      }
      std::size_t body_limit = options_.max_body_bytes;
      if (!ec && options_.large_body_for) {
        HttpRequest probe = RequestHead(parser.get());
        if (options_.large_body_for(probe.method, probe.path))
          body_limit = options_.max_large_body_bytes;
      }
      if (!ec) {
        if (parser.content_length() && *parser.content_length() > body_limit) {
          ec = http::error::body_limit;
        } else {
          parser.body_limit(body_limit);
          tcp_layer.expires_after(options_.read_timeout);
          co_await http::async_read(*stream, buffer, parser,
                                    net::redirect_error(use_awaitable, ec));
        }
      }
      if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
          ec == net::error::operation_aborted || ec == net::error::connection_reset ||
          ec == net::error::eof || ec == net::ssl::error::stream_truncated) {
        break;
      }
      if (ec == http::error::body_limit) {
        co_await RefuseTooLarge(*stream, "request body", body_limit);
        co_return;
      }
      if (ec == http::error::header_limit) {
        co_await WriteSimple(*stream, 431,
                             ErrorJson("InvalidArgument", "request headers too large"), false);
        break;
      }
      if (ec) {
        co_await WriteSimple(*stream, 400, ErrorJson("InvalidArgument", "malformed HTTP request"),
                             false);
        break;
      }
      http::request<http::string_body> raw = parser.release();
      bool keep_alive = raw.keep_alive();
      HttpRequest req = ToHttpRequest(raw);
      if (admission.slot() == Slot::kReserved && !options_.reserved_for(req.method, req.path)) {
        co_await WriteSimple(*stream, 503, ErrorJson("Unavailable", "too many connections"), false);
        break;
      }

      if (!co_await Answer(stream, req, raw.version(), keep_alive, &buffer)) break;
    }
    beast::error_code ignored;
    tcp_layer.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  // Calls the handler and writes its answer. Returns whether the connection
  // may serve another request.
  // `buffer` holds what the client sent after the request, if the caller
  // has such a buffer (a proxied WebSocket's first frames).
  template <class Stream>
  awaitable<bool> Answer(std::shared_ptr<Stream> stream, const HttpRequest& req, unsigned version,
                         bool keep_alive, beast::flat_buffer* buffer = nullptr) {
    HttpResponse resp = co_await CallHandler(req);
    while (resp.deferred) resp = co_await Deferred(std::move(resp.deferred));
    if (resp.attach) {
      co_await Attach(stream, req, resp.attach);
      co_return false;
    }
    if (resp.proxy) {
      beast::flat_buffer none;
      co_return co_await Relay(stream, req, *resp.proxy, keep_alive, buffer ? *buffer : none);
    }
    const bool gzip = Compressible(req, resp);
    if (resp.stream) {
      co_await WriteStream(stream, version, resp, gzip);
      co_return false;
    }
    http::response<http::string_body> out{static_cast<http::status>(resp.status), version};
    out.set(http::field::server, "headway");
    out.set(http::field::content_type, resp.content_type);
    for (const auto& [k, v] : resp.headers) out.set(k, v);
    if (gzip && resp.body.size() >= kMinGzipBytes) {
      out.set(http::field::content_encoding, "gzip");
      out.body() = Gzip(resp.body);
      resp.body = {};
    } else {
      out.body() = std::move(resp.body);
    }
    if (gzip) out.set(http::field::vary, "Accept-Encoding");
    out.keep_alive(keep_alive);
    out.prepare_payload();
    beast::error_code ec;
    co_await http::async_write(*stream, out, net::redirect_error(use_awaitable, ec));
    co_return !ec && keep_alive;
  }

  // Runs the handler: on this I/O thread for requests options_.inline_for
  // accepts, else on the handler pool, so a handler that blocks holds no
  // I/O thread. `req` lives in the caller's frame until this returns: a
  // frame waiting here is only destroyed with the io_context, after Stop()
  // has joined the pool.
  awaitable<HttpResponse> CallHandler(const HttpRequest& req) {
    if (!pool_ || (options_.inline_for && options_.inline_for(req.method, req.path))) {
      co_return SafeCall(req);
    }
    auto deferred = std::make_shared<DeferredResponse>();
    net::post(*pool_, [this, &req, deferred] { deferred->Complete(SafeCall(req)); });
    co_return co_await Deferred(std::move(deferred));
  }

  HttpResponse SafeCall(const HttpRequest& req) {
    try {
      return handler_(req);
    } catch (const std::exception& e) {
      HttpResponse failed;
      failed.status = 500;
      failed.body = ErrorJson("Internal", "internal error");
      return failed;
    }
  }

  // Waits for a deferred answer on this connection's strand: Complete()
  // posts a cancel of the timer the coroutine waits on. The timer is
  // reached through a weak pointer, and the guard detaches the wake, so a
  // completion after the connection went touches nothing of it.
  static awaitable<HttpResponse> Deferred(std::shared_ptr<DeferredResponse> deferred) {
    auto executor = co_await net::this_coro::executor;
    auto timer =
        std::make_shared<net::steady_timer>(executor, std::chrono::steady_clock::time_point::max());
    std::weak_ptr<net::steady_timer> weak = timer;
    if (deferred->Await([executor, weak] {
          net::post(executor, [weak] {
            if (auto t = weak.lock()) t->cancel();
          });
        })) {
      struct Detach {
        DeferredResponse& d;
        ~Detach() { d.Detach(); }
      } detach{*deferred};
      beast::error_code ignored;
      co_await timer->async_wait(net::redirect_error(use_awaitable, ignored));
    }
    co_return deferred->Take();
  }

  // Whether to send `resp` gzip-encoded: the client accepts it, the type is
  // text, and the handler set no encoding of its own.
  static bool Compressible(const HttpRequest& req, const HttpResponse& resp) {
    if (!AcceptsGzip(req.Header("accept-encoding")) || !WorthGzip(resp.content_type)) {
      return false;
    }
    for (const auto& [k, v] : resp.headers) {
      if (EqualsIgnoringCase(k, "content-encoding")) return false;
    }
    return true;
  }

  // Sends `req` on to `target` and its answer back (see ProxyTarget).
  // Returns whether the client's connection may serve another request.
  template <class Stream>
  awaitable<bool> Relay(std::shared_ptr<Stream> stream, const HttpRequest& req,
                        const ProxyTarget& target, bool keep_alive,
                        beast::flat_buffer& client_buffer) {
    auto& client_tcp = beast::get_lowest_layer(*stream);
    const bool upgrade = AsciiLower(req.Header("upgrade")) == "websocket";
    http::request<http::string_body> out;
    out.method_string(req.method);
    out.target(req.target);
    out.version(11);
    // Hop-by-hop headers are the proxy's own (RFC 9110, 7.6.1).
    static const std::vector<std::string> kHopByHop = {
        "connection", "keep-alive",        "proxy-connection", "proxy-authorization", "te",
        "trailer",    "transfer-encoding", "upgrade",          "content-length"};
    for (const auto& [name, value] : req.headers) {
      if (std::find(kHopByHop.begin(), kHopByHop.end(), name) != kHopByHop.end()) continue;
      if (std::find(target.remove_headers.begin(), target.remove_headers.end(), name) !=
          target.remove_headers.end()) {
        continue;
      }
      out.set(name, value);
    }
    for (const auto& [name, value] : target.set_headers) out.set(name, value);
    if (upgrade) {
      out.set(http::field::connection, "Upgrade");
      out.set(http::field::upgrade, req.Header("upgrade"));
    } else {
      out.set(http::field::connection, "close");
    }
    out.body() = req.body;
    out.prepare_payload();

    // Connect, send, read the answer's head: a failure at any step is one 502.
    auto upstream = std::make_shared<beast::tcp_stream>(co_await net::this_coro::executor);
    beast::error_code ec;
    if (target.connect) {
      auto fd = target.connect();
      if (!fd.ok()) {
        ec = net::error::connection_refused;
      } else {
        upstream->socket().assign(tcp::v4(), *fd, ec);
        if (ec) ::close(*fd);
      }
    } else {
      auto address = net::ip::make_address(target.host, ec);
      if (!ec) {
        upstream->expires_after(std::chrono::seconds(10));
        co_await upstream->async_connect(
            tcp::endpoint(address, static_cast<unsigned short>(target.port)),
            net::redirect_error(use_awaitable, ec));
      }
    }
    if (!ec) {
      upstream->expires_after(options_.read_timeout);
      co_await http::async_write(*upstream, out, net::redirect_error(use_awaitable, ec));
    }
    beast::flat_buffer up_buffer;
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    if (!ec) {
      // An upstream may think for a while (a notebook saving a large file).
      upstream->expires_after(std::chrono::minutes(5));
      co_await http::async_read_header(*upstream, up_buffer, parser,
                                       net::redirect_error(use_awaitable, ec));
    }
    if (ec) {
      if (target.on_answer) target.on_answer(0);
      co_await WriteSimple(
          *stream, 502, ErrorJson("Unavailable", "the upstream server did not answer"), keep_alive);
      co_return keep_alive;
    }
    auto& head = parser.get();
    if (target.on_answer) target.on_answer(head.result_int());
    if (target.rewrite_set_cookie) {
      std::vector<std::string> cookies;
      for (const auto& field : head) {
        if (field.name() == http::field::set_cookie) cookies.emplace_back(field.value());
      }
      head.erase(http::field::set_cookie);
      for (const std::string& cookie : cookies) {
        head.insert(http::field::set_cookie, target.rewrite_set_cookie(cookie));
      }
    }
    for (const auto& [name, value] : target.default_response_headers) {
      if (head.find(name) == head.end()) head.set(name, value);
    }
    if (upgrade && head.result() == http::status::switching_protocols) {
      http::response<http::empty_body> switched{head.base()};
      client_tcp.expires_after(std::chrono::seconds(10));
      co_await http::async_write(*stream, switched, net::redirect_error(use_awaitable, ec));
      if (ec) co_return false;
      co_await Tunnel(stream, upstream, client_buffer, up_buffer);
      co_return false;
    }
    // The answer's own framing (length or chunks) is kept; until EOF only
    // when it has neither, and then the client's connection ends with it.
    const bool until_eof = parser.need_eof();
    head.keep_alive(keep_alive && !until_eof);
    http::response_serializer<http::buffer_body> serializer{head};
    client_tcp.expires_after(options_.read_timeout);
    co_await http::async_write_header(*stream, serializer, net::redirect_error(use_awaitable, ec));
    std::vector<char> piece(64 * 1024);
    while (!ec && !parser.is_done()) {
      head.body().data = piece.data();
      head.body().size = piece.size();
      upstream->expires_after(std::chrono::minutes(5));
      co_await http::async_read(*upstream, up_buffer, parser,
                                net::redirect_error(use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      if (ec) break;
      head.body().size = piece.size() - head.body().size;
      head.body().data = piece.data();
      head.body().more = !parser.is_done();
      client_tcp.expires_after(options_.read_timeout);
      co_await http::async_write(*stream, serializer, net::redirect_error(use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
    }
    if (!ec && !serializer.is_done()) {
      head.body().data = nullptr;
      head.body().size = 0;
      head.body().more = false;
      co_await http::async_write(*stream, serializer, net::redirect_error(use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
    }
    beast::error_code ignored;
    upstream->socket().shutdown(tcp::socket::shutdown_both, ignored);
    co_return !ec && keep_alive && !until_eof;
  }

  // Copies bytes both ways between the client and an upstream until either
  // side closes, starting with what each already sent past the handshake.
  template <class Stream>
  awaitable<void> Tunnel(std::shared_ptr<Stream> stream,
                         std::shared_ptr<beast::tcp_stream> upstream,
                         beast::flat_buffer& client_buffer, beast::flat_buffer& up_buffer) {
    // A kernel's socket may rightly be quiet for hours.
    beast::get_lowest_layer(*stream).expires_never();
    upstream->expires_never();
    std::string client_first = beast::buffers_to_string(client_buffer.data());
    client_buffer.consume(client_buffer.size());
    std::string up_first = beast::buffers_to_string(up_buffer.data());
    auto close_both = [stream, upstream] {
      beast::error_code ignored;
      beast::get_lowest_layer(*stream).socket().shutdown(tcp::socket::shutdown_both, ignored);
      upstream->socket().shutdown(tcp::socket::shutdown_both, ignored);
    };
    // Client to upstream on its own coroutine (same strand); upstream to
    // client here. Whichever side ends first shuts both down, which ends the other.
    net::co_spawn(
        stream->get_executor(),
        [stream, upstream, first = std::move(client_first), close_both]() -> awaitable<void> {
          co_await Pipe(stream, upstream, first);
          close_both();
        },
        net::detached);
    co_await Pipe(upstream, stream, std::move(up_first));
    close_both();
  }

  // Writes `first`, then copies what `from` sends to `to` until either fails.
  template <class From, class To>
  static awaitable<void> Pipe(std::shared_ptr<From> from, std::shared_ptr<To> to,
                              std::string first) {
    beast::error_code ec;
    if (!first.empty()) {
      co_await net::async_write(*to, net::buffer(first), net::redirect_error(use_awaitable, ec));
    }
    std::vector<char> piece(64 * 1024);
    while (!ec) {
      std::size_t n = co_await from->async_read_some(net::buffer(piece),
                                                     net::redirect_error(use_awaitable, ec));
      if (ec) break;
      co_await net::async_write(*to, net::buffer(piece.data(), n),
                                net::redirect_error(use_awaitable, ec));
    }
  }

  // Runs the WebSocket of an attached process (see AttachedProcess).
  template <class Stream>
  awaitable<void> Attach(std::shared_ptr<Stream> stream, const HttpRequest& req,
                         std::shared_ptr<AttachedProcess> process) {
    namespace websocket = beast::websocket;
    using Descriptor = net::posix::stream_descriptor;
    auto executor = co_await net::this_coro::executor;
    // The descriptors are the server's from here on, whatever happens.
    auto input = std::make_shared<Descriptor>(executor);
    auto output = std::make_shared<Descriptor>(executor);
    auto error = std::make_shared<Descriptor>(executor);
    if (process->input >= 0) input->assign(process->input);
    if (process->output >= 0) output->assign(process->output);
    if (process->error >= 0) error->assign(process->error);
    struct Ending {
      std::shared_ptr<AttachedProcess> process;
      std::optional<int> code;
      ~Ending() {
        if (process->on_end) process->on_end(code);
      }
    } ending{process, std::nullopt};

    http::request<http::string_body> upgrade{http::verb::get, req.target, 11};
    for (const auto& [name, value] : req.headers) upgrade.set(name, value);
    // The newest of Kubernetes' channel protocols the client offers.
    std::string offered = req.Header("sec-websocket-protocol");
    std::string protocol;
    for (const char* p : {"v5.channel.k8s.io", "v4.channel.k8s.io", "base.channel.k8s.io"}) {
      if (protocol.empty() && offered.find(p) != std::string::npos) protocol = p;
    }
    const bool v5 = protocol == "v5.channel.k8s.io";
    auto ws = std::make_shared<websocket::stream<Stream&>>(*stream);
    ws->set_option(websocket::stream_base::decorator([protocol](websocket::response_type& res) {
      res.set(http::field::server, "headway");
      if (!protocol.empty()) res.set(http::field::sec_websocket_protocol, protocol);
    }));
    // Pings keep a quiet shell's connection open and find a vanished client.
    beast::get_lowest_layer(*stream).expires_never();
    ws->set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
    beast::error_code ec;
    co_await ws->async_accept(upgrade, net::redirect_error(use_awaitable, ec));
    if (ec) {
      if (process->kill) process->kill();
      co_return;
    }
    ws->binary(true);

    struct Outbox {
      explicit Outbox(net::any_io_executor e) : wake(e) {}
      std::deque<std::string> messages;
      net::steady_timer wake;
      int producing = 0;
      bool client_gone = false;
      void Push(std::string message) {
        messages.push_back(std::move(message));
        wake.cancel();
      }
    };
    auto outbox = std::make_shared<Outbox>(executor);
    // Output to its channel, as it comes; at most 64 messages wait for a slow client.
    // Everything it uses is a parameter, which the coroutine's frame keeps: a
    // capture would live in this closure, gone once Attach returns while a
    // read is still pending (the client went first).
    auto pump = [](std::shared_ptr<Outbox> outbox, std::shared_ptr<Descriptor> from,
                   char channel) -> awaitable<void> {
      std::vector<char> piece(32 * 1024);
      net::steady_timer pause(co_await net::this_coro::executor);
      for (;;) {
        while (outbox->messages.size() > 64 && !outbox->client_gone) {
          pause.expires_after(std::chrono::milliseconds(10));
          beast::error_code ignored;
          co_await pause.async_wait(net::redirect_error(use_awaitable, ignored));
        }
        if (outbox->client_gone) break;
        beast::error_code read_ec;
        std::size_t n = co_await from->async_read_some(net::buffer(piece),
                                                       net::redirect_error(use_awaitable, read_ec));
        if (n > 0) outbox->Push(std::string(1, channel) + std::string(piece.data(), n));
        if (read_ec) break;  // EOF, or EIO once a terminal's last holder closed it
      }
      --outbox->producing;
      outbox->wake.cancel();
    };
    for (auto [descriptor, channel] : {std::pair{output, '\1'}, std::pair{error, '\2'}}) {
      if (!descriptor->is_open()) continue;
      ++outbox->producing;
      net::co_spawn(executor, pump(outbox, descriptor, channel), net::detached);
    }
    // What the client sends: stdin, resizes, and (v5) the end of its stdin.
    net::co_spawn(
        executor,
        [stream, ws, input, process, outbox, v5]() -> awaitable<void> {
          beast::flat_buffer buffer;
          for (;;) {
            beast::error_code read_ec;
            co_await ws->async_read(buffer, net::redirect_error(use_awaitable, read_ec));
            if (read_ec) break;
            std::string message = beast::buffers_to_string(buffer.data());
            buffer.consume(buffer.size());
            if (message.empty()) continue;
            const char channel = message[0];
            message.erase(0, 1);
            if (channel == 0 && input->is_open() && !message.empty()) {
              beast::error_code write_ec;
              co_await net::async_write(*input, net::buffer(message),
                                        net::redirect_error(use_awaitable, write_ec));
            } else if (channel == 4 && process->resize) {
              auto size = nlohmann::json::parse(message, nullptr, false);
              if (size.is_object() && size.value("Width", 0) > 0 && size.value("Height", 0) > 0) {
                process->resize(size.value("Width", 80), size.value("Height", 24));
              }
            } else if (channel == '\xff' && v5 && message.size() == 1 && message[0] == 0) {
              // Its stdin ends; a terminal's master stays open (it is also the output).
              if (process->error >= 0) {
                beast::error_code ignored;
                input->close(ignored);
              }
            }
          }
          outbox->client_gone = true;
          outbox->wake.cancel();
          if (process->kill) process->kill();
        },
        net::detached);

    while (!outbox->client_gone) {
      while (!outbox->messages.empty() && !outbox->client_gone) {
        std::string message = std::move(outbox->messages.front());
        outbox->messages.pop_front();
        co_await ws->async_write(net::buffer(message), net::redirect_error(use_awaitable, ec));
        if (ec) outbox->client_gone = true;
      }
      if (outbox->producing == 0 && outbox->messages.empty()) break;
      if (outbox->client_gone) break;
      outbox->wake.expires_at(std::chrono::steady_clock::time_point::max());
      beast::error_code ignored;
      co_await outbox->wake.async_wait(net::redirect_error(use_awaitable, ignored));
    }
    // Its output has ended (or the client went): wait for it to exit.
    net::steady_timer poll(executor);
    for (;;) {
      ending.code = process->exit_code ? process->exit_code() : std::optional<int>(0);
      if (ending.code) break;
      poll.expires_after(std::chrono::milliseconds(outbox->client_gone ? 20 : 50));
      beast::error_code ignored;
      co_await poll.async_wait(net::redirect_error(use_awaitable, ignored));
    }
    if (outbox->client_gone) co_return;
    nlohmann::json status = {{"metadata", nlohmann::json::object()}, {"status", "Success"}};
    if (*ending.code != 0) {
      status = {
          {"metadata", nlohmann::json::object()},
          {"status", "Failure"},
          {"message",
           "command terminated with non-zero exit code: " + std::to_string(*ending.code)},
          {"reason", "NonZeroExitCode"},
          {"details",
           {{"causes", {{{"reason", "ExitCode"}, {"message", std::to_string(*ending.code)}}}}}}};
    }
    std::string last = std::string(1, '\3') + status.dump();
    co_await ws->async_write(net::buffer(last), net::redirect_error(use_awaitable, ec));
    co_await ws->async_close(websocket::close_code::normal, net::redirect_error(use_awaitable, ec));
  }

  bool WantsFileBody(const http::request<http::string_body>& head) const {
    HttpRequest probe = RequestHead(head);
    return options_.body_to_file(probe.method, probe.path);
  }

  // Reads the body of a request whose headers are read into a file, then
  // answers it. Returns whether the connection may serve another request.
  template <class Stream>
  awaitable<bool> ServeFileBody(std::shared_ptr<Stream> stream, beast::flat_buffer& buffer,
                                http::request_parser<http::string_body>&& head_parser,
                                const Admission& admission) {
    auto& tcp_layer = beast::get_lowest_layer(*stream);
    // A declared length over the limit is refused before anything is read;
    // an undeclared one (chunked) as soon as it passes the limit.
    if (head_parser.content_length() &&
        *head_parser.content_length() > options_.max_file_body_bytes) {
      co_await RefuseTooLarge(*stream, "upload", options_.max_file_body_bytes);
      co_return false;
    }
    http::request_parser<http::file_body> parser{std::move(head_parser)};
    parser.body_limit(options_.max_file_body_bytes);
    std::string path = options_.file_body_dir + "/upload-" + RandomName();
    // 0600 from the start: the file is made before beast opens it.
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);
    struct RemoveAfter {
      std::string path;
      ~RemoveAfter() { ::unlink(path.c_str()); }
    } remove_after{path};
    beast::error_code ec;
    if (fd >= 0) parser.get().body().open(path.c_str(), beast::file_mode::write_existing, ec);
    if (fd < 0 || ec) {
      co_await WriteSimple(*stream, 503, ErrorJson("Unavailable", "cannot take an upload now"),
                           false);
      co_return false;
    }
    // Each read must bring something within the read timeout; the whole body
    // may take as long as it needs. Reads fill what the buffer holds, which
    // after the headers is a few KiB: room for 1 MiB makes each read (and
    // each completion handed between the I/O threads) 1 MiB, not 2 KiB.
    buffer.reserve(1 << 20);
    while (!ec && !parser.is_done()) {
      tcp_layer.expires_after(options_.read_timeout);
      co_await http::async_read_some(*stream, buffer, parser,
                                     net::redirect_error(use_awaitable, ec));
    }
    if (ec == http::error::body_limit) {
      co_await RefuseTooLarge(*stream, "upload", options_.max_file_body_bytes);
      co_return false;
    }
    if (ec) co_return false;  // the client went away or stalled: nothing was stored
    buffer.shrink_to_fit();   // a kept-alive connection does not keep the 1 MiB
    parser.get().body().close();
    auto& raw = parser.get();
    HttpRequest req = RequestHead(raw);
    req.body_file = path;
    if (admission.slot() == Slot::kReserved && !options_.reserved_for(req.method, req.path)) {
      co_await WriteSimple(*stream, 503, ErrorJson("Unavailable", "too many connections"), false);
      co_return false;
    }
    co_return co_await Answer(stream, req, raw.version(), raw.keep_alive());
  }

  // 413 for a body over `limit` bytes ("request body exceeds N bytes"), then
  // a lingering close: the rest of the body is still arriving.
  template <class Stream>
  awaitable<void> RefuseTooLarge(Stream& stream, std::string what, std::uint64_t limit) {
    co_await WriteSimple(
        stream, 413,
        ErrorJson("PayloadTooLarge", what + " exceeds " + std::to_string(limit) + " bytes"), false);
    co_await LingeringClose(stream);
  }

  // After refusing a request whose body is still arriving, read and drop what
  // the client sends for a moment before closing, so it gets to read our
  // answer instead of a connection reset.
  template <class Stream>
  awaitable<void> LingeringClose(Stream& stream) {
    auto& tcp_layer = beast::get_lowest_layer(stream);
    beast::error_code ec;
    tcp_layer.socket().shutdown(tcp::socket::shutdown_send, ec);
    tcp_layer.expires_after(std::chrono::seconds(2));
    std::vector<char> sink(64 * 1024);
    std::size_t drained = 0;
    // Raw bytes, also under TLS: the connection is closing, they are dropped.
    while (!ec && drained < 16 * options_.max_body_bytes) {
      drained += co_await tcp_layer.async_read_some(net::buffer(sink),
                                                    net::redirect_error(use_awaitable, ec));
    }
  }

  template <class Stream>
  awaitable<void> WriteSimple(Stream& stream, int status, std::string body, bool keep_alive) {
    http::response<http::string_body> out{static_cast<http::status>(status), 11};
    out.set(http::field::server, "headway");
    out.set(http::field::content_type, "application/json");
    out.body() = std::move(body);
    out.keep_alive(keep_alive);
    out.prepare_payload();
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(10));
    beast::error_code ec;
    co_await http::async_write(stream, out, net::redirect_error(use_awaitable, ec));
  }

  // Streams resp.stream as a chunked body until it completes or the client goes away.
  template <class Stream>
  awaitable<void> WriteStream(std::shared_ptr<Stream> stream, unsigned version, HttpResponse& resp,
                              bool gzip) {
    auto& tcp_layer = beast::get_lowest_layer(*stream);
    http::response<http::empty_body> head{static_cast<http::status>(resp.status), version};
    head.set(http::field::server, "headway");
    head.set(http::field::content_type, resp.content_type);
    head.set(http::field::cache_control, "no-cache");
    for (const auto& [k, v] : resp.headers) head.set(k, v);
    // Compressed piece by piece, each flushed whole: an event is readable
    // as soon as its chunk arrives.
    std::unique_ptr<GzipEncoder> encoder;
    if (gzip) {
      encoder = std::make_unique<GzipEncoder>();
      head.set(http::field::content_encoding, "gzip");
      head.set(http::field::vary, "Accept-Encoding");
    }
    head.chunked(true);
    head.keep_alive(false);
    http::response_serializer<http::empty_body> serializer{head};
    beast::error_code ec;
    tcp_layer.expires_after(std::chrono::seconds(10));
    co_await http::async_write_header(*stream, serializer, net::redirect_error(use_awaitable, ec));
    if (ec) co_return;
    // A stream lasts as long as the client wants it. Clear the deadline now,
    // before any chunk write is pending: the stream's timer is not reset
    // under a pending operation, and the first write past the header's 10 s
    // would fail.
    tcp_layer.expires_never();

    // A pending read notices the client hanging up while we have nothing to send.
    auto closed = std::make_shared<std::atomic<bool>>(false);
    net::co_spawn(
        stream->get_executor(),
        [stream, closed]() -> awaitable<void> {
          char byte;
          beast::error_code read_ec;
          for (;;) {
            co_await stream->async_read_some(net::buffer(&byte, 1),
                                             net::redirect_error(use_awaitable, read_ec));
            if (read_ec) break;
          }
          closed->store(true);
        },
        net::detached);

    net::steady_timer timer(stream->get_executor());
    std::string pending = std::move(resp.body);
    bool more = true;
    while (!closed->load()) {
      if (more) more = resp.stream->Next(pending);
      if (encoder && !pending.empty()) pending = encoder->Add(pending, /*flush=*/true);
      if (encoder && !more) pending += encoder->Finish();
      if (!pending.empty()) {
        co_await net::async_write(*stream, http::make_chunk(net::buffer(pending)),
                                  net::redirect_error(use_awaitable, ec));
        if (ec) break;
        pending.clear();
      }
      if (!more) {
        co_await net::async_write(*stream, http::make_chunk_last(),
                                  net::redirect_error(use_awaitable, ec));
        break;
      }
      timer.expires_after(resp.stream->interval());
      co_await timer.async_wait(net::redirect_error(use_awaitable, ec));
    }
    beast::error_code ignored;
    tcp_layer.socket().shutdown(tcp::socket::shutdown_both, ignored);
    tcp_layer.socket().close(ignored);
  }

  HttpServerOptions options_;
  HttpHandler handler_;
  std::unique_ptr<net::ssl::context> tls_;  // set: the listener speaks TLS only
  // Everything a session touches is declared before io_: sessions still
  // pending when the server goes are destroyed with io_, and their
  // Admission gives its slot back here.
  std::mutex admission_mu_;
  int general_ = 0;                        // guarded by admission_mu_
  int reserved_ = 0;                       // guarded by admission_mu_
  std::map<std::string, int> per_client_;  // guarded by admission_mu_: general slots by address
  std::atomic<bool> stopped_{false};
  int port_ = 0;
  net::io_context io_;
  tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
  std::optional<net::thread_pool> pool_;  // the handler threads (options_.handler_threads)
};

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                      HttpHandler handler) {
  auto server = std::make_unique<Server>(options, std::move(handler));
  HEADWAY_RETURN_IF_ERROR(server->Listen());
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace headway::api
