// The daemon: the libuv loop that owns every socket, connection and the job
// queue, plus the worker thread that owns LibTorch. Follow one request:
//   Listener accept -> Connection (framing) -> Server::OnLine (parse, op table)
//   -> op handler -> Scheduler (class queues) -> Worker (via Handoff: a task,
//   or a sequence in the step loop's batch) -> Scheduler -> Responder -> socket.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <uv.h>

#include "daemon/config.h"
#include "daemon/handoff.h"
#include "daemon/http/http_server.h"
#include "daemon/loop/connection.h"
#include "daemon/loop/listen_socket.h"
#include "daemon/loop/peer_auth.h"
#include "daemon/loop/scheduler.h"
#include "daemon/loop/state.h"
#include "daemon/worker/worker.h"

namespace medq::daemon {

class Server {
 public:
  // `args` are the command-line arguments, kept for SIGHUP reloads.
  Server(Config config, std::vector<std::string> args);
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server();

  // Runs until SIGTERM/SIGINT and the drain that follows. Returns the exit
  // status: 0 after a clean shutdown, 69 when the socket cannot be served.
  int Run();

 private:
  static void OnConnection(uv_stream_t* server, int status);
  static void OnSignal(uv_signal_t* handle, int signum);
  void Accept();
  void OnLine(Connection& conn, std::string line);
  void OnTooLarge(Connection& conn);
  void BeginDrain();
  void FinishIfDrained();
  void Reload();
  void RefreshMemory();
  void CloseEverything();
  void PingWatchdog();
  void Tick();
  void Preload();
  void MarkReady();
  void FinishReady();
  // Opens the job store (state_dir); false when the daemon cannot start.
  bool OpenJobStore();
  void CountReport(const WorkerReport& report);
  // Closes the connections holding the most unread reply bytes until the
  // total is within write_budget_.limit.
  void ShedUnreadReplies();

  Config config_;
  std::vector<std::string> args_;
  uv_loop_t loop_;
  Handoff handoff_;
  Worker worker_;
  Scheduler scheduler_;
  DurableJobs jobs_;
  DaemonState state_;
  PeerPolicy peers_;
  ListeningSocket socket_;
  // The HTTP endpoint, when http_listen (or systemd's "http" socket) turns it on.
  std::unique_ptr<http::HttpServer> http_;
  // Zero-initialized: a handle whose `loop` is null was never initialized.
  uv_pipe_t listener_{};
  uv_signal_t sigterm_{}, sigint_{}, sighup_{};
  uv_timer_t drain_timer_{};
  uv_timer_t force_close_timer_{};
  std::chrono::steady_clock::time_point drain_deadline_;
  uv_timer_t memory_timer_{};
  uv_timer_t watchdog_timer_{};
  uv_timer_t tick_timer_{};
  // Tick's bookkeeping of idle periods: one idle cleanup and one keep-alive
  // unload check per idle period.
  std::chrono::steady_clock::time_point last_busy_ = std::chrono::steady_clock::now();
  bool idle_cleanup_done_ = true;
  bool unload_checked_ = false;
  std::chrono::milliseconds watchdog_interval_{0};
  uint64_t next_connection_id_ = 1;
  std::map<uint64_t, std::shared_ptr<Connection>> connections_;
  // Unread reply bytes of every socket connection, and the timer that closes
  // the largest holders once they pass the limit (ShedUnreadReplies).
  WriteBudget write_budget_;
  uv_timer_t shed_timer_{};
  // At shutdown, the bound on waiting for file-system work (loop/fs_work.h);
  // set when it passed with work still stuck: Run exits without waiting.
  uv_timer_t fs_stop_timer_{};
  bool abandoned_fs_work_ = false;
  // A connection that held many unread bytes closed: the heap goes back to
  // the system at the next tick.
  bool trim_wanted_ = false;
  bool listening_ = false;
  bool socket_activated_ = false;  // systemd owns the socket file
  bool stopped_ = false;
};

}  // namespace medq::daemon
