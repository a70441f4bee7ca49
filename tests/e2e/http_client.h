// A raw HTTP/1.1 client for the HTTP endpoint's end-to-end tests: bytes out
// exactly as the test writes them, responses parsed just enough to check
// (status, lowercased headers, body with content-length or chunked).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/daemon_process.h"
#include "tests/support/model_repo.h"

namespace medq::test {

// A free TCP port on 127.0.0.1 (bound, then released).
int FreePort();

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;
  std::string body;  // chunked bodies de-chunked
  // "data: X" lines of a server-sent events body.
  std::vector<std::string> Events() const;
};

class HttpClient {
 public:
  // Connects to 127.0.0.1:port; REQUIREs success.
  explicit HttpClient(int port);
  // Connects to the Unix socket at `path`; REQUIREs success.
  explicit HttpClient(const std::string& path);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  void Send(const std::string& bytes);
  // The next response; nullopt when the server closed (or `timeout` passed)
  // before a whole one came. `head` skips the body (a HEAD request's).
  std::optional<HttpResponse> Read(std::chrono::milliseconds timeout = std::chrono::seconds(60),
                                   bool head = false);
  // Every byte until the server closes (an HTTP/1.0 stream's body).
  std::string ReadToClose(std::chrono::milliseconds timeout);
  // True when the server closes the connection within `timeout`.
  bool ClosedWithin(std::chrono::milliseconds timeout);
  void Close();

 private:
  bool Fill(std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  std::string buffer_;
};

// The daemon's usual test arguments (DaemonArgs) with the HTTP endpoint on
// 127.0.0.1:`port`, plus `extra`.
std::vector<std::string> HttpArgs(const ModelRepo& repo, int port,
                                  std::vector<std::string> extra = {});
// A response's body as JSON (REQUIREs that it parses).
nlohmann::json Body(const HttpResponse& r);
// `r` is an OpenAI error object with `status`, naming `param` when given.
void RequireError(const HttpResponse& r, int status, const std::string& param = "");

// A whole request: `method` `path` with `body` (JSON) on a fresh connection.
HttpResponse HttpCall(int port, const std::string& method, const std::string& path,
                      const std::string& body = "", const std::string& extra_headers = "");

// `script` (a client test in tests/http/) run with `args` by the checkout's
// virtual environment's python (scripts/setup-http-tests); nullopt when
// there is none, or when the script exits 77 (a client not installed): the
// case then reports itself skipped.
std::optional<ProcessResult> RunClientScript(const std::string& script,
                                             const std::vector<std::string>& args);
// The script passed: it exited 0 and said "all passed".
void RequireAllPassed(const ProcessResult& r);

}  // namespace medq::test
