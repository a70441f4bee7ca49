#include "daemon/loop/connection.h"

#include <poll.h>

#include <spdlog/spdlog.h>

#include "common/protocol.h"
#include "daemon/uv_guard.h"

namespace medq::daemon {
namespace {

// After EOF with replies still owed, how often to look for a full hang-up.
constexpr uint64_t kHangupCheckMs = 200;

struct WriteRequest {
  uv_write_t req;
  std::string data;
  Connection* conn;  // alive: libuv completes (or cancels) writes before the close callback
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
  idle_deadline_ms_ = uv_now(pipe_.loop) + limits_.idle_timeout_ms;
  ScheduleTimer();
}

// One timer serves three deadlines: the idle one (ArmIdleTimer), the
// hang-up checks after EOF, and the stall of unread replies.
void Connection::ScheduleTimer() {
  const uint64_t now = uv_now(pipe_.loop);
  uint64_t due = input_ended_ ? now + kHangupCheckMs : idle_deadline_ms_;
  if (pending_bytes_ > 0) due = std::min(due, write_progress_ms_ + limits_.idle_timeout_ms);
  uv_timer_start(&idle_timer_, &Connection::OnIdle, due > now ? due - now : 0, 0);
}

void Connection::OnAlloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  auto* self = static_cast<Connection*>(handle->data);
  *buf = uv_buf_init(self->read_buffer_, sizeof(self->read_buffer_));
}

// Every callback below runs its body in GuardCallback (loop/uv_guard.h);
// OnAlloc and the write completion only assign and delete.
void Connection::OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  GuardCallback("a socket read", [&] { static_cast<Connection*>(stream->data)->Read(nread, buf); });
}

void Connection::Read(ssize_t nread, const uv_buf_t* buf) {
  if (nread == 0 || closing_) return;
  if (nread == UV_EOF) {
    OnEndOfInput();
    return;
  }
  if (nread < 0) {  // a read error: the client is gone
    Close();
    return;
  }
  // The idle timer runs from the first byte of a line: a line in progress
  // keeps its deadline however its bytes trickle in.
  const bool line_in_progress = lines_.HasPartialLine();
  if (!lines_.Append(std::string_view(buf->base, static_cast<size_t>(nread)))) {
    callbacks_.on_too_large(*this);
    return;
  }
  const bool completed_lines = DeliverLines();
  if (!closing_ && (!line_in_progress || completed_lines)) ArmIdleTimer();
}

bool Connection::DeliverLines() {
  // Hold a reference: a line's handler may close the connection.
  std::shared_ptr<Connection> keep = shared_from_this();
  bool any = false;
  while (!closing_) {
    // Checked before each line: one read may hold a thousand requests, and
    // a reply each (metrics: tens of KiB) would pile up unread.
    if (pending_bytes_ > limits_.pause_reading_bytes) {
      PauseReading();
      break;
    }
    std::optional<std::string> line = lines_.NextLine();
    if (!line) break;
    any = true;
    callbacks_.on_line(*this, std::move(*line));
  }
  return any;
}

void Connection::PauseReading() {
  if (paused_) return;
  paused_ = true;
  if (reading_) {
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&pipe_));
    reading_ = false;
  }
  spdlog::debug("connection {}: {} reply bytes unread; reading no more requests until they drain",
                id_, pending_bytes_);
}

void Connection::ResumeReading() {
  paused_ = false;
  const bool line_in_progress = lines_.HasPartialLine();
  DeliverLines();  // the lines read before the pause first; may pause again
  if (closing_ || paused_ || input_ended_ || shutting_down_) return;
  reading_ = true;
  uv_read_start(reinterpret_cast<uv_stream_t*>(&pipe_), &Connection::OnAlloc, &Connection::OnRead);
  // A line cut off by the pause gets a whole timeout from now: its client
  // could not send the rest meanwhile.
  if (line_in_progress || in_flight_ == 0) ArmIdleTimer();
}

void Connection::WriteCompleted(size_t bytes) {
  pending_bytes_ -= bytes;
  write_progress_ms_ = uv_now(pipe_.loop);
  if (closing_) return;  // Close() took the connection's bytes off the budget
  limits_.budget->pending -= bytes;
  if (paused_ && pending_bytes_ <= limits_.pause_reading_bytes / 2) {
    std::shared_ptr<Connection> keep = shared_from_this();
    ResumeReading();
  }
}

std::optional<uint64_t> Connection::WriteStalledMs() const {
  if (pending_bytes_ == 0) return std::nullopt;
  return uv_now(pipe_.loop) - write_progress_ms_;
}

void Connection::OnEndOfInput() {
  std::shared_ptr<Connection> keep = shared_from_this();
  input_ended_ = true;
  reading_ = false;    // libuv stops reading at EOF by itself
  if (PeerHungUp()) {  // closed, not half-closed: nobody would read a reply
    Close();
    return;
  }
  if (std::optional<std::string> last = lines_.TakeFinalLine()) {
    callbacks_.on_line(*this, std::move(*last));
  }
  if (closing_) return;
  if (in_flight_ == 0) {
    CloseAfterWrites();
  } else {
    ScheduleTimer();
  }
}

void Connection::EndRequest() {
  --in_flight_;
  if (in_flight_ > 0 || closing_) return;
  if (input_ended_) {
    CloseAfterWrites();
  } else if (!lines_.HasPartialLine()) {
    // The silence is counted from the last reply, not from the request line:
    // a request that took longer than the timeout must not leave its client
    // a deadline that has already passed.
    ArmIdleTimer();
  }
}

