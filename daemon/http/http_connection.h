// One HTTP/1.1 client connection on the loop thread: reads bytes, parses
// requests (HttpRequestParser: http_request_parser.h), enforces the limits,
// and writes response bytes. Loop thread only; nothing here blocks.
//
// One request at a time: after a whole request is parsed, parsing pauses
// until its response has ended (EndResponse), so pipelined requests are
// answered in order; their bytes wait in a buffer meanwhile.
//
// Limits: the request line and headers (max_header_bytes, max_headers: 431;
// http-parser's own bound on a head, 80 KiB, is 431 too), the body
// (max_body_bytes: 413, told by Content-Length before the body is read when
// it can be) and time: while no request is being answered, the client has
// idle_timeout_ms to send a whole request (a client trickling header bytes,
// slowloris, is closed like a silent one). A client that reads nothing is cut
// off past max_pending_write_bytes. A request whose head `admit_head` refuses
// (no API key) goes to on_request without its body, which is never read.
//
// Every request taken for answering is answered or its connection closed:
// when on_request throws, the client gets a 500 (or, once its response has
// begun, the connection closes). A connection the daemon closes after an
// answer the client may not have waited for (a refusal, `connection: close`)
// lingers: the response is sent and the sending side shut, then what the
// client still sends is read and dropped for up to kLingerMs, so that it
// reads the answer instead of a reset.
//
// Lifetime: the HttpServer holds the only owning reference; exchanges hold
// weak ones. End of input or a read error while a request is being answered
// means the client has gone: the connection closes and its close hooks run
// (cancelling the request's job). After Close() on_closed runs once both
// libuv handles are closed.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/http/http_request_parser.h"

namespace medq::daemon::http {

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  struct Limits {
    size_t max_header_bytes;
    size_t max_headers;
    size_t max_body_bytes;
    uint64_t idle_timeout_ms;
    size_t max_pending_write_bytes;
  };
  struct Callbacks {
    std::function<void(HttpConnection&, HttpRequest)> on_request;
    std::function<void(HttpConnection&)> on_closed;
    // Once a request's line and headers are parsed, before any byte of its
    // body is read (`body` is empty): false takes it to on_request at once
    // with body_unread set. Unset: every head is admitted.
    std::function<bool(const HttpRequest& head)> admit_head;
  };
  // How long a connection closed by the daemon goes on reading (and
  // dropping) what its client sends, at most.
  static constexpr uint64_t kLingerMs = 2000;

  // `tcp`: the listener is a TCP socket; else a Unix socket.
  HttpConnection(uv_loop_t* loop, uint64_t id, bool tcp, Limits limits, Callbacks callbacks);
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  int Accept(uv_stream_t* server);
  int fd() const;
  bool tcp() const { return tcp_; }
  void StartReading();

  // Queues bytes for writing. Dropped once closing.
  void Write(std::string bytes);
  // The current request's response is written: go on with the next request,
  // or close once written when the connection must not be kept.
  void EndResponse(bool keep_alive);
  // Answers a request that never reached a route (a parse error, a limit)
  // with `status` and a JSON error body, then closes.
  void Reject(int status, std::string_view message, std::string_view code);
  // Closes once the writes queued are out; `linger`: then reads and drops
  // what the client sends for up to kLingerMs first (see above).
  void CloseAfterWrites(bool linger = false);
  void Close();
  // Answering the current request failed (`what` is logged): a 500 when no
  // byte of its response is out yet, else the connection closes; either way
  // its close hooks run (its job is cancelled) and the connection closes.
  void FailRequest(std::string_view what);

  bool closing() const { return closing_ || shutting_down_; }
  // Runs `hook` when the connection closes; hooks of a request that has
  // ended are dropped at its end.
  void AddCloseHook(std::function<void()> hook) { close_hooks_.push_back(std::move(hook)); }
  uint64_t id() const { return id_; }
  // Keeps the current request's exchange alive until its response ends.
  void Hold(std::shared_ptr<void> exchange) { exchange_ = std::move(exchange); }

 private:
  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnIdle(uv_timer_t* timer);
  static void OnHandleClosed(uv_handle_t* handle);
  void Parse();
  void Linger();
  uv_stream_t* stream() { return &handle_.stream; }
  uv_handle_t* handle() { return &handle_.handle; }

  uint64_t id_;
  bool tcp_;
  Limits limits_;
  Callbacks callbacks_;
  union {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } handle_;
  uv_timer_t idle_timer_;
  HttpRequestParser parser_;
  std::string input_;  // read, not parsed yet
  bool answering_ = false;
  bool response_started_ = false;  // a byte of the current request's response was written
  bool reading_ = false;           // StartReading was called
  bool linger_after_shutdown_ = false;
  bool lingering_ = false;  // shut down; reading and dropping until the client's end
  bool parsing_ = false;
  std::shared_ptr<void> exchange_;
  char read_buffer_[64 * 1024];
  int open_handles_ = 2;
  bool closing_ = false;
  bool shutting_down_ = false;
  std::vector<std::function<void()>> close_hooks_;
  std::shared_ptr<HttpConnection> self_while_closing_;
};

// "HTTP/1.1 404 Not Found\r\n": the status line of `status`.
std::string StatusLine(int status);

// Every JSON text the endpoint writes: compact, with bytes that are not UTF-8
// (a path, a header, a token piece may hold them) replaced by U+FFFD, so that
// building a response never throws.
std::string DumpJson(const nlohmann::json& value);

}  // namespace medq::daemon::http
