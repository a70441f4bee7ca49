#include "daemon/http/http_connection.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "daemon/uv_guard.h"

namespace medq::daemon::http {
namespace {

struct HttpWriteRequest {
  uv_write_t req;
  std::string data;
};

}  // namespace

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string StatusLine(int status) {
  const char* reason = "Unknown";
  switch (status) {
    case 200:
      reason = "OK";
      break;
    case 204:
      reason = "No Content";
      break;
    case 400:
      reason = "Bad Request";
      break;
    case 401:
      reason = "Unauthorized";
      break;
    case 403:
      reason = "Forbidden";
      break;
    case 404:
      reason = "Not Found";
      break;
    case 405:
      reason = "Method Not Allowed";
      break;
    case 408:
      reason = "Request Timeout";
      break;
    case 409:
      reason = "Conflict";
      break;
    case 411:
      reason = "Length Required";
      break;
    case 413:
      reason = "Content Too Large";
      break;
    case 415:
      reason = "Unsupported Media Type";
      break;
    case 429:
      reason = "Too Many Requests";
      break;
    case 431:
      reason = "Request Header Fields Too Large";
      break;
    case 500:
      reason = "Internal Server Error";
      break;
    case 501:
      reason = "Not Implemented";
      break;
    case 503:
      reason = "Service Unavailable";
      break;
    case 504:
      reason = "Gateway Timeout";
      break;
    case 505:
      reason = "HTTP Version Not Supported";
      break;
    default:
      break;
  }
  return "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
}

HttpConnection::HttpConnection(uv_loop_t* loop, uint64_t id, bool tcp, Limits limits,
                               Callbacks callbacks)
    : id_(id),
      tcp_(tcp),
      limits_(limits),
      callbacks_(std::move(callbacks)),
      parser_({limits.max_header_bytes, limits.max_headers, limits.max_body_bytes},
              callbacks_.admit_head) {
  if (tcp_) {
    uv_tcp_init(loop, &handle_.tcp);
  } else {
    uv_pipe_init(loop, &handle_.pipe, 0);
  }
  uv_timer_init(loop, &idle_timer_);
  handle_.handle.data = this;
  idle_timer_.data = this;
}

int HttpConnection::Accept(uv_stream_t* server) {
  int rc = uv_accept(server, stream());
  if (rc == 0 && tcp_) uv_tcp_nodelay(&handle_.tcp, 1);
  return rc;
}

int HttpConnection::fd() const {
  uv_os_fd_t fd = -1;
  uv_fileno(&handle_.handle, &fd);
  return fd;
}

void HttpConnection::StartReading() {
  reading_ = true;
  uv_read_start(stream(), &HttpConnection::OnAlloc, &HttpConnection::OnRead);
  uv_timer_start(&idle_timer_, &HttpConnection::OnIdle, limits_.idle_timeout_ms, 0);
}

// The libuv callbacks below run their bodies in GuardCallback
// (loop/uv_guard.h); OnAlloc and the write completion only assign and delete.
void HttpConnection::OnAlloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  auto* self = static_cast<HttpConnection*>(handle->data);
  *buf = uv_buf_init(self->read_buffer_, sizeof(self->read_buffer_));
}

void HttpConnection::OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  GuardCallback("an HTTP read", [&] {
    auto* self = static_cast<HttpConnection*>(stream->data);
    if (nread == 0 || self->closing_) return;
    if (self->lingering_) {
      // Closing: what the client still sends is dropped; its end closes.
      if (nread < 0) self->Close();
      return;
    }
    if (nread < 0) {
      // End of input or a read error. While a request is answered the client
      // has gone (HTTP clients do not half-close): its job is cancelled.
      if (self->answering_) {
        spdlog::info("http connection {}: client went away during its request", self->id_);
      }
      self->Close();
      return;
    }
    self->input_.append(buf->base, static_cast<size_t>(nread));
    // Pipelined bytes beyond one whole request wait unread in the kernel.
    if (self->answering_ &&
        self->input_.size() > self->limits_.max_header_bytes + self->limits_.max_body_bytes) {
      uv_read_stop(stream);
    }
    self->Parse();
  });
}

void HttpConnection::Parse() {
  if (parsing_) return;  // EndResponse from inside a route: the loop below goes on
  std::shared_ptr<HttpConnection> keep = shared_from_this();
  parsing_ = true;
  while (!closing() && !answering_ && !input_.empty()) {
    HttpRequestParser::Step step = parser_.Feed(input_);
    input_.erase(0, step.consumed);
    if (step.kind == HttpRequestParser::Step::Kind::kRefused) {
      Reject(step.status, step.message, step.code);
      break;
    }
    if (step.kind == HttpRequestParser::Step::Kind::kNeedMore) break;
    answering_ = true;
    response_started_ = false;
    uv_timer_stop(&idle_timer_);
    HttpRequest request = std::move(step.request);
    if (request.body_unread) {
      // Its body is never read: nothing more is parsed or buffered, and the
      // connection closes after the answer.
      uv_read_stop(stream());
      input_.clear();
      input_.shrink_to_fit();
    }
    try {
      callbacks_.on_request(*this, std::move(request));
    } catch (const std::exception& e) {
      FailRequest(e.what());
    } catch (...) {
      FailRequest("an unknown exception");
    }
  }
  parsing_ = false;
}

