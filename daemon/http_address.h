// The `http_listen` setting: "HOST:PORT" ("127.0.0.1:8090", "[::1]:8090",
// "localhost:8090") or an absolute Unix socket path (for a reverse proxy).
#pragma once

#include <string>

#include "common/result.h"

namespace medq::daemon::http {

struct HttpAddress {
  bool unix_socket = false;
  std::string path;  // unix_socket
  std::string host;  // numeric IPv4 or IPv6 ("localhost" becomes 127.0.0.1)
  int port = 0;
  bool ipv6 = false;
};

// INVALID_REQUEST naming what is wrong when `listen` is neither form.
Result<HttpAddress> ParseHttpAddress(const std::string& listen);

// True for a Unix socket and for 127.0.0.0/8 and ::1.
bool IsLoopback(const HttpAddress& address);

}  // namespace medq::daemon::http
