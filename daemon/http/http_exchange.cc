#include "daemon/http/http_exchange.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <stdexcept>

namespace medq::daemon::http {
namespace {

using nlohmann::json;

std::string SnakeCase(std::string_view name) {
  std::string out(name);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string TypeOf(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

}  // namespace

HttpError MapError(const Error& error) {
  HttpError out;
  out.message = error.message;
  out.code = SnakeCase(ErrorCodeName(error.code));
  out.retry_after_s = error.retry_after_s;
  switch (error.code) {
    case ErrorCode::kInvalidRequest:
    case ErrorCode::kUnsupportedVersion:
      out.status = 400;
      break;
    case ErrorCode::kUnknownOp:
      out.status = 404;
      break;
    case ErrorCode::kTooLarge:
      out.status = 413;
      break;
    case ErrorCode::kPermissionDenied:
      out.status = 403;
      break;
    case ErrorCode::kModelNotFound:
      out.status = 404;
      break;
    case ErrorCode::kQueueFull:
      out.status = 429;
      if (!out.retry_after_s) out.retry_after_s = 1;
      break;
    case ErrorCode::kQueueTimeout:
    case ErrorCode::kTimeout:
      out.status = 504;
      break;
    case ErrorCode::kNotReady:
    case ErrorCode::kGpuOom:
    case ErrorCode::kInsufficientMemory:
      out.status = 503;
      if (!out.retry_after_s) out.retry_after_s = 1;
      break;
    case ErrorCode::kCancelled:
      out.status = 409;
      break;
    case ErrorCode::kInternal:
      out.status = 500;
      break;
  }
  out.type = TypeOf(out.status);
  out.param = error.param;
  return out;
}

std::string ErrorBody(const HttpError& error) {
  json e = {{"message", error.message},
            {"type", error.type},
            {"code", error.code},
            {"param", error.param ? json(*error.param) : json(nullptr)}};
  return DumpJson(json{{"error", std::move(e)}}) + "\n";
}

HttpExchange::HttpExchange(std::weak_ptr<HttpConnection> connection, const HttpRequest& request)
    : connection_(std::move(connection)),
      head_only_(request.method == "HEAD"),
      keep_alive_(request.keep_alive),
      http10_(request.http10) {}

void HttpExchange::AddHeader(std::string name, std::string value) {
  headers_.emplace_back(std::move(name), std::move(value));
}

std::string HttpExchange::Head(int status, std::string_view content_type,
                               std::optional<size_t> content_length) const {
  std::string head = StatusLine(status);
  head += "content-type: ";
  head += content_type;
  head += "\r\n";
  if (content_length) {
    head += "content-length: " + std::to_string(*content_length) + "\r\n";
  } else {
    head += http10_ ? "cache-control: no-cache\r\n"
                    : "transfer-encoding: chunked\r\ncache-control: no-cache\r\n";
  }
  if (!keep_alive_) {
    head += "connection: close\r\n";
  } else if (http10_) {
    head += "connection: keep-alive\r\n";
  }
  for (const auto& [name, value] : headers_)
    head += name + ": " + value + "\r\n";
  head += "\r\n";
  return head;
}

void HttpExchange::Respond(int status, std::string_view content_type, std::string body) {
  if (finished_ || streaming_) return;
  auto c = connection_.lock();
  if (c != nullptr) {
    std::string bytes = Head(status, content_type, body.size());
    if (!head_only_) bytes += body;
    c->Write(std::move(bytes));
  }
  Finish();
}

void HttpExchange::RespondJson(int status, const nlohmann::json& body) {
  Respond(status, "application/json", DumpJson(body) + "\n");
}

void HttpExchange::RespondError(const HttpError& error) {
  if (error.retry_after_s) {
    AddHeader("retry-after",
              std::to_string(static_cast<int64_t>(std::ceil(std::max(*error.retry_after_s, 1.0)))));
  }
  Respond(error.status, "application/json", ErrorBody(error));
}

void HttpExchange::StartEventStream() {
  if (finished_ || streaming_) return;
  streaming_ = true;
  // HTTP/1.0 knows no chunked bodies: the stream ends with the connection.
  if (http10_) keep_alive_ = false;
  if (auto c = connection_.lock()) c->Write(Head(200, "text/event-stream", std::nullopt));
  if (head_only_) Finish();
}

void HttpExchange::SendData(std::string_view data) {
  if (finished_ || !streaming_) return;
  std::string event = "data: ";
  event += data;
  event += "\n\n";
  auto c = connection_.lock();
  if (c == nullptr) return;
  if (http10_) return c->Write(std::move(event));
  char size[32];
  std::snprintf(size, sizeof(size), "%zx\r\n", event.size());
  c->Write(size + event + "\r\n");
}

void HttpExchange::EndEventStream() {
  if (finished_ || !streaming_) return;
  if (auto c = connection_.lock(); c != nullptr && !http10_) c->Write("0\r\n\r\n");
  Finish();
}

void HttpExchange::Finish() {
  if (finished_) return;
  finished_ = true;
  if (auto c = connection_.lock()) c->EndResponse(keep_alive_);
}

template <typename Fn>
void HttpExchange::Translating(std::string_view what, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    Fail(what, e.what());
  } catch (...) {
    Fail(what, "an unknown exception");
  }
}

void HttpExchange::Fail(std::string_view what, std::string_view why) {
  if (finished_) {
    spdlog::error("http: translating {} after the response failed: {}", what, why);
    return;
  }
  finished_ = true;  // nothing more from this exchange: the connection answers
  auto c = connection_.lock();
  if (c == nullptr) return;
  c->FailRequest("translating " + std::string(what) + ": " + std::string(why));
}

void HttpExchange::SendEvent(const nlohmann::json&, const GenerateEvent& event) {
  Translating(EventName(event), [&] {
    if (handlers_.event) handlers_.event(*this, event);
  });
}

void HttpExchange::SendDone(const nlohmann::json&, const GenerateDone& done) {
  Translating("done", [&] {
    if (!handlers_.done) throw std::logic_error("a generation's end reached a route without one");
    handlers_.done(*this, done);
  });
}

void HttpExchange::SendEmbedResult(const nlohmann::json&, const EmbedResult& result) {
  Translating("a result", [&] {
    if (!handlers_.embedded) throw std::logic_error("vectors reached a route without an embed");
    handlers_.embedded(*this, result);
  });
}

void HttpExchange::SendResult(const nlohmann::json&, const nlohmann::json&) {
  // The routes call typed entry points (daemon/loop/entry_points.h), none of
  // which answers with a plain op result.
  Translating("a result", [] { throw std::logic_error("an op's result has no HTTP form"); });
}

void HttpExchange::SendError(const nlohmann::json&, const Error& error) {
  Translating("an error", [&] {
    if (handlers_.error) return handlers_.error(*this, error);
    if (streaming_) {
      // The head has gone: the error is the stream's last event.
      SendData(ErrorBody(MapError(error)));
      return EndEventStream();
    }
    RespondError(error);
  });
}

bool HttpExchange::closing() const {
  auto c = connection_.lock();
  return c == nullptr || c->closing();
}

void HttpExchange::AddCloseHook(std::function<void()> hook) {
  auto c = connection_.lock();
  if (c == nullptr || c->closing()) return hook();
  c->AddCloseHook(std::move(hook));
}

}  // namespace medq::daemon::http
