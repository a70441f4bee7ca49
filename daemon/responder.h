// A request's way back to its client. Loop thread only.
//
// Every request gets exactly one final reply: Result() or Fail(). A Responder
// destroyed without one sends INTERNAL, so no request is ever left hanging,
// whatever path a handler takes. Replies to a client that has gone are
// dropped silently.
#pragma once

#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "daemon/connection.h"

namespace medq::daemon {

class Responder {
 public:
  Responder(std::weak_ptr<Connection> connection, nlohmann::json id, std::string op);
  Responder(Responder&& other) noexcept;
  Responder& operator=(Responder&&) = delete;
  Responder(const Responder&) = delete;
  ~Responder();

  // An intermediate event of a streaming op (queued, started, token...).
  void Event(std::string_view event, nlohmann::json fields) const;
  // The final reply.
  void Result(const nlohmann::json& result);
  void Fail(const Error& error);

  bool answered() const { return answered_; }
  // True when the client disconnected; work for it may stop.
  bool client_gone() const;
  const std::string& op() const { return op_; }

 private:
  void Finish();

  std::weak_ptr<Connection> connection_;
  nlohmann::json id_;
  std::string op_;
  bool answered_ = false;
};

}  // namespace medq::daemon
