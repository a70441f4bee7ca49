#include "tests/e2e/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <utility>

#include "tests/e2e/generate_client.h"

namespace medq::test {

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  socklen_t len = sizeof(addr);
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  close(fd);
  return ntohs(addr.sin_port);
}

std::vector<std::string> HttpResponse::Events() const {
  std::vector<std::string> out;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
  }
  return out;
}

HttpClient::HttpClient(int port) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd_ >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
}

HttpClient::HttpClient(const std::string& path) {
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd_ >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  REQUIRE(path.size() < sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
}

HttpClient::~HttpClient() {
  Close();
}

void HttpClient::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void HttpClient::Send(const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;  // the server may close on a refused request
    off += static_cast<size_t>(n);
  }
}

bool HttpClient::Fill(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return false;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(left.count())) != 1) return false;
  char buf[65536];
  ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
  if (n <= 0) return false;
  buffer_.append(buf, static_cast<size_t>(n));
  return true;
}

std::optional<HttpResponse> HttpClient::Read(std::chrono::milliseconds timeout, bool head) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t end;
  while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (!Fill(deadline)) return std::nullopt;
  }
  HttpResponse r;
  std::istringstream in(buffer_.substr(0, end));
  std::string line;
  std::getline(in, line);
  r.status = std::stoi(line.substr(9, 3));
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
  }
  buffer_.erase(0, end + 4);
  if (head) return r;
  if (r.headers.count("content-length") != 0) {
    const size_t length = std::stoul(r.headers["content-length"]);
    while (buffer_.size() < length) {
      if (!Fill(deadline)) return std::nullopt;
    }
    r.body = buffer_.substr(0, length);
    buffer_.erase(0, length);
    return r;
  }
  if (r.headers["transfer-encoding"] == "chunked") {
    for (;;) {
      size_t eol;
      while ((eol = buffer_.find("\r\n")) == std::string::npos) {
        if (!Fill(deadline)) return std::nullopt;
      }
      const size_t size = std::stoul(buffer_.substr(0, eol), nullptr, 16);
      while (buffer_.size() < eol + 2 + size + 2) {
        if (!Fill(deadline)) return std::nullopt;
      }
      r.body += buffer_.substr(eol + 2, size);
      buffer_.erase(0, eol + 2 + size + 2);
      if (size == 0) return r;
    }
  }
  return r;
}

std::string HttpClient::ReadToClose(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (Fill(deadline)) {
  }
  return std::exchange(buffer_, {});
}

bool HttpClient::ClosedWithin(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) != 1) return false;
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return true;
  }
}

HttpResponse HttpCall(int port, const std::string& method, const std::string& path,
                      const std::string& body, const std::string& extra_headers) {
  HttpClient c(port);
  std::string request = method + " " + path + " HTTP/1.1\r\nhost: localhost\r\n" + extra_headers;
  if (!body.empty() || method == "POST") {
    request +=
        "content-type: application/json\r\ncontent-length: " + std::to_string(body.size()) + "\r\n";
  }
  request += "\r\n" + body;
  c.Send(request);
  auto r = c.Read(std::chrono::seconds(60), method == "HEAD");
  REQUIRE(r.has_value());
  return *r;
}

std::vector<std::string> HttpArgs(const ModelRepo& repo, int port, std::vector<std::string> extra) {
  std::vector<std::string> args =
      DaemonArgs(repo, {"--http-listen", "127.0.0.1:" + std::to_string(port)});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

nlohmann::json Body(const HttpResponse& r) {
  INFO(r.body);
  return nlohmann::json::parse(r.body);
}

void RequireError(const HttpResponse& r, int status, const std::string& param) {
  INFO(r.status << " " << r.body);
  REQUIRE(r.status == status);
  const nlohmann::json e = Body(r)["error"];
  CHECK(e["message"].is_string());
  CHECK(e["type"].is_string());
  CHECK(e["code"].is_string());
  REQUIRE(e.contains("param"));
  if (!param.empty()) CHECK(e["param"] == param);
}

std::optional<ProcessResult> RunClientScript(const std::string& script,
                                             const std::vector<std::string>& args) {
  const std::filesystem::path python = MEDQ_VENV_PYTHON;
  if (!std::filesystem::exists(python)) return std::nullopt;
  std::vector<std::string> argv = {python.string(), script};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = RunProcess(argv);
  if (r.status == 77) return std::nullopt;
  return r;
}

void RequireAllPassed(const ProcessResult& r) {
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  CHECK(r.out.find("all passed") != std::string::npos);
}

}  // namespace medq::test
