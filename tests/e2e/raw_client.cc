#include "tests/e2e/raw_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>

namespace medq::test {

RawClient::RawClient(const std::string& socket) {
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd_ >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket.c_str(), sizeof(addr.sun_path) - 1);
  REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
}

RawClient::~RawClient() {
  close(fd_);
}

bool RawClient::Send(std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void RawClient::ShutdownWrite() {
  REQUIRE(shutdown(fd_, SHUT_WR) == 0);
}

std::optional<nlohmann::json> RawClient::Read(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto line = lines_.NextLine()) return nlohmann::json::parse(*line);
    if (closed_) return std::nullopt;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd pfd{fd_, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[65536];
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) {
      closed_ = true;
      continue;
    }
    lines_.Append(std::string_view(buf, static_cast<size_t>(n)));
  }
}

nlohmann::json RawClient::Roundtrip(std::string_view line) {
  REQUIRE(Send(line));
  auto reply = Read();
  REQUIRE(reply.has_value());
  return *reply;
}

bool RawClient::WaitClosed(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!closed_ && std::chrono::steady_clock::now() < deadline) {
    Read(std::chrono::milliseconds(50));
  }
  return closed_;
}

void RequireHealthy(const std::string& socket) {
  RawClient probe(socket);
  nlohmann::json reply = probe.Roundtrip(R"({"v":1,"id":"probe","op":"health"})"
                                         "\n");
  REQUIRE(reply["event"] == "result");
  REQUIRE(reply["result"]["ready"] == true);
}

}  // namespace medq::test
