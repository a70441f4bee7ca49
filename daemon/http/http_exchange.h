// One HTTP request being answered: the ReplyChannel a Responder writes to
// when an HTTP route starts a generation or an embed request (routes.h).
// Loop thread only.
//
// The route gives the exchange its translation (Handlers): what a typed
// medq event, end or error becomes in OpenAI terms. The exchange writes the
// response: whole (Respond, with content-length) or as server-sent events in
// a chunked body (StartEventStream, SendData, EndEventStream). Its response
// ends exactly once; then the connection goes on with the next request
// (keep-alive) or closes. A HEAD request gets the head without the body.
//
// Every JSON the exchange writes is dumped with bytes that are not UTF-8
// replaced (DumpJson), and a translation that throws still ends the response
// (a 500, or the connection closes once the head has gone).
//
// Errors (MapError): a medq Error becomes the OpenAI error object
// {"error":{"message","type","code","param"}} with the HTTP status the code
// calls for (docs/http.md), and Retry-After when the daemon gave one.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "daemon/http/http_connection.h"
#include "daemon/loop/reply_channel.h"

namespace medq::daemon::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpError {
  int status = 500;
  std::string type;  // invalid_request_error, authentication_error, ...
  std::string code;  // snake_case, e.g. queue_full, model_not_found
  std::optional<std::string> param;
  std::optional<double> retry_after_s;
  std::string message;
};

// The HTTP form of a medq error; `param` is the Error's.
HttpError MapError(const Error& error);
// The JSON body of an error.
std::string ErrorBody(const HttpError& error);

class HttpExchange : public ReplyChannel, public std::enable_shared_from_this<HttpExchange> {
 public:
  // The route's rendering of each typed reply (reply_channel.h); a reply
  // whose handler is unset ends the exchange with a 500 (a route that
  // cannot render what its entry point answers is a bug).
  struct Handlers {
    // A generation's events before its end.
    std::function<void(HttpExchange&, const GenerateEvent& event)> event;
    // A generation's end.
    std::function<void(HttpExchange&, const GenerateDone& done)> done;
    // An embed request's vectors.
    std::function<void(HttpExchange&, const EmbedResult& result)> embedded;
    // Unset: RespondError (or an error event when streaming).
    std::function<void(HttpExchange&, const Error& error)> error;
  };

  HttpExchange(std::weak_ptr<HttpConnection> connection, const HttpRequest& request);

  void set_handlers(Handlers handlers) { handlers_ = std::move(handlers); }
  // Headers every response of this exchange carries (x-medq-job, ...).
  void AddHeader(std::string name, std::string value);

  // A whole response.
  void Respond(int status, std::string_view content_type, std::string body);
  void RespondJson(int status, const nlohmann::json& body);
  void RespondError(const HttpError& error);
  void RespondError(const Error& error) { RespondError(MapError(error)); }

  // Server-sent events: the head (200, text/event-stream, chunked), then
  // "data: ...\n\n" events, then the last chunk.
  void StartEventStream();
  void SendData(std::string_view data);
  void EndEventStream();

  bool streaming() const { return streaming_; }
  bool finished() const { return finished_; }

  // ReplyChannel.
  void SendEvent(const nlohmann::json& id, const GenerateEvent& event) override;
  void SendDone(const nlohmann::json& id, const GenerateDone& done) override;
  void SendEmbedResult(const nlohmann::json& id, const EmbedResult& result) override;
  void SendResult(const nlohmann::json& id, const nlohmann::json& result) override;
  void SendError(const nlohmann::json& id, const Error& error) override;
  void BeginRequest() override {}
  void EndRequest() override {}
  bool closing() const override;
  void AddCloseHook(std::function<void()> hook) override;
  // Every HTTP client with a valid key is one owner of jobs.
  std::string owner() const override { return "http"; }

 private:
  std::string Head(int status, std::string_view content_type,
                   std::optional<size_t> content_length) const;
  void Finish();
  // Runs a translation (the route's handlers): what it throws ends the
  // exchange through HttpConnection::FailRequest (a 500, or the connection
  // closes once the response has begun; its job is cancelled), so that no
  // client waits for an answer that cannot come.
  template <typename Fn>
  void Translating(std::string_view what, Fn&& fn);
  void Fail(std::string_view what, std::string_view why);

  std::weak_ptr<HttpConnection> connection_;
  bool head_only_;
  bool keep_alive_;
  bool http10_;
  Headers headers_;
  Handlers handlers_;
  bool streaming_ = false;
  bool finished_ = false;
};

}  // namespace medq::daemon::http
