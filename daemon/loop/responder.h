// A request's way back to its client. Loop thread only.
//
// Every request gets exactly one final reply: Result() or Fail(). A Responder
// destroyed without one sends INTERNAL, so no request is ever left hanging,
// whatever path a handler takes. Replies to a client that has gone are
// dropped silently. The replies go to a ReplyChannel: the socket's Connection
// or an HTTP exchange (daemon/http/).
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/messages.h"
#include "daemon/loop/metrics.h"
#include "daemon/loop/reply_channel.h"

namespace medq::daemon {

class Responder {
 public:
  // `metrics` (may be null) counts the request's outcome when it ends.
  Responder(std::weak_ptr<ReplyChannel> connection, nlohmann::json id, std::string op,
            Metrics* metrics);
  Responder(Responder&& other) noexcept;
  Responder& operator=(Responder&&) = delete;
  Responder(const Responder&) = delete;
  ~Responder();

  // A generation's event before its end (queued, started, token).
  void Event(const GenerateEvent& event) const;
  // The final reply: a generation's end, an embed request's vectors, another
  // op's result (its JSON form), or an error.
  void Done(const GenerateDone& done);
  void Embedded(const EmbedResult& result);
  void Result(const nlohmann::json& result);
  void Fail(const Error& error);

  // Runs `hook` on the loop thread when the client's connection closes (e.g.
  // to cancel its job). It may run after the final reply, so it must check
  // that its job still exists.
  void OnClientGone(std::function<void()> hook);

  const std::string& op() const { return op_; }
  // The client's ReplyChannel::owner(); "" when it has gone.
  std::string owner() const;

 private:
  void Finish(std::string_view outcome);

  std::weak_ptr<ReplyChannel> connection_;
  nlohmann::json id_;
  std::string op_;
  Metrics* metrics_;
  bool answered_ = false;
};

}  // namespace medq::daemon
