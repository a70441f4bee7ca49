#include "daemon/http_address.h"

#include <arpa/inet.h>

namespace medq::daemon::http {

Result<HttpAddress> ParseHttpAddress(const std::string& listen) {
  HttpAddress a;
  if (!listen.empty() && listen[0] == '/') {
    a.unix_socket = true;
    a.path = listen;
    return a;
  }
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen.size()) {
    return Error(ErrorCode::kInvalidRequest,
                 "http_listen \"" + listen + "\": expected HOST:PORT or an absolute socket path");
  }
  std::string host = listen.substr(0, colon);
  const std::string port = listen.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 ||
      std::stoi(port) > 65535) {
    return Error(ErrorCode::kInvalidRequest, "http_listen \"" + listen + "\": bad port");
  }
  a.port = std::stoi(port);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    a.ipv6 = true;
  }
  if (host == "localhost") host = "127.0.0.1";
  unsigned char buf[16];
  if (inet_pton(a.ipv6 ? AF_INET6 : AF_INET, host.c_str(), buf) != 1) {
    return Error(ErrorCode::kInvalidRequest, "http_listen \"" + listen +
                                                 "\": the host must be a numeric address " +
                                                 "(127.0.0.1, [::1]) or localhost");
  }
  a.host = host;
  return a;
}

bool IsLoopback(const HttpAddress& a) {
  if (a.unix_socket) return true;
  if (a.ipv6) return a.host == "::1";
  return a.host.rfind("127.", 0) == 0;
}

}  // namespace medq::daemon::http
