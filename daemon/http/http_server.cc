#include "daemon/http/http_server.h"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include "daemon/http/routes.h"
#include "daemon/uv_guard.h"

namespace medq::daemon::http {
namespace {

constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr size_t kMaxHeaders = 100;
constexpr size_t kMaxPendingHttpWriteBytes = 64u << 20;

}  // namespace

HttpServer::HttpServer(uv_loop_t* loop, DaemonState& state, const Config& config,
                       const PeerPolicy& peers)
    : loop_(loop), state_(state), config_(config), peers_(peers) {}

Status HttpServer::Start(std::optional<int> systemd_fd) {
  if (systemd_fd) {
    // systemd's socket (FileDescriptorName=http): TCP or Unix, as it is.
    address_.unix_socket =
        sd_is_socket_unix(*systemd_fd, SOCK_STREAM, /*listening=*/1, nullptr, 0) > 0;
  } else {
    auto address = ParseHttpAddress(config_.http_listen);
    if (!address.ok()) return address.error();
    address_ = *address;
  }
  if (!config_.http_api_keys_file.empty()) {
    if (Status st = keys_.Load(config_.http_api_keys_file); !st.ok()) return st;
  }
  int rc = 0;
  if (address_.unix_socket) {
    int fd = -1;
    if (systemd_fd) {
      fd = *systemd_fd;
    } else {
      auto sock = OpenListeningSocket(address_.path, config_.socket_group);
      if (!sock.ok()) return sock.error();
      unix_socket_ = *sock;
      fd = sock->fd;
    }
    uv_pipe_init(loop_, &listener_.pipe, 0);
    rc = uv_pipe_open(&listener_.pipe, fd);
  } else {
    uv_tcp_init(loop_, &listener_.tcp);
    if (systemd_fd) {
      rc = uv_tcp_open(&listener_.tcp, *systemd_fd);
    } else {
      sockaddr_storage addr{};
      if (address_.ipv6) {
        uv_ip6_addr(address_.host.c_str(), address_.port, reinterpret_cast<sockaddr_in6*>(&addr));
      } else {
        uv_ip4_addr(address_.host.c_str(), address_.port, reinterpret_cast<sockaddr_in*>(&addr));
      }
      rc = uv_tcp_bind(&listener_.tcp, reinterpret_cast<const sockaddr*>(&addr), 0);
    }
  }
  listener_.handle.data = this;
  listening_ = true;  // the handle is initialized: StopListening closes it
  if (rc == 0) rc = uv_listen(&listener_.stream, SOMAXCONN, &HttpServer::OnConnection);
  if (rc != 0) {
    return Error(ErrorCode::kNotReady,
                 "cannot listen on " + config_.http_listen + ": " + uv_strerror(rc));
  }
  spdlog::info("HTTP endpoint on {}{}{}",
               systemd_fd ? std::string("the socket from systemd") : config_.http_listen, "",
               keys_.empty() ? "" : " (API keys required)");
  return {};
}

void HttpServer::ReplaceKeys(Result<ApiKeys> keys) {
  if (!keys.ok()) {
    spdlog::warn("SIGHUP: {}; keeping the {} key(s) loaded", keys.error().message, keys_.size());
    return;
  }
  keys_ = std::move(*keys);
  spdlog::info("SIGHUP: reloaded {} HTTP API key(s)", keys_.size());
}

void HttpServer::StopListening() {
  if (!listening_) return;
  listening_ = false;
  if (address_.unix_socket && unix_socket_.fd >= 0) RemoveListeningSocket(unix_socket_);
  if (!uv_is_closing(&listener_.handle)) uv_close(&listener_.handle, nullptr);
}

void HttpServer::CloseConnections(bool now) {
  for (auto& [id, conn] : std::map(connections_)) {
    if (now) {
      conn->Close();
    } else {
      conn->CloseAfterWrites();
    }
  }
}

void HttpServer::OnConnection(uv_stream_t* listener, int status) {
  GuardCallback("an HTTP accept", [&] {
    auto* self = static_cast<HttpServer*>(listener->data);
    if (status < 0) {
      spdlog::warn("http accept failed: {}", uv_strerror(status));
      return;
    }
    self->Accept();
  });
}

void HttpServer::Accept() {
  const uint64_t id = next_id_++;
  HttpConnection::Limits limits{
      kMaxHeaderBytes, kMaxHeaders, static_cast<size_t>(config_.max_message_bytes),
      static_cast<uint64_t>(config_.idle_timeout_s * 1000), kMaxPendingHttpWriteBytes};
  HttpConnection::Callbacks callbacks{
      [this](HttpConnection& c, HttpRequest r) { OnRequest(c, std::move(r)); },
      [this](HttpConnection& c) {
        connections_.erase(c.id());
        state_.http_connections = static_cast<int>(connections_.size());
      },
      // The key is checked once the headers are in, before the body: a client
      // without one gets its 401 without the daemon reading (and buffering)
      // a byte of what it uploads.
      [this](const HttpRequest& head) { return Authorized(head); }};
  auto conn = std::make_shared<HttpConnection>(loop_, id, !address_.unix_socket, limits,
                                               std::move(callbacks));
  connections_[id] = conn;
  state_.http_connections = static_cast<int>(connections_.size());
  if (conn->Accept(&listener_.stream) != 0) {
    conn->Close();
    return;
  }
  if (static_cast<int>(connections_.size()) > config_.max_connections) {
    spdlog::warn("refusing HTTP connection: {} open, max_connections is {}",
                 connections_.size() - 1, config_.max_connections);
    return conn->Reject(503, "too many connections; try again later", "too_many_connections");
  }
  if (address_.unix_socket) {
    auto peer = PeerOf(conn->fd());
    if (!peer || !peers_.Allows(*peer)) {
      spdlog::warn("refused HTTP connection from uid {}: not in group '{}'",
                   peer ? std::to_string(peer->uid) : "?", config_.socket_group);
      return conn->Reject(403,
                          "permission denied: ask an administrator to add you to the group '" +
                              config_.socket_group + "'",
                          "permission_denied");
    }
  }
  conn->StartReading();
}

bool HttpServer::Authorized(const HttpRequest& head) const {
  if (keys_.empty() || head.path == "/health") return true;
  const std::string* auth = head.Header("authorization");
  return auth != nullptr && keys_.Allows(*auth);
}

void HttpServer::OnRequest(HttpConnection& connection, HttpRequest request) {
  // body_unread: admit_head refused it, for its key alone.
  if (request.body_unread || !Authorized(request)) {
    const std::string* auth = request.Header("authorization");
    auto exchange = std::make_shared<HttpExchange>(connection.weak_from_this(), request);
    connection.Hold(exchange);
    exchange->AddHeader("www-authenticate", "Bearer");
    return exchange->RespondError(HttpError{
        401, "authentication_error", "invalid_api_key", std::nullopt, std::nullopt,
        auth == nullptr ? "missing API key: send Authorization: Bearer KEY" : "invalid API key"});
  }
  Dispatch(state_, connection, std::move(request));
}

}  // namespace medq::daemon::http
