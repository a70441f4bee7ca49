// HTTP/1.1 request parsing, apart from any socket: bytes in, whole requests
// (or a refusal with its status) out. HttpConnection feeds it what it reads;
// the fuzz target (tests/fuzz/http_request_fuzz.cc) feeds it anything. Built
// on Debian's http-parser (the Node.js parser: incremental, chunked request
// bodies, pipelining). No libuv, no threads; never throws out of a parser
// callback.
//
// Limits (docs/http.md): the request line and headers together
// (max_header_bytes) and their count (max_headers): 431, as is http-parser's
// own bound on a head (80 KiB); the body (max_body_bytes): 413, from
// Content-Length before the body is read when it can be. A head that
// `admit_head` refuses (an API key missing) is handed out at once without
// its body, body_unread set; the parser then stops for good.
#pragma once

#include <http_parser.h>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/protocol.h"
#include "common/result.h"

namespace medq::daemon::http {

struct HttpRequest {
  std::string method;                                        // "GET", "POST", "HEAD", ...
  std::string target;                                        // as sent: path and query
  std::string path;                                          // without the query
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased
  std::string body;
  bool keep_alive = true;
  bool http10 = false;  // HTTP/1.0: keep-alive only when asked, and said in the response
  // admit_head refused the head: `body` is empty, whatever the client sends
  // after the head is never read, and the connection closes after the answer.
  bool body_unread = false;

  // The first header of that (lowercase) name, or null.
  const std::string* Header(std::string_view name) const;
};

class HttpRequestParser {
 public:
  struct Limits {
    size_t max_header_bytes;
    size_t max_headers;
    size_t max_body_bytes;
  };
  // Once a request's line and headers are parsed, before any byte of its
  // body: false hands the request out at once with body_unread set.
  using AdmitHead = std::function<bool(const HttpRequest& head)>;

  // What Feed found.
  struct Step {
    enum class Kind {
      kNeedMore,  // every byte given is consumed; no whole request yet
      kRequest,   // `request` is whole; bytes after `consumed` are the next
      kRefused,   // malformed or over a limit: answer `status`, then close
    };
    Kind kind = Kind::kNeedMore;
    size_t consumed = 0;
    HttpRequest request;  // kRequest
    int status = 0;       // kRefused: 400, 413 or 431
    std::string message;  // kRefused
    std::string code;     // kRefused: malformed_http, request_too_large, headers_too_large
  };

  explicit HttpRequestParser(Limits limits, AdmitHead admit_head = {});
  HttpRequestParser(const HttpRequestParser&) = delete;
  HttpRequestParser& operator=(const HttpRequestParser&) = delete;

  // Parses from `bytes` up to the end of one request. After kRequest, call
  // again with the bytes from `consumed` on for the next (pipelining); after
  // kRefused, or a request with body_unread or upgrade(), nothing more may
  // be fed.
  Step Feed(std::string_view bytes);

  // The last request asked to switch protocols (Upgrade, CONNECT).
  bool upgrade() const { return parser_.upgrade != 0; }
  // Bytes of a request's head have arrived and its end has not.
  bool in_request() const { return header_bytes_ > 0; }

 private:
  static int OnMessageBegin(http_parser* p);
  static int OnUrl(http_parser* p, const char* at, size_t n);
  static int OnHeaderField(http_parser* p, const char* at, size_t n);
  static int OnHeaderValue(http_parser* p, const char* at, size_t n);
  static int OnHeadersComplete(http_parser* p);
  static int OnBody(http_parser* p, const char* at, size_t n);
  static int OnMessageComplete(http_parser* p);

  Limits limits_;
  AdmitHead admit_head_;
  http_parser parser_;
  http_parser_settings settings_;
  HttpRequest current_;
  size_t header_bytes_ = 0;
  bool in_value_ = false;
  int limit_status_ = 0;  // 413 or 431 when a callback stopped the parser for a limit
  bool request_ready_ = false;
};

// The request body as a JSON object (ParseBoundedJson: the socket's parse
// and nesting bound), or the 400 error to answer with.
Result<Params> ParseBody(const HttpRequest& request);

}  // namespace medq::daemon::http
