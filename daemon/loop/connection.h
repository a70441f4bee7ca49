// One client connection: reads bytes, frames them into lines, writes reply
// lines. Loop thread only.
//
// Lifetime: the Server holds the only owning reference; replies to requests
// still in flight hold weak references, so a reply to a connection that has
// gone is dropped. After Close() the connection calls on_closed once both of
// its libuv handles are closed; the Server then drops it.
//
// Timeouts: `idle_timeout_ms` bounds the time a client takes to send one
// whole line, counted from its first byte (a client trickling one byte at a
// time is closed like a silent one), the silence between lines while no
// request is in flight, and the time a client reads none of its replies:
// while replies wait in the write queue, a connection whose queue has not
// shrunk for `idle_timeout_ms` is closed (a reply still in flight does not
// keep a client that never reads).
//
// Unread replies: bytes queued for the client and not yet taken by its
// socket are bounded three ways (docs/protocol.md). Past
// `pause_reading_bytes` the connection stops taking requests (lines already
// read wait in its buffer) until its queue has drained below half of that,
// so that a client that sends and never reads holds at most that much plus
// the replies of requests already in flight. Past `max_pending_write_bytes`
// a further reply closes it (one reply of any size is still queued whole).
// And every connection's bytes count in one WriteBudget: past its limit the
// Server closes the connections holding the most.
//
// End of input: bytes after the last newline at EOF are a final line (a last
// line need not end in "\n"). A client that half-closes (shutdown(SHUT_WR))
// still gets every reply to what it sent; the connection closes once they are
// written. A client that closes completely is gone: its requests are
// cancelled (close hooks) as soon as the hang-up is seen.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <uv.h>

#include "daemon/loop/reply_channel.h"
#include "ipc/line_buffer.h"

namespace medq::daemon {

// Reply bytes queued and not yet written, summed over every connection.
// Owned by the Server; loop thread only.
struct WriteBudget {
  size_t pending = 0;
  size_t limit = 0;
  // Called whenever a write takes `pending` past `limit`; must not close
  // connections from inside the call (it runs inside a reply's Write).
  std::function<void()> over_limit;
};

class Connection : public ReplyChannel, public std::enable_shared_from_this<Connection> {
 public:
  struct Limits {
    size_t max_line_bytes;
    uint64_t idle_timeout_ms;
    size_t pause_reading_bytes;      // no more requests read while this much is unread
    size_t max_pending_write_bytes;  // a client that reads nothing is cut off past this
    WriteBudget* budget;             // every connection's; outlives them
  };
  struct Callbacks {
    std::function<void(Connection&, std::string line)> on_line;
    std::function<void(Connection&)> on_too_large;
    std::function<void(Connection&)> on_closed;
  };

  Connection(uv_loop_t* loop, uint64_t id, Limits limits, Callbacks callbacks);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Accepts the pending connection of `server`. Returns a libuv error code.
  int Accept(uv_stream_t* server);
  int fd() const;
  void StartReading();

  // Queues one line (newline included) for writing. Dropped once closing.
  void Write(std::string line);
  // Stops reading, flushes queued writes, then closes.
  void CloseAfterWrites();
  // The only line a connection refused at accept gets: written at once when
  // the socket takes it whole (a fresh socket's buffer does) and the
  // descriptor closed at once, so that a flood of refused connections holds
  // no descriptors while the loop catches up; otherwise Write and
  // CloseAfterWrites.
  void WriteAndClose(std::string line);
  // Closes now; queued writes are abandoned.
  void Close();

  // ReplyChannel: each reply is one encoded line (common/protocol.h).
  void SendEvent(const nlohmann::json& id, const GenerateEvent& event) override;
  void SendDone(const nlohmann::json& id, const GenerateDone& done) override;
  void SendEmbedResult(const nlohmann::json& id, const EmbedResult& result) override;
  void SendResult(const nlohmann::json& id, const nlohmann::json& result) override;
  void SendError(const nlohmann::json& id, const Error& error) override;

  bool closing() const override { return closing_; }
  // Runs `hook` when the connection closes (client gone, idle, shutdown).
  void AddCloseHook(std::function<void()> hook) override {
    close_hooks_.push_back(std::move(hook));
  }
  uint64_t id() const { return id_; }
  // Set once the peer's credentials are known (Server::Accept).
  void set_owner(std::string owner) { owner_ = std::move(owner); }
  std::string owner() const override { return owner_; }

  // Requests whose final reply has not been sent yet; the idle timeout never
  // closes a connection that waits for one (unless it stalls mid-line).
  void BeginRequest() override { ++in_flight_; }
  void EndRequest() override;
  int in_flight() const { return in_flight_; }
  // Reply bytes queued and not yet written to the socket, now and at most.
  size_t pending_write_bytes() const { return pending_bytes_; }
  size_t peak_pending_write_bytes() const { return peak_pending_bytes_; }

 private:
  std::string owner_;  // "uid:N"
  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnIdle(uv_timer_t* timer);
  static void OnHandleClosed(uv_handle_t* handle);
  // The bodies of OnRead and OnIdle.
  void Read(ssize_t nread, const uv_buf_t* buf);
  void IdleTimerFired();
  // The idle deadline is now plus the timeout; the timer is set for it.
  void ArmIdleTimer();
  void ScheduleTimer();
  // A write of `bytes` left the queue (written, or cancelled by the close).
  void WriteCompleted(size_t bytes);
  // Stops reading requests while too many replies are unread; resumes once
  // they drained (from WriteCompleted).
  void PauseReading();
  void ResumeReading();
  // Milliseconds since the write queue last shrank, when it holds anything.
  std::optional<uint64_t> WriteStalledMs() const;
  void OnEndOfInput();
  // Hands every complete line to on_line; true when there was at least one.
  bool DeliverLines();
  bool PeerHungUp() const;

  uint64_t id_;
  Limits limits_;
  Callbacks callbacks_;
  uv_pipe_t pipe_;
  uv_timer_t idle_timer_;
  ipc::LineBuffer lines_;
  char read_buffer_[64 * 1024];
  int in_flight_ = 0;
  int open_handles_ = 2;
  size_t pending_bytes_ = 0;        // queued writes not yet completed
  size_t peak_pending_bytes_ = 0;   // the most pending_bytes_ ever held
  uint64_t write_progress_ms_ = 0;  // uv_now when the queue last shrank or began
  uint64_t idle_deadline_ms_ = 0;   // uv_now past which the client is idle
  bool paused_ = false;             // requests not read: too many replies unread
  bool reading_ = false;
  bool input_ended_ = false;  // EOF read: no more requests, replies still go out
  bool closing_ = false;
  bool shutting_down_ = false;
  std::vector<std::function<void()>> close_hooks_;
  std::shared_ptr<Connection> self_while_closing_;  // keeps *this alive until closed
};

}  // namespace medq::daemon