void HttpConnection::FailRequest(std::string_view what) {
  spdlog::error("http connection {}: answering a request failed: {}", id_, what);
  if (!answering_ || closing()) return;
  // A response cut short cannot be mended; Close runs the close hooks.
  if (response_started_) return Close();
  answering_ = false;
  // From here on the connection is closing: what the request still sends is
  // dropped, and no second answer can follow the 500.
  Reject(500, "internal error; see the daemon's log", "internal");
  // What the request started (its job) is cancelled now, not once the
  // connection has lingered.
  for (auto& hook : std::exchange(close_hooks_, {}))
    hook();
}

void HttpConnection::EndResponse(bool keep_alive) {
  if (!answering_) return;
  answering_ = false;
  close_hooks_.clear();
  std::shared_ptr<void> done = std::move(exchange_);  // freed when this returns
  if (closing()) return;
  if (!keep_alive || parser_.upgrade()) {
    CloseAfterWrites(/*linger=*/true);
    return;
  }
  uv_timer_start(&idle_timer_, &HttpConnection::OnIdle, limits_.idle_timeout_ms, 0);
  uv_read_start(stream(), &HttpConnection::OnAlloc, &HttpConnection::OnRead);
  // Pipelined requests already read (from inside Parse, its loop goes on).
  Parse();
}

void HttpConnection::OnIdle(uv_timer_t* timer) {
  GuardCallback("an HTTP connection's idle timer", [&] {
    auto* self = static_cast<HttpConnection*>(timer->data);
    if (self->lingering_) return self->Close();
    if (self->answering_) return;
    if (self->shutting_down_) {
      spdlog::info("http connection {}: closed; its client did not read its last response in {} ms",
                   self->id_, self->limits_.idle_timeout_ms);
      return self->Close();
    }
    spdlog::info(
        "http connection {}: closed after {} ms {}", self->id_, self->limits_.idle_timeout_ms,
        self->input_.empty() && !self->parser_.in_request() ? "without a request"
                                                            : "without completing a request");
    self->Close();
  });
}

void HttpConnection::Reject(int status, std::string_view message, std::string_view code) {
  const std::string body =
      DumpJson({{"error",
                 {{"message", message},
                  {"type", status >= 500 ? "server_error" : "invalid_request_error"},
                  {"code", code},
                  {"param", nullptr}}}}) +
      "\n";
  Write(StatusLine(status) +
        "content-type: application/json\r\nconnection: close\r\ncontent-length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body);
  // A connection refused as it is accepted (too many, not allowed) closes at
  // once: lingering would hold more of them under a flood.
  CloseAfterWrites(/*linger=*/reading_);
}

void HttpConnection::Write(std::string bytes) {
  if (closing()) return;
  if (answering_) response_started_ = true;
  if (uv_stream_get_write_queue_size(stream()) > limits_.max_pending_write_bytes) {
    spdlog::warn("http connection {}: client is not reading its responses; closing", id_);
    Close();
    return;
  }
  auto* w = new HttpWriteRequest{{}, std::move(bytes)};
  uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  w->req.data = w;
  int rc = uv_write(&w->req, stream(), &buf, 1,
                    [](uv_write_t* req, int) { delete static_cast<HttpWriteRequest*>(req->data); });
  if (rc != 0) {
    delete w;
    Close();
  }
}

void HttpConnection::CloseAfterWrites(bool linger) {
  if (closing_ || shutting_down_) return;
  shutting_down_ = true;
  linger_after_shutdown_ = linger;
  uv_read_stop(stream());
  input_.clear();  // never parsed now
  // A client that never reads its last answer is closed all the same (while
  // a request is still answered, as at shutdown, its own bounds apply).
  if (!answering_) {
    uv_timer_start(&idle_timer_, &HttpConnection::OnIdle, limits_.idle_timeout_ms, 0);
  }
  auto* req = new uv_shutdown_t;
  req->data = this;
  int rc = uv_shutdown(req, stream(), [](uv_shutdown_t* r, int status) {
    auto* self = static_cast<HttpConnection*>(r->data);
    delete r;
    GuardCallback("an HTTP connection's shutdown", [self, status] {
      if (status != 0 || self->closing_ || !self->linger_after_shutdown_) return self->Close();
      self->Linger();
    });
  });
  if (rc != 0) {
    delete req;
    Close();
  }
}

void HttpConnection::Linger() {
  // The answer is out and the sending side shut (the client reads it, then
  // its end). Closing now, with the client's bytes unread, would send a
  // reset that can destroy the answer before the client reads it: read and
  // drop them instead, into the one read buffer, for a bounded time.
  lingering_ = true;
  if (uv_read_start(stream(), &HttpConnection::OnAlloc, &HttpConnection::OnRead) != 0) {
    return Close();
  }
  uv_timer_start(&idle_timer_, &HttpConnection::OnIdle,
                 std::min<uint64_t>(kLingerMs, limits_.idle_timeout_ms), 0);
}

void HttpConnection::Close() {
  if (closing_) return;
  closing_ = true;
  self_while_closing_ = shared_from_this();
  for (auto& hook : std::exchange(close_hooks_, {}))
    hook();
  exchange_.reset();
  uv_close(handle(), &HttpConnection::OnHandleClosed);
  uv_close(reinterpret_cast<uv_handle_t*>(&idle_timer_), &HttpConnection::OnHandleClosed);
}

void HttpConnection::OnHandleClosed(uv_handle_t* handle) {
  auto* self = static_cast<HttpConnection*>(handle->data);
  if (--self->open_handles_ > 0) return;
  auto keep = std::move(self->self_while_closing_);
  if (self->callbacks_.on_closed) {
    GuardCallback("an HTTP connection's close", [self] { self->callbacks_.on_closed(*self); });
  }
}

}  // namespace medq::daemon::http
