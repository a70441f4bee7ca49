#include "daemon/http/http_request_parser.h"

#include <algorithm>
#include <cctype>
#include <climits>

namespace medq::daemon::http {
namespace {

HttpRequestParser* Self(http_parser* p) {
  return static_cast<HttpRequestParser*>(p->data);
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

const std::string* HttpRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return &value;
  }
  return nullptr;
}

HttpRequestParser::HttpRequestParser(Limits limits, AdmitHead admit_head)
    : limits_(limits), admit_head_(std::move(admit_head)) {
  http_parser_init(&parser_, HTTP_REQUEST);
  parser_.data = this;
  http_parser_settings_init(&settings_);
  settings_.on_message_begin = &HttpRequestParser::OnMessageBegin;
  settings_.on_url = &HttpRequestParser::OnUrl;
  settings_.on_header_field = &HttpRequestParser::OnHeaderField;
  settings_.on_header_value = &HttpRequestParser::OnHeaderValue;
  settings_.on_headers_complete = &HttpRequestParser::OnHeadersComplete;
  settings_.on_body = &HttpRequestParser::OnBody;
  settings_.on_message_complete = &HttpRequestParser::OnMessageComplete;
}

HttpRequestParser::Step HttpRequestParser::Feed(std::string_view bytes) {
  Step step;
  const size_t n = http_parser_execute(&parser_, &settings_, bytes.data(), bytes.size());
  step.consumed = std::min(n, bytes.size());
  const auto err = static_cast<http_errno>(parser_.http_errno);
  if (err == HPE_PAUSED) {
    http_parser_pause(&parser_, 0);
  } else if (err != HPE_OK) {
    step.kind = Step::Kind::kRefused;
    if (limit_status_ == 413) {
      step.status = 413;
      step.message = "request body exceeds " + std::to_string(limits_.max_body_bytes) + " bytes";
      step.code = "request_too_large";
    } else if (limit_status_ == 431 || err == HPE_HEADER_OVERFLOW) {
      // http-parser's own bound on a head (80 KiB) can stop a long line or
      // header before our callbacks have counted past ours.
      step.status = 431;
      step.message = "request headers exceed the limit";
      step.code = "headers_too_large";
    } else {
      step.status = 400;
      step.message = std::string("malformed HTTP request: ") + http_errno_description(err);
      step.code = "malformed_http";
    }
    return step;
  }
  if (!request_ready_) return step;  // the rest of the request has not arrived yet
  request_ready_ = false;
  step.kind = Step::Kind::kRequest;
  step.request = std::move(current_);
  current_ = HttpRequest{};
  if (upgrade()) step.request.keep_alive = false;
  return step;
}

int HttpRequestParser::OnMessageBegin(http_parser* p) {
  HttpRequestParser* self = Self(p);
  self->current_ = HttpRequest{};
  self->header_bytes_ = 0;
  self->in_value_ = false;
  return 0;
}

int HttpRequestParser::OnUrl(http_parser* p, const char* at, size_t n) {
  HttpRequestParser* self = Self(p);
  self->header_bytes_ += n;
  if (self->header_bytes_ > self->limits_.max_header_bytes) {
    self->limit_status_ = 431;
    return -1;
  }
  self->current_.target.append(at, n);
  return 0;
}

int HttpRequestParser::OnHeaderField(http_parser* p, const char* at, size_t n) {
  HttpRequestParser* self = Self(p);
  self->header_bytes_ += n;
  if (self->in_value_ || self->current_.headers.empty()) {
    if (self->current_.headers.size() >= self->limits_.max_headers) {
      self->limit_status_ = 431;
      return -1;
    }
    self->current_.headers.emplace_back();
    self->in_value_ = false;
  }
  if (self->header_bytes_ > self->limits_.max_header_bytes) {
    self->limit_status_ = 431;
    return -1;
  }
  self->current_.headers.back().first += Lower(std::string_view(at, n));
  return 0;
}

int HttpRequestParser::OnHeaderValue(http_parser* p, const char* at, size_t n) {
  HttpRequestParser* self = Self(p);
  self->header_bytes_ += n;
  if (self->header_bytes_ > self->limits_.max_header_bytes) {
    self->limit_status_ = 431;
    return -1;
  }
  self->in_value_ = true;
  if (!self->current_.headers.empty()) self->current_.headers.back().second.append(at, n);
  return 0;
}

int HttpRequestParser::OnHeadersComplete(http_parser* p) {
  HttpRequestParser* self = Self(p);
  HttpRequest& r = self->current_;
  r.method = http_method_str(static_cast<http_method>(p->method));
  r.path = r.target.substr(0, r.target.find('?'));
  r.keep_alive = http_should_keep_alive(p) != 0;
  r.http10 = p->http_major == 1 && p->http_minor == 0;
  if (self->admit_head_) {
    bool admitted = false;
    try {  // nothing may unwind through http-parser's C frames
      admitted = self->admit_head_(r);
    } catch (...) {
      admitted = false;  // refused: answered without its body
    }
    if (!admitted) {
      // Handed out without its body: the parser stops here for good.
      r.body_unread = true;
      r.keep_alive = false;
      self->request_ready_ = true;
      http_parser_pause(p, 1);
      return 0;
    }
  }
  if (p->content_length != ULLONG_MAX && p->content_length > self->limits_.max_body_bytes) {
    self->limit_status_ = 413;
    return -1;
  }
  return 0;
}

int HttpRequestParser::OnBody(http_parser* p, const char* at, size_t n) {
  HttpRequestParser* self = Self(p);
  if (self->current_.body.size() + n > self->limits_.max_body_bytes) {
    self->limit_status_ = 413;
    return -1;
  }
  self->current_.body.append(at, n);
  return 0;
}

int HttpRequestParser::OnMessageComplete(http_parser* p) {
  HttpRequestParser* self = Self(p);
  self->request_ready_ = true;
  self->header_bytes_ = 0;
  http_parser_pause(p, 1);
  return 0;
}

Result<Params> ParseBody(const HttpRequest& request) {
  // The socket's parse and its nesting bound: a body of 100,000 brackets is
  // refused before anything recursive (the job store's dump, a template)
  // can see it.
  BoundedJson body = ParseBoundedJson(request.body);
  if (body.fault == BoundedJson::Fault::kOutOfRange) {
    return Error(ErrorCode::kInvalidRequest,
                 "the request body holds a number out of range (e.g. 1e999)");
  }
  if (body.fault != BoundedJson::Fault::kNone) {
    return Error(ErrorCode::kInvalidRequest,
                 "the request body is not valid JSON (or not UTF-8) near byte " +
                     std::to_string(body.byte) +
                     "; send a JSON object with content-type: application/json");
  }
  if (body.too_deep) return Error(ErrorCode::kInvalidRequest, TooDeepMessage("the request body"));
  if (!body.value.is_object()) {
    return Error(ErrorCode::kInvalidRequest, "the request body must be a JSON object");
  }
  return std::move(body.value);
}

}  // namespace medq::daemon::http
