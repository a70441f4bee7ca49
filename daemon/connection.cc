#include "daemon/connection.h"

#include <spdlog/spdlog.h>

namespace medq::daemon {
namespace {

struct WriteRequest {
  uv_write_t req;
  std::string data;
};

}  // namespace

Connection::Connection(uv_loop_t* loop, uint64_t id, Limits limits, Callbacks callbacks)
    : id_(id), limits_(limits), callbacks_(std::move(callbacks)), lines_(limits.max_line_bytes) {
  uv_pipe_init(loop, &pipe_, 0);
  uv_timer_init(loop, &idle_timer_);
  pipe_.data = this;
  idle_timer_.data = this;
}

int Connection::Accept(uv_stream_t* server) {
  return uv_accept(server, reinterpret_cast<uv_stream_t*>(&pipe_));
}

int Connection::fd() const {
  uv_os_fd_t fd = -1;
  uv_fileno(reinterpret_cast<const uv_handle_t*>(&pipe_), &fd);
  return fd;
}

void Connection::StartReading() {
  reading_ = true;
  uv_read_start(reinterpret_cast<uv_stream_t*>(&pipe_), &Connection::OnAlloc, &Connection::OnRead);
  ArmIdleTimer();
}

void Connection::ArmIdleTimer() {
  uv_timer_start(&idle_timer_, &Connection::OnIdle, limits_.idle_timeout_ms, 0);
}

void Connection::OnAlloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  auto* self = static_cast<Connection*>(handle->data);
  *buf = uv_buf_init(self->read_buffer_, sizeof(self->read_buffer_));
}

void Connection::OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* self = static_cast<Connection*>(stream->data);
  if (nread == 0 || self->closing_) return;
  if (nread < 0) {  // EOF or error: the client is gone
    self->Close();
    return;
  }
  self->ArmIdleTimer();
  if (!self->lines_.Append(std::string_view(buf->base, static_cast<size_t>(nread)))) {
    self->callbacks_.on_too_large(*self);
    return;
  }
  // Hold a reference: a line's handler may close the connection.
  std::shared_ptr<Connection> keep = self->shared_from_this();
  while (!self->closing_) {
    std::optional<std::string> line = self->lines_.NextLine();
    if (!line) break;
    self->callbacks_.on_line(*self, std::move(*line));
  }
}

void Connection::OnIdle(uv_timer_t* timer) {
  auto* self = static_cast<Connection*>(timer->data);
  if (self->in_flight_ > 0 && !self->lines_.HasPartialLine()) {
    self->ArmIdleTimer();
    return;
  }
  spdlog::info("connection {}: closed after {} ms without input{}", self->id_,
               self->limits_.idle_timeout_ms,
               self->lines_.HasPartialLine() ? " (stalled in the middle of a line)" : "");
  self->Close();
}

void Connection::Write(std::string line) {
  if (closing_) return;
  auto* stream = reinterpret_cast<uv_stream_t*>(&pipe_);
  if (uv_stream_get_write_queue_size(stream) > limits_.max_pending_write_bytes) {
    spdlog::warn("connection {}: client is not reading its replies ({} bytes pending); closing",
                 id_, uv_stream_get_write_queue_size(stream));
    Close();
    return;
  }
  auto* w = new WriteRequest{{}, std::move(line)};
  uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  w->req.data = w;
  int rc = uv_write(&w->req, stream, &buf, 1,
                    [](uv_write_t* req, int) { delete static_cast<WriteRequest*>(req->data); });
  if (rc != 0) {
    delete w;
    Close();
  }
}

void Connection::CloseAfterWrites() {
  if (closing_ || shutting_down_) return;
  shutting_down_ = true;
  if (reading_) uv_read_stop(reinterpret_cast<uv_stream_t*>(&pipe_));
  auto* req = new uv_shutdown_t;
  req->data = this;
  int rc = uv_shutdown(req, reinterpret_cast<uv_stream_t*>(&pipe_), [](uv_shutdown_t* r, int) {
    auto* self = static_cast<Connection*>(r->data);
    delete r;
    self->Close();
  });
  if (rc != 0) {
    delete req;
    Close();
  }
}

void Connection::Close() {
  if (closing_) return;
  closing_ = true;
  self_while_closing_ = shared_from_this();
  for (auto& hook : std::exchange(close_hooks_, {}))
    hook();
  uv_close(reinterpret_cast<uv_handle_t*>(&pipe_), &Connection::OnHandleClosed);
  uv_close(reinterpret_cast<uv_handle_t*>(&idle_timer_), &Connection::OnHandleClosed);
}

void Connection::OnHandleClosed(uv_handle_t* handle) {
  auto* self = static_cast<Connection*>(handle->data);
  if (--self->open_handles_ > 0) return;
  std::shared_ptr<Connection> keep = std::move(self->self_while_closing_);
  self->callbacks_.on_closed(*self);
}

}  // namespace medq::daemon
