// The HTTP endpoint beside the Unix socket (`http_listen`, off by default):
// its listener on the daemon's loop, its connections, who may use it, and
// the routes (routes.h). Loop thread only; no thread per connection.
//
// Who may connect: on TCP, loopback only unless the operator named another
// address, which config.cc refuses without `http_api_keys_file`; with a keys
// file every route but GET /health needs "Authorization: Bearer KEY" (401
// otherwise, answered from the headers: the body of a request without a
// valid key is never read). On a Unix socket the socket's peer credentials apply as on the
// main socket (403 otherwise).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <uv.h>

#include "common/result.h"
#include "daemon/config.h"
#include "daemon/http/api_keys.h"
#include "daemon/http/http_connection.h"
#include "daemon/http_address.h"
#include "daemon/loop/listen_socket.h"
#include "daemon/loop/peer_auth.h"
#include "daemon/loop/state.h"

namespace medq::daemon::http {

class HttpServer {
 public:
  HttpServer(uv_loop_t* loop, DaemonState& state, const Config& config, const PeerPolicy& peers);
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Listens on config.http_listen, or on `systemd_fd` when systemd passed the
  // socket. The error says why it cannot.
  Status Start(std::optional<int> systemd_fd);
  // The keys file (`http_api_keys_file`), empty when none is set: SIGHUP
  // reads it again off the loop (server/server.cc) and hands the keys to
  // ReplaceKeys, or its failure, after which the keys held stay.
  const std::string& keys_file() const { return config_.http_api_keys_file; }
  void ReplaceKeys(Result<ApiKeys> keys);
  // Draining: no new connections.
  void StopListening();
  // Shutdown: every connection closes once its writes are out, or `now`.
  void CloseConnections(bool now);
  size_t connections() const { return connections_.size(); }

 private:
  static void OnConnection(uv_stream_t* listener, int status);
  void Accept();
  void OnRequest(HttpConnection& connection, HttpRequest request);
  // The request (its head is enough) may use its route: no keys, GET
  // /health, or a valid "Authorization: Bearer KEY".
  bool Authorized(const HttpRequest& head) const;

  uv_loop_t* loop_;
  DaemonState& state_;
  const Config& config_;
  const PeerPolicy& peers_;
  HttpAddress address_;
  ApiKeys keys_;
  union {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } listener_{};
  bool listening_ = false;
  ListeningSocket unix_socket_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::shared_ptr<HttpConnection>> connections_;
};

}  // namespace medq::daemon::http