bool Connection::PeerHungUp() const {
  // A Unix stream socket reports POLLHUP only once both directions are shut:
  // a peer that half-closed (shutdown(SHUT_WR)) still reads its replies.
  pollfd p{fd(), POLLOUT, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)) != 0;
}

void Connection::OnIdle(uv_timer_t* timer) {
  GuardCallback("a connection's idle timer",
                [timer] { static_cast<Connection*>(timer->data)->IdleTimerFired(); });
}

void Connection::IdleTimerFired() {
  // Replies waiting unread: the client must take some within the timeout,
  // whether or not it still sends, and whatever it has in flight.
  if (std::optional<uint64_t> stalled = WriteStalledMs()) {
    if (*stalled >= limits_.idle_timeout_ms) {
      spdlog::warn(
          "connection {}: client read none of its replies for {} ms ({} bytes unread); closing",
          id_, *stalled, pending_bytes_);
      Close();
      return;
    }
  }
  if (input_ended_) {
    if (PeerHungUp()) {
      spdlog::info("connection {}: client hung up with {} request(s) in flight", id_, in_flight_);
      Close();
    } else {
      ScheduleTimer();
    }
    return;
  }
  // Woken early for the stall deadline, which has moved on.
  if (uv_now(pipe_.loop) < idle_deadline_ms_) {
    ScheduleTimer();
    return;
  }
  // A request in flight, or replies the client is reading (they wait in the
  // write queue and it shrinks): the client is not idle, and closing would
  // drop them. A line cut off by a pause is ours to wait for, not the
  // client's.
  const bool replies_owed = in_flight_ > 0 || pending_bytes_ > 0 || paused_;
  if (replies_owed && (paused_ || !lines_.HasPartialLine())) {
    ArmIdleTimer();
    return;
  }
  spdlog::info("connection {}: closed after {} ms {}", id_, limits_.idle_timeout_ms,
               lines_.HasPartialLine() ? "without completing a line" : "without input");
  Close();
}

void Connection::SendEvent(const nlohmann::json& id, const GenerateEvent& event) {
  Write(EncodeEvent(id, EventName(event), EventFields(event)));
}

void Connection::SendDone(const nlohmann::json& id, const GenerateDone& done) {
  Write(EncodeEvent(id, "done", done));
}

void Connection::SendEmbedResult(const nlohmann::json& id, const EmbedResult& result) {
  Write(EncodeResult(id, result));
}

void Connection::SendResult(const nlohmann::json& id, const nlohmann::json& result) {
  Write(EncodeResult(id, result));
}

void Connection::SendError(const nlohmann::json& id, const Error& error) {
  Write(EncodeError(id, error));
}

void Connection::Write(std::string line) {
  if (closing_) return;
  auto* stream = reinterpret_cast<uv_stream_t*>(&pipe_);
  // Checked before queueing: one reply of any size still goes out whole.
  if (pending_bytes_ > limits_.max_pending_write_bytes) {
    spdlog::warn("connection {}: client is not reading its replies ({} bytes pending); closing",
                 id_, pending_bytes_);
    Close();
    return;
  }
  const size_t bytes = line.size();
  auto* w = new WriteRequest{{}, std::move(line), this};
  uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  w->req.data = w;
  const bool stall_clock_starts = pending_bytes_ == 0;
  if (stall_clock_starts) write_progress_ms_ = uv_now(pipe_.loop);
  pending_bytes_ += bytes;
  limits_.budget->pending += bytes;
  peak_pending_bytes_ = std::max(peak_pending_bytes_, pending_bytes_);
  int rc = uv_write(&w->req, stream, &buf, 1, [](uv_write_t* req, int) {
    std::unique_ptr<WriteRequest> done(static_cast<WriteRequest*>(req->data));
    Connection* conn = done->conn;
    const size_t size = done->data.size();
    done.reset();  // the reply's memory goes before anything else runs
    GuardCallback("a socket write's completion", [conn, size] { conn->WriteCompleted(size); });
  });
  if (rc != 0) {
    pending_bytes_ -= bytes;
    limits_.budget->pending -= bytes;
    delete w;
    Close();
    return;
  }
  if (stall_clock_starts) ScheduleTimer();
  if (limits_.budget->pending > limits_.budget->limit && limits_.budget->over_limit) {
    limits_.budget->over_limit();
  }
}

void Connection::WriteAndClose(std::string line) {
  if (closing_) return;
  auto* stream = reinterpret_cast<uv_stream_t*>(&pipe_);
  if (uv_stream_get_write_queue_size(stream) == 0) {
    uv_buf_t buf = uv_buf_init(line.data(), static_cast<unsigned>(line.size()));
    const int written = uv_try_write(stream, &buf, 1);
    if (written == static_cast<int>(line.size())) {
      Close();
      return;
    }
    if (written > 0) line.erase(0, static_cast<size_t>(written));
  }
  Write(std::move(line));
  CloseAfterWrites();
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
    GuardCallback("a connection's shutdown", [self] { self->Close(); });
  });
  if (rc != 0) {
    delete req;
    Close();
  }
}

void Connection::Close() {
  if (closing_) return;
  closing_ = true;
  // Its queued replies are dropped with the handle: they leave the budget now.
  limits_.budget->pending -= pending_bytes_;
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
  GuardCallback("a connection's close", [self] { self->callbacks_.on_closed(*self); });
}

}  // namespace medq::daemon
