// A raw socket client for end-to-end tests: sends arbitrary bytes and reads
// reply lines, so tests can send what `medq` never would.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "ipc/line_buffer.h"

namespace medq::test {

class RawClient {
 public:
  // REQUIREs the connection.
  explicit RawClient(const std::string& socket);
  ~RawClient();
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  // False once the daemon has closed the connection (EPIPE/ECONNRESET).
  bool Send(std::string_view bytes);
  // The next reply line as JSON; nullopt on timeout or when the daemon closed
  // the connection (then closed() is true).
  std::optional<nlohmann::json> Read(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Sends one line and reads one reply.
  nlohmann::json Roundtrip(std::string_view line);
  // Closes the sending side (shutdown(SHUT_WR)): the daemon reads EOF.
  void ShutdownWrite();
  // Waits until the daemon closes the connection; true if it did in time.
  bool WaitClosed(std::chrono::milliseconds timeout);
  bool closed() const { return closed_; }

 private:
  int fd_ = -1;
  bool closed_ = false;
  ipc::LineBuffer lines_{64u << 20};
};

// The daemon at `socket` still serves a fresh client and says it is ready.
void RequireHealthy(const std::string& socket);

}  // namespace medq::test
