// A blocking client for the medq protocol, used by the CLI, the tests and the
// benchmarks. One Client is one connection; it is not thread-safe.
#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "common/result.h"
#include "ipc/line_buffer.h"

namespace medq::ipc {

class Client {
 public:
  // Connects to the daemon's socket. Fails with NOT_READY when nothing
  // listens there (the message names the path and how to start medqd), and
  // with PERMISSION_DENIED when the socket cannot be opened by this user.
  static Result<Client> Connect(const std::string& socket_path);

  Client(Client&& other) noexcept;
  Client& operator=(Client&& other) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // Sends one request line; assigns and returns the request id.
  Result<int64_t> Send(std::string_view op, const Params& params = Params::object());

  // Sends raw bytes as they are (for tests of malformed input).
  Status SendRaw(std::string_view bytes);

  // Reads the next reply line, any id, waiting at most `timeout`. Errors:
  // NOT_READY when the daemon closed the connection, QUEUE_TIMEOUT when the
  // timeout passed, INVALID_REQUEST when the line is not JSON.
  Result<nlohmann::json> ReadReply(std::chrono::milliseconds timeout);

  // Sends a request and waits for its final reply line (`result`, `done` or
  // an `error` event), skipping intermediate events. Fails only when the
  // daemon cannot be reached, goes away or the timeout passes: an error
  // reply from the daemon is a successful Call (see ErrorOf).
  Result<nlohmann::json> Call(std::string_view op, const Params& params = Params::object(),
                              std::chrono::milliseconds timeout = std::chrono::seconds(30));

  const std::string& socket_path() const { return path_; }
  int fd() const { return fd_; }

 private:
  Client(int fd, std::string path);

  int fd_ = -1;
  std::string path_;
  int64_t next_id_ = 1;
  LineBuffer lines_{kDefaultMaxMessageBytes};
};

// True for the events that end a request: result, done, error.
bool IsFinalEvent(const nlohmann::json& reply);

// The Error an `error` event carries; nullopt for any other reply.
std::optional<Error> ErrorOf(const nlohmann::json& reply);

}  // namespace medq::ipc
