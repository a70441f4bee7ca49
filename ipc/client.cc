#include "ipc/client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace medq::ipc {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

Error Unreachable(const std::string& path, int err) {
  return Error(ErrorCode::kNotReady, "cannot reach medqd at " + path + ": " + std::strerror(err) +
                                         ". Start it with `medqd` (or `systemctl start medqd`), "
                                         "or point --socket / MEDQ_SOCKET at its socket.");
}

// The reply's event name; "" when missing or not a string (json::value would
// throw on another type, and the reply comes from outside).
std::string EventOf(const json& reply) {
  const auto it = reply.find("event");
  return it != reply.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

Client::Client(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

Client::Client(Client&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      next_id_(other.next_id_),
      lines_(std::move(other.lines_)) {}

Client& Client::operator=(Client&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    next_id_ = other.next_id_;
    lines_ = std::move(other.lines_);
  }
  return *this;
}

Client::~Client() {
  if (fd_ >= 0) close(fd_);
}

Result<Client> Client::Connect(const std::string& socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    return Error(ErrorCode::kInvalidRequest, "socket path too long: " + socket_path);
  }
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error(ErrorCode::kInternal, std::string("socket: ") + std::strerror(errno));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    close(fd);
    if (err == EACCES || err == EPERM) {
      return Error(ErrorCode::kPermissionDenied,
                   "permission denied on " + socket_path +
                       ": ask an administrator to add you to the daemon's group (default "
                       "`medq`), then log in again");
    }
    return Unreachable(socket_path, err);
  }
  return Client(fd, socket_path);
}

Status Client::SendRaw(std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error(ErrorCode::kNotReady,
                   "connection to medqd at " + path_ + " lost: " + std::strerror(errno));
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Result<int64_t> Client::Send(std::string_view op, const Params& params) {
  int64_t id = next_id_++;
  if (Status s = SendRaw(EncodeRequest(id, op, params)); !s.ok()) return s.error();
  return id;
}

Result<json> Client::ReadReply(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (auto line = lines_.NextLine()) {
      json reply = json::parse(*line, nullptr, false);
      if (reply.is_discarded() || !reply.is_object()) {
        return Error(ErrorCode::kInvalidRequest, "medqd sent a line that is not a JSON object");
      }
      return reply;
    }
    if (lines_.overflowed()) {
      return Error(ErrorCode::kTooLarge, "medqd sent a line over the maximum message size");
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return Error(ErrorCode::kQueueTimeout,
                   "no reply from medqd within " + std::to_string(timeout.count()) + " ms");
    }
    pollfd pfd{fd_, POLLIN, 0};
    int r = poll(&pfd, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Error(ErrorCode::kInternal, std::string("poll: ") + std::strerror(errno));
    if (r == 0) continue;
    char buf[65536];
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Error(ErrorCode::kNotReady, "medqd at " + path_ + " closed the connection");
    }
    lines_.Append(std::string_view(buf, static_cast<size_t>(n)));
  }
}

Result<json> Client::Call(std::string_view op, const Params& params,
                          std::chrono::milliseconds timeout) {
  auto id = Send(op, params);
  if (!id.ok()) {
    // The daemon may have refused the connection (permission, too many
    // connections) and closed it before our request went out: its error line
    // is the better answer.
    auto refusal = ReadReply(std::chrono::milliseconds(500));
    if (refusal.ok() && ErrorOf(*refusal) && refusal->value("id", json()).is_null()) return refusal;
    return std::move(id).error();
  }
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    auto reply = ReadReply(std::max(left, std::chrono::milliseconds(0)));
    if (!reply.ok()) return reply;
    // An error with a null id concerns the whole connection (refused peer,
    // too many connections, line too large): it answers this call too.
    const json& reply_id = reply->value("id", json());
    const bool connection_error = reply_id.is_null() && ErrorOf(*reply).has_value();
    if (!connection_error && (reply_id != json(*id) || !IsFinalEvent(*reply))) continue;
    return reply;
  }
}

std::optional<Error> ErrorOf(const json& reply) {
  if (EventOf(reply) != "error") return std::nullopt;
  return DecodeError(reply);
}

bool IsFinalEvent(const json& reply) {
  const std::string event = EventOf(reply);
  return event == "result" || event == "done" || event == "error";
}

}  // namespace medq::ipc
