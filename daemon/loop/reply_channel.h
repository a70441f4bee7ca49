// Where a Responder sends a request's replies: the socket's Connection
// (NDJSON lines, loop/connection.h) or an HTTP exchange (daemon/http/), which
// renders OpenAI JSON or server-sent events from the same typed replies.
// Loop thread only.
//
// The replies are the protocol's types (common/messages.h): a generation's
// events (queued, started, token) and its end (GenerateDone), an embed
// request's EmbedResult, any other op's result as its JSON form, an Error.
// The socket encodes each with its one JSON form (common/protocol.h); HTTP
// renders from the types and never reads JSON back.
//
// Contract: BeginRequest() when a Responder is made, then any number of
// SendEvent(), then exactly one final SendDone(), SendEmbedResult(),
// SendResult() or SendError(), then EndRequest(). Close hooks run once, when
// the client goes away (or the channel closes for any other reason); a
// channel that is closing() drops what is sent to it.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/messages.h"

namespace medq::daemon {

class ReplyChannel {
 public:
  virtual ~ReplyChannel() = default;

  virtual void SendEvent(const nlohmann::json& id, const GenerateEvent& event) = 0;
  virtual void SendDone(const nlohmann::json& id, const GenerateDone& done) = 0;
  virtual void SendEmbedResult(const nlohmann::json& id, const EmbedResult& result) = 0;
  // The result of an op no edge but the socket renders (health, models, ...).
  virtual void SendResult(const nlohmann::json& id, const nlohmann::json& result) = 0;
  virtual void SendError(const nlohmann::json& id, const Error& error) = 0;

  virtual void BeginRequest() = 0;
  virtual void EndRequest() = 0;
  virtual bool closing() const = 0;
  virtual void AddCloseHook(std::function<void()> hook) = 0;
  // Who is asking, for the jobs they may read back (durable_jobs.h): "uid:N"
  // on the socket, "http" on the HTTP endpoint.
  virtual std::string owner() const = 0;
};

}  // namespace medq::daemon
