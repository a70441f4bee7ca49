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

  // An intermediate event of a streaming op (queued, started, token...).
  void Event(std::string_view event, nlohmann::json fields) const;
  // The final reply: `result` (simple ops), `done` (streaming ops) or `error`.
  void Result(const nlohmann::json& result);
  void Done(nlohmann::json fields);
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
