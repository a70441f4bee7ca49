// Where a Responder sends a request's replies: the socket's Connection
// (NDJSON lines, loop/connection.h) or an HTTP exchange (daemon/http/), which
// translates them into OpenAI JSON or server-sent events. Loop thread only.
//
// Contract: BeginRequest() when a Responder is made, then any number of
// SendEvent(), then exactly one final SendResult(), SendEvent("done") or
// SendError(), then EndRequest(). Close hooks run once, when the client goes
// away (or the channel closes for any other reason); a channel that is
// closing() drops what is sent to it.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace medq::daemon {

class ReplyChannel {
 public:
  virtual ~ReplyChannel() = default;

  virtual void SendEvent(const nlohmann::json& id, std::string_view event,
                         nlohmann::json fields) = 0;
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
